package objstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// An index shard is stored as a base, index/<shard>.json.zst, which a
// write replaces whole, with If-Match on the ETag the writer last read or
// wrote (If-None-Match: * when there is none): a 412 means another writer
// changed it, so the writer reads it again and applies its entries to
// that. A reader needs the base alone: one GET, a 304 when unchanged, and
// all sixteen shards in one round trip.
//
// Earlier writers of format 3 wrote deltas after the base instead,
// index/<shard>/<n:020d>.json.zst, numbered from the base's Through+1 and
// folded into it every 16. A prefix whose marker requires
// manifest.FeatureIndexBases has no such writer left (the first writer
// that replaces bases adds the feature, and older pantos refuse the
// prefix from then on), so its readers probe no delta; other prefixes are
// read as before, the base then its deltas, and a write folds the deltas
// it read into the base it writes. The deltas a base folded are deleted by
// a later write once that base is older than indexPruneAfter, so that a
// reader that read the base before it and is still probing finds them.
const (
	// openSnapshotFor is how long after Open its reading of the index
	// serves listings as it is (WithOpenSnapshot): long enough for a
	// command's listings right after Open, short enough that nothing
	// that runs for long sees the bucket as it was.
	openSnapshotFor = 2 * time.Second
	// indexStale: a cached shard older than this is read again before it
	// vouches for the segments a reader probed (catchUpFrom).
	indexStale      = 30 * time.Second
	indexPruneAfter = 10 * time.Minute // well above a reader's probing, and clock skew
)

// shardState caches one index shard (its base, with any legacy deltas
// applied) and queues the entries waiting to be written. Writers of the
// shard hold wmu; updates queued meanwhile are written by the next writer
// in one base (group commit), so parallel appends do not race each other
// for the shard.
type shardState struct {
	wmu     sync.Mutex
	mu      sync.Mutex // guards the fields below
	loaded  bool
	view    shardView
	fresh   time.Time // when the view was last read from the bucket
	pending map[string]manifest.IndexEntry
	buried  map[string]manifest.Tombstone // tombstones waiting to be written
	// purge: a session of the shard was deleted, so the next write asks
	// for the shard's older deltas, which hold its summary, to be deleted.
	purge bool
	// prefetching is closed when Open's reading of the shard ends: the
	// first write of the shard starts from it (its ETag for the
	// If-Match), and the first listing asks for the base with it (a 304
	// when nothing changed since Open).
	prefetching chan struct{}
	// snapshot: until then, a listing serves the cached reading (Open's,
	// with this Store's writes since) as it is (WithOpenSnapshot).
	snapshot time.Time
}

func (s *Store) shardState(name string) *shardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.shards[name]
	if !ok {
		st = &shardState{}
		s.shards[name] = st
	}
	return st
}

func shardKey(name string) string { return "index/" + name + ".json.zst" }

func deltaKey(name string, n int64) string {
	return fmt.Sprintf("index/%s/%020d.json.zst", name, n)
}

// shardView is one reading of a shard: its base (ETag "" when none is
// stored) with the deltas through applied.
type shardView struct {
	shard   *manifest.IndexShard
	etag    string
	base    *manifest.IndexShard // Through, Pruned, Purge, Written; nil when none
	applied int64
}

// baseView is the view of base, just read or written with etag.
func baseView(base *manifest.IndexShard, etag string, applied int64) shardView {
	meta := &manifest.IndexShard{Through: base.Through, Pruned: base.Pruned, Purge: base.Purge, Written: base.Written}
	return shardView{shard: base, etag: etag, base: meta, applied: applied}
}

// purgePending reports whether v's base asks for its deltas to be
// deleted now (manifest.IndexShard.Purge): a purge cut short.
func (v shardView) purgePending() bool {
	return v.base != nil && v.base.Purge > v.base.Pruned
}

func (v shardView) through() int64 {
	if v.base == nil {
		return 0
	}
	return v.base.Through
}

// newer reports whether v is a later reading of the shard than w.
func (v shardView) newer(w shardView) bool {
	return v.through() > w.through() || v.through() == w.through() && v.applied >= w.applied
}

// prefetchIndex reads every shard's base in parallel, from the moment
// Open starts (its requests go out with the marker's), and waits for the
// marker to say whether deltas are to be probed; Open waits for it (the
// same round trip, but on a prefix with legacy deltas). Errors are
// dropped: a reader or writer that finds no reading makes its own.
func (s *Store) prefetchIndex(ctx context.Context, marker <-chan struct{}) *sync.WaitGroup {
	names := manifest.ShardNames()
	for _, name := range names {
		s.shardState(name).prefetching = make(chan struct{})
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s.shardState(name)
			defer close(st.prefetching)
			v, err := s.fetchBase(ctx, name)
			if err != nil {
				return
			}
			select {
			case <-marker:
			case <-ctx.Done():
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
	if ch := s.shardState(name).prefetching; ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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

// updateIndex records e in its shard (see writeShard). An entry never
// replaces a longer one: the index may lag behind the sessions, never go
// back.
func (s *Store) updateIndex(ctx context.Context, e manifest.IndexEntry) error {
	name := s.queueIndex(e)
	return s.writeShard(ctx, name)
}

// queueIndex queues e for the next write of its shard, and returns the
// shard's name.
func (s *Store) queueIndex(e manifest.IndexEntry) string {
	name := manifest.ShardOf(e.Info.ID)
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
	name := manifest.ShardOf(t.ID)
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
// shard's new base (see the top of this file). It starts from the cached
// reading, whatever its age: the If-Match refuses a base someone changed
// since, and then the shard is read again and the entries applied to it.
func (s *Store) writeShard(ctx context.Context, name string) error {
	// Before the shard's lock: the adoption folds every shard under its
	// own. The entries stay queued if it fails.
	if err := s.adoptIndexBases(ctx); err != nil {
		return err
	}
	st := s.shardState(name)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	batch, buried, purge := st.pending, st.buried, st.purge
	st.pending, st.buried, st.purge = nil, nil, false
	v := st.view
	loaded := st.loaded && v.shard != nil
	st.mu.Unlock()
	if len(batch) == 0 && len(buried) == 0 {
		return nil // written by the writer before us, or nothing queued
	}
	requeue := func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.pending == nil {
			st.pending = map[string]manifest.IndexEntry{}
		}
		for id, e := range batch {
			if old, ok := st.pending[id]; !ok || old.Length < e.Length {
				st.pending[id] = e
			}
		}
		for id, t := range buried {
			if st.buried == nil {
				st.buried = map[string]manifest.Tombstone{}
			}
			st.buried[id] = t
		}
		st.purge = st.purge || purge
	}
	if !loaded {
		if err := s.awaitPrefetch(ctx, name); err != nil {
			requeue()
			return err
		}
		st.mu.Lock()
		v, loaded = st.view, st.loaded && st.view.shard != nil
		st.mu.Unlock()
	}
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !loaded {
			var err error
			if v, err = s.readShardView(ctx, name); err != nil {
				requeue()
				return err
			}
			loaded = true
		}
		next := v.shard.Clone()
		changed := v.applied > v.through() // legacy deltas to fold
		for _, e := range batch {
			changed = next.Put(e) || changed
		}
		for _, t := range buried {
			changed = next.Bury(t) || changed
		}
		if !changed && !v.purgePending() {
			return nil
		}
		base, pruneFrom, pruneTo := s.nextBase(next, v, purge)
		w, err := s.putBase(ctx, name, base, v.etag)
		if err == nil {
			if w.purgePending() {
				return s.finishPurge(ctx, name, w)
			}
			s.pruneDeltas(ctx, name, pruneFrom, pruneTo)
			return nil
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			requeue()
			return err
		}
		loaded = false
		if errors.Is(err, errConflict) {
			if err := backoff(ctx, attempt); err != nil {
				requeue()
				return err
			}
		}
	}
	requeue()
	return fmt.Errorf("index shard %s: too many concurrent updates", name)
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

// readIndex reads the named shards in parallel and returns their entries.
// A shard that does not decode does not hide the others: their entries
// come back with an error wrapping ErrIndexDamaged that names it (a
// failure to reach the bucket fails the whole read).
func (s *Store) readIndex(ctx context.Context, names []string) (map[string]manifest.IndexEntry, error) {
	all, _, err := s.readIndexAll(ctx, names)
	return all, err
}

// readIndexAll is readIndex that also returns the shards' tombstones.
func (s *Store) readIndexAll(ctx context.Context, names []string) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	shards := make([]*manifest.IndexShard, len(names))
	damaged := make([]error, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			var err error
			shards[i], err = s.readShard(gctx, name)
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
	return all, tombs, s.damage(names, damaged)
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

func sortNewestFirst(infos []agent.SessionInfo) {
	slices.SortFunc(infos, func(a, b agent.SessionInfo) int {
		if c := b.Modified.Compare(a.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// List returns every session in the index, newest first: one GET per
// shard, whatever the number of sessions and segments.
func (s *Store) List(ctx context.Context) ([]agent.SessionInfo, error) {
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	all, err := s.readIndex(ctx, manifest.ShardNames())
	if all == nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	infos := make([]agent.SessionInfo, 0, len(all))
	for _, e := range all {
		infos = append(infos, e.Info)
	}
	sortNewestFirst(infos)
	if err != nil {
		return infos, fmt.Errorf("list sessions: %w", err)
	}
	return infos, nil
}

// Resolve finds the session whose id is idOrPrefix or the only one
// starting with it, reading the one shard the prefix falls in. A full id
// the index does not know yet (its first append crashed before the index
// was written) is found through its manifest or first segment, and put
// back in the index.
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (*agent.Session, error) {
	if err := agent.ValidateSessionID(idOrPrefix); err != nil {
		return nil, err
	}
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, err)
	}
	all, tombs, err := s.readIndexAll(ctx, []string{manifest.ShardOf(idOrPrefix)})
	if all == nil {
		return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, err)
	}
	if t, ok := tombs[idOrPrefix]; ok {
		return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, deletedError(idOrPrefix, t))
	}
	if err != nil {
		// The shard is damaged: a full id is still found through its own
		// objects; a prefix cannot be resolved until the shard is repaired.
		if sess, ferr := s.resolveObjects(ctx, idOrPrefix); ferr == nil {
			return sess, nil
		}
		return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, err)
	}
	if e, ok := all[idOrPrefix]; ok {
		return &agent.Session{Info: e.Info, Store: s}, nil
	}
	deleted := make(map[string]bool, len(tombs))
	for id := range tombs {
		deleted[id] = true
	}
	r, err := store.ResolvePrefix(idOrPrefix, slices.Collect(maps.Keys(all)), deleted, nil)
	switch {
	case err != nil:
		return nil, err
	case r.ID != "":
		return &agent.Session{Info: all[r.ID].Info, Store: s}, nil
	case r.Gone != "":
		return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, deletedError(r.Gone, tombs[r.Gone]))
	}
	return s.resolveObjects(ctx, idOrPrefix)
}

// resolveObjects finds session id, which the index does not list (its
// first append crashed before the index was written, or the shard is
// damaged), through its own objects, and puts it back in the index.
func (s *Store) resolveObjects(ctx context.Context, id string) (*agent.Session, error) {
	m, _, err := s.readManifestFolded(ctx, id) // its summary goes to the index
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", id, err)
	}
	stored := len(m.Segments)
	if _, err := s.catchUp(ctx, m, 0, nil); err != nil {
		return nil, fmt.Errorf("resolve %q: %w", id, err)
	}
	if m.Length == 0 {
		return nil, agent.NotFoundError(id)
	}
	// Repair the index the crashed writer did not update; it is a
	// checkpoint, so a failure here changes nothing.
	_ = s.updateIndex(ctx, storedEntry(m, stored))
	return &agent.Session{Info: m.Info(), Store: s}, nil
}

// Latest returns the most recently modified session in the index. With
// a damaged shard it fails: the latest session may be one it hides.
func (s *Store) Latest(ctx context.Context) (*agent.Session, error) {
	infos, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("latest session: %w", err)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("latest session: %w", agent.ErrSessionNotFound)
	}
	return &agent.Session{Info: infos[0], Store: s}, nil
}
