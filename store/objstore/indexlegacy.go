package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
)

// The legacy index deltas and their migration to bases (docs/DESIGN.md
// §P3). Writers of format 2, and the earlier ones of format 3, did not
// replace a shard's base: they wrote deltas after it,
// index/<shard>/<n:020d>.json.zst, numbered from the base's Through+1 and
// folded into it every 16. A prefix whose marker requires
// manifest.FeatureIndexBases has no such writer left (the first writer
// that replaces bases adds the feature, and older pantos refuse the
// prefix from then on), so its readers probe no delta; other prefixes are
// read as before, the base then its deltas, and a write folds the deltas
// it read into the base it writes. The deltas a base folded are deleted by
// a later write once that base is older than indexPruneAfter, so that a
// reader that read the base before it and is still probing finds them.
//
// When this file can go: once panto refuses to open a prefix whose marker
// lacks index-bases (telling the user to open it once with a release that
// has this file, which folds the deltas and adds the feature) and a
// release has deleted the folded deltas of every base (Through = Pruned).
// With it go the deltas' bookkeeping in nextBase (Through, Pruned,
// Purge), finishPurge in delete.go (a deletion purges the deltas that
// hold the session's summary), the v2 fixture (testdata/v2-bucket,
// TestV2Bucket) and TestIndexLegacyDeltas.

func deltaKey(name string, n int64) string {
	return fmt.Sprintf("index/%s/%020d.json.zst", name, n)
}

// probeDeltas applies to v the legacy deltas after the last it applied:
// the first probe alone (a shard nobody changed costs one 404), then up
// to deltaProbes at once.
func (s *Store) probeDeltas(ctx context.Context, name string, v shardView) (shardView, error) {
	owned := false
	for batch := 1; ; batch = deltaProbes {
		found, err := s.fetchDeltas(ctx, name, v.applied+1, batch)
		if err != nil {
			return shardView{}, err
		}
		for _, delta := range found {
			if !owned {
				v.shard, owned = v.shard.Clone(), true
			}
			v.shard.Apply(delta)
			v.applied++
		}
		if len(found) < batch {
			return v, nil
		}
	}
}

// deltaProbes is how many delta GETs a reader has in flight at once.
const deltaProbes = 4

// fetchDeltas reads deltas from, from+1, ... from+count-1 of shard name
// in parallel and returns those before the first missing one.
func (s *Store) fetchDeltas(ctx context.Context, name string, from int64, count int) ([]*manifest.IndexShard, error) {
	deltas := make([]*manifest.IndexShard, count)
	missing := make([]bool, count)
	g, gctx := errgroup.WithContext(ctx)
	for i := range count {
		g.Go(func() error {
			key := deltaKey(name, from+int64(i))
			data, _, err := s.b.get(gctx, key, "")
			if errors.Is(err, errNotFound) {
				missing[i] = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("read index shard %s: %w", name, err)
			}
			deltas[i], err = s.decodeShardObject(key, name, data)
			return err
		})
	}
	err := g.Wait()
	for i := range count {
		if missing[i] {
			return deltas[:i], nil
		}
		if deltas[i] == nil {
			return nil, err
		}
	}
	return deltas, err
}

// adoptIndexBases makes the prefix one whose writers replace bases
// (manifest.FeatureIndexBases) before this Store's first write of the
// index: every shard's legacy deltas are folded into its base, then the
// marker requires the feature, so that readers may stop probing for
// deltas. A legacy panto still running, which opened the prefix before
// the marker changed, may write a delta after that no reader looks for:
// its session lists again with its next append by this version, or after
// panto-sync repair (docs/DESIGN.md §P3).
func (s *Store) adoptIndexBases(ctx context.Context) error {
	if s.indexBases() {
		return nil
	}
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	if s.indexBases() {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range manifest.ShardNames() {
		g.Go(func() error { return s.foldLegacy(gctx, name) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("fold the index deltas: %w", err)
	}
	return s.ensureFeature(ctx, manifest.FeatureIndexBases)
}

// adoptIndex brings the prefix's index to this version's format before
// this Store's first write of it: bases instead of deltas, then format 4.
func (s *Store) adoptIndex(ctx context.Context) error {
	if err := s.adoptIndexBases(ctx); err != nil {
		return err
	}
	return s.adoptIndexLog(ctx, false)
}

// adoptIndexLog moves a format-3 index (16 shards) to format 4 (256
// partitions and the index log, manifest.FeatureIndexLog) before this
// Store's first write of it: every shard's entries and tombstones go to
// their partitions, a commit of the log records the newest sessions, and
// then the marker requires the feature, so that an older panto refuses
// the prefix from then on. Cut short anywhere, the next writer does it
// again: a partition never takes back a longer entry or a deleted
// session, and a commit's recent sessions only gain. The 16 shards stay
// where they are, read by nobody (the deltas of an older panto still
// running are treated the same way, §P3). A damaged shard stops the
// move (its sessions would go missing without a word) until repair,
// which moves it anyway (damaged: true) and rebuilds what is missing.
func (s *Store) adoptIndexLog(ctx context.Context, damaged bool) error {
	if s.indexLog() {
		return nil
	}
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	if s.indexLog() {
		return nil
	}
	// Another Store may have moved it since this one opened.
	if err := s.rereadMarker(ctx); err != nil {
		return err
	}
	if s.indexLog() {
		return nil
	}
	all, tombs, err := s.readIndexAll(ctx, manifest.ShardNames())
	if all == nil || err != nil && !(damaged && errors.Is(err, ErrIndexDamaged)) {
		return fmt.Errorf("move the index to format 4: %w", err)
	}
	names := map[string]bool{}
	for _, e := range all {
		names[s.queueIndexIn(manifest.PartitionOf(e.Info.ID, 2), e)] = true
	}
	for _, t := range tombs {
		names[s.queueTombstoneIn(manifest.PartitionOf(t.ID, 2), t)] = true
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for name := range names {
		g.Go(func() error { return s.writeQueued(gctx, name) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("move the index to format 4: %w", err)
	}
	// The commit takes the newest of them as changes, so that they fold
	// into the recent sessions of any commit another Store wrote since.
	recent := map[string]manifest.IndexEntry{}
	for id, e := range all {
		recent[id] = e
	}
	whole := err == nil && len(recent) <= manifest.RecentSize
	manifest.TrimRecent(recent)
	// Every project's head, from the whole index (a damaged shard's
	// sessions may be missing from them: not Complete, and not required
	// until repair).
	partial := err != nil
	dirs, err := s.rebuildHeads(ctx, all, partial, false, nil)
	if err != nil {
		return fmt.Errorf("move the index to format 4: write the project heads: %w", err)
	}
	ch := logChanges{folded: recent, dirHead: dirs}
	if dirs {
		ch.dirFilter = dirFilterOf(all)
	}
	if err := s.commitLog(ctx, ch, nil, whole); err != nil {
		return fmt.Errorf("move the index to format 4: write the index log: %w", err)
	}
	if err := s.ensureFeature(ctx, manifest.FeatureIndexLog); err != nil || partial {
		return err
	}
	return s.ensureFeature(ctx, manifest.FeatureIndexHeads)
}

// dropShards deletes format 3's 16 shards and their deltas, once the
// index moved: nobody reads them, and they hold the summaries of
// sessions a deletion must take out. Not at the move itself, so that a
// Store that read the marker just before lists what it listed until it
// reads the marker again (checkMoved): each 64th commit, and each
// deletion, drops them. Best effort: what is left is garbage, and deltas
// are found by listing, which credentials may not allow.
func (s *Store) dropShards(ctx context.Context) {
	_ = s.b.deleteKeys(ctx, s.shardKeys(ctx))
}

// shardKeys finds format 3's shards and deltas: one listing of index/ (a
// format-4 prefix that never had any costs that alone); without the
// right to list, the 16 bases, to be deleted blind.
func (s *Store) shardKeys(ctx context.Context) []string {
	var keys []string
	objects, prefixes, err := s.b.list(ctx, "index/", "/")
	if err != nil {
		for _, name := range manifest.ShardNames() {
			keys = append(keys, shardKey(name))
		}
	}
	for _, o := range objects {
		if name := strings.TrimSuffix(strings.TrimPrefix(o.key, "index/"), ".json.zst"); len(name) == 1 {
			keys = append(keys, o.key)
		}
	}
	for _, p := range prefixes {
		if name := strings.TrimSuffix(strings.TrimPrefix(p, "index/"), "/"); len(name) == 1 {
			deltas, _, err := s.b.list(ctx, p, "")
			if err == nil {
				keys = append(keys, listedKeys(deltas)...)
			}
		}
	}
	return keys
}

// rereadMarker reads the marker again, for a feature another Store may
// have added since Open.
func (s *Store) rereadMarker(ctx context.Context) error {
	data, etag, err := s.b.get(ctx, markerName, "")
	if err != nil {
		return fmt.Errorf("read the format marker: %w", err)
	}
	m, err := manifest.DecodeMarker(data)
	if err != nil {
		return fmt.Errorf("%s: %w: upgrade panto", s.b.url(""), err)
	}
	s.markerMu.Lock()
	s.marker, s.markerEtag, s.markerRead = m, etag, s.now()
	s.markerMu.Unlock()
	return nil
}

// checkMoved reads the marker again before a listing of a format-3 index
// whose marker this Store read more than openSnapshotFor ago: another
// Store may have moved the index to format 4 since, after which nobody
// writes the 16 shards.
func (s *Store) checkMoved(ctx context.Context) error {
	if s.indexLog() {
		return nil
	}
	s.markerMu.Lock()
	recent := s.now().Sub(s.markerRead) < openSnapshotFor
	s.markerMu.Unlock()
	if recent {
		return nil
	}
	return s.rereadMarker(ctx)
}

// foldLegacy writes shard name's base anew if deltas follow it.
func (s *Store) foldLegacy(ctx context.Context, name string) error {
	st := s.shardState(name)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if err := s.awaitPrefetch(ctx, name); err != nil {
		return err
	}
	st.mu.Lock()
	v, loaded := st.view, st.loaded && st.view.shard != nil
	st.mu.Unlock()
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !loaded {
			var err error
			if v, err = s.readShardView(ctx, name); err != nil {
				return err
			}
		}
		if v.applied == v.through() {
			return nil
		}
		base, _, _ := s.nextBase(v.shard.Clone(), v, false)
		_, err := s.putBase(ctx, name, base, v.etag)
		if err == nil || !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			return err
		}
		loaded = false
	}
	return fmt.Errorf("index shard %s: too many concurrent updates", name)
}

// pruneDeltas deletes the deltas from..to of shard name, by number. A
// delta left behind is garbage, never read again.
func (s *Store) pruneDeltas(ctx context.Context, name string, from, to int64) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for n := from; n > 0 && n <= to; n++ {
		g.Go(func() error { return s.b.delete(gctx, deltaKey(name, n)) })
	}
	_ = g.Wait()
}
