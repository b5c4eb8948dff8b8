package objstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
)

// The index widens (docs/DESIGN.md §P3, "Wider partitions"): past
// manifest.WideAfter sessions, a sync that read the catalog moves it
// from 256 partitions (an id's first two characters) to 4,096 (three),
// so that a partition, which an agent's fold step writes whole and a
// resolve of an older session reads whole, stays a few KB (80 KB of 256
// at 100,000 sessions, 5 KB of 4,096). It is the move of format 3's
// shards again, a width up, with one thing more: writers of this
// version that read the index before it moved learn of it from the
// commit they build on (manifest.IndexShard.Widened), and do not commit
// as done what they wrote to the partitions nobody reads any more
// (narrowed).

// wide reports whether the index's partitions are named by three
// characters: the marker requires it, or a commit this Store read or
// wrote says it moved (a Store that read the marker before the move).
func (s *Store) wide() bool {
	if s.widened.Load() {
		return true
	}
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	return slices.Contains(s.marker.Requires, manifest.FeatureIndexWide)
}

// noteWidth records what commit c says of the partitions' width: a
// commit after the move says so, and the width only grows.
func (s *Store) noteWidth(c *manifest.IndexShard) {
	if c != nil && c.Widened > 0 {
		s.widened.Store(true)
	}
}

// narrowed makes ch, prepared on partitions of two characters, fit to
// commit after the index widened: nobody reads those partitions any
// more. What its writer put there as done (entries its partitions hold)
// goes to a run instead, which readers of every width read; a step of a
// fold or merge is void (the runs stay named, the merge's pages
// unnamed, for the next writers at the new width); a purge's pages,
// rewritten without deleted sessions, stand, but the sessions it saw
// buried in the old partitions stay in the note (Unpurged) until a purge
// at the new width sees their partitions bury them. Deletions stand.
func (s *Store) narrowed(ctx context.Context, ch *logChanges) error {
	s.widened.Store(true)
	ch.width = 0
	switch {
	case ch.purge != nil:
		p := *ch.purge
		p.ids = nil
		ch.purge = &p
	case ch.fold != nil || ch.merge != nil:
		ch.fold, ch.merge, ch.retired, ch.read, ch.pages = nil, nil, nil, nil, nil
	}
	if len(ch.folded) == 0 {
		return nil
	}
	pages, err := s.writeRun(ctx, ch.folded)
	if err != nil {
		return fmt.Errorf("write as a run what partitions of the index's old width took: %w", err)
	}
	ch.run = longest(ch.run, ch.folded)
	ch.pages = append(ch.pages, pages...)
	ch.folded = nil
	return nil
}

// widenIndex moves the index to partitions of three characters, in a
// sync, once the sessions this Store knows of (the catalog it read, and what it is
// about to write) pass wideAfter. Every session and tombstone of the
// catalog is written to its new partition (If-None-Match: *, or the
// partition read and applied to, when a move cut short wrote it); then
// the partitions of two characters are read again (a 304 each, when the
// catalog was read from them and nobody wrote since), and what a writer
// put there since the catalog's reading is written to the new ones;
// then one commit says the index moved (Widened), read again and
// brought over after each lost race; then the marker requires the
// feature, so that an older panto refuses the prefix. Readers take the
// width from the newest commit, which they read before any partition, so
// none reads the new partitions before they hold everything, nor the
// old ones after. The runs and unfolded entries stay as they are: a
// page compares partitions of either width by the characters they share
// (manifest.ComparePartitions). The commit drops a fold or merge under
// way, which the next writers start again at the new width (what was
// merged and what was not are then runs like any other).
func (s *Store) widenIndex(ctx context.Context, queued []string) error {
	// A sync's (a Store opened for bulk work): an agent's exit, a
	// local-first panto's shipper too, must stay small (§P3, runs).
	if !s.deferIndex || !s.unfoldedIndex() || s.wide() {
		return nil
	}
	s.cat.mu.Lock()
	doc := s.cat.doc
	s.cat.mu.Unlock()
	if doc == nil || len(doc.Sessions)+s.queuedCount(queued) < s.wideAfter {
		return nil
	}
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	if s.wide() {
		return nil
	}
	narrow := s.shardNames()
	written := map[string]manifest.IndexEntry{}
	buried := map[string]manifest.Tombstone{}
	batches := map[string]*shardBatch{}
	add := func(entries map[string]manifest.IndexEntry, tombs map[string]manifest.Tombstone) {
		for id, e := range entries {
			if old, ok := written[id]; ok && old.Length >= e.Length {
				continue
			}
			written[id] = e
			batchOf(batches, manifest.PartitionOf(id, 3)).entries[id] = e
		}
		for id, t := range tombs {
			if _, ok := buried[id]; ok {
				continue
			}
			buried[id] = t
			batchOf(batches, manifest.PartitionOf(id, 3)).buried[id] = t
		}
	}
	add(doc.Sessions, doc.Tombstones)
	if err := s.putWide(ctx, batches, true); err != nil {
		return fmt.Errorf("widen the index: %w", err)
	}
	// What writers put in the old partitions since the catalog's reading.
	// Each partition is asked for (a 304 when nobody wrote it since this
	// Store read it), however recent that reading: a listing's snapshot
	// (WithOpenSnapshot) does not serve here.
	asked := func(ctx context.Context, name string) (*manifest.IndexShard, error) {
		return s.shardReading(ctx, name, func(*shardState) bool { return false })
	}
	catchUp := func(ctx context.Context) error {
		entries, tombs, err := s.readPartitionsBy(ctx, narrow, nil, asked)
		if err != nil {
			return err
		}
		clear(batches)
		add(entries, tombs)
		return s.putWide(ctx, batches, false)
	}
	if err := catchUp(ctx); err != nil {
		return fmt.Errorf("widen the index: %w", err)
	}
	s.ilog.wmu.Lock()
	err := s.commitLog(ctx, logChanges{widen: true, recheck: catchUp}, nil, false)
	s.ilog.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("widen the index: write the index log: %w", err)
	}
	return s.ensureFeature(ctx, manifest.FeatureIndexWide)
}

// partitionsUnder is names, partitions of the index, at its width now:
// a name narrower than that stands for every partition it starts.
func (s *Store) partitionsUnder(names []string) []string {
	w := s.partitionWidth()
	if !slices.ContainsFunc(names, func(name string) bool { return len(name) < w }) {
		return names
	}
	var wide []string
	for _, name := range manifest.PartitionNames(w) {
		if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(name, n) }) {
			wide = append(wide, name)
		}
	}
	return wide
}

// narrowest is the width of the narrowest of names (0: none).
func narrowest(names []string) int {
	w := 0
	for _, name := range names {
		if w == 0 || len(name) < w {
			w = len(name)
		}
	}
	return w
}

// withWideAfter sets manifest.WideAfter (tests widen small indexes).
func withWideAfter(n int) Option { return func(o *options) { o.wideAfter = n } }

// batchOf is the batch of partition name in batches, made when missing.
func batchOf(batches map[string]*shardBatch, name string) *shardBatch {
	b, ok := batches[name]
	if !ok {
		b = &shardBatch{entries: map[string]manifest.IndexEntry{}, buried: map[string]manifest.Tombstone{}}
		batches[name] = b
	}
	return b
}

// putWide writes each partition of batches with its batch applied, 64
// at a time: fresh (new: none was written yet, unless by a move cut
// short or another Store's, which a 412 then reads), or as read.
func (s *Store) putWide(ctx context.Context, batches map[string]*shardBatch, fresh bool) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxIdleConnsPerHost)
	for name, b := range batches {
		g.Go(func() error {
			st := s.shardState(name)
			st.wmu.Lock()
			defer st.wmu.Unlock()
			v, loaded := shardView{}, false
			if fresh {
				v, loaded = shardView{shard: manifest.NewIndexShard(name)}, true
			}
			w, _, err := s.putBatch(gctx, name, st, *b, v, loaded)
			if err == nil && w.shard != nil {
				st.mu.Lock()
				st.loaded = true // putBase keeps the view it wrote
				st.mu.Unlock()
			}
			return err
		})
	}
	return g.Wait()
}

// narrowKeys is the keys of the partitions of two characters (and of
// format 3's shards, one) that may hold the summaries of sessions ids,
// once the index widened: a deletion deletes them with the commits
// before its own (purgeLog), as it deletes format 3's shards. The rest
// go with the pruning that deletes the commit that widened, when every
// Store that read the index before the move has read a newer commit,
// and the prunings after it, a share each (narrowKeysPrunedAt).
func narrowKeys(ids []string) []string {
	var keys []string
	for _, id := range ids {
		keys = append(keys, shardKey(manifest.PartitionOf(id, 1)), shardKey(manifest.PartitionOf(id, 2)))
	}
	return keys
}

// allNarrowKeys is the keys of every partition of two characters and
// every shard of format 3.
func allNarrowKeys() []string {
	var keys []string
	for _, name := range append(manifest.PartitionNames(1), manifest.PartitionNames(2)...) {
		keys = append(keys, shardKey(name))
	}
	return keys
}
