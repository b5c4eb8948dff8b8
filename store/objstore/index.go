package objstore

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/panto-dev/panto/internal/manifest"
)

// An index partition (a shard, in format 3) is stored as a base,
// index/<name>.json.zst, which a write replaces whole, with If-Match on
// the ETag the writer last read or wrote (If-None-Match: * when there is
// none): a 412 means another writer changed it, so the writer reads it
// again and applies its entries to that. A reader needs the base alone:
// one GET, a 304 when unchanged. Index format 4 (manifest.FeatureIndexLog,
// docs/DESIGN.md §P3) has 256 partitions, named by an id's first two
// characters, so that a write replaces 1/256 of the index (4,096 by
// three once it widened past manifest.WideAfter sessions: widen.go);
// format 3 had 16, by the first character. After each write of partitions a commit
// goes to the index log (indexlog.go): the newest sessions, so that the
// latest session and the first page of a listing are one small object
// whatever the number of sessions.
//
// indexread.go reads and caches the partitions, indexwrite.go writes
// them, indexlog.go keeps the log, indexlist.go lists and resolves
// sessions from them, and indexlegacy.go holds what older prefixes need:
// their index deltas, and the move from 16 shards to 256 partitions.
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

// indexLog reports whether the prefix's index is format 4: 256
// partitions and a log (manifest.FeatureIndexLog).
func (s *Store) indexLog() bool {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	return slices.Contains(s.marker.Requires, manifest.FeatureIndexLog)
}

// partitionWidth is the number of id characters that name a partition
// of the prefix's index: 1 (the 16 shards) before format 4, 3 (4,096)
// once the index widened (the marker requires manifest.FeatureIndexWide,
// or a commit this Store read says so: widen.go), else 2 (256).
func (s *Store) partitionWidth() int {
	if !s.indexLog() {
		return 1
	}
	if s.wide() {
		return 3
	}
	return 2
}

// shardNames returns the names of the index's partitions.
func (s *Store) shardNames() []string { return manifest.PartitionNames(s.partitionWidth()) }

// shardOf returns the partition of session id.
func (s *Store) shardOf(id string) string { return manifest.PartitionOf(id, s.partitionWidth()) }

// shardsOfPrefix returns the partitions that hold every id starting with
// prefix: one, or those named by the prefix's characters when it is
// shorter than their names (16 of a one-character prefix in format 4).
func (s *Store) shardsOfPrefix(prefix string) []string {
	w := s.partitionWidth()
	if len(prefix) >= w {
		return []string{manifest.PartitionOf(prefix, w)}
	}
	head := manifest.PartitionOf(prefix, len(prefix))
	var names []string
	for _, name := range manifest.PartitionNames(w) {
		if strings.HasPrefix(name, head) {
			names = append(names, name)
		}
	}
	return names
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
