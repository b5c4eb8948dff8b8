package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// mergeMax bounds the raw bytes of a merged object: compaction merges
// runs of consecutive segments up to this size, so that neither the
// memory it takes nor any object grows with the session (a long session
// keeps one merged object per 32 MiB).
const mergeMax = 32 << 20

// Compact merges runs of the session's small segments into merged objects
// (at most mergeMax raw bytes each) and deletes the objects replaced by
// earlier compactions whose grace period has passed. It is idempotent; a
// session with nothing to merge only has its due deletions done.
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

// mergeRuns returns the runs [from, to) of consecutive segments to merge,
// each of at least two segments and at most max raw bytes together. A
// segment of an eighth of max or more (a chunk of a copy, or an earlier
// merge) is never merged again: it is big enough that reading it costs
// one request among few, and rewriting it to absorb small ones would
// rewrite the session over and over.
func mergeRuns(segs []manifest.Segment, max int64) [][2]int {
	var runs [][2]int
	for i := 0; i < len(segs); {
		j, size := i, int64(0)
		for j < len(segs) && segs[j].Length < max/8 && size+segs[j].Length <= max {
			size += segs[j].Length
			j++
		}
		if j-i < 2 {
			i++
			continue
		}
		runs = append(runs, [2]int{i, j})
		i = j
	}
	return runs
}

// compactLocked compacts the session described by st (caught up) (§P5).
// Each merged object is written under MergedName, a name no appender
// uses; the manifest swap is a compare-and-swap; the replaced segments
// stay for the grace period, recorded in the manifest. Callers hold st.mu.
func (s *Store) compactLocked(ctx context.Context, id string, st *sessionState) error {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		m := st.m
		now := s.now()
		due, keep := duePending(m.Pending, now)
		runs := mergeRuns(m.Segments, mergeMax)
		if len(runs) == 0 && len(due) == 0 {
			return nil
		}
		next, err := s.mergeRunsOf(ctx, m, runs, keep, now)
		if err != nil {
			return fmt.Errorf("compact session %s: %w", id, err)
		}
		data, err := s.codec.EncodeManifest(s.sessionKey(id, "manifest.json"), next)
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
		st.adopt(next, etag, s.now())
		// The manifest no longer mentions the due objects: delete them. A
		// failed delete leaves garbage, never a dangling reference.
		keys := make([]string, len(due))
		for i, p := range due {
			keys[i] = s.sessionKey(id, p.Name)
		}
		if err := s.b.deleteKeys(ctx, keys); err != nil {
			return fmt.Errorf("compact session %s: %w", id, err)
		}
		return nil
	}
	return fmt.Errorf("compact session %s: too many concurrent updates", id)
}

// duePending splits pending deletions into those due at now and those
// to keep.
func duePending(pending []manifest.PendingDelete, now time.Time) (due, keep []manifest.PendingDelete) {
	for _, p := range pending {
		if now.After(p.After) || now.Equal(p.After) {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	return due, keep
}

// mergeRunsOf writes a merged object for each run of m's segments and
// returns the manifest that lists them instead, with the replaced
// segments pending deletion after the grace period (behind keep).
func (s *Store) mergeRunsOf(ctx context.Context, m *manifest.Manifest, runs [][2]int, keep []manifest.PendingDelete, now time.Time) (*manifest.Manifest, error) {
	next := m.Clone()
	next.Pending = keep
	next.Segments = next.Segments[:0]
	prev := 0
	for _, run := range runs {
		next.Segments = append(next.Segments, m.Segments[prev:run[0]]...)
		merged, err := s.mergeSegments(ctx, m.ID, m.Segments[run[0]:run[1]])
		if err != nil {
			return nil, err
		}
		next.Segments = append(next.Segments, merged)
		for _, old := range m.Segments[run[0]:run[1]] {
			if old.Name() == manifest.SegmentName(0) {
				// The first segment stays: while it exists, a create of
				// the session (If-None-Match on seg/0, which skips
				// reading the manifest) cannot succeed on a session that
				// exists. It is small: the header and the first batch.
				continue
			}
			next.Pending = append(next.Pending, manifest.PendingDelete{Name: old.Name(), After: now.Add(s.compactGrace).UTC()})
		}
		prev = run[1]
	}
	next.Segments = append(next.Segments, m.Segments[prev:]...)
	return next, nil
}

// mergeSegments reads a run of consecutive segments (verified, in
// parallel) and writes their concatenation as one merged object.
func (s *Store) mergeSegments(ctx context.Context, id string, run []manifest.Segment) (manifest.Segment, error) {
	raws := make([][]byte, len(run))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	lines := 0
	for i, seg := range run {
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
	last := run[len(run)-1]
	name := s.sessionKey(id, manifest.MergedName(run[0].Start, last.End()))
	comp := s.codec.EncodeMergedSegment(name, raw)
	seg := manifest.Segment{
		Start: run[0].Start, Length: last.End() - run[0].Start, Compressed: int64(len(comp)),
		SHA256: hex.EncodeToString(sum[:]), Lines: lines, PrefixSHA256: last.PrefixSHA256, Merged: true,
	}
	// Unconditional: the name fixes the range, and the range's bytes are
	// fixed by the prefix hash, so a rewrite stores the same bytes.
	if _, err := s.put(ctx, name, comp, putCond{}, s.objectType()); err != nil {
		return manifest.Segment{}, err
	}
	return seg, nil
}
