package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
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

	// The background checkpoint (checkpoint.go), guarded by Store.mu.
	dirty    bool          // committed segments not yet checkpointed
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

// refresh re-reads the stored manifest and catches up with the segments
// committed after it. Callers hold st.mu.
func (s *Store) refresh(ctx context.Context, id string, st *sessionState) error {
	m, etag, err := s.readManifest(ctx, id)
	if err != nil {
		st.loaded = false
		return err
	}
	stored := len(m.Segments)
	if _, err := s.catchUpFrom(ctx, m); err != nil {
		st.loaded = false
		return err
	}
	st.m, st.etag, st.stored, st.loaded, st.fresh = m, etag, stored, true, s.now()
	return nil
}

// expectation is AppendRaw's condition on the remote session.
type expectation struct {
	length int64
	sha256 string
}

// holds reports whether m has, right after the expected prefix, a segment
// holding exactly raw.
func (x *expectation) holds(m *manifest.Manifest, raw []byte) bool {
	sum := sha256.Sum256(raw)
	prefix := ""
	for _, seg := range m.Segments {
		if seg.Start == x.length && prefix == x.sha256 {
			return seg.Length == int64(len(raw)) && seg.SHA256 == hex.EncodeToString(sum[:])
		}
		prefix = seg.PrefixSHA256
	}
	return false
}

// appendBatch commits one segment holding encode's bytes at the end of
// session id (the conditional-put protocol, see the package doc) and
// returns once it is committed; the manifest and index checkpoints follow
// in the background (see checkpoint.go). The first segment of a session
// waits for its index entry too, so that a session never exists unlisted
// because its writer died a moment after the append returned. encode is
// called for each attempt, with header true when the segment starts the
// log.
func (s *Store) appendBatch(ctx context.Context, id string, encode func(header bool) ([]byte, error), expect *expectation) error {
	st := s.state(id)
	if err := st.mu.lock(ctx); err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	err := s.commitBatch(ctx, id, st, encode, expect)
	first := err == nil && len(st.m.Segments) == 1
	st.mu.unlock()
	if err != nil {
		return err
	}
	done := s.scheduleCheckpoint(ctx, id, st)
	if first && !s.deferIndex {
		// The checkpoint's outcome does not change the append's: the
		// segment is committed, and the index is a checkpoint that may lag.
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return nil
}

// commitBatch is appendBatch's commit. Callers hold st.mu.
func (s *Store) commitBatch(ctx context.Context, id string, st *sessionState, encode func(header bool) ([]byte, error), expect *expectation) error {
	// A caller that expects a new session needs no read: the segment PUT's
	// If-None-Match refuses an existing one (and the 412 path catches up).
	if !st.loaded && expect != nil && expect.length == 0 {
		st.m, st.etag, st.stored, st.loaded, st.fresh = manifest.New(id), "", 0, true, s.now()
	}
	// A manifest older than half the grace period may list segment names
	// that compaction has since deleted: re-read it before committing.
	if !st.loaded || s.now().Sub(st.fresh) > s.compactGrace/2 {
		if err := s.refresh(ctx, id, st); err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
	}
	m := st.m.Clone()
	transient := 0
	for attempt := 0; ; attempt++ {
		if expect != nil && (m.Length != expect.length || m.SHA256 != expect.sha256) {
			if m.Length < expect.length {
				if _, err := s.catchUp(ctx, m); err != nil {
					return fmt.Errorf("append to session %s: %w", id, err)
				}
			}
			if m.Length != expect.length || m.SHA256 != expect.sha256 {
				st.m, st.fresh = m, s.now()
				if raw, err := encode(expect.length == 0); err == nil && expect.holds(m, raw) {
					// An earlier attempt of this very append committed, and
					// may have died before its checkpoints: write them, so a
					// re-run repairs an index that lags.
					goto committed
				}
				return fmt.Errorf("append to session %s: %w: it holds %d bytes (sha256 %s), expected %d (sha256 %s)",
					id, ErrRemoteChanged, m.Length, orNone(m.SHA256), expect.length, orNone(expect.sha256))
			}
		}
		raw, err := encode(m.Length == 0)
		if err != nil {
			return err
		}
		name := manifest.SegmentName(m.Length)
		key := s.sessionKey(id, name)
		comp := s.codec.Compress(raw)
		next := m.Clone()
		seg, err := next.Append(s.objectURL(key), raw, int64(len(comp)))
		if err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
		_, err = s.b.put(ctx, key, comp, putCond{ifNoneMatch: true}, "application/zstd")
		if err == nil {
			m = next
			break
		}
		switch {
		case errors.Is(err, errPrecondition):
			// Another writer committed at this position (or our own PUT
			// did, and the SDK's retry of it got the 412).
			probed, cerr := s.catchUp(ctx, m)
			if cerr != nil {
				st.loaded = false
				return fmt.Errorf("append to session %s: %w", id, cerr)
			}
			if len(probed) > 0 && probed[0].seg.SHA256 == seg.SHA256 {
				goto committed
			}
		case errors.Is(err, errConflict):
		case ctx.Err() != nil:
			st.loaded = false
			landed, lookErr := s.landed(ctx, m, seg)
			if landed {
				goto committed
			}
			return appendFailed(id, err, lookErr)
		default:
			// The server may be restarting. Retrying is safe: the PUT is
			// conditional, and a 412 on the retry finds our own bytes.
			transient++
			if transient >= 3 {
				st.loaded = false
				landed, lookErr := s.landed(ctx, m, seg)
				if landed {
					goto committed
				}
				return appendFailed(id, err, lookErr)
			}
		}
		// A lost race (412) means another writer made progress, so many
		// writers on one session are no livelock: they get a larger
		// budget than conflicts and errors, and a short backoff (we have
		// just caught up, so the next position is likely free).
		lost := errors.Is(err, errPrecondition)
		limit := s.maxAttempts
		if lost {
			limit = 10 * s.maxAttempts
		}
		if attempt+1 >= limit {
			st.loaded = false
			return fmt.Errorf("append to session %s: gave up after %d attempts: %w", id, attempt+1, err)
		}
		delay := attempt
		if lost {
			delay = min(attempt, 3)
		}
		if err := backoff(ctx, delay); err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
	}
committed:
	st.m, st.fresh = m, s.now()
	return nil
}

// landed is the last word on a segment PUT whose outcome is unknown (the
// connection broke, the context ended): it looks, once, for seg at the end
// of m and reports whether it holds exactly our bytes, extending m if so.
// The append then succeeded; otherwise the caller reports the error.
//
// It returns an error when the bucket could not be asked: then nobody
// knows whether the batch is there.
func (s *Store) landed(ctx context.Context, m *manifest.Manifest, seg manifest.Segment) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	probe := m.Clone()
	found, err := s.catchUp(ctx, probe)
	if err != nil {
		return false, err
	}
	if len(found) == 0 || found[0].seg.SHA256 != seg.SHA256 {
		return false, nil
	}
	*m = *probe
	return true, nil
}

// appendFailed is the error of an append whose segment PUT failed without
// an answer. When the bucket could not be asked afterwards (lookErr), the
// batch may or may not be there: ErrOutcomeUnknown says so, rather than
// claiming it is absent.
func appendFailed(id string, putErr, lookErr error) error {
	if lookErr != nil {
		return fmt.Errorf("append to session %s: %w: the write failed (%v) and checking whether it landed failed too (%v); load the session to see", id, ErrOutcomeUnknown, putErr, lookErr)
	}
	return fmt.Errorf("append to session %s: %w", id, putErr)
}

// backoff sleeps before retry attempt+1: exponential with jitter, capped.
func backoff(ctx context.Context, attempt int) error {
	d := 5 * time.Millisecond << min(attempt, 8)
	d = min(d, time.Second)
	d = d/2 + rand.N(d)
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
	if err := agent.ValidateSessionID(sessionID); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := s.clock()
	return s.appendBatch(ctx, sessionID, func(header bool) ([]byte, error) {
		return sessionlog.EncodeBatch(sessionID, header, msgs, at)
	}, nil)
}
