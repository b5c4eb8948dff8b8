package objstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// Listing from the index: List, Resolve and Latest read the shards
// alone, whatever the number of sessions and segments (§P6).

func sortNewestFirst(infos []agent.SessionInfo) {
	slices.SortFunc(infos, func(a, b agent.SessionInfo) int {
		if c := b.Modified.Compare(a.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// List returns every session in the index, newest first: one GET per
// partition, whatever the number of segments. ListNewest reads less
// when a page will do.
func (s *Store) List(ctx context.Context) ([]agent.SessionInfo, error) {
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if err := s.checkMoved(ctx); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	all, err := s.readIndex(ctx, s.shardNames())
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
// starting with it (ResolveLog).
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (*agent.Session, error) {
	l, err := s.ResolveLog(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	return &agent.Session{Info: l.Info, Store: s}, nil
}

// ResolveLog finds the session whose id is idOrPrefix or the only one
// starting with it, with the checkpoint the index holds of it (as Logs
// lists it, so that a reader that copies the session asks the bucket
// nothing more before its read): one of the newest from one LIST
// (resolveRecent), else reading the one partition the prefix falls in
// (the 16 a one-character prefix may fall in, in format 4). A full id
// the index does not know yet (its first append crashed before the index
// was written) is found through its manifest or first segment, and put
// back in the index.
func (s *Store) ResolveLog(ctx context.Context, idOrPrefix string) (store.Log, error) {
	if err := agent.ValidateSessionID(idOrPrefix); err != nil {
		return store.Log{}, err
	}
	fail := func(err error) (store.Log, error) { return store.Log{}, fmt.Errorf("resolve %q: %w", idOrPrefix, err) }
	if err := s.settle(ctx); ctx.Err() != nil {
		return fail(err)
	}
	if err := s.checkMoved(ctx); err != nil {
		return fail(err)
	}
	if e, ok := s.resolveRecent(ctx, idOrPrefix); ok {
		return entryLog(e), nil
	}
	all, tombs, err := s.readIndexAll(ctx, s.shardsOfPrefix(idOrPrefix))
	if all == nil {
		return fail(err)
	}
	if t, ok := tombs[idOrPrefix]; ok {
		return fail(deletedError(idOrPrefix, t))
	}
	if err != nil {
		// The shard is damaged: a full id is still found through its own
		// objects; a prefix cannot be resolved until the shard is repaired.
		if l, ferr := s.resolveObjects(ctx, idOrPrefix); ferr == nil {
			return l, nil
		}
		return fail(err)
	}
	if e, ok := all[idOrPrefix]; ok {
		return entryLog(e), nil
	}
	deleted := make(map[string]bool, len(tombs))
	for id := range tombs {
		deleted[id] = true
	}
	r, err := store.ResolvePrefix(idOrPrefix, slices.Collect(maps.Keys(all)), deleted, nil)
	switch {
	case err != nil:
		return store.Log{}, err
	case r.ID != "":
		return entryLog(all[r.ID]), nil
	case r.Gone != "":
		return fail(deletedError(r.Gone, tombs[r.Gone]))
	}
	return s.resolveObjects(ctx, idOrPrefix)
}

// entryLog is session e's summary and the checkpoint its index entry
// vouches for.
func entryLog(e manifest.IndexEntry) store.Log {
	return store.Log{Info: e.Info, Checkpoint: store.Checkpoint{Length: e.Length, SHA256: e.SHA256}}
}

// resolveRecent resolves idOrPrefix without reading its partition (80
// KB at 100,000 sessions) when the session is among those the index
// log's newest commit or a project's head this Store read holds
// (freshIndexEntry: the newest of the index, which `panto sessions`
// shows and a user resumes by prefix next): one LIST of the sessions'
// objects under the prefix, with the delimiter, says which sessions the
// bucket holds there, a few hundred bytes at any size. It resolves only
// when that settles it as the partition would: idOrPrefix is the id of
// one of them, or it is the only one, and its entry is held. ok is false
// otherwise (several, one the Store holds no entry of, a deletion, a
// reader that may not list): the caller reads the partition.
func (s *Store) resolveRecent(ctx context.Context, idOrPrefix string) (manifest.IndexEntry, bool) {
	if !s.indexLog() || len(s.freshIDs(idOrPrefix)) == 0 {
		return manifest.IndexEntry{}, false // the partition answers, with no LIST before it
	}
	ids, err := s.sessionsUnder(ctx, idOrPrefix)
	if err != nil {
		return manifest.IndexEntry{}, false
	}
	id := ""
	switch {
	case slices.Contains(ids, idOrPrefix):
		id = idOrPrefix // a full id is looked up first (store.ResolvePrefix)
	case len(ids) == 1:
		id = ids[0]
	default:
		return manifest.IndexEntry{}, false
	}
	return s.freshIndexEntry(id) // none of a deleted session (nextCommit, heads.go)
}

// freshIDs is the ids starting with prefix of the sessions whose entries
// this Store holds from the index log's newest commit (recent view and
// unfolded set) or the heads it read, recently (freshIndexEntry).
func (s *Store) freshIDs(prefix string) []string {
	ids := s.freshHeadIDs(prefix)
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	if c := s.ilog.last; c != nil && s.now().Sub(s.ilog.fresh) < indexStale {
		for _, m := range []map[string]manifest.IndexEntry{c.Recent, c.Unfolded} {
			for id := range m {
				if strings.HasPrefix(id, prefix) {
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

// resolveObjects finds session id, which the index does not list (its
// first append crashed before the index was written, or the shard is
// damaged), through its own objects, and puts it back in the index.
func (s *Store) resolveObjects(ctx context.Context, id string) (store.Log, error) {
	m, _, err := s.readManifestFolded(ctx, id) // its summary goes to the index
	if err != nil {
		return store.Log{}, fmt.Errorf("resolve %q: %w", id, err)
	}
	stored := len(m.Segments)
	if _, err := s.catchUp(ctx, m, 0, nil); err != nil {
		return store.Log{}, fmt.Errorf("resolve %q: %w", id, err)
	}
	if m.Length == 0 {
		return store.Log{}, agent.NotFoundError(id)
	}
	// Repair the index the crashed writer did not update; it is a
	// checkpoint, so a failure here changes nothing.
	_ = s.updateIndex(ctx, storedEntry(m, stored))
	return store.Log{Info: m.Info(), Checkpoint: store.Checkpoint{Length: m.Length, SHA256: m.SHA256}}, nil
}

// Latest returns the most recently modified session in the index: in
// format 4 from the newest commit of the index log alone (ListNewest).
// With a damaged partition it fails when it must read them all: the
// latest session may be one it hides.
func (s *Store) Latest(ctx context.Context) (*agent.Session, error) {
	infos, err := s.ListNewest(ctx, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("latest session: %w", err)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("latest session: %w", agent.ErrSessionNotFound)
	}
	return &agent.Session{Info: infos[0], Store: s}, nil
}
