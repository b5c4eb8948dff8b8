package objstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// The index is a cache of the sessions' own objects (docs/DESIGN.md §P2,
// §P3): it can always be rebuilt from them. CheckIndex and RepairIndex
// list the bucket to find every session (the one place this package
// lists: they are explicit, never routine), read each session's manifest
// and probe its segments as a load does, and compare what they find with
// the index.

var _ store.IndexRepairer = (*Store)(nil)

// CheckIndex compares the index with the sessions the bucket holds.
func (s *Store) CheckIndex(ctx context.Context) (store.IndexReport, error) {
	report, _, _, err := s.checkIndex(ctx)
	return report, err
}

// RepairIndex rebuilds each shard the check finds wrong as a new base
// holding exactly the sessions of the shard as they are (If-Match on the
// shard's base, so that it loses to, and retries after, a writer folding
// the shard meanwhile). The deltas written after the ones the base folds
// are applied on top of it as usual, so a session appended during the
// repair is at worst listed a checkpoint behind (§P2), never lost.
func (s *Store) RepairIndex(ctx context.Context) (store.IndexReport, error) {
	// A format-3 index is moved first, damaged shards and all: the
	// repair rebuilds format 4.
	if err := s.adoptIndexBases(ctx); err != nil {
		return store.IndexReport{}, fmt.Errorf("repair the index: %w", err)
	}
	if err := s.adoptIndexLog(ctx, true); err != nil {
		return store.IndexReport{}, fmt.Errorf("repair the index: %w", err)
	}
	// The repair lists the bucket: credentials that may not are refused
	// here, before the fold below changes anything (the LIST of the run
	// pages removeUnnamedPages makes anyway, made first).
	if _, _, err := s.b.list(ctx, manifest.RunKeyPrefix, ""); err != nil {
		return store.IndexReport{}, fmt.Errorf("repair the index: %w", err)
	}
	// The runs go to the partitions first, damaged pages retired: the
	// check then finds what only those held, and rebuilds it from the
	// sessions.
	if err := s.foldAllRuns(ctx); err != nil {
		return store.IndexReport{}, fmt.Errorf("repair the index: %w", err)
	}
	removed, err := s.removeUnnamedPages(ctx)
	if err != nil {
		return store.IndexReport{Removed: removed}, fmt.Errorf("repair the index: %w", err)
	}
	for attempt := 0; ; attempt++ {
		report, truth, buried, err := s.checkIndex(ctx)
		report.Removed = removed
		if err != nil {
			return report, err
		}
		if report.Clean() {
			if !s.headsIndex() {
				// A prefix whose writers kept no heads gets them.
				if err := s.repairHeads(ctx, &report, truth); err != nil {
					return report, fmt.Errorf("repair the index: %w", err)
				}
			} else if err := s.restoreDirFilter(ctx, truth); err != nil {
				return report, fmt.Errorf("repair the index: %w", err)
			}
			return report, s.sweepBuried(ctx, buried)
		}
		shards := map[string]bool{}
		for _, list := range [][]string{report.Unindexed, report.Stale, report.Orphans} {
			for _, id := range list {
				shards[s.shardOf(id)] = true
			}
		}
		for _, name := range report.Damaged {
			if name != manifest.LogName && !strings.HasPrefix(name, manifest.RunKeyPrefix) {
				shards[name] = true
			}
		}
		var lost bool
		for _, name := range sortedKeys(shards) {
			err := s.rebuildShard(ctx, name, truth, buried)
			if errors.Is(err, errPrecondition) || errors.Is(err, errConflict) {
				lost = true // someone folded the shard meanwhile: check again
				continue
			}
			if err != nil {
				return report, fmt.Errorf("repair the index: %w", err)
			}
			report.Rebuilt = append(report.Rebuilt, name)
		}
		if !lost {
			if err := s.rebuildRecent(ctx, &report, truth); err != nil {
				return report, fmt.Errorf("repair the index: %w", err)
			}
			if err := s.repairHeads(ctx, &report, truth); err != nil {
				return report, fmt.Errorf("repair the index: %w", err)
			}
			return report, s.sweepBuried(ctx, buried)
		}
		if attempt+1 >= s.maxAttempts {
			return report, fmt.Errorf("repair the index: shards kept changing under the repair (%d attempts)", attempt+1)
		}
		if err := backoff(ctx, attempt); err != nil {
			return report, err
		}
	}
}

// checkIndex finds every session by listing, reads each one's state, and
// compares with the index. It returns the entry of every readable
// session, and the tombstone of every deleted one.
func (s *Store) checkIndex(ctx context.Context) (report store.IndexReport, truth map[string]manifest.IndexEntry, buried map[string]manifest.Tombstone, err error) {
	if err := s.settle(ctx); err != nil && ctx.Err() != nil {
		return report, nil, nil, err
	}
	ids, err := s.listSessions(ctx)
	if err != nil {
		return report, nil, nil, fmt.Errorf("list the sessions of %s: %w", s.b.url(""), err)
	}
	truth, buried, unreadable, err := s.sessionStatesAll(ctx, ids)
	if err != nil {
		return report, nil, nil, err
	}
	for id := range truth {
		report.Sessions = append(report.Sessions, id)
	}
	for id := range unreadable {
		report.Sessions = append(report.Sessions, id)
	}
	slices.Sort(report.Sessions)
	report.Unreadable = unreadable
	indexed, indexedTombs, err := s.readIndexForCheck(ctx, &report)
	if err != nil {
		return report, nil, nil, err
	}
	s.checkBuried(&report, buried, indexed, indexedTombs)
	if err := s.compareEntries(ctx, &report, truth, indexed); err != nil {
		return report, nil, nil, err
	}
	damaged := func(id string) bool { return slices.Contains(report.Damaged, s.shardOf(id)) }
	for id := range indexed {
		if _, ok := truth[id]; !ok && unreadable[id] == nil && !damaged(id) {
			report.Orphans = append(report.Orphans, id)
		}
	}
	if err := s.checkRecent(ctx, &report, truth); err != nil {
		return report, nil, nil, err
	}
	s.ilog.mu.Lock()
	newest := s.ilog.last
	s.ilog.mu.Unlock()
	if err := s.checkHeads(ctx, &report, truth, newest); err != nil {
		return report, nil, nil, err
	}
	if newest != nil {
		if report.Unnamed, err = s.unnamedPages(ctx, newest); err != nil {
			return report, nil, nil, err
		}
	}
	for _, list := range []*[]string{&report.Unindexed, &report.Stale, &report.Orphans, &report.Recent, &report.Heads, &report.Unnamed} {
		slices.Sort(*list)
	}
	return report, truth, buried, nil
}

// readIndexForCheck reads every shard, noting in report the ones that do
// not decode, and returns their entries and tombstones.
// With unfolded entries, the newest commit of the index log is read
// first, and what its Unfolded set holds counts as indexed (a reader's
// view: readIndexAll); checkRecent notes it when it does not decode.
func (s *Store) readIndexForCheck(ctx context.Context, report *store.IndexReport) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	indexed := map[string]manifest.IndexEntry{}
	indexedTombs := map[string]manifest.Tombstone{}
	var c *manifest.IndexShard
	if s.unfoldedIndex() {
		var err error
		if c, err = s.newestReadable(ctx); err != nil && !errors.Is(err, ErrIndexDamaged) {
			return nil, nil, fmt.Errorf("read the index: %w", err)
		}
	}
	var pages []*manifest.IndexShard
	for attempt := 0; c != nil && len(c.Runs) > 0; attempt++ {
		docs, damaged, err := s.readRunPages(ctx, c.Runs)
		if err != nil {
			return nil, nil, fmt.Errorf("read the index: %w", err)
		}
		if errors.Is(s.runDamage(damaged), errRunGone) && attempt < 3 {
			// Retired since (a fold): the newest commit names what is.
			if c, err = s.newestReadable(ctx); err != nil && !errors.Is(err, ErrIndexDamaged) {
				return nil, nil, fmt.Errorf("read the index: %w", err)
			}
			continue
		}
		pages = docs
		for _, key := range slices.Sorted(maps.Keys(damaged)) {
			report.Damaged = append(report.Damaged, key)
		}
		break
	}
	defer func() {
		s.withUnfolded(c, s.shardNames(), indexed, indexedTombs)
		s.withRunEntries(c, s.shardNames(), pages, indexed, indexedTombs)
	}()
	for _, name := range s.shardNames() {
		sh, err := s.readShard(ctx, name)
		if errors.Is(err, ErrCorrupt) {
			report.Damaged = append(report.Damaged, name)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read the index: %w", err)
		}
		for id, e := range sh.Sessions {
			indexed[id] = e
		}
		for id, t := range sh.Tombstones {
			indexedTombs[id] = t
		}
	}
	return indexed, indexedTombs, nil
}

// checkBuried checks the deleted sessions against the index: a deleted
// session's index entry must be its tombstone (while the retention
// lasts), and nothing of its content may be left. It takes them out of
// indexed (they are no orphans either way).
func (s *Store) checkBuried(report *store.IndexReport, buried map[string]manifest.Tombstone, indexed map[string]manifest.IndexEntry, indexedTombs map[string]manifest.Tombstone) {
	for id, t := range buried {
		switch _, listed := indexed[id]; {
		case slices.Contains(report.Damaged, s.shardOf(id)):
		case listed:
			report.Stale = append(report.Stale, id)
		case s.now().Sub(t.Deleted) <= store.TombstoneRetention:
			if _, ok := indexedTombs[id]; !ok {
				report.Unindexed = append(report.Unindexed, id)
			}
		}
		delete(indexed, id)
	}
}

// compareEntries compares the index's entries with the sessions as read
// (truth), noting in report the unindexed and stale ones. An entry ahead
// of the session may be an append made since it was read: the session is
// read again (truth updated), and the entry is stale only if it still
// leads.
func (s *Store) compareEntries(ctx context.Context, report *store.IndexReport, truth, indexed map[string]manifest.IndexEntry) error {
	var recheck []string
	for id, t := range truth {
		e, ok := indexed[id]
		switch {
		case slices.Contains(report.Damaged, s.shardOf(id)):
			// Rebuilt with its shard; not counted twice.
		case !ok:
			report.Unindexed = append(report.Unindexed, id)
		case e.Length > t.Length:
			recheck = append(recheck, id) // appended since it was read?
		case e.Length != t.Length || e.SHA256 != t.SHA256:
			report.Stale = append(report.Stale, id)
		}
	}
	again, _, err := s.sessionStates(ctx, recheck)
	if err != nil {
		return err
	}
	for _, id := range recheck {
		if t, ok := again[id]; ok && t.Length >= indexed[id].Length {
			truth[id] = t
			if t.Length == indexed[id].Length && t.SHA256 == indexed[id].SHA256 {
				continue
			}
		}
		report.Stale = append(report.Stale, id)
	}
	return nil
}

// listSessions returns the ids of the session directories of the prefix.
func (s *Store) listSessions(ctx context.Context) ([]string, error) {
	_, dirs, err := s.b.list(ctx, sessionsPrefix, "/")
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(dirs))
	for _, d := range dirs {
		id := strings.TrimSuffix(strings.TrimPrefix(d, sessionsPrefix), "/")
		if agent.ValidateSessionID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// sessionStates reads each session's manifest and probes its segments
// (§P4, without the index, which is what is being checked), in parallel.
// A session whose objects cannot be read is in unreadable, with why; one
// with no segment at all (only stray objects) is in neither.
func (s *Store) sessionStates(ctx context.Context, ids []string) (map[string]manifest.IndexEntry, map[string]error, error) {
	truth, _, unreadable, err := s.sessionStatesAll(ctx, ids)
	return truth, unreadable, err
}

// sessionStatesAll is sessionStates that also returns the tombstones of
// the deleted sessions among ids.
func (s *Store) sessionStatesAll(ctx context.Context, ids []string) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, map[string]error, error) {
	var mu sync.Mutex
	truth := map[string]manifest.IndexEntry{}
	tombs := map[string]manifest.Tombstone{}
	unreadable := map[string]error{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, id := range ids {
		g.Go(func() error {
			m, _, err := s.readManifestFolded(gctx, id) // the summary goes to the index
			stored := 0
			if err == nil {
				stored = len(m.Segments)
				_, err = s.catchUp(gctx, m, 0, nil)
			}
			tomb, deleted := tombstoneOf(err)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case deleted:
				tombs[id] = tomb
			case errors.Is(err, ErrCorrupt) || errors.Is(err, manifest.ErrInvalid):
				unreadable[id] = err
			case err != nil:
				return err
			case m.Length > 0:
				truth[id] = storedEntry(m, stored)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, nil, fmt.Errorf("read the sessions: %w", err)
	}
	return truth, tombs, unreadable, nil
}

// rebuildShard writes shard name's base anew, holding exactly the entries
// of truth that fall in it, folding every delta written so far.
func (s *Store) rebuildShard(ctx context.Context, name string, truth map[string]manifest.IndexEntry, buried map[string]manifest.Tombstone) (err error) {
	_, etag, err := s.b.get(ctx, shardKey(name), "")
	if err != nil && !errors.Is(err, errNotFound) {
		return err
	}
	objects, _, err := s.b.list(ctx, "index/"+name+"/", "")
	if err != nil {
		return err
	}
	keys := listedKeys(objects)
	var through int64
	for _, k := range keys {
		base := strings.TrimSuffix(k[strings.LastIndexByte(k, '/')+1:], ".json.zst")
		if n, err := strconv.ParseInt(base, 10, 64); err == nil && n > through {
			through = n
		}
	}
	shard := manifest.NewIndexShard(name)
	for id, e := range truth {
		if s.shardOf(id) == name {
			shard.Sessions[id] = e
		}
	}
	for id, t := range buried {
		if s.shardOf(id) == name {
			shard.Bury(t)
		}
	}
	s.expireTombstones(shard)
	// Pruned stays 0: the deltas this base folds are deleted by a later
	// fold, once the base is old enough that no writer still numbers from
	// before it (§P3) — unless the shard buries a session, whose summary
	// the old deltas hold: they go now (Purge, finishPurge).
	shard.Through, shard.Written = through, s.now().UTC()
	if len(shard.Tombstones) > 0 {
		shard.Purge = through
	}
	w, err := s.putBase(ctx, name, shard, etag)
	if err != nil {
		return err
	}
	if err := s.finishPurge(ctx, name, w); err != nil {
		return err
	}
	st := s.shardState(name)
	st.mu.Lock()
	st.loaded, st.fresh = false, time.Time{} // read it again before the next write
	st.mu.Unlock()
	return nil
}

// sweepBuried deletes what is left of the content of the deleted sessions
// the last check found (a deletion cut short, or a writer that appended
// to a session being deleted with a stale view of it).
func (s *Store) sweepBuried(ctx context.Context, buried map[string]manifest.Tombstone) error {
	for id, t := range buried {
		if err := s.finishDelete(ctx, id, t, -1, nil, true, nil); err != nil {
			return fmt.Errorf("repair the index: %w", err)
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// storedEntry is m's index entry when the stored manifest lists its first
// stored segments.
func storedEntry(m *manifest.Manifest, stored int) manifest.IndexEntry {
	e := m.Entry()
	if e.Resume.HashState != "" {
		e.Resume.Stored = stored
		if offs, ok := m.TailAfter(stored); ok {
			e.Resume.Tail = manifest.JoinOffsets(offs)
		}
	}
	return e
}
