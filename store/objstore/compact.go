package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// Compact merges the session's segments into one object and deletes the
// objects replaced by earlier compactions whose grace period has passed.
// It is idempotent; a session with one segment only has its due deletions
// done.
func (s *Store) Compact(ctx context.Context, id string) error {
	if err := agent.ValidateSessionID(id); err != nil {
		return err
	}
	st := s.state(id)
	if err := st.mu.lock(ctx); err != nil {
		return fmt.Errorf("compact session %s: %w", id, err)
	}
	defer st.mu.unlock()
	if err := s.refresh(ctx, id, st); err != nil {
		return fmt.Errorf("compact session %s: %w", id, err)
	}
	if st.m.Length == 0 {
		return agent.NotFoundError(id)
	}
	return s.compactLocked(ctx, id, st)
}

// compactLocked compacts the session described by st (caught up). The
// merged object is written under MergedName, a name no appender uses; the
// manifest swap is a compare-and-swap; the replaced segments stay for the
// grace period, recorded in the manifest. Callers hold st.mu.
func (s *Store) compactLocked(ctx context.Context, id string, st *sessionState) error {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		m := st.m
		now := s.now()
		var due, keep []manifest.PendingDelete
		for _, p := range m.Pending {
			if now.After(p.After) || now.Equal(p.After) {
				due = append(due, p)
			} else {
				keep = append(keep, p)
			}
		}
		merge := len(m.Segments) > 1
		if !merge && len(due) == 0 {
			return nil
		}
		next := m.Clone()
		next.Pending = keep
		if merge {
			merged, err := s.mergeSegments(ctx, id, m)
			if err != nil {
				return fmt.Errorf("compact session %s: %w", id, err)
			}
			next.Segments = []manifest.Segment{merged}
			for _, old := range m.Segments {
				if old.Name() == manifest.SegmentName(0) {
					// The first segment stays: while it exists, a create
					// of the session (If-None-Match on seg/0, which skips
					// reading the manifest) cannot succeed on a session
					// that exists. It is small: the header and the first
					// batch.
					continue
				}
				next.Pending = append(next.Pending, manifest.PendingDelete{Name: old.Name(), After: now.Add(s.compactGrace).UTC()})
			}
		}
		data, err := manifest.Encode(next)
		if err != nil {
			return err
		}
		etag, err := s.put(ctx, s.sessionKey(id, "manifest.json"), data, putCond{ifMatch: st.etag, ifNoneMatch: st.etag == ""}, "application/json")
		if errors.Is(err, errPrecondition) || errors.Is(err, errConflict) {
			if err := s.refresh(ctx, id, st); err != nil {
				return fmt.Errorf("compact session %s: %w", id, err)
			}
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("compact session %s: %w", id, err)
		}
		st.m, st.etag, st.stored, st.fresh = next, etag, len(next.Segments), s.now()
		// The manifest no longer mentions the due objects: delete them. A
		// failed delete leaves garbage, never a dangling reference.
		for _, p := range due {
			if err := s.b.delete(ctx, s.sessionKey(id, p.Name)); err != nil {
				return fmt.Errorf("compact session %s: %w", id, err)
			}
		}
		return nil
	}
	return fmt.Errorf("compact session %s: too many concurrent updates", id)
}

// mergeSegments reads every segment of m (verified, in parallel) and
// writes their concatenation as one merged object.
func (s *Store) mergeSegments(ctx context.Context, id string, m *manifest.Manifest) (manifest.Segment, error) {
	raws := make([][]byte, len(m.Segments))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	lines := 0
	for i, seg := range m.Segments {
		lines += seg.Lines
		g.Go(func() error {
			var err error
			raws[i], err = s.fetchSegment(gctx, id, seg)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return manifest.Segment{}, err
	}
	raw := bytes.Join(raws, nil)
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != m.SHA256 {
		return manifest.Segment{}, fmt.Errorf("%w: session %s: segments do not chain to the manifest's prefix hash", ErrCorrupt, id)
	}
	comp := s.codec.CompressSmaller(raw)
	seg := manifest.Segment{
		Start: 0, Length: m.Length, Compressed: int64(len(comp)),
		SHA256: m.SHA256, Lines: lines, PrefixSHA256: m.SHA256, Merged: true,
	}
	// Unconditional: the name fixes the range, and the range's bytes are
	// fixed by the prefix hash, so a rewrite stores the same bytes.
	if _, err := s.put(ctx, s.sessionKey(id, seg.Name()), comp, putCond{}, "application/zstd"); err != nil {
		return manifest.Segment{}, err
	}
	return seg, nil
}
