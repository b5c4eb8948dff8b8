package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// readManifest returns the stored manifest of session id and its ETag, or
// an empty manifest and "" when none is stored.
func (s *Store) readManifest(ctx context.Context, id string) (*manifest.Manifest, string, error) {
	key := s.sessionKey(id, "manifest.json")
	data, etag, err := s.b.get(ctx, key, "")
	if errors.Is(err, errNotFound) {
		return manifest.New(id), "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read manifest of session %s: %w", id, err)
	}
	m, err := s.codec.DecodeManifest(key, data)
	if err != nil {
		return nil, "", s.corrupt(key, err)
	}
	if m.ID != id {
		return nil, "", fmt.Errorf("%s: %w: manifest of session %q", s.objectURL(key), ErrCorrupt, m.ID)
	}
	return m, etag, nil
}

// readManifestFolded is readManifest for a caller that writes the
// summary on (an append resumes it, the index lists it): a summary an
// older panto folded (without the title, fork link and token totals, or
// the project: manifest.StaleSummary) is folded again from the listed segments,
// fetched in parallel. That costs a read of the log, once per process
// and stale session, until the next manifest this panto writes.
func (s *Store) readManifestFolded(ctx context.Context, id string) (*manifest.Manifest, string, error) {
	m, etag, err := s.readManifest(ctx, id)
	if err != nil || !m.StaleSummary() {
		return m, etag, err
	}
	raws := make([][]byte, len(m.Segments))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	for i, seg := range m.Segments {
		g.Go(func() error {
			var err error
			raws[i], err = s.fetchSegment(gctx, id, seg)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", fmt.Errorf("refold the summary of session %s: %w", id, err)
	}
	if err := m.Refold(s.objectURL(s.sessionKey(id, "")), bytes.Join(raws, nil)); err != nil {
		return nil, "", fmt.Errorf("refold the summary of session %s: %w: %w", id, ErrCorrupt, err)
	}
	return m, etag, nil
}

// fetched is a segment and, when it was kept, its raw bytes.
type fetched struct {
	seg manifest.Segment
	raw []byte
}

// catchUp probes for segments committed after m (GET seg/<m.Length> until
// 404) and extends m with them, checking that each holds whole committed
// lines that continue the log. It returns the segments found, the raw
// bytes of the first ones up to keep bytes in all (a reader serves them
// without fetching them again; keeping them all would make memory grow
// with the session).
func (s *Store) catchUp(ctx context.Context, m *manifest.Manifest, keep int64, early earlyGets) ([]fetched, error) {
	var found []fetched
	for {
		key := s.sessionKey(m.ID, manifest.SegmentName(m.Length))
		data, err := early.get(ctx, s, key)
		if errors.Is(err, errNotFound) {
			return found, nil
		}
		if err != nil {
			return found, fmt.Errorf("probe session %s: %w", m.ID, err)
		}
		raw, err := s.codec.DecodeSegment(key, data)
		if err != nil {
			return found, s.corrupt(key, err)
		}
		if t, ok := manifest.DecodeTombstone(raw); ok {
			return found, deletedError(m.ID, t)
		}
		seg, err := m.Append(s.objectURL(key), raw, int64(len(data)))
		if err != nil {
			return found, corruptUnlessNewer(err)
		}
		s.segs.put(key, raw)
		if int64(len(raw)) > keep {
			raw, keep = nil, 0
		} else {
			keep -= int64(len(raw))
		}
		found = append(found, fetched{seg: seg, raw: raw})
	}
}

// catchUpFrom is catchUp of m, the stored manifest (empty when none is
// stored). The segments past the manifest are found by probing, and
// nothing but their own framing (the zstd frame checksum, whole committed
// lines, the header's id) vouches for their bytes: the session's index
// entry does, from the newest commit when this Store read it recently
// (indexStale) and it holds the session (no request), else from the
// shard as this Store last read it when that is recent, else read in
// parallel with the probe (one GET, a 304 when unchanged), with the
// newest commit's. The index is written after the segments and may lag
// (a shorter prefix), never lead: when it is past the manifest, its
// length must end a probed segment whose prefix hash is its sha256, else
// ErrCorrupt naming the objects.
func (s *Store) catchUpFrom(ctx context.Context, m *manifest.Manifest, keep int64, early earlyGets) ([]fetched, error) {
	storedLen := m.Length
	var (
		found []fetched
		entry manifest.IndexEntry
		known bool
	)
	g, gctx := errgroup.WithContext(ctx)
	logged, isLogged := s.freshIndexEntry(m.ID)
	if isLogged {
		// The newest commit, read moments ago, holds the session (in its
		// recent view, or unfolded): it vouches as the partition would,
		// for no request; the partition is read only when cached (a GET
		// of 80 KB at 100,000 sessions). It may say less than the
		// partition, never more than the segments: the index lags.
		entry, known = s.cachedPartitionEntry(m.ID)
	} else {
		g.Go(func() error {
			shard, err := s.cachedShard(gctx, s.shardOf(m.ID))
			if errors.Is(err, ErrCorrupt) {
				// A damaged shard says nothing, as an entry never
				// written does: the session still loads (§P2, §P4).
				return nil
			}
			if err != nil {
				return err
			}
			entry, known = shard.Sessions[m.ID]
			return nil
		})
		g.Go(func() error {
			logged, isLogged = s.logEntry(gctx, m.ID)
			return nil
		})
	}
	g.Go(func() error {
		var err error
		found, err = s.catchUp(gctx, m, keep, early)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if isLogged && (!known || logged.Length > entry.Length) {
		entry, known = logged, true // the partition does not hold it yet
	}
	if !known || entry.Length <= storedLen {
		// The index was not written yet (or its writer died first), or
		// says no more than the manifest, which vouches for its segments.
		return found, nil
	}
	for _, f := range found {
		keep -= int64(len(f.raw))
	}
	// The index was read after a segment the probe had not seen yet
	// committed: probe on, at once. A distributed MinIO with a node down
	// has also answered 404 for a segment written moments before through
	// another node (as for a listed segment, listedSegment): the probe is
	// asked again, backing off (about 1.2 s in all while nothing new is
	// found), before the index's length is called missing.
	for retries := 0; entry.Length > m.Length && retries <= 4; {
		if retries > 0 {
			if err := backoff(ctx, 3+retries); err != nil {
				return nil, err
			}
		}
		more, err := s.catchUp(ctx, m, keep, early)
		if err != nil {
			return nil, err
		}
		for _, f := range more {
			keep -= int64(len(f.raw))
		}
		found = append(found, more...)
		if len(more) > 0 {
			retries = 1
		} else {
			retries++
		}
	}
	return found, s.checkIndexed(m, entry, storedLen)
}

// checkIndexed checks the segments of m past storedLen, found by
// probing, against the session's index entry e.
func (s *Store) checkIndexed(m *manifest.Manifest, e manifest.IndexEntry, storedLen int64) error {
	var objs []string
	for _, seg := range m.Segments {
		if seg.End() <= storedLen {
			continue
		}
		objs = append(objs, s.objectURL(s.sessionKey(m.ID, seg.Name())))
		if seg.End() == e.Length {
			if seg.PrefixSHA256 == e.SHA256 {
				return nil
			}
			return fmt.Errorf("%s: %w: raw bytes [0, %d) have sha256 %s, the index says %s",
				strings.Join(objs, ", "), ErrCorrupt, e.Length, seg.PrefixSHA256, e.SHA256)
		}
		if seg.End() > e.Length {
			return fmt.Errorf("%s: %w: the index says the log holds %d bytes (sha256 %s), which is not a segment boundary",
				strings.Join(objs, ", "), ErrCorrupt, e.Length, e.SHA256)
		}
	}
	missing := s.objectURL(s.sessionKey(m.ID, manifest.SegmentName(m.Length)))
	return fmt.Errorf("%s: %w: missing: the index says the log holds %d bytes (sha256 %s), %d were found",
		missing, ErrCorrupt, e.Length, e.SHA256, m.Length)
}

// fetchSegment reads one listed segment and verifies it against the
// manifest: size, raw length and sha256.
func (s *Store) fetchSegment(ctx context.Context, id string, seg manifest.Segment) ([]byte, error) {
	key := s.sessionKey(id, seg.Name())
	data, _, err := s.b.get(ctx, key, "")
	return s.listedSegment(ctx, id, seg, data, err)
}

// listedSegment checks the stored bytes data of seg, a segment a manifest
// lists (err: the GET's), and returns its raw bytes.
func (s *Store) listedSegment(ctx context.Context, id string, seg manifest.Segment, data []byte, err error) ([]byte, error) {
	key := s.sessionKey(id, seg.Name())
	if errors.Is(err, errNotFound) {
		// A manifest read before the session was deleted lists
		// segments that are gone: say it was deleted.
		if t, ok := s.tombstoneAt(ctx, id); ok {
			return nil, deletedError(id, t)
		}
		// A distributed MinIO with a node down has answered 404 for a
		// segment written moments before through another node (as for
		// the probe's If-Match, probe.go): asked again before it is
		// called missing.
		for attempt := 4; attempt < 8 && errors.Is(err, errNotFound); attempt++ {
			if berr := backoff(ctx, attempt); berr != nil {
				return nil, berr
			}
			data, _, err = s.b.get(ctx, key, "")
		}
		if errors.Is(err, errNotFound) {
			return nil, fmt.Errorf("%s: %w: listed in the manifest but missing: %w", s.objectURL(key), ErrCorrupt, err)
		}
	}
	if err != nil {
		return nil, err
	}
	raw, err := s.codec.DecodeSegment(key, data)
	if err != nil {
		return nil, s.corrupt(key, err)
	}
	if t, ok := manifest.DecodeTombstone(raw); ok {
		return nil, deletedError(id, t)
	}
	sum := sha256.Sum256(raw)
	if int64(len(raw)) != seg.Length || hex.EncodeToString(sum[:]) != seg.SHA256 {
		return nil, fmt.Errorf("%s: %w: %d bytes with sha256 %x, the manifest says %d bytes with sha256 %s",
			s.objectURL(key), ErrCorrupt, len(raw), sum, seg.Length, seg.SHA256)
	}
	s.segs.put(key, raw)
	return raw, nil
}

// Load returns the session's messages, every segment verified (§P7).
func (s *Store) Load(ctx context.Context, id string) (*agent.Conversation, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, err
	}
	r, end, err := s.ReadLog(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	defer r.Close()
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	log, err := sessionlog.Parse(s.objectURL(s.sessionKey(id, "")), raw)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, corruptUnlessNewer(err))
	}
	if log == nil || int64(log.Committed) != end.Length {
		return nil, fmt.Errorf("load session %s: %w: %d of %d bytes are committed lines", id, ErrCorrupt, committed(log), end.Length)
	}
	return &agent.Conversation{Messages: log.Messages}, nil
}

// corruptUnlessNewer wraps a decoding error in ErrCorrupt, unless it
// says the log is of a newer line format: that is no damage, and what to
// do about it (upgrade panto) is not what to do about corruption.
func corruptUnlessNewer(err error) error {
	if errors.Is(err, sessionlog.ErrNewerVersion) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

func committed(l *sessionlog.Log) int {
	if l == nil {
		return 0
	}
	return l.Committed
}

// earlyGets are GETs a reader issues before it knows it needs them:
// ReadLog fetches a short session's first segment, and the segment after
// its indexed end (the probe that ends a read), along with its manifest,
// so that a session of one segment reads in one round trip. Each is used
// at most once, by one goroutine (catchUp's).
type earlyGets map[string]*earlyGet

type earlyGet struct {
	done chan struct{}
	data []byte
	etag string
	err  error
}

// startGets issues a GET of each key.
func (s *Store) startGets(ctx context.Context, keys ...string) earlyGets {
	if len(keys) == 0 {
		return nil
	}
	g := make(earlyGets, len(keys))
	for _, key := range keys {
		e := &earlyGet{done: make(chan struct{})}
		g[key] = e
		go func() {
			defer close(e.done)
			e.data, e.etag, e.err = s.b.get(ctx, key, "")
		}()
	}
	return g
}

// take returns the early GET of key, if there was one, and forgets it.
func (g earlyGets) take(ctx context.Context, key string) ([]byte, bool, error) {
	data, _, ok, err := g.takeTagged(ctx, key)
	return data, ok, err
}

// takeTagged is take with the object's ETag.
func (g earlyGets) takeTagged(ctx context.Context, key string) ([]byte, string, bool, error) {
	e, ok := g[key]
	if !ok {
		return nil, "", false, nil
	}
	delete(g, key)
	select {
	case <-e.done:
		return e.data, e.etag, true, e.err
	case <-ctx.Done():
		return nil, "", true, ctx.Err()
	}
}

// get is the early GET of key if there was one, else a GET now.
func (g earlyGets) get(ctx context.Context, s *Store, key string) ([]byte, error) {
	data, _, err := g.getTagged(ctx, s, key)
	return data, err
}

// getTagged is get with the object's ETag, for a write conditional on it.
func (g earlyGets) getTagged(ctx context.Context, s *Store, key string) ([]byte, string, error) {
	if data, etag, ok, err := g.takeTagged(ctx, key); ok {
		return data, etag, err
	}
	return s.b.get(ctx, key, "")
}
