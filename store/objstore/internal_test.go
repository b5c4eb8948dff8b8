package objstore

import (
	"slices"
	"strconv"
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

// TestMergeTieredRuns: a writer's compaction merges, walking back from
// the newest segment, the appended segments, and a merged one only if
// it holds no more than the run so far; runs stay within the bound, and
// a large segment is left alone.
func TestMergeTieredRuns(t *testing.T) {
	// seg spells a segment list: "m16" a merged segment of 16 bytes,
	// "8" an appended one of 8.
	seg := func(spec string) []manifest.Segment {
		var out []manifest.Segment
		var pos int64
		for _, f := range strings.Fields(spec) {
			s := manifest.Segment{Start: pos}
			if n, ok := strings.CutPrefix(f, "m"); ok {
				s.Merged, f = true, n
			}
			s.Length, _ = strconv.ParseInt(f, 10, 64)
			out = append(out, s)
			pos += s.Length
		}
		return out
	}
	for _, tt := range []struct {
		spec string
		want [][2]int
	}{
		{"1", nil},
		{"1 1", [][2]int{{0, 2}}},
		{"5 4 3 2 1", [][2]int{{0, 5}}},                              // appended ones merge whatever their sizes
		{"m64 m16 16 8 8", [][2]int{{1, 5}}},                         // the 64 waits for 64 after it
		{"m64 m32 1 1", [][2]int{{2, 4}}},                            // the 32 waits too
		{"m64 m32 16 16", [][2]int{{0, 4}}},                          // 16+16 takes the 32, then the 64
		{"1 1 m64 2 2", [][2]int{{0, 2}, {3, 5}}},                    // a merged one is not rewritten for those before it
		{"1 m2", nil},                                                // nor for none after it
		{"100 1 1 100 1", [][2]int{{1, 3}}},                          // an eighth of the bound or more stays (bound 800)
		{"90 90 90 90 90 90 90 90 90 90", [][2]int{{0, 2}, {2, 10}}}, // at most the bound a run
	} {
		if got := mergeTieredRuns(seg(tt.spec), 800); !slices.Equal(got, tt.want) {
			t.Errorf("mergeTieredRuns(%s) = %v, want %v", tt.spec, got, tt.want)
		}
	}
}

// TestHeadsFor: a listing reads a head every session its project holds
// (agent.Project.Holds) is filed under, as the newest commit says the
// writers kept them: a work tree's, and the dirs head for the sessions
// that know only a directory below its root (when a commit says it holds
// any, and its filter may hold one), or its root's own head for those
// at the root alone (DirKeys); a directory's (--project of a directory
// that is gone), which is the work tree's of that root, and holds the
// directory's own sessions when the commit says DirKeys, else the dirs
// head does too.
func TestHeadsFor(t *testing.T) {
	tree := agent.Project{Remote: "host.test/team/a", Root: "/src/a", Dir: "/src/a/cmd"}
	local := agent.Project{Root: "/src/b", Dir: "/src/b"}
	dir := agent.Project{Dir: "/src/b"}
	filter := func(dirs ...string) []byte {
		f := manifest.NewDirFilter()
		for _, d := range dirs {
			manifest.AddDirTo(f, d)
		}
		return f
	}
	withDirs := &manifest.IndexShard{DirHead: true}
	withDirKeys := &manifest.IndexShard{DirHead: true, DirKeys: true}
	atRoots := &manifest.IndexShard{DirHead: true, DirKeys: true, DirFilter: filter("/src/a", "/src/b")}
	belowRoots := &manifest.IndexShard{DirHead: true, DirKeys: true, DirFilter: filter("/src/a/x", "/src/b/y")}
	elsewhere := &manifest.IndexShard{DirHead: true, DirKeys: true, DirFilter: filter("/scratch")}
	for _, c := range []struct {
		p      agent.Project
		commit *manifest.IndexShard
		want   []string
	}{
		{tree, withDirs, []string{keyHead(tree.Key()), dirsHead}},
		{tree, withDirKeys, []string{keyHead(tree.Key()), dirsHead}},
		{tree, &manifest.IndexShard{}, []string{keyHead(tree.Key())}},
		{tree, atRoots, []string{keyHead(tree.Key()), keyHead("/src/a")}},
		{tree, belowRoots, []string{keyHead(tree.Key()), dirsHead}},
		{tree, elsewhere, []string{keyHead(tree.Key())}},
		{local, withDirs, []string{keyHead(local.Key()), dirsHead}},
		{local, atRoots, []string{keyHead(local.Key())}},
		{local, belowRoots, []string{keyHead(local.Key()), dirsHead}},
		{dir, withDirs, []string{keyHead(local.Key()), dirsHead}},
		{dir, withDirKeys, []string{keyHead(local.Key())}},
		{dir, belowRoots, []string{keyHead(local.Key())}},
		{agent.Project{}, withDirs, nil},
	} {
		if got := headsFor(c.p, c.commit); !slices.Equal(got, c.want) {
			t.Errorf("headsFor(%+v, %+v) = %v, want %v", c.p, c.commit, got, c.want)
		}
	}
	// Every session a listing of each keeps is filed under a head it
	// reads, after a commit whose filter holds that session's directory.
	sessions := []agent.Project{tree, local, dir, {Dir: "/src/a"}, {Dir: "/src/a/"}, {Dir: "/src/a/x"}, {Dir: "/src/b"}, {Dir: "/src/b/y"}}
	for _, session := range sessions {
		commits := []*manifest.IndexShard{withDirs, withDirKeys}
		if session.OnlyDir() {
			commits = append(commits, &manifest.IndexShard{DirHead: true, DirKeys: true, DirFilter: filter(session.Dir)})
		}
		for _, commit := range commits {
			for _, p := range []agent.Project{tree, local, dir} {
				kept := headsKept(session, commit)
				if p.Holds(session) && !slices.ContainsFunc(kept, func(name string) bool { return slices.Contains(headsFor(p, commit), name) }) {
					t.Errorf("after %+v, a listing of %+v keeps %+v, filed under %v, and does not read them", commit, p, session, kept)
				}
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

// TestRunsToMerge: the lowest size tier that holds runMergeFactor runs is
// merged with the tiers below it, and never with a tier above.
func TestRunsToMerge(t *testing.T) {
	// runs lists each run's size; a run of more than runPageSize entries
	// takes several pages.
	runs := func(sizes ...int) []manifest.RunPage {
		var pages []manifest.RunPage
		for i, n := range sizes {
			for k := 0; n > 0; k++ {
				c := min(n, runPageSize)
				pages = append(pages, manifest.RunPage{Key: strings.Repeat("x", i+1) + string(rune('a'+k)), Sessions: c, Commit: int64(i + 1)})
				n -= c
			}
		}
		return pages
	}
	merged := func(pages []manifest.RunPage) []int64 {
		var commits []int64
		for _, p := range pages {
			if !slices.Contains(commits, p.Commit) {
				commits = append(commits, p.Commit)
			}
		}
		return commits
	}
	for _, tt := range []struct {
		sizes []int
		want  []int64 // the runs (by commit) merged
	}{
		{[]int{300, 1, 1, 1}, nil},
		{[]int{300, 1, 1, 1, 1}, []int64{2, 3, 4, 5}},
		{[]int{5, 5, 5, 1, 1, 1, 1}, []int64{4, 5, 6, 7}},
		{[]int{5, 6, 7, 8, 1, 2}, []int64{1, 2, 3, 4, 5, 6}},
		{[]int{2000, 300, 300, 300, 3, 1}, nil},
		{[]int{2000, 300, 300, 300, 300, 1}, []int64{2, 3, 4, 5, 6}},
		{[]int{4, 16, 64, 256}, nil},
	} {
		if got := merged(runsToMerge(runs(tt.sizes...))); !slices.Equal(got, tt.want) {
			t.Errorf("runsToMerge(%v) merges runs %v, want %v", tt.sizes, got, tt.want)
		}
	}
	for n, want := range map[int]int{1: 0, 3: 0, 4: 1, 15: 1, 16: 2, 255: 3, 256: 4, 12500: 6} {
		if got := runTier(n); got != want {
			t.Errorf("runTier(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestCatchUpThroughMergeStep: a step of a merge adds pages to a run an
// earlier commit added and may retire more than it adds; it is not a
// fold, so a catalog that must read a bulk write's pages the step
// retired reads the newest commit's pages (which hold them merged), not
// the 256 partitions.
func TestCatchUpThroughMergeStep(t *testing.T) {
	page := func(key string, commit int64) manifest.RunPage {
		return manifest.RunPage{Key: key, First: "00", Last: "ff", Sessions: 70, Commit: commit}
	}
	small := page("index/run/a-000.json.zst", 1)
	bulk := page("index/run/b-000.json.zst", 3)
	merged := page("index/run/c-000.json.zst", 2)
	commits := []*manifest.IndexShard{
		{Through: 2, Runs: []manifest.RunPage{small}},
		{Through: 3, Runs: []manifest.RunPage{small, bulk}, Omitted: 70},
		// The step's commit: the merge into run 2 retires both pages.
		{Through: 4, Runs: []manifest.RunPage{merged}},
	}
	var s Store
	pages, ok := s.catchUpPages(commits, make([]*logChanges, len(commits)))
	if !ok || len(pages) != 1 || pages[0] != merged {
		t.Fatalf("catch-up pages %+v, %v; want the merged page", pages, ok)
	}
	// A fold retires pages and adds none: the partitions hold them.
	commits[2].Runs = nil
	if pages, ok := s.catchUpPages(commits, make([]*logChanges, len(commits))); ok {
		t.Fatalf("catch-up through a fold: %+v, want refused", pages)
	}
}

// TestPurgeCommits: the commit after a purge's applies it only where the
// commit before names exactly the pages covering its partitions that it
// read, and only then takes its sessions out of Unpurged and its pages
// out of Discarded (naming the pages it retires there); a merge that
// read a page retired since adds none of its pages. Every deletion is
// named in Unpurged, and stays there until a purge takes it out.
func TestPurgeCommits(t *testing.T) {
	now := time.Now().UTC()
	page := func(key, first, last string) manifest.RunPage {
		return manifest.RunPage{Key: manifest.RunKeyPrefix + key + "-000.json.zst", First: first, Last: last, Sessions: 1, Commit: 1}
	}
	a, b, a2 := page("aa", "00", "7f"), page("bb", "80", "ff"), page("a2", "00", "7f")
	gone := "0123456789abcdef0123456789abcdef" // partition 01
	prev := &manifest.IndexShard{Shard: manifest.LogName, Through: 5, Runs: []manifest.RunPage{a, b}, Unpurged: []string{gone}, Discarded: []string{manifest.RunKeyPrefix + "old-000.json.zst"}}

	purge := func(read ...manifest.RunPage) logChanges {
		var keys []string
		for _, p := range read {
			keys = append(keys, p.Key)
		}
		return logChanges{pages: []manifest.RunPage{a2}, retired: map[string]bool{a.Key: true},
			purge: &purgeChange{partitions: []string{"01"}, read: keys, ids: []string{gone}, discarded: prev.Discarded}}
	}
	c := nextCommit(6, prev, purge(a), nil, false, now)
	if !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Key == a2.Key }) || slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Key == a.Key }) {
		t.Errorf("a purge that read what the commit names: runs %v, want %s in place of %s", c.Runs, a2.Key, a.Key)
	}
	if len(c.Unpurged) != 0 || !slices.Equal(c.Discarded, []string{a.Key}) {
		t.Errorf("a purge that read what the commit names: unpurged %v, discarded %v; want none, [%s]", c.Unpurged, c.Discarded, a.Key)
	}
	for name, read := range map[string][]manifest.RunPage{"fewer": nil, "others": {b}, "more": {a, b}} {
		c := nextCommit(6, prev, purge(read...), nil, false, now)
		if !slices.Equal(c.Runs, prev.Runs) || !slices.Equal(c.Unpurged, prev.Unpurged) || !slices.Equal(c.Discarded, prev.Discarded) {
			t.Errorf("a purge that read %s pages: runs %v, unpurged %v, discarded %v; want the commit before's", name, c.Runs, c.Unpurged, c.Discarded)
		}
	}

	merged := page("mm", "00", "ff")
	merge := logChanges{pages: []manifest.RunPage{merged}, retired: map[string]bool{a.Key: true, b.Key: true}, read: []string{a.Key, b.Key}}
	if c := nextCommit(6, prev, merge, nil, false, now); !slices.Equal(c.Runs, []manifest.RunPage{merged}) {
		t.Errorf("a merge of the pages the commit names: runs %v", c.Runs)
	}
	replaced := &manifest.IndexShard{Shard: manifest.LogName, Through: 5, Runs: []manifest.RunPage{a2, b}}
	if c := nextCommit(6, replaced, merge, nil, false, now); !slices.Equal(c.Runs, replaced.Runs) {
		t.Errorf("a merge that read a page a purge replaced since: runs %v, want %v", c.Runs, replaced.Runs)
	}

	deleted := "fedcba9876543210fedcba9876543210"
	c = nextCommit(6, prev, logChanges{buried: map[string]manifest.Tombstone{deleted: {ID: deleted, Deleted: now}}}, nil, false, now)
	if !slices.Equal(c.Unpurged, []string{gone, deleted}) {
		t.Errorf("a deletion's commit: unpurged %v, want %v", c.Unpurged, []string{gone, deleted})
	}
	if c := nextCommit(7, c, logChanges{}, nil, false, now); !slices.Equal(c.Unpurged, []string{gone, deleted}) {
		t.Errorf("the commit after: unpurged %v, want them carried on", c.Unpurged)
	}
}

// TestDirFilterAfter: a commit's dir filter carries the one before with
// what its writer added; starts from what was added when the dirs head
// held nothing before; is not known (nil: every work tree reads the dirs
// head) after a commit that said DirHead without one (a panto that
// predates it wrote that) or one that did not decode, until a rebuild
// from the whole index.
func TestDirFilterAfter(t *testing.T) {
	filter := func(dirs ...string) []byte {
		f := manifest.NewDirFilter()
		for _, d := range dirs {
			manifest.AddDirTo(f, d)
		}
		return f
	}
	holds := func(f []byte, dir string) bool { return f != nil && manifest.DirFilterMayHold(f, dir) }
	withFilter := &manifest.IndexShard{Shard: manifest.LogName, Through: 7, DirHead: true, DirFilter: filter("/a/x")}
	withoutFilter := &manifest.IndexShard{Shard: manifest.LogName, Through: 7, DirHead: true}
	noDirs := &manifest.IndexShard{Shard: manifest.LogName, Through: 7}
	added := filter("/b/y")

	if f := dirFilterAfter(withFilter, true, true, added, nil); !holds(f, "/a") || !holds(f, "/b") || holds(f, "/c") {
		t.Errorf("after a commit with a filter: holds /a %v, /b %v, /c %v; want the two added", holds(f, "/a"), holds(f, "/b"), holds(f, "/c"))
	}
	if f := dirFilterAfter(noDirs, true, true, added, nil); !holds(f, "/b") || holds(f, "/a") {
		t.Errorf("after a commit without dirs: %v; want what was added alone", f != nil)
	}
	if f := dirFilterAfter(nil, true, true, added, nil); !holds(f, "/b") {
		t.Error("the log's first commit: not what was added")
	}
	if f := dirFilterAfter(withoutFilter, true, true, added, nil); f != nil {
		t.Error("after a commit that said DirHead without a filter: a filter, which would leave out what that commit's writer put in the dirs head")
	}
	if f := dirFilterAfter(withFilter, false, true, added, nil); f != nil {
		t.Error("after a commit that did not decode: a filter, which would leave out what it added")
	}
	if f := dirFilterAfter(withoutFilter, true, true, added, filter("/c/z")); !holds(f, "/c") || !holds(f, "/b") {
		t.Error("a rebuild after a commit without a filter: not the rebuilt one with what was added")
	}
	if f := dirFilterAfter(withFilter, true, false, added, nil); f != nil {
		t.Error("a commit that does not say DirHead has a filter")
	}
}

// TestExitBudget: an exit's budget of entries to merge and fold is the
// merge budget, less the dir filter's share once the newest commit
// carries one (the turn's commits each send it).
func TestExitBudget(t *testing.T) {
	s := &Store{mergeBudget: 56}
	if got := s.exitBudget(); got != 56 {
		t.Errorf("with no commit read: %d, want 56", got)
	}
	s.ilog.last = &manifest.IndexShard{Shard: manifest.LogName, Through: 3, DirHead: true}
	if got := s.exitBudget(); got != 56 {
		t.Errorf("after a commit without a filter: %d, want 56", got)
	}
	s.ilog.last.DirFilter = manifest.NewDirFilter()
	if got := s.exitBudget(); got != 56-dirFilterEntries {
		t.Errorf("after a commit with a filter: %d, want %d", got, 56-dirFilterEntries)
	}
}

// TestDirKeysAfter: a commit says DirKeys (every session of the dirs
// head is in its directory's head too) only when each writer since the
// first commit that said DirHead, or since a rebuild of the heads, did
// so: not after a commit that said DirHead without it (a panto that
// predates it) or did not decode, until a rebuild.
func TestDirKeysAfter(t *testing.T) {
	withKeys := &manifest.IndexShard{Shard: manifest.LogName, Through: 7, DirHead: true, DirKeys: true}
	withoutKeys := &manifest.IndexShard{Shard: manifest.LogName, Through: 7, DirHead: true}
	noDirs := &manifest.IndexShard{Shard: manifest.LogName, Through: 7}
	for _, c := range []struct {
		what           string
		prev           *manifest.IndexShard
		known, dirHead bool
		rebuilt, want  bool
	}{
		{"after a commit with them", withKeys, true, true, false, true},
		{"after a commit whose dirs head held none", noDirs, true, true, false, true},
		{"the log's first commit", nil, true, true, false, true},
		{"after an older panto's commit", withoutKeys, true, true, false, false},
		{"after a commit that did not decode", withKeys, false, true, false, false},
		{"a rebuild after an older panto's commit", withoutKeys, true, true, true, true},
		{"a rebuild after a commit that did not decode", withoutKeys, false, true, true, true},
		{"a commit that does not say DirHead", withKeys, true, false, false, false},
	} {
		if got := dirKeysAfter(c.prev, c.known, c.dirHead, c.rebuilt); got != c.want {
			t.Errorf("%s: DirKeys %v, want %v", c.what, got, c.want)
		}
	}
}
