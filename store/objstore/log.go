package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// This file is the raw-log side of the Store (package store's LogStore,
// Checkpointer and Verifier): raw bytes in, raw bytes out, and the hashes
// that let sync decide "is a prefix" without downloading data.

// Logs returns every session in the bucket with its committed length and
// hash, from the index alone: its partitions, or with WithIndexCache the
// catalog cached by the last run and the commits since (catalog.go). The index may lag behind a session whose
// writer died before its checkpoint (§P2); ReadLog, Checkpoints and
// AppendLog consult the session itself.
func (s *Store) Logs(ctx context.Context) ([]store.Log, error) {
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	all, _, err := s.catalog(ctx)
	if all == nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	s.listing.Store(&all)
	out := make([]store.Log, 0, len(all))
	for _, e := range all {
		out = append(out, store.Log{Info: e.Info, Checkpoint: store.Checkpoint{Length: e.Length, SHA256: e.SHA256}})
	}
	if err != nil {
		return out, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// Checkpoints returns the prefix hashes at every segment boundary of
// session id, from its manifest plus the probed segments; ascending by
// length. Wrapped agent.ErrSessionNotFound if absent. When this Store's
// reading of the index knows the session, the segments its entry says
// the manifest does not list, and the probe at its end, go out with the
// manifest's GET.
func (s *Store) Checkpoints(ctx context.Context, id string) ([]store.Checkpoint, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, err
	}
	var early earlyGets
	if e, known := s.cachedEntry(id); known {
		early = s.startGets(ctx, s.aheadKeys(id, e, 0)...)
	}
	m, _, err := s.readManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.catchUpFrom(ctx, m, 0, early); err != nil {
		return nil, fmt.Errorf("checkpoints of session %s: %w", id, err)
	}
	if m.Length == 0 {
		return nil, agent.NotFoundError(id)
	}
	out := make([]store.Checkpoint, len(m.Segments))
	for i, seg := range m.Segments {
		out[i] = store.Checkpoint{Length: seg.End(), SHA256: seg.PrefixSHA256}
	}
	return out, nil
}

// A log reader fetches up to readAhead segments, and readAheadBytes of
// them, ahead of the one it returns bytes from: a load's segments come in
// parallel, and the memory a read holds stays bounded whatever the
// session's size. 8 MiB is many times a WAN link's bandwidth-delay
// product (375 KB at 60 ms and 50 Mbit/s, 1 MB at 80 ms and 100 Mbit/s),
// and keeps sync's 32 readers at once within 256 MiB. A session the index says is at most earlyFirstMax long
// has its first segment fetched with its manifest, not after it.
const (
	readAhead      = 64
	readAheadBytes = 8 << 20
	earlyFirstMax  = 1 << 20
)

// ReadLog returns a reader of session id's committed bytes from offset
// from to the end of the log as it is now, and the checkpoint at that end.
// The segments the manifest lists are fetched readAhead at a time, from
// the moment ReadLog is called, while it probes for the segments after
// the manifest (§P4); each is verified against the manifest before the
// reader returns a byte of it (§P7). When this Store's reading of the
// index knows the session, the probe at its indexed end (and, for a short
// session, its first segment) goes out with the manifest's GET: a session
// of one segment, or whose manifest is up to date, reads in one round
// trip.
func (s *Store) ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, store.Checkpoint{}, err
	}
	e, known := s.cachedEntry(id)
	if known && e.Resume.Segments > 0 && e.Resume.Stored == 0 && e.Length <= readAheadBytes/2 {
		r, end, err := s.readLogProbing(ctx, id, from, e)
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, agent.ErrSessionDeleted) {
			return r, end, err
		}
		// The segments do not end where the entry says: a manifest
		// written after the entry (a compaction, say) lists others. Read
		// it.
	}
	var keys []string
	first := s.sessionKey(id, manifest.SegmentName(0))
	if known {
		if from == 0 && e.Length <= earlyFirstMax {
			keys = append(keys, first)
		}
		keys = append(keys, s.aheadKeys(id, e, from)...)
	}
	early := s.startGets(ctx, keys...)
	m, etag, err := s.readManifest(ctx, id)
	if err != nil {
		return nil, store.Checkpoint{}, fmt.Errorf("read session %s: %w", id, err)
	}
	r := newLogReader(ctx, s, id, from)
	if err := s.addListed(ctx, r, m, from, early); err != nil {
		r.Close()
		return nil, store.Checkpoint{}, fmt.Errorf("read session %s: %w", id, err)
	}
	if len(m.Segments) > 0 {
		early.take(ctx, first) // a merged first segment made it useless
	}
	caught := m.Clone()
	probed, err := s.catchUpFrom(ctx, caught, readAheadBytes/2, early)
	if err != nil {
		r.Close()
		return nil, store.Checkpoint{}, fmt.Errorf("read session %s: %w", id, err)
	}
	end := store.Checkpoint{Length: caught.Length, SHA256: caught.SHA256}
	switch {
	case end.Length == 0:
		r.Close()
		return nil, end, agent.NotFoundError(id)
	case from < 0 || from > end.Length:
		r.Close()
		return nil, end, fmt.Errorf("read session %s: offset %d outside its %d bytes", id, from, end.Length)
	}
	for _, p := range probed {
		if p.seg.End() > from {
			r.add(p.seg, p.raw)
		}
	}
	s.adoptRead(id, caught, etag, len(m.Segments), m)
	return r, end, nil
}

// addListed adds to r the segments the stored manifest m lists past
// offset from: with their bytes when an early GET fetched them (verified
// against m), else to be fetched as r reads on.
func (s *Store) addListed(ctx context.Context, r *logReader, m *manifest.Manifest, from int64, early earlyGets) error {
	for _, seg := range m.Segments {
		if seg.End() <= from {
			continue
		}
		data, ok, gerr := early.take(ctx, s.sessionKey(m.ID, seg.Name()))
		if !ok {
			r.add(seg, nil)
			continue
		}
		raw, err := s.listedSegment(ctx, m.ID, seg, data, gerr)
		if err != nil {
			return err
		}
		r.add(seg, raw)
	}
	return nil
}

// aheadKeys are what a reader that knows index entry e fetches with the
// manifest: the segments e says the stored manifest does not list
// (Resume.Tail) that hold bytes after offset from, when those are at most
// half the read-ahead, and the probe at e's end. Fetched at once, they
// turn the probes for those segments, one after another, into one round
// trip.
func (s *Store) aheadKeys(id string, e manifest.IndexEntry, from int64) []string {
	end := s.sessionKey(id, manifest.SegmentName(e.Length))
	offs := e.Resume.TailOffsets()
	if len(offs) == 0 || e.Length-offs[0] > readAheadBytes/2 {
		return []string{end}
	}
	keys := make([]string, 0, len(offs)+1)
	for i, o := range offs {
		segEnd := e.Length
		if i+1 < len(offs) {
			segEnd = offs[i+1]
		}
		if segEnd > from {
			keys = append(keys, s.sessionKey(id, manifest.SegmentName(o)))
		}
	}
	return append(keys, end)
}

// readLogProbing is ReadLog of a session whose index entry e says no
// manifest is stored (a session pushed or created in one segment, or
// appended to since by tails of fewer than 8 segments): it probes from
// seg/0, the segments the entry lists (Resume.Tail; else the first) and
// the probe at the indexed end sent at once, so that a session reads in
// one round trip (without a tail, one of n segments takes n). The probed
// bytes are checked against e (catchUpFrom).
func (s *Store) readLogProbing(ctx context.Context, id string, from int64, e manifest.IndexEntry) (io.ReadCloser, store.Checkpoint, error) {
	keys := s.aheadKeys(id, e, 0)
	if len(keys) == 1 { // no tail: the first segment, then probes
		keys = append(keys, s.sessionKey(id, manifest.SegmentName(0)))
	}
	early := s.startGets(ctx, keys...)
	caught := manifest.New(id)
	probed, err := s.catchUpFrom(ctx, caught, readAheadBytes/2, early)
	if err != nil {
		return nil, store.Checkpoint{}, fmt.Errorf("read session %s: %w", id, err)
	}
	end := store.Checkpoint{Length: caught.Length, SHA256: caught.SHA256}
	switch {
	case end.Length == 0:
		return nil, end, agent.NotFoundError(id)
	case end.Length < e.Length:
		return nil, end, fmt.Errorf("read session %s: %w: its segments end at %d, the index says %d", id, ErrCorrupt, end.Length, e.Length)
	case from < 0 || from > end.Length:
		return nil, end, fmt.Errorf("read session %s: offset %d outside its %d bytes", id, from, end.Length)
	}
	r := newLogReader(ctx, s, id, from)
	for _, p := range probed {
		if p.seg.End() > from {
			r.add(p.seg, p.raw)
		}
	}
	s.adoptRead(id, caught, "", 0, caught)
	return r, end, nil
}

// adoptRead keeps what a read learned of session id (caught: the stored
// manifest m, with etag, extended by the probed segments) as the Store's
// state of it, when it has none, so that an append after a load (panto
// -c) need not read it again. A summary an older panto folded is not
// adopted: an append must fold it again first (readManifestFolded).
func (s *Store) adoptRead(id string, caught *manifest.Manifest, etag string, stored int, m *manifest.Manifest) {
	if m.StaleSummary() {
		return
	}
	st := s.state(id)
	select {
	case st.mu <- struct{}{}:
	default:
		return // an append holds it: it knows better
	}
	if !st.loaded {
		st.adoptStored(caught.Clone(), etag, stored, s.now())
	}
	st.mu.unlock()
}

// cachedEntry returns session id's entry in this Store's reading of its
// index partition, or else of the catalog (catalog.go), if the reading
// is recent (indexStale); it makes no request.
func (s *Store) cachedEntry(id string) (manifest.IndexEntry, bool) {
	e, ok := s.cachedPartitionEntry(id)
	if u, logged := s.freshIndexEntry(id); logged && (!ok || u.Length > e.Length) {
		return u, true
	}
	return e, ok
}

// cachedPartitionEntry is cachedEntry without the unfolded entries.
func (s *Store) cachedPartitionEntry(id string) (manifest.IndexEntry, bool) {
	st := s.shardState(s.shardOf(id))
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.loaded || st.view.shard == nil || s.now().Sub(st.fresh) >= indexStale {
		return s.catalogEntry(id)
	}
	e, ok := st.view.shard.Sessions[id]
	if !ok {
		return s.catalogEntry(id)
	}
	return e, ok
}

// logReader returns the bytes of a run of segments from offset from,
// fetching the segments ahead of the one it reads.
type logReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	s      *Store
	id     string
	from   int64

	mu    sync.Mutex
	segs  []*pendingSegment
	next  int    // of segs, the one to read from
	cur   []byte // what is left of the current segment
	begun int    // of segs, how many fetches have been started
}

// pendingSegment is a segment being fetched (or in memory already).
type pendingSegment struct {
	seg  manifest.Segment
	done chan struct{}
	raw  []byte
	err  error
}

func newLogReader(ctx context.Context, s *Store, id string, from int64) *logReader {
	ctx, cancel := context.WithCancel(ctx)
	return &logReader{ctx: ctx, cancel: cancel, s: s, id: id, from: from}
}

// add appends a segment to the run: raw when it is in memory already, else
// it is fetched.
func (r *logReader) add(seg manifest.Segment, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &pendingSegment{seg: seg, done: make(chan struct{})}
	if raw != nil {
		p.raw = raw
		close(p.done)
	}
	r.segs = append(r.segs, p)
	r.startAheadLocked()
}

// startAheadLocked starts the fetches of the segments up to readAhead
// past the one being read. Callers hold r.mu.
func (r *logReader) startAheadLocked() {
	var ahead int64
	for _, p := range r.segs[r.next:r.begun] {
		ahead += p.seg.Length
	}
	for ; r.begun < len(r.segs) && r.begun < r.next+readAhead; r.begun++ {
		p := r.segs[r.begun]
		if r.begun > r.next && ahead+p.seg.Length > readAheadBytes {
			break
		}
		ahead += p.seg.Length
		if p.raw != nil {
			continue
		}
		go func() {
			defer close(p.done)
			p.raw, p.err = r.s.fetchSegment(r.ctx, r.id, p.seg)
		}()
	}
}

func (r *logReader) Read(b []byte) (int, error) {
	for len(r.cur) == 0 {
		r.mu.Lock()
		if r.next >= len(r.segs) {
			r.mu.Unlock()
			return 0, io.EOF
		}
		p := r.segs[r.next]
		r.next++
		r.startAheadLocked()
		r.mu.Unlock()
		select {
		case <-p.done:
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		}
		if p.err != nil {
			return 0, p.err
		}
		r.cur = p.raw
		if skip := r.from - p.seg.Start; skip > 0 {
			r.cur = r.cur[skip:]
		}
		p.raw = nil // the reader holds it now; let it go once read
	}
	n := copy(b, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// Close stops the fetches in flight.
func (r *logReader) Close() error {
	r.cancel()
	return nil
}

// AppendLog appends data (complete committed lines in the sessionlog
// format; beginning with the header line when at is the empty log) as one
// new segment, if and only if the log is exactly at; it returns the
// checkpoint after data. Otherwise it fails with a *store.ChangedError
// saying what the log holds, and brings the session's checkpoints up to
// date (the caller's listing may have lagged because they did).
//
// data is read during the call and not retained after it returns, so the
// caller may reuse it.
func (s *Store) AppendLog(ctx context.Context, id string, at store.Checkpoint, data []byte) (store.Checkpoint, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return store.Checkpoint{}, err
	}
	if len(data) == 0 {
		return store.Checkpoint{}, fmt.Errorf("append to session %s: no data", id)
	}
	if n, err := sessionlog.CommittedLength(id, data); err != nil || n != len(data) {
		if err == nil {
			err = fmt.Errorf("%w: data does not end at a batch boundary (%d of %d bytes committed)", sessionlog.ErrMalformed, n, len(data))
		}
		return store.Checkpoint{}, fmt.Errorf("append to session %s: %w", id, err)
	}
	seg, err := s.appendBatch(ctx, id, func(bool) ([]byte, error) { return data, nil }, &at)
	if err != nil {
		return store.Checkpoint{}, err
	}
	return store.Checkpoint{Length: seg.End(), SHA256: seg.PrefixSHA256}, nil
}

// Verify re-reads every segment of session id, checking each one's hash,
// the prefix hash at every boundary, the line count, and that the bytes
// decode into the summary the manifest keeps; the error names the object.
func (s *Store) Verify(ctx context.Context, id string) error {
	if err := agent.ValidateSessionID(id); err != nil {
		return err
	}
	m, _, err := s.readManifest(ctx, id)
	if err != nil {
		return fmt.Errorf("verify session %s: %w", id, err)
	}
	if _, err := s.catchUpFrom(ctx, m, 0, nil); err != nil {
		return fmt.Errorf("verify session %s: %w", id, err)
	}
	if m.Length == 0 {
		return agent.NotFoundError(id)
	}
	r := newLogReader(ctx, s, id, 0)
	defer r.Close()
	for _, seg := range m.Segments {
		r.add(seg, nil)
	}
	chain := &prefixChain{s: s, id: id, segs: m.Segments, h: sha256.New()}
	info, err := sessionlog.Check(s.objectURL(s.sessionKey(id, "")), id, io.TeeReader(r, chain), m.Length, m.SHA256)
	if err == nil {
		err = chain.err
	}
	if err != nil {
		return fmt.Errorf("verify session %s: %w: %w", id, ErrCorrupt, err)
	}
	if !sameInfo(info, m.Info(), m.SummaryVersion) {
		return fmt.Errorf("verify session %s: %w: the parsed log does not match the manifest's summary", id, ErrCorrupt)
	}
	return s.verifyReplacedLists(ctx, m)
}

// verifyReplacedLists checks that each list of replaced objects m's
// pending deletes name reads as its name says: a damaged one deletes
// nothing it names (compact.go: replacedNames), so what it named stays
// in the bucket until the session is deleted. A list already gone was
// deleted by a compaction since m was read.
func (s *Store) verifyReplacedLists(ctx context.Context, m *manifest.Manifest) error {
	for _, p := range m.Pending {
		if !manifest.IsReplacedList(p.Name) {
			continue
		}
		if _, err := s.readReplacedList(ctx, m.ID, p.Name); errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("verify session %s: %w; what it named will stay in the bucket until the session is deleted", m.ID, err)
		} else if err != nil {
			return fmt.Errorf("verify session %s: %w", m.ID, err)
		}
	}
	return nil
}

// prefixChain is the writer side of Verify's read: it hashes the log as it
// goes by and checks the prefix hash and line count at each segment's end.
type prefixChain struct {
	s     *Store
	id    string
	segs  []manifest.Segment
	h     hash.Hash
	pos   int64
	lines int
	err   error
}

func (c *prefixChain) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 && c.err == nil && len(c.segs) > 0 {
		seg := c.segs[0]
		k := min(int64(len(b)), seg.End()-c.pos)
		c.h.Write(b[:k])
		c.lines += bytes.Count(b[:k], []byte{'\n'})
		c.pos += k
		b = b[k:]
		if c.pos < seg.End() {
			continue
		}
		obj := c.s.objectURL(c.s.sessionKey(c.id, seg.Name()))
		if got := hex.EncodeToString(c.h.Sum(nil)); got != seg.PrefixSHA256 {
			c.err = fmt.Errorf("%s: prefix hash %s, the manifest says %s", obj, got, seg.PrefixSHA256)
		} else if c.lines != seg.Lines {
			c.err = fmt.Errorf("%s: %d lines, the manifest says %d", obj, c.lines, seg.Lines)
		}
		c.lines = 0
		c.segs = c.segs[1:]
	}
	return n, nil
}

// sameInfo compares two summaries in what a summary of version v folds
// (manifest.Folded): an older writer did not fold the rest.
func sameInfo(a, b agent.SessionInfo, v int) bool {
	ok := a.Created.Equal(b.Created) && a.Modified.Equal(b.Modified)
	a.Created, a.Modified = b.Created, b.Modified
	return ok && manifest.Folded(a, v) == manifest.Folded(b, v)
}
