package objstore_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/panto-dev/panto/internal/manifest"
)

// partitionKeyRe matches an index partition of format 4.
var partitionKeyRe = regexp.MustCompile(`^pfx/index/([0-9a-f]{2})\.json\.zst$`)

// partitions reads every index partition of the env's plaintext bucket
// behind the store's back: the sessions and tombstones they hold. Each
// must be filed in its own partition.
func (e *env) partitions(t testing.TB) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone) {
	t.Helper()
	codec, _ := manifest.NewCodec()
	entries := map[string]manifest.IndexEntry{}
	tombs := map[string]manifest.Tombstone{}
	for _, o := range e.rawBucket(t) {
		m := partitionKeyRe.FindStringSubmatch(o.key)
		if m == nil {
			continue
		}
		sh, err := codec.DecodeIndexShard(o.key, o.data)
		if err != nil {
			t.Fatalf("partition %s: %v", o.key, err)
		}
		if sh.Shard != m[1] {
			t.Fatalf("partition %s holds shard %q", o.key, sh.Shard)
		}
		for id, en := range sh.Sessions {
			entries[id] = en
		}
		for id, tb := range sh.Tombstones {
			tombs[id] = tb
		}
	}
	return entries, tombs
}

// logCommits reads every commit of the index log of the env's plaintext
// bucket behind the store's back, by number; each must say its number.
func (e *env) logCommits(t testing.TB) map[int64]*manifest.IndexShard {
	t.Helper()
	codec, _ := manifest.NewCodec()
	out := map[int64]*manifest.IndexShard{}
	for _, o := range e.rawBucket(t) {
		m := logCommitKey.FindStringSubmatch(o.key)
		if m == nil {
			continue
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		c, err := codec.DecodeIndexShard(o.key, o.data)
		if err != nil {
			t.Fatalf("index log commit %s: %v", o.key, err)
		}
		if c.Shard != manifest.LogName || c.Through != n {
			t.Fatalf("index log commit %s says shard %q, through %d", o.key, c.Shard, c.Through)
		}
		out[n] = c
	}
	return out
}

// newestCommit is the newest commit of the index log of the env's
// plaintext bucket, and its number (0 and nil: none).
func (e *env) newestCommit(t testing.TB) (int64, *manifest.IndexShard) {
	t.Helper()
	var n int64
	var c *manifest.IndexShard
	for k, v := range e.logCommits(t) {
		if k > n {
			n, c = k, v
		}
	}
	return n, c
}
