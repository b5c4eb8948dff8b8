package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestUnfoldedTurn: a checkpoint commits its entry to the index log
// unfolded and writes no partition, whatever the partition holds; the
// writer's Close folds the entry into a run of one page, not its
// partition, and takes it out of the set; another Store lists the
// session at its longest before and after.
func TestUnfoldedTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	seed := e.open(t)
	for i := range 40 {
		appendNew(t, seed, fmt.Sprintf("older %d", i))
	}
	if err := seed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); len(c.Unfolded) != 0 {
		t.Fatalf("after Close the set holds %d entries, want none", len(c.Unfolded))
	}
	before, _ := e.partitions(t)

	fb := e.faults(t)
	w := e.openOn(t, fb)
	id := appendNew(t, w, "the prompt")
	for i := range 3 {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{msg(agent.RoleAssistant, fmt.Sprint("answer ", i))}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range fb.Take() {
		if o.Method == "PUT" && partitionKeyRe.MatchString("pfx/"+o.Key) {
			t.Errorf("a checkpoint wrote partition %s", o.Key)
		}
	}
	if after, _ := e.partitions(t); len(after) != len(before) {
		t.Fatalf("the partitions hold %d sessions after the turns, want the %d before", len(after), len(before))
	}
	_, c := e.newestCommit(t)
	u, ok := c.Unfolded[id]
	if !ok || u.Info.MessageCount != 4 || u.Resume.HashState == "" {
		t.Fatalf("the newest commit's unfolded entry of the session: %+v (present %v), want 4 messages and its append state", u, ok)
	}
	lists := func(when string, want int) {
		t.Helper()
		r := e.open(t)
		list, err := r.List(ctx)
		if err != nil || len(list) != 41 || list[0].ID != id || list[0].MessageCount != want {
			t.Fatalf("%s: list: %v, %d sessions, newest %+v", when, err, len(list), list[0])
		}
		if s, err := r.Resolve(ctx, id[:6]); err != nil || s.Info.MessageCount != want {
			t.Fatalf("%s: resolve: %v", when, err)
		}
		logs, err := r.Logs(ctx)
		if err != nil || len(logs) != 41 {
			t.Fatalf("%s: logs: %v, %d", when, err, len(logs))
		}
	}
	lists("unfolded", 4)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, c = e.newestCommit(t)
	if len(c.Unfolded) != 0 {
		t.Fatalf("after Close the set holds %d entries, want none", len(c.Unfolded))
	}
	pages := 0
	for _, o := range fb.Take() {
		if o.Method == "PUT" && partitionKeyRe.MatchString("pfx/"+o.Key) {
			t.Errorf("Close wrote partition %s", o.Key)
		}
		if o.Method == "PUT" && runKeyRe.MatchString(o.Key) {
			pages++
		}
	}
	if pages != 1 || e.runEntries(t)[id].Info.MessageCount != 4 {
		t.Fatalf("Close wrote %d run pages; the runs hold %+v, want one page with the session's 4 messages", pages, e.runEntries(t)[id])
	}
	lists("folded", 4)
}

// TestUnfoldedBounded: Stores that never close (killed writers) leave
// their entries in the set; a writer that finds it over
// manifest.UnfoldedSize folds the oldest, and one that finds an entry of
// another writer's session idle for half an hour folds it; every session
// stays listed throughout, and the index checks clean.
func TestUnfoldedBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	var ids []string
	for i := range manifest.UnfoldedSize + 10 {
		ids = append(ids, appendNew(t, e.open(t), fmt.Sprintf("abandoned %d", i)))
	}
	_, c := e.newestCommit(t)
	if len(c.Unfolded) > manifest.UnfoldedSize+1 {
		t.Fatalf("the set holds %d entries, want at most %d", len(c.Unfolded), manifest.UnfoldedSize+1)
	}
	entries, _ := e.indexed(t)
	for _, id := range ids {
		if _, ok := entries[id]; !ok {
			t.Errorf("%s is not in the index", id)
		}
	}
	if list, err := e.open(t).List(ctx); err != nil || len(list) != len(ids) {
		t.Fatalf("list: %v, %d sessions, want %d", err, len(list), len(ids))
	}
	// An hour later, another writer's commit folds the idle ones.
	later := e.open(t)
	objstore.SetNow(later, func() time.Time { return time.Now().Add(time.Hour) })
	appendNew(t, later, "an hour later")
	if err := later.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, c = e.newestCommit(t)
	if len(c.Unfolded) != 1 {
		t.Fatalf("an hour later the set holds %d entries, want the new session's alone", len(c.Unfolded))
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check: %v, %+v", err, report)
	}
}

// TestUnfoldedFoldDuringRead: a reader reads the newest commit, then the
// partitions; a fold that lands between the two (the partition written,
// then a commit that takes the entry out of the set) hides nothing.
func TestUnfoldedFoldDuringRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	id := appendNew(t, w, "folded while a reader reads")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	r := e.openOn(t, fb)
	partition := "index/" + manifest.PartitionOf(id, 2) + ".json.zst"
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "GET" && o.Key == partition {
			once.Do(func() { close(reached) })
			<-release
		}
		return nil
	})
	var list []agent.SessionInfo
	var err error
	done := make(chan struct{})
	go func() { defer close(done); list, err = r.List(ctx) }()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the listing never read the partition")
	}
	if err := w.Close(ctx); err != nil { // the fold
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); len(c.Unfolded) != 0 {
		t.Fatalf("the fold left %d entries in the set", len(c.Unfolded))
	}
	close(release)
	<-done
	if err != nil || !slices.ContainsFunc(list, func(i agent.SessionInfo) bool { return i.ID == id }) {
		t.Fatalf("a listing across the fold: %v, %v", err, infoIDs(list))
	}
}

// TestUnfoldedAdopted: a format-4 prefix written before the set (its
// marker without index-unfolded) is read as it is; the first checkpoint
// of this version adds the feature to the marker, and then commits its
// entry unfolded.
func TestUnfoldedAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	old := e.open(t, partitionsAtClose()) // as a writer before the set did
	first := appendNew(t, old, "before the set")
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.putRaw(t, "pfx/panto-store.json", []byte(`{"format":"panto-objstore","version":3,"requires":["index-bases","index-log"]}`))
	w := e.open(t)
	if list, err := w.List(ctx); err != nil || len(list) != 1 || list[0].ID != first {
		t.Fatalf("list before the first checkpoint: %v, %v", err, infoIDs(list))
	}
	second := appendNew(t, w, "after")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := string(e.object(t, "pfx/panto-store.json")); !strings.Contains(m, `"index-unfolded"`) {
		t.Fatalf("marker after a checkpoint: %s", m)
	}
	if _, c := e.newestCommit(t); c.Unfolded[second].Length == 0 {
		t.Fatalf("the checkpoint's entry is not unfolded: %+v", c.Unfolded)
	}
	if list, err := e.open(t).List(ctx); err != nil || len(list) != 2 {
		t.Fatalf("list after: %v, %v", err, infoIDs(list))
	}
}

// TestUnfoldedRepair: an unfolded entry of a session whose objects are
// gone (removed behind the store's back) is an orphan to CheckIndex;
// RepairIndex takes it out of the set, after which the index checks
// clean and the session lists no more.
func TestUnfoldedRepair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	keep := appendNew(t, w, "kept")
	gone := appendNew(t, w, "removed behind the store's back")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range e.rawBucket(t) {
		if strings.Contains(o.key, "/sessions/"+gone+"/") {
			e.removeRaw(t, o.key)
		}
	}
	report, err := e.open(t).CheckIndex(ctx)
	if err != nil || !slices.Equal(report.Orphans, []string{gone}) {
		t.Fatalf("check: %v, %+v; want %s an orphan", err, report, gone)
	}
	if _, err := e.open(t).RepairIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); c.Unfolded[gone].Length != 0 {
		t.Fatalf("the repair left the orphan in the set")
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check after the repair: %v, %+v", err, report)
	}
	list, err := e.open(t).List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != keep {
		t.Fatalf("list after the repair: %v, %v", err, infoIDs(list))
	}
	if err := w.Close(ctx); err != nil && !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatal(err)
	}
}

// TestProbeRemembered: with an index cache, an Open within a day of a
// probe that passed sends no probe PUT, nor do its writes; a day later
// the Open sends none either, and its first write probes again.
func TestProbeRemembered(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	cache := t.TempDir()
	var last *objstore.Store
	count := func(ops []objstore.Op) int {
		n := 0
		for _, o := range ops {
			if o.Method == "PUT" && strings.Contains(o.Key, "panto-probe") {
				n++
			}
		}
		return n
	}
	var fb *objstore.FaultBucket
	probes := func() int {
		t.Helper()
		fb = e.faults(t)
		last = e.openOn(t, fb, objstore.WithIndexCache(cache))
		return count(fb.Take())
	}
	if n := probes(); n == 0 {
		t.Fatal("the first Open sent no probe")
	}
	if n := probes(); n != 0 {
		t.Fatalf("an Open right after a probe sent %d probe PUTs", n)
	}
	appendNew(t, last, "within the day")
	if n := count(fb.Take()); n != 0 {
		t.Fatalf("a write right after a probe sent %d probe PUTs", n)
	}
	marks, _ := filepath.Glob(filepath.Join(cache, "*.probed"))
	if len(marks) != 1 {
		t.Fatalf("probe records in the cache: %v", marks)
	}
	old := time.Now().Add(-25 * time.Hour).UTC().Format(time.RFC3339Nano)
	if err := os.WriteFile(marks[0], []byte(old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := probes(); n != 0 {
		t.Fatalf("an Open a day after the last probe sent %d probe PUTs; its first write should", n)
	}
	appendNew(t, last, "a day later")
	if n := count(fb.Take()); n == 0 {
		t.Fatal("the first write a day after the last probe sent none")
	}
}

// TestCheckpointLinger: the checkpoint of an append to an indexed
// session waits a moment for the appends after it: a burst of appends
// (a turn's tool calls) takes one commit of the index log, and Flush
// does not wait out the linger.
func TestCheckpointLinger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	w := e.openOn(t, fb)
	id := appendNew(t, w, "the prompt") // the first append waits for its entry
	fb.Take()
	burst := time.Now()
	for i := range 5 {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{msg(agent.RoleAssistant, fmt.Sprint("step ", i))}); err != nil {
			t.Fatal(err)
		}
		// Apart enough that each would take its own commit without
		// the linger, close enough that the five fit in it.
		time.Sleep(20 * time.Millisecond)
	}
	fitted := time.Since(burst) < 200*time.Millisecond // a loaded machine may spread the five past the linger
	start := time.Now()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	commits := 0
	for _, o := range fb.Take() {
		if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") {
			commits++
		}
	}
	if commits == 0 || commits > 2 || fitted && commits != 1 {
		t.Errorf("5 appends in a burst took %d commits, want 1 (2 if they did not fit in the linger: fitted %v)", commits, fitted)
	}
	t.Logf("5 appends: %d commits; Flush took %s", commits, took)
	if list, err := e.open(t).List(ctx); err != nil || len(list) != 1 || list[0].MessageCount != 6 {
		t.Fatalf("list after the flush: %v, %+v", err, list)
	}
}

// TestOpenReadsCommitsSinceCache: a Store whose machine cached the
// catalog a few commits ago reads, during Open and with the newest
// commit, the commits since; a listing of the catalog then applies them
// without reading any commit again.
func TestOpenReadsCommitsSinceCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	w := e.open(t)
	for i := range 3 {
		appendNew(t, w, fmt.Sprint("before ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if logs, err := e.open(t, objstore.WithIndexCache(cache)).Logs(ctx); err != nil || len(logs) != 3 {
		t.Fatalf("logs: %v, %d", err, len(logs))
	}
	cached, _ := e.newestCommit(t)
	w = e.open(t)
	for i := range 3 {
		appendNew(t, w, fmt.Sprint("after ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := e.newestCommit(t)
	if n-cached < 2 {
		t.Fatalf("test setup: the log moved by %d commits", n-cached)
	}
	fb := e.faults(t)
	r := e.openOn(t, fb, objstore.WithIndexCache(cache))
	opened := fb.Take()
	for k := cached; k <= n; k++ {
		if !slices.ContainsFunc(opened, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == commitKey(k) }) {
			t.Errorf("Open did not read commit %d (cached %d, newest %d): %+v", k, cached, n, opened)
		}
	}
	logs, err := r.Logs(ctx)
	if err != nil || len(logs) != 6 {
		t.Fatalf("logs: %v, %d", err, len(logs))
	}
	for _, o := range fb.Take() {
		if o.Method == "GET" && strings.HasPrefix(o.Key, "index/") && o.Key != commitKey(n+1) {
			t.Errorf("the listing read %s again", o.Key)
		}
	}
}

// TestExitCommitsOnce: a turn's exit (a prompt, answers appended while
// the checkpoint lingers, then Close) commits the index once: the
// checkpoint's commit folds the session into a run, whose page and the
// project's head go out together, the head read at the append; so Close
// takes two round trips (it took six: the checkpoint's commit, a reading
// of the newest commit, the page, the head's GET and PUT, the fold's
// commit). The session lists at its longest from the run and the head
// afterwards, and the set is empty.
func TestExitCommitsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	seed := e.open(t)
	appendIn(t, seed, projectA, "an older session of the project")
	if err := seed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	w := e.openOn(t, fb)
	id := appendIn(t, w, projectA, "the prompt") // waits for its entry
	for i := range 3 {
		if err := w.AppendMessagesIn(ctx, projectA, id, []agent.PersistentMessage{msg(agent.RoleAssistant, fmt.Sprint("answer ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the answers' turn, shorter than the linger
	fb.Take()
	fb.SetDelay(100 * time.Millisecond) // so that a loaded machine does not split a round trip
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ops := fb.Take()
	commits := 0
	for _, o := range ops {
		if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") {
			commits++
		}
	}
	if commits != 1 || opRounds(ops) > 2 {
		t.Errorf("Close: %d commits in %d round trips, want 1 in 2: %s", commits, opRounds(ops), describeOps(ops))
	}
	_, c := e.newestCommit(t)
	if len(c.Unfolded) != 0 {
		t.Fatalf("after Close the set holds %v", slices.Collect(maps.Keys(c.Unfolded)))
	}
	if got := e.runEntries(t)[id].Info.MessageCount; got != 4 {
		t.Fatalf("the runs hold the session with %d messages, want 4", got)
	}
	r := e.open(t)
	page, err := r.ListNewestIn(ctx, 10, projectA, nil)
	if err != nil || len(page) != 2 || page[0].ID != id || page[0].MessageCount != 4 {
		t.Fatalf("the project's page: %v, %+v", err, page)
	}
	if report, err := r.CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check: %v, %+v", err, report)
	}
}

// TestExitFoldOfDeletedSession: a session deleted by another Store
// before its writer's exit is folded by that exit into a run by the
// commit the writer knew (its checkpoint's, lingering or, for a prompt
// alone, made a moment before), then purged from the run once the commit
// shows the deletion: no run page holds its summary, and no listing
// shows it.
func TestExitFoldOfDeletedSession(t *testing.T) {
	t.Parallel()
	for _, lingering := range []bool{true, false} {
		t.Run(fmt.Sprint("lingering=", lingering), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			w := e.open(t)
			id := appendIn(t, w, projectA, "the prompt")
			if lingering {
				if err := w.AppendMessagesIn(ctx, projectA, id, []agent.PersistentMessage{msg(agent.RoleAssistant, "the answer")}); err != nil {
					t.Fatal(err)
				}
			}
			other := e.open(t)
			cps, err := other.Checkpoints(ctx, id)
			if err != nil || len(cps) == 0 {
				t.Fatalf("checkpoints: %v, %v", err, cps)
			}
			if err := other.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: cps[len(cps)-1]}); err != nil {
				t.Fatal(err)
			}
			if err := other.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Logf("the writer's Close: %v", err)
			}
			if e, ok := e.runEntries(t)[id]; ok {
				t.Fatalf("a run page holds the deleted session: %+v", e)
			}
			list, err := e.open(t).List(ctx)
			if err != nil || slices.ContainsFunc(list, func(info agent.SessionInfo) bool { return info.ID == id }) {
				t.Fatalf("list after the deletion: %v, %+v", err, list)
			}
		})
	}
}

// runsOfOne has n agents exit, each after a turn of a new session, so
// that the log names n runs of one entry.
func runsOfOne(t *testing.T, e *env, want map[string]int, n int) {
	t.Helper()
	for i := range n {
		agentExit(t, e, want, fmt.Sprint("agent ", i))
	}
	if _, c := e.newestCommit(t); len(c.Runs) != n {
		t.Fatalf("after %d exits the log names %d pages, want %d runs of one", n, len(c.Runs), n)
	}
}

// checkMergedRuns checks that the newest commit names one run of n
// entries and no other, that every run page the bucket holds is named
// by it or in its Discarded (for the next writer to delete), and the
// listing; it returns the commit.
func checkMergedRuns(t *testing.T, e *env, want map[string]int, n int, when string) *manifest.IndexShard {
	t.Helper()
	_, c := e.newestCommit(t)
	if len(c.Runs) != 1 || c.Runs[0].Sessions != n || len(c.Unfolded) != 0 {
		t.Errorf("%s: runs %+v (want one of %d), %d unfolded (want 0)", when, c.Runs, n, len(c.Unfolded))
	}
	checkPagesAccounted(t, e, c, when)
	checkListing(t, e, when, want)
	return c
}

// checkPagesAccounted checks that every run page the bucket holds is
// named by commit c or in its Discarded.
func checkPagesAccounted(t *testing.T, e *env, c *manifest.IndexShard, when string) {
	t.Helper()
	for _, key := range e.runObjects(t) {
		named := slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Key == key })
		if !named && !slices.Contains(c.Discarded, key) {
			t.Errorf("%s: run page %s is stored, neither named nor discarded (runs %+v, discarded %v)", when, key, c.Runs, c.Discarded)
		}
	}
}

// TestExitMergesItsRun: the exit whose run completes a tier (the fourth
// one-session run) writes the merged run, its own entry in it, in the
// place of its own run (exitmerge.go): the pages merged were read at its
// append (prefetchForExit), so its Close reads none and is two round trips
// (the merged run's page, its commit, which lists the pages merged in
// Discarded), not five (the run, its commit, the merged run, its commit,
// the deletion), with one commit. The next exit deletes the pages beside
// its own run's and takes them out of the list.
func TestExitMergesItsRun(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	want := map[string]int{}
	runsOfOne(t, e, want, 3)
	ops := tracedExit(t, e, want, "the fourth")
	reads, commits := 0, 0
	for _, o := range ops {
		switch {
		case o.Method == "GET" && runKeyRe.MatchString(o.Key):
			reads++
		case o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/"):
			commits++
		}
	}
	if reads != 0 || commits != 1 || opRounds(ops) > 2 {
		t.Errorf("the fourth exit: %d pages read (want 0), %d commits (want 1), %d round trips (want 2): %s", reads, commits, opRounds(ops), describeOps(ops))
	}
	if c := checkMergedRuns(t, e, want, 4, "after the fourth exit"); len(c.Discarded) != 3 {
		t.Errorf("after the fourth exit: discarded %v, want the 3 pages merged", c.Discarded)
	}
	ops = agentExit(t, e, want, "the fifth")
	_, c := e.newestCommit(t)
	if stored := e.runObjects(t); len(c.Discarded) != 0 || len(stored) != len(c.Runs) {
		t.Errorf("after the next exit: %d run pages stored, %d named, discarded %v (want none): %s", len(stored), len(c.Runs), c.Discarded, describeOps(ops))
	}
	checkListing(t, e, "after the next exit", want)
}

// TestExitMergeAfterNewerRun: an exit that did not know, at its
// appends, the run that made the merge due (another agent's exit came
// between) merges after its commit, as before exits took the merge in.
func TestExitMergeAfterNewerRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	runsOfOne(t, e, want, 2)
	w := e.open(t)
	want[appendNew(t, w, "the fourth")] = 1
	agentExit(t, e, want, "the third")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkMergedRuns(t, e, want, 4, "after the fourth exit")
}

// TestExitMergeVoided: an exit whose run took in a merge that another
// writer made first (its commit no longer names the pages read) is
// voided: the run's entry stays in the unfolded set, the page it wrote
// is deleted, and Close folds the entry into a run of its own. So both
// where the exit's fold goes (Close's own fold of a session whose
// checkpoint went before it, and the closing checkpoint's commit, when
// the answer is appended just before Close); without the entry kept in
// the set, the checkpoint's commit took it out with no page holding it.
func TestExitMergeVoided(t *testing.T) {
	t.Parallel()
	for _, answer := range []bool{false, true} {
		t.Run(fmt.Sprint("answer before Close ", answer), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			want := map[string]int{}
			runsOfOne(t, e, want, 3)
			fb := e.faults(t)
			w := e.openOn(t, fb)
			late := appendNew(t, w, "the late one")
			want[late] = 1
			objstore.WaitPrefetches(ctx, w)
			// Another agent's exit merges the three runs (with its own) first.
			agentExit(t, e, want, "the fourth")
			if _, c := e.newestCommit(t); len(c.Runs) != 1 || c.Runs[0].Sessions != 4 {
				t.Fatalf("after the other exit: runs %+v, want one of 4", c.Runs)
			}
			if answer {
				if err := w.AppendMessages(ctx, late, []agent.PersistentMessage{msg(agent.RoleAssistant, "the answer")}); err != nil {
					t.Fatal(err)
				}
				want[late] = 2
			}
			fb.Take()
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			ops := fb.Take()
			// The first run page the exit wrote is the merged one, which
			// its commit voided.
			i := slices.IndexFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && runKeyRe.MatchString(o.Key) })
			if i < 0 {
				t.Fatalf("the late exit wrote no run page: %s", describeOps(ops))
			}
			first := ops[i].Key
			voided := slices.ContainsFunc(ops, func(o objstore.Op) bool {
				return o.Method == "DELETE" && o.Key == first || o.Method == "DELETES" && slices.Contains(o.Keys, first)
			})
			if _, c := e.newestCommit(t); !voided || slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Key == first }) {
				t.Errorf("the late exit's first page %s was not voided and deleted: it did not take in the merge, so the test tests nothing: %s", first, describeOps(ops))
			}
			_, c := e.newestCommit(t)
			if _, ok := c.Unfolded[late]; ok {
				t.Errorf("the late session is still unfolded after Close")
			}
			if _, ok := e.runEntries(t)[late]; !ok {
				t.Errorf("the late session is in no run page: runs %+v: %s", c.Runs, describeOps(ops))
			}
			checkPagesAccounted(t, e, c, "after the voided merge")
			checkListing(t, e, "after the voided merge", want)
		})
	}
}
