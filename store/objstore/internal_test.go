package objstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
)

// TestMergeRuns: compaction merges runs of at least two consecutive
// segments, each run at most the bound, and leaves larger segments alone.
func TestMergeRuns(t *testing.T) {
	seg := func(lengths ...int64) []manifest.Segment {
		var out []manifest.Segment
		var pos int64
		for _, n := range lengths {
			out = append(out, manifest.Segment{Start: pos, Length: n})
			pos += n
		}
		return out
	}
	for _, tt := range []struct {
		lengths []int64
		want    [][2]int
	}{
		{[]int64{1}, nil},
		{[]int64{1, 1}, [][2]int{{0, 2}}},
		{[]int64{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, [][2]int{{0, 10}, {10, 12}}},
		{[]int64{40, 1, 1, 40, 1}, [][2]int{{1, 3}}},
		{[]int64{31, 2, 30, 2, 2}, [][2]int{{3, 5}}},
		{[]int64{8, 8, 8}, nil},
		{[]int64{4, 1, 1}, [][2]int{{1, 3}}},
		{[]int64{32, 32}, nil},
	} {
		if got := mergeRuns(seg(tt.lengths...), 32); !slices.Equal(got, tt.want) {
			t.Errorf("mergeRuns(%v) = %v, want %v", tt.lengths, got, tt.want)
		}
	}
}

// TestHeadsFor: a listing reads the head every session its project
// holds (agent.Project.Holds) is filed under: a work tree's, and the
// dirs head for the sessions that know only a directory inside it (when
// a commit says it holds any); a directory's (--project of a directory
// that is gone), which is the work tree's of that root, and the dirs
// head.
func TestHeadsFor(t *testing.T) {
	tree := agent.Project{Remote: "host.test/team/a", Root: "/src/a", Dir: "/src/a/cmd"}
	local := agent.Project{Root: "/src/b", Dir: "/src/b"}
	dir := agent.Project{Dir: "/src/b"}
	withDirs := &manifest.IndexShard{DirHead: true}
	for _, c := range []struct {
		p      agent.Project
		commit *manifest.IndexShard
		want   []string
	}{
		{tree, withDirs, []string{headOf(tree), dirsHead}},
		{tree, &manifest.IndexShard{}, []string{headOf(tree)}},
		{local, withDirs, []string{headOf(local), dirsHead}},
		{dir, withDirs, []string{headOf(local), dirsHead}},
		{agent.Project{}, withDirs, nil},
	} {
		if got := headsFor(c.p, c.commit); !slices.Equal(got, c.want) {
			t.Errorf("headsFor(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	// Every session a listing of each keeps is filed under a head it reads.
	for _, session := range []agent.Project{tree, local, dir, {Dir: "/src/a/x"}, {Dir: "/src/b"}} {
		for _, p := range []agent.Project{tree, local, dir} {
			if p.Holds(session) && !slices.Contains(headsFor(p, withDirs), headOf(session)) {
				t.Errorf("a listing of %+v keeps %+v, filed under %s, and does not read it", p, session, headOf(session))
			}
		}
	}
}

// TestHeadTombstones: a head keeps a deletion's tombstone for the hour a
// writer may still hold an older entry, which it then refuses, and drops
// it after.
func TestHeadTombstones(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	id := "0123456789abcdef0123456789abcdef"
	entry := manifest.IndexEntry{Info: agent.SessionInfo{ID: id, Modified: now.Add(-2 * time.Hour)}, Length: 10, SHA256: strings.Repeat("a", 64)}
	deleted := manifest.Tombstone{ID: id, Deleted: now.Add(-10 * time.Minute), Length: 10}
	h := headAfter(nil, &headBatch{buried: map[string]manifest.Tombstone{id: deleted}}, true, now)
	late := headAfter(h, &headBatch{entries: map[string]manifest.IndexEntry{id: entry}}, true, now)
	if _, ok := late.Sessions[id]; ok {
		t.Fatal("an entry taken before the deletion brought the session back")
	}
	later := headAfter(h, &headBatch{}, true, now.Add(time.Hour))
	if len(later.Tombstones) != 0 {
		t.Fatalf("tombstones an hour after the deletion: %v", later.Tombstones)
	}
}
