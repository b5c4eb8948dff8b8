package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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
// (at most mergeMax raw bytes each; every small segment, where a
// writer's own compaction merges tiered) and deletes the objects replaced by
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
	return s.compactLocked(ctx, id, st, mergeRuns)
}

// mergeRuns returns the runs [from, to) of consecutive segments to merge,
// each of at least two segments and at most max raw bytes together. A
// segment of an eighth of max or more (a chunk of a copy, or an earlier
// merge) is never merged again: it is big enough that reading it costs
// one request among few, and rewriting it to absorb small ones would
// rewrite the session over and over. This is an explicit compaction's
// (`panto-sync compact`): every small segment merged.
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

// mergeTieredRuns is mergeRuns as a writer's compaction past the
// threshold does it: tiered, as an LSM tree's merges are. Walking back
// from the newest segment, a run takes every appended segment, and a
// merged one only while it holds no more than the run so far. A merged
// object is so rewritten only once as much came after it, and each
// merge at least doubles what it rewrites: each byte of a long session
// is rewritten about log2(its size ÷ the threshold's worth) times, and
// a session is a few merged objects of falling sizes and the segments
// appended since. Merging every small segment at each compaction
// (mergeRuns) rewrote the whole session each time: 150 turns of six
// appends made compaction write 13 times the log
// (TestLongSessionCompaction).
func mergeTieredRuns(segs []manifest.Segment, max int64) [][2]int {
	var runs [][2]int
	for end := len(segs); end > 0; {
		from, size := end, int64(0)
		for from > 0 {
			prev := segs[from-1]
			if prev.Length >= max/8 || size+prev.Length > max || prev.Merged && prev.Length > size {
				break
			}
			from--
			size += prev.Length
		}
		if end-from >= 2 {
			runs = append(runs, [2]int{from, end})
		}
		end = min(from, end-1)
	}
	slices.Reverse(runs)
	return runs
}

// compactLocked compacts the session described by st (caught up) (§P5),
// merging the runs plan picks (mergeRuns or mergeTieredRuns). Each
// merged object is written under MergedName, a name no appender uses;
// the manifest swap is a compare-and-swap; the replaced segments stay
// for the grace period, recorded in the manifest. Callers hold st.mu.
func (s *Store) compactLocked(ctx context.Context, id string, st *sessionState, plan func([]manifest.Segment, int64) [][2]int) error {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		m := st.m
		now := s.now()
		due, keep := duePending(m.Pending, now)
		runs := plan(m.Segments, mergeMax)
		if len(runs) == 0 && len(due) == 0 {
			return nil
		}
		// The lists of the due deletions are read while the manifest
		// still names them: a list lost after the swap would leave what
		// it names behind for good.
		doomed, err := s.dueObjects(ctx, id, due)
		if err != nil {
			return fmt.Errorf("compact session %s: %w", id, err)
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
		var replaced []string
		for _, run := range runs {
			for _, old := range m.Segments[run[0]:run[1]] {
				replaced = append(replaced, s.sessionKey(id, old.Name()))
			}
		}
		s.segs.drop(replaced)
		// The manifest no longer mentions the due objects: delete them. A
		// failed delete leaves garbage, never a dangling reference.
		if err := s.b.deleteKeys(ctx, doomed); err != nil {
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
// segments pending deletion after the grace period (behind keep). The
// merges, and the list of the replaced objects, are written at once: a
// writer compacts as panto exits, and each in turn cost a round trip.
// Runs of more than mergeMax together are merged one at a time, so that
// an explicit compaction of a large session holds one run in memory.
func (s *Store) mergeRunsOf(ctx context.Context, m *manifest.Manifest, runs [][2]int, keep []manifest.PendingDelete, now time.Time) (*manifest.Manifest, error) {
	var replaced []string
	var total int64
	for _, run := range runs {
		for _, old := range m.Segments[run[0]:run[1]] {
			total += old.Length
			if old.Name() == manifest.SegmentName(0) {
				// The first segment stays: while it exists, a create of
				// the session (If-None-Match on seg/0, which skips
				// reading the manifest) cannot succeed on a session that
				// exists. It is small: the header and the first batch.
				continue
			}
			replaced = append(replaced, old.Name())
		}
	}
	merged := make([]manifest.Segment, len(runs))
	g, gctx := errgroup.WithContext(ctx)
	if total > mergeMax {
		g.SetLimit(1)
	}
	for i, run := range runs {
		g.Go(func() error {
			var err error
			merged[i], err = s.mergeSegments(gctx, m.ID, m.Segments[run[0]:run[1]])
			return err
		})
	}
	next := m.Clone()
	next.Pending = keep
	after := now.Add(s.compactGrace).UTC()
	if len(replaced) <= replacedInline {
		for _, name := range replaced {
			next.Pending = append(next.Pending, manifest.PendingDelete{Name: name, After: after})
		}
	} else {
		// Written before the manifest that names it, so that no
		// manifest names a list that is not there. Unconditional: its
		// name is its content's hash. A list whose manifest loses the
		// race is left as garbage (a few hundred bytes, swept with the
		// session): the winner may have written the same one.
		list := manifest.ReplacedListName(replaced)
		key := s.sessionKey(m.ID, list)
		g.Go(func() error {
			_, err := s.put(gctx, key, s.codec.EncodeReplacedList(key, replaced), putCond{}, s.objectType())
			return err
		})
		next.Pending = append(next.Pending, manifest.PendingDelete{Name: list, After: after})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	next.Segments = next.Segments[:0]
	prev := 0
	for i, run := range runs {
		next.Segments = append(next.Segments, m.Segments[prev:run[0]]...)
		next.Segments = append(next.Segments, merged[i])
		prev = run[1]
	}
	next.Segments = append(next.Segments, m.Segments[prev:]...)
	return next, nil
}

// replacedInline is how many replaced objects a compaction records one
// pending delete each for; past it, it lists them in an object of their
// own (manifest.ReplacedListName).
const replacedInline = 4

// dueObjects returns the keys of session id's objects that the due
// pending deletions remove: each named one, and for each list of
// replaced objects, what it names before the list itself. A list that
// cannot be read is an error, so that the manifest keeps naming it.
func (s *Store) dueObjects(ctx context.Context, id string, due []manifest.PendingDelete) ([]string, error) {
	var keys []string
	for _, p := range due {
		if manifest.IsReplacedList(p.Name) {
			names, err := s.replacedNames(ctx, id, p.Name)
			if err != nil {
				return nil, err
			}
			keys = append(keys, names...)
		}
		keys = append(keys, s.sessionKey(id, p.Name))
	}
	return keys, nil
}

// replacedNames reads the list of replaced objects called list under
// session id, and returns their keys. A list already gone (its deletion
// was cut short after it) names none, and so does a damaged one: it
// must not delete what it may not have listed, nor stop every later
// compaction of the session; what it listed is left as garbage, which
// the session's deletion sweeps.
func (s *Store) replacedNames(ctx context.Context, id, list string) ([]string, error) {
	names, err := s.readReplacedList(ctx, id, list)
	if errors.Is(err, ErrCorrupt) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = s.sessionKey(id, n)
	}
	return keys, nil
}

// readReplacedList reads the list of replaced objects called list under
// session id: the names it holds, none if it is gone, and ErrCorrupt if
// it does not read as its name says.
func (s *Store) readReplacedList(ctx context.Context, id, list string) ([]string, error) {
	key := s.sessionKey(id, list)
	data, _, err := s.b.get(ctx, key, "")
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names, err := s.codec.DecodeReplacedList(key, list, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: the list of the objects a compaction replaced is damaged: %w", s.objectURL(key), ErrCorrupt, err)
	}
	return names, nil
}

// mergeSegments reads a run of consecutive segments (verified, in
// parallel) and writes their concatenation as one merged object. The
// run's GETs go out as a log reader's do, readAhead at once: a writer's
// compaction runs as panto exits, and a run of 33 segments read 8 at a
// time cost 5 round trips where 1 does. The run is held whole anyway
// (at most mergeMax), so reading more of it at once holds no more.
func (s *Store) mergeSegments(ctx context.Context, id string, run []manifest.Segment) (manifest.Segment, error) {
	raws := make([][]byte, len(run))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readAhead)
	lines := 0
	for i, seg := range run {
		lines += seg.Lines
		if raw, ok := s.segs.get(s.sessionKey(id, seg.Name()), seg); ok {
			raws[i] = raw
			continue
		}
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
	s.segs.put(name, raw) // a tiered merge takes it again
	return seg, nil
}
