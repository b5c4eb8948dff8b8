package objstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// shardState caches one index shard and its ETag, and queues the entries
// waiting to be written. Writers of the shard hold wmu; concurrent updates
// queued meanwhile are written by the next writer in one PUT (group
// commit), so parallel appends do not race each other for the shard.
type shardState struct {
	wmu     sync.Mutex
	mu      sync.Mutex // guards the fields below
	loaded  bool
	shard   *manifest.IndexShard
	etag    string
	pending map[string]manifest.IndexEntry
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

// readShard returns the stored shard (empty when absent). It asks with the
// cached ETag, so an unchanged shard costs a 304 and no transfer.
func (s *Store) readShard(ctx context.Context, name string) (*manifest.IndexShard, error) {
	st := s.shardState(name)
	st.mu.Lock()
	cached, etag := st.shard, st.etag
	if !st.loaded || cached == nil {
		etag = ""
	}
	st.mu.Unlock()
	key := shardKey(name)
	data, newEtag, err := s.b.get(ctx, key, etag)
	switch {
	case errors.Is(err, errNotModified):
		return cached, nil
	case errors.Is(err, errNotFound):
		return manifest.NewIndexShard(name), nil
	case err != nil:
		return nil, fmt.Errorf("read index shard %s: %w", name, err)
	}
	shard, err := s.codec.DecodeIndexShard(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", s.objectURL(key), ErrCorrupt, err)
	}
	if shard.Shard != name {
		return nil, fmt.Errorf("%s: %w: holds shard %q", s.objectURL(key), ErrCorrupt, shard.Shard)
	}
	st.mu.Lock()
	st.shard, st.etag, st.loaded = shard, newEtag, true
	st.mu.Unlock()
	return shard, nil
}

// updateIndex records e in its shard with If-Match on the cached ETag,
// re-reading and re-applying on a lost race. An entry never replaces a
// longer one: the index may lag behind the sessions, never go back.
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

// writeShard writes the entries queued for shard name, if any.
func (s *Store) writeShard(ctx context.Context, name string) error {
	st := s.shardState(name)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.mu.Lock()
	batch := st.pending
	st.pending = nil
	cur, etag, loaded := st.shard, st.etag, st.loaded
	st.mu.Unlock()
	if len(batch) == 0 {
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
	}
	key := shardKey(name)
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !loaded || cur == nil {
			data, tag, err := s.b.get(ctx, key, "")
			switch {
			case errors.Is(err, errNotFound):
				cur, etag = manifest.NewIndexShard(name), ""
			case err != nil:
				requeue()
				return fmt.Errorf("read index shard %s: %w", name, err)
			default:
				if cur, err = s.codec.DecodeIndexShard(data); err != nil {
					requeue()
					return fmt.Errorf("%s: %w: %w", s.objectURL(key), ErrCorrupt, err)
				}
				etag = tag
			}
			loaded = true
		}
		next := cur.Clone()
		changed := false
		for _, e := range batch {
			changed = next.Put(e) || changed
		}
		if !changed {
			st.mu.Lock()
			st.shard, st.etag, st.loaded = cur, etag, true
			st.mu.Unlock()
			return nil
		}
		data, err := s.codec.EncodeIndexShard(next)
		if err != nil {
			return err
		}
		newEtag, err := s.b.put(ctx, key, data, putCond{ifMatch: etag, ifNoneMatch: etag == ""}, "application/zstd")
		if err == nil {
			st.mu.Lock()
			st.shard, st.etag, st.loaded = next, newEtag, true
			st.mu.Unlock()
			return nil
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			requeue()
			return err
		}
		loaded = false
		if err := backoff(ctx, attempt); err != nil {
			requeue()
			return err
		}
	}
	requeue()
	return fmt.Errorf("index shard %s: too many concurrent updates", name)
}

// readIndex reads the named shards in parallel and returns their entries.
func (s *Store) readIndex(ctx context.Context, names []string) (map[string]manifest.IndexEntry, error) {
	shards := make([]*manifest.IndexShard, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			var err error
			shards[i], err = s.readShard(gctx, name)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	all := map[string]manifest.IndexEntry{}
	for _, sh := range shards {
		for id, e := range sh.Sessions {
			all[id] = e
		}
	}
	return all, nil
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
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	infos := make([]agent.SessionInfo, 0, len(all))
	for _, e := range all {
		infos = append(infos, e.Info)
	}
	sortNewestFirst(infos)
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
	all, err := s.readIndex(ctx, []string{manifest.ShardOf(idOrPrefix)})
	if err != nil {
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
		m, _, err := s.readManifest(ctx, idOrPrefix)
		if err != nil {
			return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, err)
		}
		if _, err := s.catchUp(ctx, m); err != nil {
			return nil, fmt.Errorf("resolve %q: %w", idOrPrefix, err)
		}
		if m.Length > 0 {
			// Repair the index the crashed writer did not update; it is a
			// checkpoint, so a failure here changes nothing.
			_ = s.updateIndex(ctx, manifest.IndexEntry{Info: m.Info(), Length: m.Length, SHA256: m.SHA256})
			return &agent.Session{Info: m.Info(), Store: s}, nil
		}
		return nil, agent.NotFoundError(idOrPrefix)
	}
	slices.Sort(matches)
	return nil, agent.AmbiguousError(idOrPrefix, matches)
}

// Latest returns the most recently modified session in the index.
func (s *Store) Latest(ctx context.Context) (*agent.Session, error) {
	infos, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("latest session: %w", agent.ErrSessionNotFound)
	}
	return &agent.Session{Info: infos[0], Store: s}, nil
}
