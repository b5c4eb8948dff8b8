package objstore_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// storedBase is the number of the newest commit of the env's index log
// and the base it is stored against (0: stored whole), as stored.
func (e *env) storedBase(t *testing.T) (n, base int64) {
	t.Helper()
	n, _ = e.newestCommit(t)
	codec, _ := manifest.NewCodec()
	c, err := codec.DecodeIndexShard(commitKey(n), e.rawObject(t, "pfx/"+commitKey(n)))
	if err != nil {
		t.Fatal(err)
	}
	return n, c.Base
}

// twoProjects writes n sessions of a and n of b, taking turns, through
// a Store it closes (which folds them), and returns it for more.
func twoProjects(t *testing.T, e *env, n int) *objstore.Store {
	t.Helper()
	w := e.open(t)
	for i := range n {
		appendIn(t, w, projectA, fmt.Sprint("a ", i))
		appendIn(t, w, projectB, fmt.Sprint("b ", i))
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPageAhead: a Store opened for a project's page (WithPageAhead)
// lists the page from the newest commit as stored and the project's head,
// without the commit's base: four requests (the marker, the log's LIST,
// then the commit and the head together), where the base made five. The page is the one
// the whole commit gives, with the project's unfolded sessions (stored
// whole in every commit) and without its deleted ones, through rounds of
// folds, runs, deletions and sessions still being written. A write after
// the page reads the base once, and its commits are stored against it.
func TestPageAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	twoProjects(t, e, 70)
	checked := 0
	for round := range 12 {
		// Each round: a sync's run of a's and b's, a's sessions still
		// being written (unfolded), a deletion of one of a's, then
		// enough of b's that the recent view holds few of a's.
		bulk := e.open(t, objstore.WithDeferredIndex())
		for i := range 6 {
			appendIn(t, bulk, projectA, fmt.Sprint("a synced ", round, i))
			appendIn(t, bulk, projectB, fmt.Sprint("b synced ", round, i))
		}
		if err := bulk.Close(ctx); err != nil {
			t.Fatal(err)
		}
		open := e.open(t) // not closed: its sessions stay unfolded
		unfolded := appendIn(t, open, projectA, fmt.Sprint("a being written ", round))
		all, err := e.open(t).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		victim := newestOf(all, projectA, 10)[1+round%9].ID // not the one being written
		at, err := store.Head(ctx, open, victim)
		if err != nil {
			t.Fatal(err)
		}
		if err := open.Delete(ctx, store.Tombstone{ID: victim, Deleted: time.Now(), At: at}); err != nil {
			t.Fatal(err)
		}
		for i := range round % 5 {
			b := e.open(t)
			appendIn(t, b, projectB, fmt.Sprint("b later ", round, i))
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, base := e.storedBase(t); base == 0 {
			continue // stored whole: nothing to show
		}
		checked++
		all, err = e.open(t).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fb := e.faults(t)
		fb.SetDelay(20 * time.Millisecond) // so that what goes out together overlaps, also on a loaded machine
		r := e.openOn(t, fb, objstore.WithOpenSnapshot(), objstore.WithProbeAtFirstWrite(), objstore.WithPageAhead(projectA))
		got, err := r.ListNewestIn(ctx, 50, projectA, nil)
		ops := fb.Take()
		fb.SetDelay(0)
		want := newestOf(all, projectA, 50)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: a's page: %v\n got %v\nwant %v", round, err, infoIDs(got), infoIDs(want))
		}
		if got[0].ID != unfolded {
			t.Fatalf("round %d: a's page begins with %s, not %s, which is being written", round, got[0].ID, unfolded)
		}
		var commits, heads []objstore.Op
		for _, o := range ops {
			if strings.HasPrefix(o.Key, "index/log/0") {
				commits = append(commits, o)
			}
			if isHeadKey(o.Key) {
				heads = append(heads, o)
			}
		}
		if len(commits) != 1 || len(heads) != 1 || len(ops) > 4 {
			t.Fatalf("round %d: Open and a's page: %d requests, %d of them commits, %d heads %+v; want 4: one commit, one head", round, len(ops), len(commits), len(heads), ops)
		}
		if c, h := commits[0], heads[0]; !h.Start.Before(c.End) || !c.Start.Before(h.End) {
			t.Fatalf("round %d: the head went out after the commit's answer (%v, %v); want them in one round trip", round, c, h)
		}
		if round == 11 {
			// As panto -c: the latest session its head holds is read
			// (the head says where its segments are: no commit needed),
			// then grows. The base goes out once, with the append's
			// segment, and the commit is stored against it (or whole,
			// on a multiple of 16).
			latest := got[1]
			if _, err := r.Load(ctx, latest.ID); err != nil {
				t.Fatal(err)
			}
			fb.SetDelay(20 * time.Millisecond)
			if err := r.AppendMessagesIn(ctx, projectA, latest.ID, []agent.PersistentMessage{user("after the page")}); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(ctx); err != nil { // its commits are all written
				t.Fatal(err)
			}
			fb.SetDelay(0)
			var bases, segments []objstore.Op
			for _, o := range fb.Take() {
				if o.Method == "GET" && strings.HasPrefix(o.Key, "index/log/0") {
					bases = append(bases, o)
				}
				if o.Method == "PUT" && strings.Contains(o.Key, "/seg/") {
					segments = append(segments, o)
				}
			}
			if n, base := e.storedBase(t); len(bases) != 1 || (base == 0 && n%objstore.LogFullEvery != 0) {
				t.Fatalf("the load and write after the page read %d commits and stored commit %d against %d; want the base once, and against it", len(bases), n, base)
			}
			if len(segments) == 0 || !bases[0].Start.Before(segments[0].End) {
				t.Fatalf("the base went out after the append's segment was written (%v, %v); want them together", bases, segments)
			}
		}
		if err := open.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if round != 11 {
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if checked < 6 {
		t.Fatalf("only %d of 12 rounds ended on a commit stored against a base", checked)
	}
}

// TestPageAheadOtherListings: a Store opened for a project's page lists
// every other way as any Store does (the whole commit, read when needed):
// the newest of every project, another project's page, and all.
func TestPageAheadOtherListings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	twoProjects(t, e, 40)
	for i := 0; ; i++ {
		if _, base := e.storedBase(t); base != 0 {
			break
		}
		if i > 20 {
			t.Fatal("no commit stored against a base in 20 writes")
		}
		b := e.open(t)
		appendIn(t, b, projectB, fmt.Sprint("b later ", i))
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := e.open(t, objstore.WithOpenSnapshot(), objstore.WithPageAhead(projectA))
	for _, tc := range []struct {
		p     agent.Project
		limit int
	}{{agent.Project{}, 10}, {projectB, 50}, {projectA, 5}, {agent.Project{}, 0}} {
		got, err := r.ListNewestIn(ctx, tc.limit, tc.p, nil)
		want := all
		if tc.p != (agent.Project{}) {
			want = newestOf(all, tc.p, len(all))
		}
		if tc.limit > 0 {
			want = want[:min(tc.limit, len(want))]
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v, %d: %v\n got %v\nwant %v", tc.p, tc.limit, err, infoIDs(got), infoIDs(want))
		}
	}
}

// TestPageAheadAfterSnapshot: once Open's snapshot is over, a page reads
// the newest commit again, and the head Open read beside the older one
// serves it no more: a fold since took sessions out of the unfolded set
// and put them in the head (and newer ones out of the recent view), and
// the page still lists them.
func TestPageAheadAfterSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := twoProjects(t, e, 70)
	for i := range manifest.RecentSize {
		appendIn(t, w, projectB, fmt.Sprint("b later ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r := e.open(t, objstore.WithOpenSnapshot(), objstore.WithPageAhead(projectA))
	// After Open: a's new sessions, folded into a run (and a's head) by
	// their writer's Close.
	later := e.open(t)
	var folded []string
	for i := range 3 {
		folded = append(folded, appendIn(t, later, projectA, fmt.Sprint("a after the open ", i)))
	}
	if err := later.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// And b's, so that the recent view holds none of them: only a's
	// head does.
	for i := range manifest.RecentSize {
		appendIn(t, later, projectB, fmt.Sprint("b after the open ", i))
	}
	if err := later.Close(ctx); err != nil {
		t.Fatal(err)
	}
	objstore.SetNow(r, func() time.Time { return time.Now().Add(time.Minute) })
	got, err := r.ListNewestIn(ctx, 50, projectA, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range folded {
		if !slices.ContainsFunc(got, func(info agent.SessionInfo) bool { return info.ID == id }) {
			t.Fatalf("a's page after the snapshot lacks %s, folded after the Open: %v", id, infoIDs(got))
		}
	}
}

// TestPageAheadDirsHead: in a bucket with imported sessions (the dirs
// head), a work tree's page on a machine that saw the bucket before reads
// the project's head and the dirs head (or, when the imported sessions
// are at its root alone, the project's head alone, which claimed the
// root's) in Open, once the LIST has
// answered, judging from the commit it guessed from its cache: both in
// Open's second round trip, where the page read the dirs head after
// Open, in a third. The page lists the imported sessions of the tree, through
// commits stored whole and against a base, and after another writer's
// commit since the machine's last run (the guess older than the newest,
// whose DirHead it vouches for: once set, every later commit carries it).
func TestPageAheadDirsHead(t *testing.T) {
	t.Parallel()
	// Below a's root, in the dirs head; at the root, in the root's own.
	for _, imported := range []agent.Project{importedA, {Dir: projectA.Root}} {
		t.Run(imported.Dir, func(t *testing.T) {
			t.Parallel()
			pageAheadDirsHead(t, imported)
		})
	}
}

func pageAheadDirsHead(t *testing.T, importedA agent.Project) {
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	for i := range 40 {
		appendIn(t, w, projectA, fmt.Sprint("a ", i))
		if i%8 == 0 {
			appendIn(t, w, importedA, fmt.Sprint("imported ", i))
		}
	}
	for i := range manifest.RecentSize + 10 {
		appendIn(t, w, projectB, fmt.Sprint("b ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, newest := e.newestCommit(t); !newest.DirHead {
		t.Fatal("the newest commit does not say the dirs head holds sessions: the test reads no dirs head")
	}
	cache := t.TempDir()
	// A run of panto on the machine: it lists a's page, and its Close
	// notes the newest commit, which the next Open guesses.
	machineRun := func() {
		seen := e.open(t, objstore.WithIndexCache(cache), objstore.WithProbeAtFirstWrite())
		if _, err := seen.ListNewestIn(ctx, 50, projectA, nil); err != nil {
			t.Fatal(err)
		}
		if err := seen.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 6 {
		// Another writer after the machine's run: in odd rounds the
		// guess is older than the newest commit; in even ones the
		// machine runs again after it, and the guess is the newest.
		machineRun()
		later := e.open(t)
		appendIn(t, later, projectB, fmt.Sprint("b later ", round))
		if round%2 == 1 {
			appendIn(t, later, importedA, fmt.Sprint("imported later ", round))
		}
		if err := later.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			machineRun()
		}
		all, err := e.open(t).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fb := e.faults(t)
		fb.SetDelay(5 * time.Millisecond)
		r := e.openOn(t, fb, objstore.WithIndexCache(cache), objstore.WithOpenSnapshot(), objstore.WithProbeAtFirstWrite(), objstore.WithPageAhead(projectA))
		opened := fb.Take()
		got, err := r.ListNewestIn(ctx, 50, projectA, nil)
		paged := fb.Take()
		fb.SetDelay(0)
		want := newestOf(all, projectA, 50)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: a's page: %v\n got %v\nwant %v", round, err, infoIDs(got), infoIDs(want))
		}
		if !slices.ContainsFunc(got, func(info agent.SessionInfo) bool { return info.Project == importedA }) {
			t.Fatalf("round %d: a's page lists no imported session of a's tree", round)
		}
		// Both heads are read by Open, once the LIST answered; the
		// page reads nothing more. Open's reads: the marker, the LIST,
		// the guess and, when the log moved since, the newest commit,
		// then the heads.
		var list objstore.Op
		var heads []objstore.Op
		for _, o := range opened {
			if o.Method == "LIST" {
				list = o
			}
			if isHeadKey(o.Key) {
				heads = append(heads, o)
			}
		}
		// At the root, a's head claimed the root's (claims.go) when w
		// folded a's sessions, and holds the imported ones: Open reads
		// it alone.
		wantHeads := 2
		if importedA.Dir == projectA.Root {
			wantHeads = 1
		}
		requests := 3 + wantHeads + round%2
		if len(heads) != wantHeads || len(opened) != requests || len(paged) != 0 {
			t.Fatalf("round %d: Open read %d heads in %d requests %+v, then the page %+v; want %d heads in %d requests, then none", round, len(heads), len(opened), opened, paged, wantHeads, requests)
		}
		for _, h := range heads {
			if h.Start.Before(list.End) {
				t.Fatalf("round %d: a head went out before the LIST's answer (%v, %v): it may miss a commit the LIST names", round, list, h)
			}
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPageAheadDirFilter: in a bucket whose dirs head holds more
// sessions that know only their directory than it keeps, all outside
// b's work tree (other machines' scratch directories), the page of b
// reads b's head alone, since the newest commit's dir filter says the
// dirs head holds nothing under /src/b: four requests and no partition.
// Without the filter it read the dirs head too, whose oldest session,
// newer than all of b's, bounded what b's page may miss and sent it to
// the catalog. a's page, whose tree holds an imported session, still
// reads the dirs head and lists it. The page of a scratch directory,
// whose sessions the dirs head holds some of, reads its directory's
// head alone (DirKeys): four requests, where it read the dirs head too
// and, that head holding more than it keeps, the catalog. c's page,
// whose imported sessions are at its root (another agent run there) and
// older than the dirs head's oldest, reads the root's own head beside
// c's: five requests, where the dirs head sent it to the catalog.
func TestPageAheadDirFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	for i := range 55 {
		appendIn(t, w, projectB, fmt.Sprint("b ", i))
	}
	appendIn(t, w, importedA, "imported into a's tree")
	for i := range 12 {
		appendIn(t, w, agent.Project{Dir: "/src/c"}, fmt.Sprint("imported at c's root ", i))
		appendIn(t, w, projectC, fmt.Sprint("c ", i))
	}
	for i := range manifest.HeadSize + 10 {
		appendIn(t, w, agent.Project{Dir: fmt.Sprintf("/scratch/%d", i%7)}, fmt.Sprint("scratch ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); !c.DirHead || len(c.DirFilter) != manifest.DirFilterBytes || !c.DirKeys {
		t.Fatalf("the newest commit: dir head %v, a dir filter of %d bytes, dir keys %v; want all", c.DirHead, len(c.DirFilter), c.DirKeys)
	}
	scratch := agent.Project{Dir: "/scratch/3"}
	for _, p := range []agent.Project{projectB, projectA, scratch, projectC} {
		ops := checkedPage(t, e, p, "the page")
		dirs := readsDirsHead(ops)
		switch p {
		case projectC:
			if dirs || readsPartitions(ops) || len(ops) > 5 {
				t.Fatalf("c's page read the dirs head %v, the partitions %v, in %d requests: %s; want c's head and its root's, in 5", dirs, readsPartitions(ops), len(ops), describeOps(ops))
			}
		case projectB, scratch:
			if dirs || readsPartitions(ops) || len(ops) > 4 {
				t.Fatalf("%s's page read the dirs head %v, the partitions %v, in %d requests: %s; want its head alone, in 4", p.Key(), dirs, readsPartitions(ops), len(ops), describeOps(ops))
			}
		case projectA:
			if !dirs {
				t.Fatalf("a's page did not read the dirs head, which holds a session in a's tree: %s", describeOps(ops))
			}
		}
	}
}

// TestDirFilterLostAndRepaired: a panto that predates the dir filter
// and DirKeys drops them from the commit it writes, and put the sessions
// that know only their directory in the dirs head alone; the commits
// after it have neither (what that writer put in the dirs head is in no
// filter, and in no directory's head), so every work tree's page reads
// the dirs head again, as before the filter, and so does a directory's.
// The next sync that read the catalog as of the newest commit, and
// writes the index, writes the directories' heads and gives the log a
// filter made from it; so does repair; and b's page, and a scratch
// directory's, are four requests again.
func TestDirFilterLostAndRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	for i := range 10 {
		appendIn(t, w, projectB, fmt.Sprint("b ", i))
	}
	for i := range 10 {
		appendIn(t, w, agent.Project{Dir: fmt.Sprintf("/scratch/%d", i%3)}, fmt.Sprint("scratch ", i))
	}
	// Newer than b's, so that the newest commit's recent view holds
	// none of b's and b's page reads the heads.
	for i := range manifest.RecentSize + 5 {
		appendIn(t, w, projectA, fmt.Sprint("a ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	scratch := agent.Project{Dir: "/scratch/0"}
	readsDirs := func(what string) bool {
		t.Helper()
		b := readsDirsHead(checkedPage(t, e, projectB, what))
		if d := readsDirsHead(checkedPage(t, e, scratch, what)); d != b {
			t.Fatalf("%s: b's page read the dirs head %v, /scratch/0's %v", what, b, d)
		}
		return b
	}
	if readsDirs("with the filter") {
		t.Fatal("with the filter, b's page read the dirs head")
	}
	// The older panto's commit: the newest one again, whole, without
	// the filter.
	olderPanto := func() {
		t.Helper()
		e.rewriteNewestCommit(t, func(c *manifest.IndexShard) {
			c.Base, c.BaseETag, c.DirFilter, c.DirKeys = 0, "", nil, false
		})
		// What it folded of the scratch directories is in no head of
		// theirs.
		for i := range 3 {
			e.removeRaw(t, "pfx/"+objstore.ProjectHeadKey(fmt.Sprintf("/scratch/%d", i)))
		}
	}
	olderPanto()
	later := e.open(t)
	appendIn(t, later, agent.Project{Dir: "/scratch/later"}, "after the older panto")
	if err := later.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); !c.DirHead || c.DirFilter != nil || c.DirKeys {
		t.Fatalf("the commits after one without a filter: dir head %v, a filter of %d bytes, dir keys %v; want neither", c.DirHead, len(c.DirFilter), c.DirKeys)
	}
	if !readsDirs("after an older panto's commit") {
		t.Fatal("after a commit without the filter, b's page did not read the dirs head")
	}
	// A sync: it reads the catalog, writes a session, and flushes.
	sync := e.open(t, objstore.WithDeferredIndex())
	if _, err := sync.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	appendIn(t, sync, agent.Project{Dir: "/scratch/synced"}, "pushed")
	if err := sync.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); len(c.DirFilter) != manifest.DirFilterBytes || !manifest.DirFilterMayHold(c.DirFilter, "/scratch/later") || !manifest.DirFilterMayHold(c.DirFilter, "/scratch/synced") || !c.DirKeys {
		t.Fatalf("after a sync the newest commit's filter is %d bytes, holding /scratch/later %v, /scratch/synced %v; dir keys %v", len(c.DirFilter), manifest.DirFilterMayHold(c.DirFilter, "/scratch/later"), manifest.DirFilterMayHold(c.DirFilter, "/scratch/synced"), c.DirKeys)
	}
	if readsDirs("after a sync") {
		t.Fatal("after a sync, b's page read the dirs head")
	}
	olderPanto()
	if !readsDirs("after another older panto's commit") {
		t.Fatal("after a commit without the filter, b's page did not read the dirs head")
	}
	// A sync whose catalog is older than the newest commit makes no
	// filter: what went to the dirs head since is not in its catalog.
	stale := e.open(t, objstore.WithDeferredIndex())
	if _, err := stale.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	other := e.open(t)
	appendIn(t, other, agent.Project{Dir: "/scratch/other"}, "meanwhile")
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	appendIn(t, stale, agent.Project{Dir: "/scratch/stale"}, "pushed late")
	if err := stale.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); c.DirFilter != nil && !manifest.DirFilterMayHold(c.DirFilter, "/scratch/other") {
		t.Fatal("a sync made a filter from a catalog older than the newest commit: it lacks what that commit put in the dirs head")
	}
	// Repair, after an older panto's commit whose folds left the
	// scratch directories' heads (which repair's fold of the runs may
	// have written again) without their sessions.
	olderPanto()
	if _, err := e.open(t).RepairIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); len(c.DirFilter) != manifest.DirFilterBytes || !manifest.DirFilterMayHold(c.DirFilter, "/scratch/later") {
		t.Fatalf("after repair the newest commit's filter is %d bytes, holding /scratch/later %v", len(c.DirFilter), manifest.DirFilterMayHold(c.DirFilter, "/scratch/later"))
	}
	if readsDirs("after repair") {
		t.Fatal("after repair, b's page read the dirs head")
	}
}

// checkedPage reads project p's page of 50 as panto sessions does in a
// work tree (a Store opened for that page), fails unless it is the full
// listing's, and returns the requests of the Open and the page.
func checkedPage(t *testing.T, e *env, p agent.Project, what string) []objstore.Op {
	t.Helper()
	ctx := context.Background()
	all, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	r := e.openOn(t, fb, objstore.WithOpenSnapshot(), objstore.WithProbeAtFirstWrite(), objstore.WithPageAhead(p))
	got, err := r.ListNewestIn(ctx, 50, p, nil)
	if want := newestOf(all, p, 50); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %s's page: %v\n got %v\nwant %v", what, p.Key(), err, infoIDs(got), infoIDs(want))
	}
	return fb.Take()
}

// readsDirsHead reports whether ops read the head of the sessions that
// know only their directory.
func readsDirsHead(ops []objstore.Op) bool {
	return slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Key == "index/head/dirs.json.zst" })
}
