package objstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/panto-dev/panto/internal/manifest"
)

// Writing the index: entries and tombstones are queued per shard and
// written by the next writer of the shard as its new base (group commit),
// with If-Match on the ETag of the reading it applied them to (§P3).

// updateIndex records e in its shard (see writeShard). An entry never
// replaces a longer one: the index may lag behind the sessions, never go
// back.
//
// With unfolded entries (unfolded.go) it writes no partition: the entry
// goes to the next commit of the index log.
func (s *Store) updateIndex(ctx context.Context, e manifest.IndexEntry) error {
	if err := s.adoptUnfolded(ctx); err != nil {
		return err
	}
	if s.unfoldedIndex() {
		return s.commitUnfolded(ctx, e)
	}
	name := s.queueIndex(e)
	if err := s.writeShard(ctx, name); err != nil {
		return err
	}
	return s.writeLog(ctx)
}

// queueIndex queues e for the next write of its shard, and returns the
// shard's name.
func (s *Store) queueIndex(e manifest.IndexEntry) string {
	return s.queueIndexIn(s.shardOf(e.Info.ID), e)
}

// queueIndexIn queues e for the next write of shard name.
func (s *Store) queueIndexIn(name string, e manifest.IndexEntry) string {
	st := s.shardState(name)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending == nil {
		st.pending = map[string]manifest.IndexEntry{}
	}
	if old, ok := st.pending[e.Info.ID]; !ok || old.Length <= e.Length {
		st.pending[e.Info.ID] = e
	}
	return name
}

// queueTombstone queues tombstone t for the next write of its shard, which
// purges the shard's older deltas (nextBase), and returns the shard's
// name.
func (s *Store) queueTombstone(t manifest.Tombstone) string {
	return s.queueTombstoneIn(s.shardOf(t.ID), t)
}

// queueTombstoneIn queues t for the next write of shard name.
func (s *Store) queueTombstoneIn(name string, t manifest.Tombstone) string {
	st := s.shardState(name)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.buried == nil {
		st.buried = map[string]manifest.Tombstone{}
	}
	st.buried[t.ID], st.purge = t, true
	return name
}

// writeShard writes the entries queued for shard name, if any, as the
// shard's new base (see index.go), and queues what changed for the next
// commit of the index log (format 4), which the caller writes
// (writeLog) once it has written every shard it meant to. It starts from the cached reading,
// whatever its age: the If-Match refuses a base someone changed since,
// and then the shard is read again and the entries applied to it. A
// write that fails leaves the entries queued for the next writer.
func (s *Store) writeShard(ctx context.Context, name string) error {
	// Before the shard's lock: the adoption folds every shard under its
	// own. The entries stay queued if it fails.
	if err := s.adoptIndex(ctx); err != nil {
		return err
	}
	if len(name) < s.partitionWidth() {
		// Queued under a shard's or narrower partition's name before
		// this Store learnt that the index moved (to format 4, or
		// widened): requeue under the partitions.
		return s.requeueShard(ctx, name)
	}
	return s.writeQueued(ctx, name)
}

// writeQueued is writeShard once the index is in this Store's format.
// A partition that buries a session is noted for the purge of the runs'
// pages that cover it (purgeBuried, once the caller has written every
// partition it meant to): they may hold the session's summary.
func (s *Store) writeQueued(ctx context.Context, name string) error {
	buried, err := s.writeQueuedLocked(ctx, name)
	if buried {
		s.noteBuried(name)
	}
	return err
}

// writeQueuedLocked is writeQueued under the partition's write lock; it
// reports whether the write had a session to bury.
func (s *Store) writeQueuedLocked(ctx context.Context, name string) (buried bool, err error) {
	st := s.shardState(name)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	batch, v, loaded := st.take()
	if batch.empty() {
		return false, nil // written by the writer before us, or nothing queued
	}
	w, applied, err := s.putBatch(ctx, name, st, batch, v, loaded)
	if err != nil {
		st.requeue(batch)
		return false, err
	}
	if s.indexLog() {
		// A deletion queues its tombstone for the log itself, before
		// the partition buries the session (finishDelete).
		s.queueLog(applied.entries, nil, len(name))
	}
	// Every burial purges the runs, also one the partition held already
	// (a deletion cut short, finished again): its commit named the
	// session in Unpurged again (purge.go).
	if w.purgePending() {
		return len(batch.buried) > 0, s.finishPurge(ctx, name, w)
	}
	return len(batch.buried) > 0, nil
}

// dropQueued forgets what is queued for partition name (a damaged one,
// which repair rebuilds from the sessions).
func (s *Store) dropQueued(name string) {
	st := s.shardState(name)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.take()
}

// requeueShard moves what is queued under format 3's shard name to the
// partitions of format 4, and writes them.
func (s *Store) requeueShard(ctx context.Context, name string) error {
	st := s.shardState(name)
	st.wmu.Lock()
	batch, _, _ := st.take()
	st.wmu.Unlock()
	names := map[string]bool{}
	for _, e := range batch.entries {
		names[s.queueIndex(e)] = true
	}
	for _, t := range batch.buried {
		names[s.queueTombstone(t)] = true
	}
	var errs []error
	for n := range names {
		errs = append(errs, s.writeQueued(ctx, n))
	}
	return errors.Join(errs...)
}

// shardBatch is what one writer of a shard took from its queue.
type shardBatch struct {
	entries map[string]manifest.IndexEntry
	buried  map[string]manifest.Tombstone
	purge   bool
}

func (b shardBatch) empty() bool { return len(b.entries) == 0 && len(b.buried) == 0 }

// take empties st's queue into a batch and returns it with st's reading
// of the shard (loaded: there is one). Callers hold st.wmu.
func (st *shardState) take() (b shardBatch, v shardView, loaded bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b = shardBatch{entries: st.pending, buried: st.buried, purge: st.purge}
	st.pending, st.buried, st.purge = nil, nil, false
	return b, st.view, st.loaded && st.view.shard != nil
}

// requeue puts b back in st's queue, where an entry queued since that is
// at least as long wins.
func (st *shardState) requeue(b shardBatch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending == nil {
		st.pending = map[string]manifest.IndexEntry{}
	}
	for id, e := range b.entries {
		if old, ok := st.pending[id]; !ok || old.Length < e.Length {
			st.pending[id] = e
		}
	}
	for id, t := range b.buried {
		if st.buried == nil {
			st.buried = map[string]manifest.Tombstone{}
		}
		st.buried[id] = t
	}
	st.purge = st.purge || b.purge
}

// putBatch applies batch to the reading v of shard name (loaded: v is
// one; else Open's, or a new reading) and puts the result as the base,
// reading the shard again after each lost race. It returns the view of
// the base it wrote (the zero view when the batch changed nothing), after
// deleting the deltas an older base folded, and what of the batch changed
// the shard (for the index log).
func (s *Store) putBatch(ctx context.Context, name string, st *shardState, batch shardBatch, v shardView, loaded bool) (shardView, shardBatch, error) {
	if !loaded {
		if err := s.awaitPrefetch(ctx, name); err != nil {
			return shardView{}, shardBatch{}, err
		}
		st.mu.Lock()
		v, loaded = st.view, st.loaded && st.view.shard != nil
		st.mu.Unlock()
	}
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !loaded {
			var err error
			if v, err = s.readShardView(ctx, name); err != nil {
				return shardView{}, shardBatch{}, err
			}
			loaded = true
		}
		next := v.shard.Clone()
		changed := v.applied > v.through() // legacy deltas to fold
		// applied: what the partition holds of the batch's sessions once
		// written, changed or not, for the index log: a commit lost after
		// its partition's write (a fault, a crash) is made good by the
		// next write of the session, even one that changes nothing here.
		applied := shardBatch{entries: map[string]manifest.IndexEntry{}, buried: map[string]manifest.Tombstone{}}
		for id, e := range batch.entries {
			changed = next.Put(e) || changed
			if held, ok := next.Sessions[id]; ok {
				applied.entries[id] = held
			}
		}
		for id, t := range batch.buried {
			if held, ok := next.Sessions[id]; ok {
				// Its project's head holds it too (heads.go).
				s.queueHeadBurial(held.Info.Project, t)
			}
			if next.Bury(t) {
				applied.buried[id], changed = t, true
			}
		}
		if !changed && !v.purgePending() {
			return shardView{}, applied, nil
		}
		base, pruneFrom, pruneTo := s.nextBase(next, v, batch.purge)
		w, err := s.putBase(ctx, name, base, v.etag)
		if err == nil {
			if !w.purgePending() {
				s.pruneDeltas(ctx, name, pruneFrom, pruneTo)
			}
			return w, applied, nil
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			return shardView{}, shardBatch{}, err
		}
		loaded = false
		if errors.Is(err, errConflict) {
			if err := backoff(ctx, attempt); err != nil {
				return shardView{}, shardBatch{}, err
			}
		}
	}
	return shardView{}, shardBatch{}, fmt.Errorf("index shard %s: too many concurrent updates", name)
}

// nextBase is next, the reading v with the queued entries applied, as the
// shard's new base: it folds every delta v applied. A burial (purge)
// asks for those deltas to be deleted at once (Purge), since they hold
// the buried session's summary (finishPurge); otherwise the deltas an
// older base folded are deleted once it is older than indexPruneAfter,
// and nextBase returns their range.
func (s *Store) nextBase(next *manifest.IndexShard, v shardView, purge bool) (base *manifest.IndexShard, pruneFrom, pruneTo int64) {
	base = next.Clone()
	base.Through, base.Written, base.Pruned, base.Purge = v.applied, s.now().UTC(), 0, 0
	if v.base != nil {
		base.Pruned, base.Purge = v.base.Pruned, v.base.Purge
		if v.base.Through > v.base.Pruned && s.now().Sub(v.base.Written) > s.indexPruneAfter {
			pruneFrom, pruneTo = v.base.Pruned+1, v.base.Through
			base.Pruned = v.base.Through
		}
	}
	if purge {
		base.Purge = v.applied
	}
	s.expireTombstones(base)
	return base, pruneFrom, pruneTo
}
