package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// sessionState is what a Store knows of one session: the manifest (which
// may be ahead of the stored one: segments committed by this Store or found
// by probing, not yet checkpointed) and the ETag of the stored manifest it
// extends. Appends and compactions of the session in this Store hold mu.
type sessionState struct {
	mu     chanMutex
	loaded bool
	m      *manifest.Manifest
	etag   string    // "" when no manifest is stored (as far as we know)
	stored int       // segments of m the stored manifest lists
	fresh  time.Time // when m was last confirmed against the bucket
	// partial: m was resumed from the index entry (manifest.Resume), so
	// its Segments start after the log's first partial segments, which
	// this Store has not read; stored counts among those. A manifest is
	// written only after the stored one is read (checkpoint).
	partial int
	// partialTail: where those of the partial segments past the stored
	// ones begin (the entry's Resume.Tail), nil when the entry did not say.
	partialTail []int64

	// The background checkpoint (checkpoint.go), guarded by Store.mu.
	dirty    bool          // committed segments not yet checkpointed
	urgent   bool          // an append waits for the next checkpoint (no linger)
	flushing bool          // a checkpointLoop is running
	flushed  chan struct{} // closed when that loop ends
	ckErr    error         // of the last checkpoint, nil when it succeeded
}

// chanMutex is a mutex whose Lock gives up when ctx ends, so that a caller
// stuck behind a slow append can still be cancelled.
type chanMutex chan struct{}

func (c chanMutex) lock(ctx context.Context) error {
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c chanMutex) unlock() { <-c }

// state returns the Store's state of session id, creating an unloaded one.
func (s *Store) state(id string) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sessions[id]
	if !ok {
		st = &sessionState{mu: make(chanMutex, 1)}
		s.sessions[id] = st
	}
	return st
}

// adopt makes m the state: the manifest the Store knows, whose segments
// the stored manifest (ETag etag, "" when none is stored) all lists.
func (st *sessionState) adopt(m *manifest.Manifest, etag string, now time.Time) {
	st.adoptStored(m, etag, len(m.Segments), now)
}

// adoptStored is adopt for an m of which only the first stored segments
// are in the stored manifest; the rest were committed after it.
func (st *sessionState) adoptStored(m *manifest.Manifest, etag string, stored int, now time.Time) {
	st.m, st.etag, st.stored, st.loaded, st.fresh, st.partial, st.partialTail = m, etag, stored, true, now, 0, nil
}

// adoptResume adopts the state index entry e resumes (e.Resumable): an
// append goes on from it without reading the session. If the log grew
// past e meanwhile, the conditional PUT of the next segment finds out.
func (st *sessionState) adoptResume(e manifest.IndexEntry, now time.Time) {
	st.m, st.etag, st.stored, st.loaded, st.fresh = e.Manifest(e.Info.ID), "", e.Resume.Stored, true, now
	st.partial = e.Resume.Segments
	st.partialTail = nil
	if offs := e.Resume.TailOffsets(); len(offs) == e.Resume.Segments-e.Resume.Stored {
		st.partialTail = offs
	}
}

// segments is the number of segments of the log as st knows it.
func (st *sessionState) segments() int { return st.partial + len(st.m.Segments) }

// entry is the session's index entry as st knows it.
func (st *sessionState) entry() manifest.IndexEntry {
	e := st.m.Entry()
	if e.Resume.HashState != "" {
		e.Resume.Segments, e.Resume.Stored = st.segments(), st.stored
		e.Resume.Tail = st.tail()
	}
	return e
}

// tail is the entry's Resume.Tail: where the segments past the stored
// manifest's begin, "" when st does not know them all.
func (st *sessionState) tail() string {
	if st.partial > st.stored && st.partialTail == nil {
		return ""
	}
	// st.m's segments follow the partial ones, of which the stored
	// manifest lists at most all.
	offs, ok := st.m.TailAfter(max(st.stored-st.partial, 0))
	if !ok {
		return ""
	}
	return manifest.JoinOffsets(append(slices.Clone(st.partialTail), offs...))
}

// advance records that m, which extends st.m, is what the bucket holds.
func (st *sessionState) advance(m *manifest.Manifest, now time.Time) { st.m, st.fresh = m, now }

// refresh re-reads the stored manifest and catches up with the segments
// committed after it (§P4). When this Store's reading of the index knows
// the session, the segments its entry says the manifest does not list,
// and the probe at its end, go out with the manifest's GET (as
// Checkpoints sends them): a deletion's read of a session whose manifest
// lags by 5 segments is one round trip, not 6. Callers hold st.mu.
func (s *Store) refresh(ctx context.Context, id string, st *sessionState) error {
	_, err := s.refreshFirst(ctx, id, st)
	return err
}

// refreshFirst is refresh that also returns the GET of the session's
// first segment when it went out early with the manifest's and
// succeeded (nil otherwise): a deletion replaces that segment, If-Match
// on its ETag, and need not read it again.
func (s *Store) refreshFirst(ctx context.Context, id string, st *sessionState) (*earlyGet, error) {
	var early earlyGets
	if e, known := s.cachedEntry(id); known {
		// Not those this Store has in hand (it appended them, or a load
		// read them), but always the probe at the end, the last key.
		keys := s.aheadKeys(id, e, 0)
		keys = append(slices.DeleteFunc(keys[:len(keys)-1], s.segs.has), keys[len(keys)-1])
		early = s.startGets(ctx, keys...)
	}
	first := early[s.sessionKey(id, manifest.SegmentName(0))]
	m, etag, err := s.readManifestFolded(ctx, id)
	if err != nil {
		st.loaded = false
		return nil, err
	}
	s.keepListed(ctx, m, early)
	stored := len(m.Segments)
	if _, err := s.catchUpFrom(ctx, m, 0, early); err != nil {
		st.loaded = false
		return nil, err
	}
	st.adoptStored(m, etag, stored, s.now())
	if first != nil {
		select {
		case <-first.done:
			if first.err == nil {
				return first, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, nil
}

// keepListed verifies the early GETs of segments that manifest m lists
// (an index entry older than m named them as its tail), and keeps them
// for a compaction (segmentCache), which would otherwise read them
// again. They went out with the manifest's GET. One that does not verify
// is left to whoever reads it next.
func (s *Store) keepListed(ctx context.Context, m *manifest.Manifest, early earlyGets) {
	for _, seg := range m.Segments {
		data, ok, err := early.take(ctx, s.sessionKey(m.ID, seg.Name()))
		if ok && err == nil {
			_, _ = s.listedSegment(ctx, m.ID, seg, data, nil)
		}
	}
}

// appendBatch commits one segment holding encode's bytes at the end of
// session id (§P1) and returns once it is committed; the manifest and
// index checkpoints follow in the background (checkpoint.go, §P2). The
// first segment of a session waits for its index entry too, so that a
// session never exists unlisted because its writer died a moment after
// the append returned. encode is called for each attempt, with header
// true when the segment starts the log. With expect set, the segment is
// committed only at that checkpoint (AppendLog).
func (s *Store) appendBatch(ctx context.Context, id string, encode func(header bool) ([]byte, error), expect *store.Checkpoint) (manifest.Segment, error) {
	st := s.state(id)
	if err := st.mu.lock(ctx); err != nil {
		return manifest.Segment{}, fmt.Errorf("append to session %s: %w", id, err)
	}
	if !s.deferIndex {
		s.warmPartition(ctx, id)
	}
	seg, err := s.commitBatch(ctx, id, st, encode, expect)
	first := err == nil && seg.Start == 0
	if err == nil && !s.deferIndex {
		// The fold at Close writes the project's head (foldMine); its
		// run may take in a merge, and the exit a step of the runs'
		// fold (exitmerge.go).
		s.prefetchHead(ctx, st.m.Info().Project)
		s.prefetchForExit(ctx)
	}
	caughtUp := st.loaded
	st.mu.unlock()
	if err != nil {
		if caughtUp && errors.Is(err, store.ErrChanged) {
			// The log is not where the caller thought, maybe because the
			// index lags behind it (a writer that died before its
			// checkpoints): bring them up to date. A checkpoint that
			// changes nothing writes nothing.
			s.scheduleCheckpoint(ctx, id, st, false)
		}
		return manifest.Segment{}, err
	}
	done := s.scheduleCheckpoint(ctx, id, st, first && !s.deferIndex)
	if first && !s.deferIndex {
		// The checkpoint's outcome does not change the append's: the
		// segment is committed, and the index is a checkpoint that may lag.
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return seg, nil
}

// commitBatch is appendBatch's commit: it puts the segment at the end of
// the log as this Store knows it and, on a lost race, catches up and tries
// at the new end, with bounded backoff. It returns the segment committed,
// or found (our own PUT whose answer was lost). Callers hold st.mu.
func (s *Store) commitBatch(ctx context.Context, id string, st *sessionState, encode func(header bool) ([]byte, error), expect *store.Checkpoint) (manifest.Segment, error) {
	if err := s.prepare(ctx, id, st, expect); err != nil {
		return manifest.Segment{}, fmt.Errorf("append to session %s: %w", id, err)
	}
	if err := s.checkFormat(id, st.m); err != nil {
		return manifest.Segment{}, fmt.Errorf("append to session %s: %w", id, err)
	}
	m := st.m.Clone()
	tries := putTries{unanswered: -1}
	for attempt := 0; ; attempt++ {
		if expect != nil {
			err := s.atExpected(ctx, id, m, *expect)
			st.advance(m, s.now()) // m may have caught up
			if err != nil {
				return manifest.Segment{}, err
			}
		}
		raw, err := encode(m.Length == 0)
		if err != nil {
			return manifest.Segment{}, err
		}
		next := m.Clone()
		key := s.sessionKey(id, manifest.SegmentName(m.Length))
		comp := s.codec.EncodeSegment(key, raw)
		seg, err := next.Append(s.objectURL(key), raw, int64(len(comp)))
		if err != nil {
			return manifest.Segment{}, fmt.Errorf("append to session %s: %w", id, err)
		}
		outcome, err := s.putSegment(ctx, key, m, next, seg, comp, &tries)
		switch outcome {
		case segmentCommitted:
			st.advance(m, s.now())
			s.segs.put(key, bytes.Clone(raw)) // encode's buffer may be the caller's (AppendLog)
			return seg, nil
		case segmentFailed:
			st.loaded = false
			return manifest.Segment{}, appendFailed(id, err)
		}
		// A lost race (another writer committed at this position, and m
		// has caught up with it) means progress, so many writers on one
		// session are no livelock: they get a larger budget than
		// conflicts and errors, and a short backoff (the next position is
		// likely free).
		lost := outcome == segmentLost
		limit, delay := s.maxAttempts, attempt
		switch {
		case lost:
			limit, delay = 10*s.maxAttempts, min(attempt, 3)
		case outcome == segmentThrottled:
			// The server refused for now (a cluster missing a node):
			// as long as an SDK retryer would wait, with the backoff
			// growing to a second, about 25 s in all.
			limit = 3 * s.maxAttempts
		}
		if attempt+1 >= limit {
			st.loaded = false
			return manifest.Segment{}, fmt.Errorf("append to session %s: gave up after %d attempts: %w", id, attempt+1, err)
		}
		if err := backoff(ctx, delay); err != nil {
			return manifest.Segment{}, fmt.Errorf("append to session %s: %w", id, err)
		}
	}
}

// prepare makes st a manifest that is safe to append to. Callers hold
// st.mu.
func (s *Store) prepare(ctx context.Context, id string, st *sessionState, expect *store.Checkpoint) error {
	// A caller that expects a new session needs no manifest read: the
	// segment PUT's If-None-Match refuses an existing one. But the PUT
	// would send the whole log first, and a session missing from the
	// caller's listing may be one the index lost (docs/DESIGN.md §P2):
	// unless this Store created the prefix, look for seg/0 first (a
	// session that exists always has it, §P5). Found, the log is read
	// properly.
	// A sync appending a tail at the checkpoint the index lists resumes
	// from the index entry (docs/DESIGN.md §P2): one PUT, no read.
	if !st.loaded && expect != nil && expect.Length > 0 {
		if e, ok := s.cachedEntry(id); ok && e.Length == expect.Length && e.SHA256 == expect.SHA256 && e.Resumable() {
			st.adoptResume(e, s.now())
		}
	}
	if !st.loaded && expect != nil && expect.Length == 0 {
		exists := false
		if !s.created {
			var err error
			if exists, err = s.exists(ctx, s.sessionKey(id, manifest.SegmentName(0))); err != nil {
				return fmt.Errorf("look for session %s: %w", id, err)
			}
		}
		if !exists {
			st.adopt(manifest.New(id), "", s.now())
		}
	}
	// A manifest older than half the grace period may list segment names
	// that compaction has since deleted (§P5): re-read it.
	if !st.loaded || s.now().Sub(st.fresh) > s.compactGrace/2 {
		return s.refresh(ctx, id, st)
	}
	return nil
}

// checkFormat refuses to append to a log whose header names a newer line
// format: the lines of this panto's format would be mixed into it. A log
// probed from its first segment was refused by its decoder already; one
// read from a manifest is known by the manifest's decoder state, since
// no appender reads the log's start again.
func (s *Store) checkFormat(id string, m *manifest.Manifest) error {
	h := m.Decoder.Header
	if h == nil || h.Version <= sessionlog.Version {
		return nil
	}
	return fmt.Errorf("%s: %w (format version %d, this panto reads up to %d): upgrade panto",
		s.objectURL(s.sessionKey(id, "manifest.json")), sessionlog.ErrNewerVersion, h.Version, sessionlog.Version)
}

// atExpected checks that m is at the checkpoint expect, catching m up
// when it is behind; a log not at expect is a *store.ChangedError. (A log
// that holds the caller's bytes after expect already — an earlier run's
// append — is not at expect either: the caller learns that it wrote
// nothing, and plans from what the log holds.)
func (s *Store) atExpected(ctx context.Context, id string, m *manifest.Manifest, expect store.Checkpoint) error {
	at := func() bool { return m.Length == expect.Length && m.SHA256 == expect.SHA256 }
	if at() {
		return nil
	}
	if m.Length < expect.Length {
		if _, err := s.catchUp(ctx, m, 0, nil); err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
		if at() {
			return nil
		}
	}
	return fmt.Errorf("append to session %s: %w", id,
		&store.ChangedError{ID: id, Want: expect, Have: store.Checkpoint{Length: m.Length, SHA256: m.SHA256}})
}

// The outcomes of one segment PUT.
type segmentOutcome int

const (
	// segmentCommitted: our segment is in the bucket; m holds it (and,
	// when the PUT was answered 412, whatever followed it).
	segmentCommitted segmentOutcome = iota
	// segmentLost: another writer committed at our position; m has caught
	// up with it, so the next attempt goes to the new end.
	segmentLost
	// segmentRetry: a transient failure; try the same position again.
	segmentRetry
	// segmentThrottled: the server answered that it is busy (503);
	// nothing was written: try the same position again, longer.
	segmentThrottled
	// segmentFailed: the PUT failed without an answer, and the bucket
	// does not hold our bytes (or could not be asked).
	segmentFailed
)

// putTries is what one append's segment PUTs went through: the failures
// without an answer so far, and the position of the last one (-1: none).
type putTries struct {
	transient  int
	unanswered int64
	// inFlight says that one of them went out and got no answer (a
	// timeout, a connection lost mid-request), not a connection refused
	// before a byte was sent: the server may still be writing it.
	inFlight bool
}

// putSegment creates the segment seg (comp, its stored bytes) at the end
// of m with If-None-Match: * — the commit point of an append (§P1) — and
// says what came of it. next is m extended with seg.
//
// The PUT is sent once (the SDK does not retry it): a 412 then means
// another writer committed at the position, unless an earlier attempt of
// this append at the same position went unanswered, when the bytes found
// there may be our own. A caller that resumed from a lagging index (or a
// re-run of an interrupted sync) thus learns that the log holds more than
// it thought, instead of taking identical bytes for its own write.
func (s *Store) putSegment(ctx context.Context, key string, m, next *manifest.Manifest, seg manifest.Segment, comp []byte, tries *putTries) (segmentOutcome, error) {
	_, err := s.put(ctx, key, comp, putCond{ifNoneMatch: true, once: true}, s.objectType())
	switch {
	case err == nil:
		*m = *next
		return segmentCommitted, nil
	case errors.Is(err, errPrecondition):
		probed, cerr := s.catchUp(ctx, m, 0, nil)
		if cerr != nil {
			return segmentFailed, cerr
		}
		if tries.unanswered == seg.Start && len(probed) > 0 && probed[0].seg.SHA256 == seg.SHA256 {
			return segmentCommitted, nil
		}
		return segmentLost, err
	case errors.Is(err, errConflict):
		return segmentRetry, err
	case errors.Is(err, ErrPermission):
		return segmentFailed, err // an answer: nothing was written
	case errors.Is(err, ErrConditionalWrites):
		return segmentFailed, err // the probe's: no write here is safe
	case errors.As(err, new(markerRefused)):
		return segmentFailed, err // the marker's: nothing was sent
	case errors.Is(err, errThrottled):
		return segmentThrottled, err // an answer: nothing was written, later
	}
	// No answer: the server may be restarting. Retrying is safe (the PUT
	// is conditional, and a 412 on the retry finds our own bytes), but
	// only so often.
	tries.unanswered = seg.Start
	if !neverSent(err) {
		tries.inFlight = true
	}
	if tries.transient++; ctx.Err() == nil && tries.transient < 3 {
		return segmentRetry, err
	}
	landed, lookErr := s.landed(ctx, m, seg)
	switch {
	case landed:
		return segmentCommitted, nil
	case lookErr != nil:
		return segmentFailed, fmt.Errorf("%w: the write failed (%v) and checking whether it landed failed too (%v); load the session to see", ErrOutcomeUnknown, err, lookErr)
	case tries.inFlight:
		// Not there when looked for, but a PUT that went out may still
		// be on the server: MinIO holds a write behind a lock a lost
		// node held until it expires the lock, up to a minute
		// (TestClusterLosesANode), and writes it then.
		return segmentFailed, fmt.Errorf("%w: the write got no answer (%v) and is not there yet, but may still land; load the session to see", ErrOutcomeUnknown, err)
	}
	return segmentFailed, err
}

// neverSent reports whether err is a connection that was refused or
// could not be made (a dial): the request never reached a server, so it
// cannot land.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// landed looks for a segment PUT whose outcome is unknown (the
// connection broke, the context ended): once, for seg at the end of m,
// and reports whether it holds exactly our bytes, extending m if so. The
// append then succeeded; otherwise the caller reports the error, an
// outcome still unknown when a PUT went out (putTries.inFlight).
//
// It returns an error when the bucket could not be asked: then nobody
// knows whether the batch is there.
func (s *Store) landed(ctx context.Context, m *manifest.Manifest, seg manifest.Segment) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	probe := m.Clone()
	found, err := s.catchUp(ctx, probe, 0, nil)
	if err != nil {
		return false, err
	}
	if len(found) == 0 || found[0].seg.SHA256 != seg.SHA256 {
		return false, nil
	}
	*m = *probe
	return true, nil
}

// appendFailed is the error of an append whose segment PUT failed.
func appendFailed(id string, err error) error {
	return fmt.Errorf("append to session %s: %w", id, err)
}

// backoff sleeps before retry attempt+1: exponential with jitter, capped.
func backoff(ctx context.Context, attempt int) error {
	d := 5 * time.Millisecond << min(attempt, 8)
	d = min(d, time.Second)
	return sleep(ctx, d/2+rand.N(d))
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// AppendMessages appends msgs to the session as one segment, creating the
// session with its first batch. The batch is atomic: it is one object.
func (s *Store) AppendMessages(ctx context.Context, sessionID string, msgs []agent.PersistentMessage) error {
	return s.AppendMessagesIn(ctx, agent.Project{}, sessionID, msgs)
}

var _ agent.ProjectRecorder = (*Store)(nil)

// AppendMessagesIn is AppendMessages whose first batch records project in
// the header (agent.ProjectRecorder).
func (s *Store) AppendMessagesIn(ctx context.Context, project agent.Project, sessionID string, msgs []agent.PersistentMessage) error {
	if err := agent.ValidateSessionID(sessionID); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := s.clock()
	s.settleAhead(ctx)
	_, err := s.appendBatch(ctx, sessionID, func(header bool) ([]byte, error) {
		return sessionlog.EncodeBatchIn(project, sessionID, header, msgs, at)
	}, nil)
	return err
}
