package objstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// An index shard is stored as a base, index/<shard>.json.zst, and a log
// of deltas after it, index/<shard>/<n:020d>.json.zst, numbered from the
// base's Through+1: a write creates the next delta (If-None-Match: *)
// holding only the entries it changes, so that an append or a push sends
// what changed, not the shard. Readers apply the deltas in order, probing
// until a 404. Every indexFoldEvery deltas, the writer folds them into a
// new base (If-Match; losing that race is fine: someone else folded).
//
// The deltas a base folded are deleted by a later fold, once that base is
// older than indexPruneAfter: a writer re-reads a shard it read more than
// indexStale ago before writing, so no writer still numbers its next
// delta from before that base, and a delta name is never created twice
// (a delta written under a deleted name would go unread).
const (
	indexFoldEvery  = 16
	indexStale      = 30 * time.Second
	indexPruneAfter = 10 * time.Minute // well above indexStale and clock skew
)

// shardState caches one index shard (its base with the deltas applied)
// and queues the entries waiting to be written. Writers of the shard hold
// wmu; concurrent updates queued meanwhile are written by the next writer
// in one delta (group commit), so parallel appends do not race each
// other for the shard.
type shardState struct {
	wmu     sync.Mutex
	mu      sync.Mutex // guards the fields below
	loaded  bool
	view    shardView
	fresh   time.Time // when the view was last read from the bucket
	pending map[string]manifest.IndexEntry
	buried  map[string]manifest.Tombstone // tombstones waiting to be written
	// purge: a session of the shard was deleted, so the next write folds
	// the shard and deletes its older deltas, which hold its summary.
	purge bool
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

// readShard returns the stored shard (empty when absent), its base and
// deltas applied. It asks for the base with the cached ETag, so an
// unchanged one costs a 304, then probes the deltas after the last it
// applied: two requests for a shard nobody changed.
func (s *Store) readShard(ctx context.Context, name string) (*manifest.IndexShard, error) {
	v, err := s.readShardView(ctx, name)
	if err != nil {
		return nil, err
	}
	return v.shard, nil
}

func (s *Store) readShardView(ctx context.Context, name string) (shardView, error) {
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
	var v shardView
	owned := true
	switch {
	case errors.Is(err, errNotModified) && loaded,
		errors.Is(err, errNotFound) && loaded && cached.etag == "":
		// The base we read is unchanged (or there is still none): go on
		// from the deltas we applied.
		v, owned = cached, false
	case errors.Is(err, errNotFound):
		v = shardView{shard: manifest.NewIndexShard(name)}
	case err != nil:
		return shardView{}, fmt.Errorf("read index shard %s: %w", name, err)
	default:
		base, err := s.decodeShardObject(key, name, data)
		if err != nil {
			return shardView{}, err
		}
		v = baseView(base, etag, base.Through)
	}
	// The first probe alone (a shard nobody changed costs one 404), then
	// up to deltaProbes at once: a cold reader of a shard with many
	// unfolded deltas waits for a few round trips, not one per delta.
	for batch := 1; ; batch = deltaProbes {
		found, err := s.fetchDeltas(ctx, name, v.applied+1, batch)
		if err != nil {
			return shardView{}, err
		}
		for _, delta := range found {
			if !owned {
				v.shard, owned = v.shard.Clone(), true
			}
			for _, e := range delta.Sessions {
				v.shard.Put(e)
			}
			for _, t := range delta.Tombstones {
				v.shard.Bury(t)
			}
			v.applied++
		}
		if len(found) < batch {
			break
		}
	}
	st.mu.Lock()
	// Keep the newest view when readers and writers of the shard overlap.
	if !st.loaded || v.newer(st.view) {
		st.view, st.loaded = v, true
	}
	st.fresh = s.now()
	st.mu.Unlock()
	return v, nil
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
// writes it as a base that purges the shard (purgingBase), and returns the
// shard's name.
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
// shard's next delta. A 412 means another writer took that number: read
// its delta and take the next one.
func (s *Store) writeShard(ctx context.Context, name string) error {
	st := s.shardState(name)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	batch, buried, purge := st.pending, st.buried, st.purge
	st.pending, st.buried, st.purge = nil, nil, false
	v := st.view
	loaded := st.loaded && v.shard != nil && s.now().Sub(st.fresh) < indexStale
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
		delta := manifest.NewIndexShard(name)
		for _, e := range batch {
			if next.Put(e) {
				delta.Put(e)
			}
		}
		for _, t := range buried {
			if next.Bury(t) || next.Tombstones[t.ID] == t {
				delta.Bury(t)
			}
		}
		if len(delta.Sessions) == 0 && len(delta.Tombstones) == 0 && !v.purgePending() {
			return nil
		}
		var err error
		if purge || v.purgePending() {
			// A burial is written as a new base, never as a delta: the
			// deltas before it hold the buried session's summary, and
			// the base that says they must go is the one that buries it.
			var w shardView
			if w, err = s.putBase(ctx, name, s.purgingBase(next, v), v.etag); err == nil {
				return s.finishPurge(ctx, name, w)
			}
		} else {
			n := v.applied + 1
			data, eerr := s.codec.EncodeIndexShard(deltaKey(name, n), delta)
			if eerr != nil {
				return eerr
			}
			_, err = s.put(ctx, deltaKey(name, n), data, putCond{ifNoneMatch: true}, "application/zstd")
			if err == nil {
				// Not fresher than before: the write tells nothing of a
				// base folded since the view was read.
				w := shardView{shard: next, etag: v.etag, base: v.base, applied: n}
				st.mu.Lock()
				if w.newer(st.view) {
					st.view = w
				}
				st.mu.Unlock()
				if n-w.through() >= indexFoldEvery {
					s.foldShard(ctx, name, w)
				}
				return nil
			}
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

// foldShard writes v (its deltas applied through v.applied) as the
// shard's new base, and deletes the deltas v's base folded if that base
// is older than indexPruneAfter. It only saves readers work: when another
// writer folded first, or a request fails, the deltas stay and are folded
// or deleted later.
func (s *Store) foldShard(ctx context.Context, name string, v shardView) {
	base := v.shard.Clone()
	base.Through, base.Written = v.applied, s.now().UTC()
	s.expireTombstones(base)
	var pruneFrom, pruneTo int64
	if v.base != nil {
		base.Pruned, base.Purge = v.base.Pruned, v.base.Purge
		if v.base.Through > v.base.Pruned && s.now().Sub(v.base.Written) > s.indexPruneAfter {
			pruneFrom, pruneTo = v.base.Pruned+1, v.base.Through
			base.Pruned = v.base.Through
		}
	}
	data, err := s.codec.EncodeIndexShard(shardKey(name), base)
	if err != nil {
		return
	}
	etag, err := s.put(ctx, shardKey(name), data, putCond{ifMatch: v.etag, ifNoneMatch: v.etag == ""}, "application/zstd")
	if err != nil {
		return
	}
	w := baseView(base, etag, v.applied)
	st := s.shardState(name)
	st.mu.Lock()
	if w.newer(st.view) {
		st.view = w
	}
	st.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for n := pruneFrom; n > 0 && n <= pruneTo; n++ {
		g.Go(func() error { return s.b.delete(gctx, deltaKey(name, n)) })
	}
	_ = g.Wait() // a delta left behind is garbage, never read again
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
	return fmt.Errorf("%w: %s damaged, so the sessions listed there are missing (their data is untouched): run `panto-sync repair s3://%s/%s` (%v)",
		ErrIndexDamaged, which, s.b.name, strings.TrimSuffix(s.b.prefix, "/"), first)
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
	var matches []string
	for id := range all {
		if strings.HasPrefix(id, idOrPrefix) {
			matches = append(matches, id)
		}
	}
	switch len(matches) {
	case 1:
		return &agent.Session{Info: all[matches[0]].Info, Store: s}, nil
	case 0:
		// A prefix of one deleted session says so.
		var gone []manifest.Tombstone
		for id, t := range tombs {
			if strings.HasPrefix(id, idOrPrefix) {
				gone = append(gone, t)
			}
		}
		if len(gone) == 1 && gone[0].ID != idOrPrefix {
			return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, deletedError(gone[0].ID, gone[0]))
		}
		return s.resolveObjects(ctx, idOrPrefix)
	}
	slices.Sort(matches)
	return nil, agent.AmbiguousError(idOrPrefix, matches)
}

// resolveObjects finds session id, which the index does not list (its
// first append crashed before the index was written, or the shard is
// damaged), through its own objects, and puts it back in the index.
func (s *Store) resolveObjects(ctx context.Context, id string) (*agent.Session, error) {
	m, _, err := s.readManifestFolded(ctx, id) // its summary goes to the index
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", id, err)
	}
	if _, err := s.catchUp(ctx, m, 0); err != nil {
		return nil, fmt.Errorf("resolve %q: %w", id, err)
	}
	if m.Length == 0 {
		return nil, agent.NotFoundError(id)
	}
	// Repair the index the crashed writer did not update; it is a
	// checkpoint, so a failure here changes nothing.
	_ = s.updateIndex(ctx, m.Entry())
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
