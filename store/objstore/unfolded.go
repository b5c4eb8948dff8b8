package objstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// Unfolded entries (manifest.FeatureIndexUnfolded, docs/DESIGN.md §P3):
// a checkpoint commits its session's entry to the index log, in the
// commit's Unfolded set, and writes no partition. A partition holds
// about 1/256 of the index (80 KB at 100,000 sessions), which every turn
// would otherwise send twice; the set holds the sessions being written
// now. A run (runs.go) takes the entry later, in a fold (the LSM's flush
// of its memtable, Litestream's of its L0 files), and the partition when
// the runs fold:
//
//   - the writer's Close folds the sessions it committed unfolded;
//   - a writer that finds the set over manifest.UnfoldedSize, or holding
//     an entry idle for unfoldedIdle (its writer died), folds those;
//   - a bulk write (panto-sync, repair) writes a run or partitions, and
//     its commit takes what they now hold out of the set.
//
// A fold writes the run's pages, then commits it: an entry leaves the
// set only in the commit that names a page holding it, or a longer one.
// So a reader that reads the newest commit, then the partitions and the
// pages it names, sees every session at its longest.

// unfoldedIdle is how long an entry stays unfolded after its session was
// last modified before any writer folds it.
const unfoldedIdle = 30 * time.Minute

// unfoldedBatch is the most sessions a deferred write (WithDeferredIndex:
// panto-sync) commits unfolded; a bigger batch writes its partitions,
// which costs less than carrying its entries in every commit.
const unfoldedBatch = 8

// unfoldedIndex reports whether the prefix's checkpoints commit entries
// unfolded (manifest.FeatureIndexUnfolded).
func (s *Store) unfoldedIndex() bool {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	return slices.Contains(s.marker.Requires, manifest.FeatureIndexUnfolded)
}

// adoptUnfolded brings the prefix to format 4 with unfolded entries
// before this Store's first checkpoint: no object changes, the marker
// only, so that a panto that does not know the set refuses the prefix
// before it could miss a session the partitions do not hold yet.
func (s *Store) adoptUnfolded(ctx context.Context) error {
	if s.unfoldedIndex() {
		return nil
	}
	if err := s.adoptIndex(ctx); err != nil {
		return err
	}
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	if s.unfoldedIndex() {
		return nil
	}
	return s.ensureFeature(ctx, manifest.FeatureIndexUnfolded)
}

// commitUnfolded commits entries unfolded (see the top of this file),
// then folds what the newest commit holds past the set's bounds.
func (s *Store) commitUnfolded(ctx context.Context, entries ...manifest.IndexEntry) error {
	lg := &s.ilog
	lg.mu.Lock()
	if lg.unfolded == nil {
		lg.unfolded = map[string]manifest.IndexEntry{}
	}
	if lg.mine == nil {
		lg.mine = map[string]bool{}
	}
	for _, e := range entries {
		if old, ok := lg.unfolded[e.Info.ID]; !ok || old.Length <= e.Length {
			lg.unfolded[e.Info.ID] = e
		}
		lg.mine[e.Info.ID] = true
	}
	lg.mu.Unlock()
	folded := false
	if s.closing.Load() {
		var err error
		if folded, err = s.commitFoldingMine(ctx); err != nil {
			return err
		}
	}
	if !folded {
		if err := s.writeLog(ctx); err != nil {
			return err
		}
	}
	// Best effort: the entries are committed; a fold that fails (a
	// damaged partition, say) is tried again by the next commit.
	_ = s.foldDue(ctx)
	return nil
}

// commitFoldingMine is writeLog for a checkpoint of a closing Store: the
// sessions this Store committed unfolded (its own, lg.mine) go to a run
// written beside the commit, which then takes them out of the set, as
// the fold of Close (foldMine) would have done after it. An exit so
// makes one commit: the run's page and the heads, then the commit, where
// it made the checkpoint's commit, a reading of the newest commit, the
// page and heads, then the fold's commit, one after the other.
//
// It reports false, and commits nothing, when there is nothing of its
// own to fold, or a deletion waits for the commit (writeLog buries it and
// purges the log after it), or the run cannot be written: writeLog then
// commits the entries unfolded, and foldMine folds them.
func (s *Store) commitFoldingMine(ctx context.Context) (bool, error) {
	if !s.indexLog() {
		return false, nil
	}
	lg := &s.ilog
	lg.wmu.Lock()
	lg.mu.Lock()
	var committed map[string]manifest.IndexEntry
	if lg.last != nil {
		committed = lg.last.Unfolded
	}
	// Not a deleted session's summary into a run: a purge took those
	// out of the runs the commits named.
	due := withoutDeleted(lg.last, onlyMine(lg.mine, longest(lg.unfolded, committed)))
	if len(lg.buried) > 0 || len(due) == 0 {
		lg.mu.Unlock()
		lg.wmu.Unlock()
		return false, nil
	}
	ch := lg.takeQueuedLocked()
	lg.mu.Unlock()
	w, err := s.writeRunAndHeads(ctx, due)
	if err == nil {
		w.into(&ch, due)
		err = s.commitLog(ctx, ch, nil, false)
	}
	if err != nil {
		s.requeueLog(ch)
		lg.wmu.Unlock()
		if w.pages == nil {
			return false, nil // the run was not written: commit unfolded
		}
		return true, fmt.Errorf("write the index log: %w", err)
	}
	// Not named: the merge the run took in was voided, and the commit
	// holds the entries unfolded, for foldMine.
	ran := s.runNamed(w)
	if ran {
		lg.mu.Lock()
		for id := range due {
			// Unless a later append's checkpoint queued it again: that
			// commit holds it unfolded, for foldMine.
			if _, queued := lg.unfolded[id]; !queued {
				delete(lg.mine, id)
			}
		}
		lg.mu.Unlock()
	}
	lg.wmu.Unlock()
	s.finishRunWrite(ctx, w)
	if ran {
		s.afterFold(ctx, due)
	}
	return true, nil
}

// onlyMine is the entries of the sessions mine names.
func onlyMine(mine map[string]bool, entries map[string]manifest.IndexEntry) map[string]manifest.IndexEntry {
	out := map[string]manifest.IndexEntry{}
	for id := range mine {
		if e, ok := entries[id]; ok {
			out[id] = e
		}
	}
	return out
}

// afterFold is what follows the commit of a fold of entries: the purge
// of those a deletion since took (purgeFoldedDeleted), then the
// catalog's catch-up and the runs' merges (afterRun).
func (s *Store) afterFold(ctx context.Context, entries map[string]manifest.IndexEntry) {
	s.purgeFoldedDeleted(ctx, entries)
	s.afterRun(ctx)
}

// purgeFoldedDeleted purges from the runs the sessions of entries, just
// folded into one, that the commit naming it says are deleted: a
// deletion committed after the reading the fold went by, whose purge
// did not know the new run (best effort: the commit's Unpurged has the
// next writer finish it).
func (s *Store) purgeFoldedDeleted(ctx context.Context, entries map[string]manifest.IndexEntry) {
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	if c == nil {
		return
	}
	deleted := false
	for id := range entries {
		if _, gone := c.Tombstones[id]; gone || slices.Contains(c.Unpurged, id) {
			s.noteBuried(s.shardOf(id))
			deleted = true
		}
	}
	if deleted {
		_ = s.purgeBuried(ctx)
	}
}

// foldDue folds the entries of the newest commit this Store knows that
// are over manifest.UnfoldedSize (the oldest) or idle for unfoldedIdle.
//
// Not this Store's own sessions: its Close folds them.
func (s *Store) foldDue(ctx context.Context) error {
	s.ilog.mu.Lock()
	c, mine := s.ilog.last, maps.Clone(s.ilog.mine)
	s.ilog.mu.Unlock()
	if c == nil || len(c.Unfolded) == 0 {
		return nil
	}
	infos := make([]agent.SessionInfo, 0, len(c.Unfolded))
	for _, e := range c.Unfolded {
		infos = append(infos, e.Info)
	}
	sortNewestFirst(infos)
	due := map[string]manifest.IndexEntry{}
	for i, info := range infos {
		if i >= manifest.UnfoldedSize || s.now().Sub(info.Modified) > unfoldedIdle && !mine[info.ID] {
			due[info.ID] = c.Unfolded[info.ID]
		}
	}
	return s.fold(ctx, due)
}

// foldMine folds the sessions this Store committed unfolded (Close): the
// process is done with them, and the set keeps the sessions in use.
func (s *Store) foldMine(ctx context.Context) error {
	lg := &s.ilog
	lg.mu.Lock()
	mine := lg.mine
	lg.mine = nil
	lg.mu.Unlock()
	if len(mine) == 0 {
		return nil
	}
	// The newest commit's set: what another writer folded, or a repair
	// took out, since this Store's last commit is not folded again. A
	// reading of the last indexStale serves as it is (a one-turn exit
	// committed it a moment ago): a round trip of the exit's, against
	// a fold of the same entry twice (which merges take as one) should
	// another writer have folded it meanwhile; a session deleted
	// meanwhile is purged from the run (fold: purgeFoldedDeleted).
	lg.mu.Lock()
	c, fresh := lg.last, lg.known && s.now().Sub(lg.fresh) < indexStale
	lg.mu.Unlock()
	if !fresh {
		if newest, err := s.newestCommit(ctx); err == nil {
			c = newest
		}
	}
	if c == nil {
		return nil
	}
	if err := s.fold(ctx, onlyMine(mine, c.Unfolded)); err != nil {
		return fmt.Errorf("fold the index entries of this process's sessions into a run: %w", err)
	}
	return nil
}

// fold writes entries as a run (runs.go) and commits it, which takes
// them out of the set (nextCommit: what a run or a partition holds
// leaves it); the run merges with others by size, and the runs fold into
// the partitions once they hold an eighth of the index. So an agent's
// exit writes a page of one entry (about 1 KB), not the session's
// partition (80 KB at 100,000 sessions). Cut short, the entries stay in
// the set for the next fold.
func (s *Store) fold(ctx context.Context, entries map[string]manifest.IndexEntry) error {
	if len(entries) == 0 {
		return nil
	}
	ran, err := s.addRun(ctx, entries)
	if err == nil && !ran {
		// The merge the run took in was voided (exitmerge.go): once more,
		// by the commit that voided it.
		ran, err = s.addRun(ctx, entries)
	}
	if err != nil {
		return err
	}
	if ran {
		s.afterFold(ctx, entries)
	}
	return nil
}

// withUnfolded adds to all, the entries read from the partitions names,
// the longer entries commit c (nil: none) holds unfolded for them; a
// session the partitions bury stays buried.
func (s *Store) withUnfolded(c *manifest.IndexShard, names []string, all map[string]manifest.IndexEntry, tombs map[string]manifest.Tombstone) {
	if c == nil || len(c.Unfolded) == 0 {
		return
	}
	s.addLonger(all, tombs, nil, names, c.Unfolded)
}

// addLonger adds to all each of entries, of a session in the partitions
// names, that is longer than all's; a session tombs or gone (nil: none)
// bury stays buried.
func (s *Store) addLonger(all map[string]manifest.IndexEntry, tombs, gone map[string]manifest.Tombstone, names []string, entries map[string]manifest.IndexEntry) {
	for id, e := range entries {
		if !slices.Contains(names, s.shardOf(id)) {
			continue
		}
		if _, buried := tombs[id]; buried {
			continue
		}
		if _, buried := gone[id]; buried {
			continue
		}
		if old, ok := all[id]; !ok || old.Length < e.Length {
			all[id] = e
		}
	}
}

// freshIndexEntry is session id's entry in the newest commit this Store
// knows (logEntryOf), when it read or wrote that commit less than
// indexStale ago, or in a project head it read as recently
// (freshHeadEntry), the longer; it makes no request (cachedEntry).
func (s *Store) freshIndexEntry(id string) (manifest.IndexEntry, bool) {
	s.ilog.mu.Lock()
	var e manifest.IndexEntry
	ok := false
	if s.ilog.last != nil && s.now().Sub(s.ilog.fresh) < indexStale {
		e, ok = logEntryOf(s.ilog.last, id)
	}
	s.ilog.mu.Unlock()
	if h, inHead := s.freshHeadEntry(id); inHead && (!ok || h.Length > e.Length) {
		return h, true
	}
	return e, ok
}

// logEntryOf is session id's entry in commit c: the longer of its
// Unfolded set's (with Resume) and its recent view's (with where the
// segments are, Resume.Where). A session the partitions and runs hold
// longer is not one a writer committed since: a reader takes the
// longest entry it finds.
func logEntryOf(c *manifest.IndexShard, id string) (manifest.IndexEntry, bool) {
	e, ok := c.Unfolded[id]
	if r, recent := c.Recent[id]; recent && (!ok || r.Length > e.Length) {
		return r, true
	}
	return e, ok
}

// logEntry is session id's entry in the newest commit (logEntryOf): this
// Store's reading when recent (indexStale), else read now
// (newestCommit). A commit that cannot be read says nothing (nil error):
// the caller goes on with what the partition says.
func (s *Store) logEntry(ctx context.Context, id string) (manifest.IndexEntry, bool) {
	if !s.indexLog() {
		return manifest.IndexEntry{}, false
	}
	if e, ok := s.freshIndexEntry(id); ok {
		return e, true
	}
	s.ilog.mu.Lock()
	fresh := s.ilog.last != nil && s.now().Sub(s.ilog.fresh) < indexStale
	s.ilog.mu.Unlock()
	if fresh {
		return manifest.IndexEntry{}, false
	}
	c, err := s.newestCommit(ctx)
	if err != nil || c == nil {
		return manifest.IndexEntry{}, false
	}
	return logEntryOf(c, id)
}
