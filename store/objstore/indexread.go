package objstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
)

// Reading the index: Open's prefetch of every shard, the cached readings
// (a 304 when a shard has not changed), and the error of damaged shards.

// prefetchIndex reads what the first listing needs from the moment Open
// starts: in format 4 the newest commit of the index log (its LIST goes
// out with the marker's read, prefetchLog), before it every shard's base,
// once the marker says the prefix is one (16 shards of a format-3 prefix
// read in the round trip after the marker's; a migrated prefix keeps no
// shard anyone reads). Open waits for it. Errors are dropped: a reader or
// writer that finds no reading makes its own.
func (s *Store) prefetchIndex(ctx context.Context, marker <-chan struct{}) *sync.WaitGroup {
	logs := s.prefetchLog(ctx)
	names := manifest.ShardNames()
	for _, name := range names {
		st := s.shardState(name)
		st.mu.Lock()
		st.prefetching = make(chan struct{})
		st.mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); logs.Wait() }()
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s.shardState(name)
			st.mu.Lock()
			done := st.prefetching
			st.mu.Unlock()
			defer close(done)
			select {
			case <-marker:
			case <-ctx.Done():
				return
			}
			if s.indexLog() {
				return
			}
			v, err := s.fetchBase(ctx, name)
			if err != nil {
				return
			}
			if !s.indexBases() {
				if v, err = s.probeDeltas(ctx, name, v); err != nil {
					return
				}
			}
			st.mu.Lock()
			if !st.loaded || v.newer(st.view) {
				st.view, st.loaded, st.fresh = v, true, s.now()
				if s.openSnapshot {
					st.snapshot = s.now().Add(openSnapshotFor)
				}
			}
			st.mu.Unlock()
		}()
	}
	return &wg
}

// indexBases reports whether the prefix's writers all replace bases
// (manifest.FeatureIndexBases): then readers probe no delta.
func (s *Store) indexBases() bool {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	return slices.Contains(s.marker.Requires, manifest.FeatureIndexBases)
}

// readShard returns the stored shard (empty when absent), read now: a
// listing reflects every write that completed before it began. After
// Open's reading it costs a 304; with WithOpenSnapshot the first listing
// serves Open's reading itself.
func (s *Store) readShard(ctx context.Context, name string) (*manifest.IndexShard, error) {
	return s.shardReading(ctx, name, func(st *shardState) bool { return s.now().Before(st.snapshot) })
}

// awaitPrefetch waits for Open's reading of shard name, if one is under
// way, so that the next read can be conditional on it.
func (s *Store) awaitPrefetch(ctx context.Context, name string) error {
	st := s.shardState(name)
	st.mu.Lock()
	ch := st.prefetching
	st.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// warmPartition starts reading session id's partition when this Store
// has no reading of it and none is under way (format 4: Open reads no
// partition), so that the index write after an append, which the first
// append of a session waits for, finds it read: its GET goes out with
// the segment's PUT instead of after it.
func (s *Store) warmPartition(ctx context.Context, id string) {
	if !s.indexLog() || s.unfoldedIndex() {
		return
	}
	s.prefetchPartition(ctx, s.shardOf(id))
}

// prefetchPartition starts reading partition name when this Store has no
// reading of it and none is under way; a write of it waits for that
// reading (awaitPrefetch).
func (s *Store) prefetchPartition(ctx context.Context, name string) {
	st := s.shardState(name)
	st.mu.Lock()
	if st.loaded || st.prefetching != nil {
		st.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	st.prefetching = ch
	st.mu.Unlock()
	go func() {
		defer close(ch)
		v, err := s.fetchBase(context.WithoutCancel(ctx), name)
		if err != nil {
			return // the write reads it itself
		}
		st.mu.Lock()
		if !st.loaded || v.newer(st.view) {
			st.view, st.loaded, st.fresh = v, true, s.now()
		}
		st.mu.Unlock()
	}()
}

// cachedShard returns the cached reading of shard name if it is younger
// than indexStale, else reads it: for a check that a slightly older
// reading serves as well (an index that lags vouches for less, never for
// something wrong).
func (s *Store) cachedShard(ctx context.Context, name string) (*manifest.IndexShard, error) {
	return s.shardReading(ctx, name, func(st *shardState) bool {
		return st.loaded && st.view.shard != nil && s.now().Sub(st.fresh) < indexStale
	})
}

// shardReading returns the cached reading of shard name when serves says
// it may serve (called with st.mu held), else a new reading.
func (s *Store) shardReading(ctx context.Context, name string, serves func(st *shardState) bool) (*manifest.IndexShard, error) {
	if err := s.awaitPrefetch(ctx, name); err != nil {
		return nil, err
	}
	st := s.shardState(name)
	st.mu.Lock()
	if serves(st) {
		v := st.view
		st.mu.Unlock()
		return v.shard, nil
	}
	st.mu.Unlock()
	v, err := s.readShardView(ctx, name)
	if err != nil {
		return nil, err
	}
	return v.shard, nil
}

// readShardView reads shard name: its base (with the cached ETag, so an
// unchanged one costs a 304) and, on a prefix with legacy writers, the
// deltas after it.
func (s *Store) readShardView(ctx context.Context, name string) (shardView, error) {
	v, err := s.fetchBase(ctx, name)
	if err != nil {
		return shardView{}, err
	}
	if !s.indexBases() {
		if v, err = s.probeDeltas(ctx, name, v); err != nil {
			return shardView{}, err
		}
	}
	st := s.shardState(name)
	st.mu.Lock()
	// Keep the newest view when readers and writers of the shard overlap.
	if !st.loaded || v.newer(st.view) {
		st.view, st.loaded = v, true
	}
	st.fresh = s.now()
	st.mu.Unlock()
	return v, nil
}

// fetchBase reads shard name's base, a 304 when the cached one is still
// it (then the cached view, its deltas applied, is returned).
func (s *Store) fetchBase(ctx context.Context, name string) (shardView, error) {
	st := s.shardState(name)
	st.mu.Lock()
	cached := st.view
	loaded := st.loaded && st.view.shard != nil
	st.mu.Unlock()
	ifNoneMatch := ""
	if loaded {
		ifNoneMatch = cached.etag
	}
	key := shardKey(name)
	data, etag, err := s.b.get(ctx, key, ifNoneMatch)
	switch {
	case errors.Is(err, errNotModified) && loaded,
		errors.Is(err, errNotFound) && loaded && cached.etag == "":
		// The base we read is unchanged (or there is still none): go on
		// from the deltas we applied.
		return cached, nil
	case errors.Is(err, errNotFound):
		return shardView{shard: manifest.NewIndexShard(name)}, nil
	case err != nil:
		return shardView{}, fmt.Errorf("read index shard %s: %w", name, err)
	}
	base, err := s.decodeShardObject(key, name, data)
	if err != nil {
		return shardView{}, err
	}
	return baseView(base, etag, base.Through), nil
}

// decodeShardObject decodes the object at key, a base or a delta of shard
// name; an object that does not decode, or holds another shard, is
// ErrCorrupt naming it.
func (s *Store) decodeShardObject(key, name string, data []byte) (*manifest.IndexShard, error) {
	sh, err := s.codec.DecodeIndexShard(key, data)
	if err != nil {
		return nil, s.corrupt(key, err)
	}
	if sh.Shard != name {
		return nil, fmt.Errorf("%s: %w: holds shard %q", s.objectURL(key), ErrCorrupt, sh.Shard)
	}
	return sh, nil
}

// readIndex reads the named shards in parallel and returns their entries.
// A shard that does not decode does not hide the others: their entries
// come back with an error wrapping ErrIndexDamaged that names it (a
// failure to reach the bucket fails the whole read).
func (s *Store) readIndex(ctx context.Context, names []string) (map[string]manifest.IndexEntry, error) {
	all, _, err := s.readIndexAll(ctx, names)
	return all, err
}

// readIndexAll is readIndex that also returns the shards' tombstones.
// With unfolded entries it reads the newest commit of the index log
// first, and adds what its Unfolded set holds for those partitions
// (unfolded.go: in that order, a fold between the two reads is seen).
func (s *Store) readIndexAll(ctx context.Context, names []string) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	if !s.unfoldedIndex() {
		return s.readPartitions(ctx, names, nil)
	}
	for attempt := 0; ; attempt++ {
		c, err := s.newestReadable(ctx)
		if err != nil && !errors.Is(err, ErrIndexDamaged) {
			return nil, nil, err
		}
		// Named before the commit said the index widened: the
		// partitions that hold what those did (widen.go).
		names = s.partitionsUnder(names)
		all, tombs, perr := s.readPartitions(ctx, names, c)
		if errors.Is(perr, errRunGone) && attempt < 3 {
			s.pageGone() // folded since the commit was read: read it again
			continue
		}
		if all == nil {
			return nil, nil, perr
		}
		return all, tombs, errors.Join(perr, err)
	}
}

// logDamage is the error of a newest commit that does not decode (err):
// the sessions it holds unfolded are missing from a listing until repair.
func (s *Store) logDamage(err error) error {
	return fmt.Errorf("%w: the index log's newest commit is damaged, so the sessions written last may be missing (their data is untouched): run `panto-sync repair %s` (%v)",
		ErrIndexDamaged, strings.TrimSuffix(s.b.url(""), "/"), err)
}

// partitionReads is how many partitions a reading of the catalog reads
// at once: all of format 4's 256.
const partitionReads = 256

// readPartitions reads the named partitions in parallel and returns
// their entries, with those commit c (nil: none), read before them,
// holds unfolded and in the pages of its runs that cover them (read with
// the partitions; a page retired since is errRunGone).
func (s *Store) readPartitions(ctx context.Context, names []string, c *manifest.IndexShard) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	return s.readPartitionsBy(ctx, names, c, s.readShard)
}

// readPartitionsBy is readPartitions with each partition read by read.
func (s *Store) readPartitionsBy(ctx context.Context, names []string, c *manifest.IndexShard, read func(context.Context, string) (*manifest.IndexShard, error)) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	shards := make([]*manifest.IndexShard, len(names))
	damaged := make([]error, len(names))
	g, gctx := errgroup.WithContext(ctx)
	// All 256 partitions at once; of a widened index's 4,096, as many.
	g.SetLimit(partitionReads)
	var pages []*manifest.IndexShard
	var pagesDamaged map[string]error
	if covering := pagesCovering(c, names); len(covering) > 0 {
		g.Go(func() error {
			var err error
			pages, pagesDamaged, err = s.readRunPages(gctx, covering)
			return err
		})
	}
	for i, name := range names {
		g.Go(func() error {
			var err error
			shards[i], err = read(gctx, name)
			if errors.Is(err, ErrCorrupt) {
				damaged[i], err = err, nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	all := map[string]manifest.IndexEntry{}
	tombs := map[string]manifest.Tombstone{}
	for _, sh := range shards {
		if sh == nil {
			continue
		}
		for id, e := range sh.Sessions {
			all[id] = e
		}
		for id, t := range sh.Tombstones {
			tombs[id] = t
		}
	}
	s.withUnfolded(c, names, all, tombs)
	s.withRunEntries(c, names, pages, all, tombs)
	return all, tombs, errors.Join(s.damage(names, damaged), s.runDamage(pagesDamaged))
}

// damage is the error of the shards of names that did not decode (errs,
// parallel to names), or nil.
func (s *Store) damage(names []string, errs []error) error {
	var bad []string
	var first error
	for i, err := range errs {
		if err != nil {
			bad = append(bad, names[i])
			if first == nil {
				first = err
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	which := fmt.Sprintf("index shard %s is", bad[0])
	if len(bad) > 1 {
		which = fmt.Sprintf("index shards %s are", strings.Join(bad, ", "))
	}
	return fmt.Errorf("%w: %s damaged, so the sessions listed there are missing (their data is untouched): run `panto-sync repair %s` (%v)",
		ErrIndexDamaged, which, strings.TrimSuffix(s.b.url(""), "/"), first)
}
