package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// runKeyRe matches a page of an index run.
var runKeyRe = regexp.MustCompile(`^index/run/[0-9a-f]+-[0-9]+\.json\.zst$`)

// bulkWrite appends one message to each of n new sessions and to each
// session of grow through a Store that defers its index (a sync), and
// flushes it; it returns the new sessions' ids.
func bulkWrite(t *testing.T, e *env, b objstore.Bucket, n int, grow []string, opts ...objstore.Option) []string {
	t.Helper()
	ctx := context.Background()
	opts = append([]objstore.Option{objstore.WithDeferredIndex()}, opts...)
	var w *objstore.Store
	if b != nil {
		w = e.openOn(t, b, opts...)
	} else {
		w = e.open(t, opts...)
	}
	var ids []string
	for i := range n {
		ids = append(ids, appendNew(t, w, fmt.Sprintf("bulk %d", i)))
	}
	for _, id := range grow {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{msg(agent.RoleAssistant, "grown")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// runObjects is the keys of the run pages in the env's bucket.
func (e *env) runObjects(t *testing.T) []string {
	t.Helper()
	var keys []string
	for _, o := range e.rawBucket(t) {
		if k := strings.TrimPrefix(o.key, "pfx/"); runKeyRe.MatchString(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// runEntries is the entries the run pages in the env's bucket hold, the
// longest of a session in several.
func (e *env) runEntries(t *testing.T) map[string]manifest.IndexEntry {
	t.Helper()
	codec, _ := manifest.NewCodec()
	entries := map[string]manifest.IndexEntry{}
	for _, o := range e.rawBucket(t) {
		k := strings.TrimPrefix(o.key, "pfx/")
		if !runKeyRe.MatchString(k) {
			continue
		}
		page, err := codec.DecodeIndexShard(k, o.data)
		if err != nil {
			t.Fatalf("run page %s: %v", k, err)
		}
		for id, en := range page.Sessions {
			if old, ok := entries[id]; !ok || old.Length < en.Length {
				entries[id] = en
			}
		}
	}
	return entries
}

// runPage is run page key (relative to the prefix) of the env's
// plaintext bucket, read behind the store's back.
func (e *env) runPage(t *testing.T, key string) *manifest.IndexShard {
	t.Helper()
	codec, _ := manifest.NewCodec()
	page, err := codec.DecodeIndexShard(key, e.rawObject(t, e.key(key)))
	if err != nil {
		t.Fatalf("run page %s: %v", key, err)
	}
	return page
}

// checkListing checks that another Store lists exactly want (id →
// message count), resolves each by a prefix, and that the index checks
// clean.
func checkListing(t *testing.T, e *env, when string, want map[string]int) {
	t.Helper()
	ctx := context.Background()
	r := e.open(t)
	list, err := r.List(ctx)
	if err != nil || len(list) != len(want) {
		t.Fatalf("%s: list: %v, %d sessions, want %d", when, err, len(list), len(want))
	}
	for _, info := range list {
		if want[info.ID] != info.MessageCount {
			t.Fatalf("%s: %s listed with %d messages, want %d", when, info.ID, info.MessageCount, want[info.ID])
		}
	}
	for id, n := range want {
		s, err := r.Resolve(ctx, id[:8])
		if err != nil || s.Info.ID != id || s.Info.MessageCount != n {
			t.Fatalf("%s: resolve %s: %v", when, id[:8], err)
		}
		break
	}
	if report, err := r.CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("%s: check: %v, %+v", when, err, report)
	}
}

// TestRunBulkWrite: a bulk write (a Store that defers its index, more
// than a few sessions) writes its entries as a run, and no partition;
// the commit names the run's page; every reader lists and resolves the
// sessions at their longest, and the index checks clean.
func TestRunBulkWrite(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	want := map[string]int{}
	seed := e.open(t, partitionsAtClose())
	var seeded []string
	for i := range 20 {
		id := appendNew(t, seed, fmt.Sprintf("seeded %d", i))
		seeded, want[id] = append(seeded, id), 1
	}
	if err := seed.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	for _, id := range bulkWrite(t, e, fb, 30, seeded[:5]) {
		want[id] = 1
	}
	for _, id := range seeded[:5] {
		want[id] = 2
	}
	var pagePuts int
	for _, o := range fb.Take() {
		if o.Method == "PUT" && partitionKeyRe.MatchString("pfx/"+o.Key) {
			t.Errorf("the bulk write wrote partition %s", o.Key)
		}
		if o.Method == "PUT" && runKeyRe.MatchString(o.Key) {
			pagePuts++
		}
	}
	n, c := e.newestCommit(t)
	if pagePuts != 1 || len(c.Runs) != 1 || c.Runs[0].Sessions != 35 || c.Runs[0].Commit > n {
		t.Fatalf("%d pages written; the newest commit (%d) names %+v, want one page of 35 sessions", pagePuts, n, c.Runs)
	}
	if got := e.runObjects(t); !slices.Equal(got, []string{c.Runs[0].Key}) {
		t.Fatalf("run objects %v, want %s", got, c.Runs[0].Key)
	}
	checkListing(t, e, "after the bulk write", want)

	// A bulk write past the fold limit writes the partitions: its run
	// would be folded at once. (The seed's fold counted the index as
	// about 256 sessions, one in each partition it wrote: the limit is
	// an eighth of that, 32.)
	big := bulkWrite(t, e, nil, 40, nil, objstore.WithRunFoldAt(20))
	for _, id := range big {
		want[id] = 1
	}
	if got := e.runObjects(t); len(got) != 1 {
		t.Fatalf("run objects after a bulk write past the limit: %v, want the one before", got)
	}
	parts, _ := e.partitions(t)
	for _, id := range big {
		if _, ok := parts[id]; !ok {
			t.Fatalf("%s, of a bulk write past the limit, is not in its partition", id)
		}
	}
	checkListing(t, e, "after a bulk write past the limit", want)
}

// TestRunsMergeAndFold: runs of one size tier are merged into one, and
// runs past their limit are folded into the partitions, which leaves no
// page; readers list every session at its longest throughout, and a
// reader with a catalog on disk catches up with each bulk write by
// reading its pages, never a partition, but after a fold.
func TestRunsMergeAndFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	want := map[string]int{}
	var all []string
	reader := func(when string, first bool) {
		t.Helper()
		fb := e.faults(t)
		r := e.openOn(t, fb, objstore.WithIndexCache(cache))
		fb.Take()
		logs, err := r.Logs(ctx)
		if err != nil || len(logs) != len(want) {
			t.Fatalf("%s: logs: %v, %d, want %d", when, err, len(logs), len(want))
		}
		for _, l := range logs {
			if l.Info.MessageCount != want[l.Info.ID] {
				t.Fatalf("%s: %s has %d messages, want %d", when, l.Info.ID, l.Info.MessageCount, want[l.Info.ID])
			}
		}
		for _, o := range fb.Take() {
			if !first && partitionKeyRe.MatchString("pfx/"+o.Key) {
				t.Fatalf("%s: the cached catalog read partition %s", when, o.Key)
			}
		}
	}
	first := bulkWrite(t, e, nil, 1, nil, partitionsAtClose())
	want[first[0]] = 1
	reader("before the runs", true)
	for round := range 5 {
		// More than manifest.LogChanges each: the commits omit them.
		ids := bulkWrite(t, e, nil, 70, all[max(len(all)-3, 0):], objectsFoldAt(1000))
		for _, id := range all[max(len(all)-3, 0):] {
			want[id]++
		}
		for _, id := range ids {
			want[id] = 1
		}
		all = append(all, ids...)
		_, c := e.newestCommit(t)
		runs := map[int64]bool{}
		for _, p := range c.Runs {
			runs[p.Commit] = true
		}
		// Runs of about 70 entries, one size tier: the fourth makes
		// the tier's merge due (runsToMerge).
		if want := []int{1, 2, 3, 1, 2}[round]; len(runs) != want {
			t.Fatalf("round %d: the newest commit names %d runs, want %d", round, len(runs), want)
		}
		reader(fmt.Sprint("round ", round), false)
	}
	if _, c := e.newestCommit(t); len(c.Runs) == 0 || len(e.runObjects(t)) != len(c.Runs) {
		t.Fatalf("after the merge: %d pages named, %d stored", len(c.Runs), len(e.runObjects(t)))
	}
	checkListing(t, e, "after the merge", want)
	// Past the limit: folded.
	ids := bulkWrite(t, e, nil, 70, nil, objectsFoldAt(300))
	for _, id := range ids {
		want[id] = 1
	}
	if _, c := e.newestCommit(t); len(c.Runs) != 0 || len(e.runObjects(t)) != 0 {
		t.Fatalf("after the fold: %d pages named, %v stored", len(c.Runs), e.runObjects(t))
	}
	parts, _ := e.partitions(t)
	for id, n := range want {
		if parts[id].Info.MessageCount != n {
			t.Fatalf("after the fold the partition holds %+v for %s, want %d messages", parts[id], id, n)
		}
	}
	// A fold wrote the runs' entries to the partitions and deleted the
	// pages: a catalog that missed them reads the partitions once (once
	// per eighth of the index changed), then catches up through pages
	// again.
	reader("after the fold", true)
	checkListing(t, e, "after the fold", want)
	for _, id := range bulkWrite(t, e, nil, 70, nil) {
		want[id] = 1
	}
	reader("after the fold and a run", false)
}

// partitionsAtClose makes a Store's Close leave its sessions' entries in
// their partitions (through a run folded at once), as the tests that
// read or alter a partition need.
func partitionsAtClose() objstore.Option { return objstore.WithPartitionsAtClose() }

// objectsFoldAt is WithRunFoldAt, spelled for the tests' bulk writes.
func objectsFoldAt(n int) objstore.Option { return objstore.WithRunFoldAt(n) }

// TestRunDeletionPurges: deleting a session a run holds rewrites the
// page that holds it without it, in its run, and deletes the old page
// (it holds the summary); the session is listed nowhere, the rest
// everywhere.
func TestRunDeletionPurges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	ids := bulkWrite(t, e, nil, 20, nil)
	pages := e.runObjects(t)
	if len(pages) != 1 {
		t.Fatalf("run pages %v, want one", pages)
	}
	w := e.open(t)
	at, err := store.Head(ctx, w, ids[3])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, store.Tombstone{ID: ids[3], Deleted: time.Now(), At: at}); err != nil {
		t.Fatal(err)
	}
	_, c := e.newestCommit(t)
	if got := e.runObjects(t); len(got) != 1 || got[0] == pages[0] || len(c.Runs) != 1 || c.Runs[0].Key != got[0] || c.Runs[0].Sessions != 19 {
		t.Fatalf("after the deletion the run pages %v are stored, %+v named; want the page rewritten without the session", got, c.Runs)
	}
	if parts, _ := e.partitions(t); len(parts) != 0 {
		t.Fatalf("the deletion folded %d sessions into the partitions; a rewrite of the page writes none", len(parts))
	}
	for _, o := range e.rawBucket(t) {
		if strings.HasPrefix(o.key, "pfx/index/") && strings.Contains(string(o.data), "bulk 3") {
			t.Fatalf("%s still holds the deleted session's summary", o.key)
		}
	}
	want := map[string]int{}
	for _, id := range ids {
		if id != ids[3] {
			want[id] = 1
		}
	}
	checkListing(t, e, "after the deletion", want)
}

// checkRepairedRuns checks the index after a repair that folded the
// runs: no run page is stored, and ids, sessions of one message each,
// all list.
func checkRepairedRuns(t *testing.T, e *env, ids []string) {
	t.Helper()
	if got := e.runObjects(t); len(got) != 0 {
		t.Fatalf("after the repair the run pages %v are still stored", got)
	}
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	checkListing(t, e, "after the repair", want)
}

// TestRunDamagedPage: a page that does not decode, or is missing while
// the newest commit names it, hides only what it alone holds: the
// listing says the index is damaged and lists the rest; CheckIndex
// names the page; RepairIndex folds the runs, retires the page and
// indexes its sessions from their own objects.
func TestRunDamagedPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, missing := range []bool{false, true} {
		e := newMemEnv(t)
		seeded := bulkWrite(t, e, nil, 5, nil, partitionsAtClose())
		ids := bulkWrite(t, e, nil, 20, nil)
		pages := e.runObjects(t)
		if len(pages) != 1 {
			t.Fatalf("run pages %v, want one", pages)
		}
		if missing {
			objstore.MemDelete(e.mem, e.key(pages[0]))
		} else {
			d := e.rawObject(t, e.key(pages[0]))
			d[len(d)/2] ^= 0x01
			e.putRaw(t, e.key(pages[0]), d)
		}
		list, err := e.open(t).List(ctx)
		if !errors.Is(err, objstore.ErrIndexDamaged) || len(list) != len(seeded) {
			t.Fatalf("missing %v: list with a damaged page: %v, %d sessions, want the %d the partitions hold", missing, err, len(list), len(seeded))
		}
		if logs, err := e.open(t, objstore.WithIndexCache(t.TempDir())).Logs(ctx); !errors.Is(err, objstore.ErrIndexDamaged) || len(logs) != len(seeded) {
			t.Fatalf("missing %v: the catalog with a damaged page: %v, %d sessions", missing, err, len(logs))
		}
		report, err := e.open(t).CheckIndex(ctx)
		if err != nil || !slices.Contains(report.Damaged, pages[0]) || len(report.Unindexed) != len(ids) {
			t.Fatalf("missing %v: check with a damaged page: %v, %+v", missing, err, report)
		}
		if _, err := e.open(t).RepairIndex(ctx); err != nil {
			t.Fatal(err)
		}
		checkRepairedRuns(t, e, append(seeded, ids...))
		if _, c := e.newestCommit(t); len(c.Runs) != 0 {
			t.Fatalf("after the repair the newest commit names %+v", c.Runs)
		}
	}
}

// TestRunDamagedPartition: a repair of an index whose runs hold entries
// of a damaged partition folds the runs into the other partitions,
// retires the pages, and rebuilds the damaged one from the sessions,
// where its fold of the runs failed on that partition and so did the
// whole repair.
func TestRunDamagedPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	seeded := bulkWrite(t, e, nil, 5, nil, partitionsAtClose())
	ids := bulkWrite(t, e, nil, 20, nil)
	if len(e.runObjects(t)) == 0 {
		t.Fatal("the bulk write left no run")
	}
	// The partition of one of the run's sessions, as garbage.
	e.putRaw(t, e.key("index/"+ids[0][:2]+".json.zst"), []byte("this is not an index partition"))
	report, err := e.open(t).RepairIndex(ctx)
	if err != nil {
		t.Fatalf("repair with a damaged partition the runs fold into: %v", err)
	}
	if !slices.Contains(report.Rebuilt, ids[0][:2]) {
		t.Fatalf("the repair rebuilt %v, not the damaged partition %s", report.Rebuilt, ids[0][:2])
	}
	checkRepairedRuns(t, e, append(seeded, ids...))
	if _, err := e.open(t).CheckIndex(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRunGoneWhileReading: a reader whose commit names a page that a
// fold deleted since (here Open's snapshot, WithOpenSnapshot, which
// serves its reading for a moment) reads the newest commit and the
// partitions again, and lists every session.
func TestRunGoneWhileReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	live := 0
	for _, opts := range [][]objstore.Option{{objstore.WithOpenSnapshot()}, {objstore.WithOpenSnapshot(), objstore.WithIndexCache(t.TempDir())}} {
		// A run, one page (20 entries), which a reader's commit names.
		ids := bulkWrite(t, e, nil, 20, nil)
		live += len(ids)
		before := e.runObjects(t)
		r := e.open(t, opts...)
		// The deletion of a session of it rewrites the page without it,
		// and deletes the old one.
		w := e.open(t)
		at, err := store.Head(ctx, w, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Delete(ctx, store.Tombstone{ID: ids[0], Deleted: time.Now(), At: at}); err != nil {
			t.Fatal(err)
		}
		live--
		if got := e.runObjects(t); !slices.ContainsFunc(before, func(k string) bool { return !slices.Contains(got, k) }) {
			t.Fatalf("run pages %v after the deletion, %v before: no page the reader's commit names is gone", got, before)
		}
		logs, err := r.Logs(ctx)
		if err != nil || len(logs) != live {
			t.Fatalf("logs after the page went: %v, %d, want %d", err, len(logs), live)
		}
	}
}

// TestCatalogCachedAtCommitZero: a catalog read from a bucket whose log
// has no commit yet (a new bucket) is cached too, and the next run brings
// it up to date from commit 1 on: after a first push (a run), a listing
// of every session reads the commits and the run's pages, not the 256
// partitions.
func TestCatalogCachedAtCommitZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	if logs, err := e.open(t, objstore.WithIndexCache(cache)).Logs(ctx); err != nil || len(logs) != 0 {
		t.Fatalf("logs of a new bucket: %v, %d", err, len(logs))
	}
	ids := bulkWrite(t, e, nil, 100, nil)
	fb := e.faults(t)
	r := e.openOn(t, fb, objstore.WithIndexCache(cache))
	logs, err := r.Logs(ctx)
	if err != nil || len(logs) != len(ids) {
		t.Fatalf("logs after the first push: %v, %d, want %d", err, len(logs), len(ids))
	}
	for _, o := range fb.Take() {
		if partitionKeyRe.MatchString("pfx/" + o.Key) {
			t.Fatalf("the catalog cached at commit 0 read partition %s", o.Key)
		}
	}
}

// TestNewPrefixCatalog: a Store that creates the prefix knows its index
// is empty until something is committed: a sync's listings of it (the
// catalog, then the tombstones) read no partition.
func TestNewPrefixCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithDeferredIndex(), objstore.WithIndexCache(t.TempDir()))
	if logs, err := s.Logs(ctx); err != nil || len(logs) != 0 {
		t.Fatalf("logs of a new prefix: %v, %d", err, len(logs))
	}
	if _, err := s.Tombstones(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range fb.Take() {
		if partitionKeyRe.MatchString("pfx/" + o.Key) {
			t.Fatalf("the listings of a new prefix read partition %s", o.Key)
		}
	}
}

// TestRunsOnServers: the runs on every server the matrix holds (MinIO,
// versitygw, gofakes3), encrypted or not: a bulk write's pages are
// created and read back, merged past four runs and folded past the
// limit, a deletion purges the pages that cover its session, and the
// index checks clean throughout.
func TestRunsOnServers(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, runsOnServer)
}

// runsOnServer is TestRunsOnServers on srv.
func runsOnServer(t *testing.T, srv *miniotest.Server) {
	for _, encrypted := range []bool{false, true} {
		e := newEnvOn(t, srv)
		var opts []objstore.Option
		if encrypted {
			opts = append(opts, objstore.WithKey(newKey(t)))
		}
		want := map[string]int{}
		open := func(more ...objstore.Option) *objstore.Store {
			return e.open(t, append(slices.Clone(opts), more...)...)
		}
		for round := range 5 {
			w := open(objstore.WithDeferredIndex(), objstore.WithRunFoldAt(60))
			for i := range 10 {
				id := appendNew(t, w, fmt.Sprintf("round %d, session %d", round, i))
				want[id] = 1
			}
			if err := w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if got := e.runObjects(t); len(got) == 0 {
			t.Fatalf("encrypted %v: no run page after the bulk writes", encrypted)
		}
		r := open()
		list, err := r.List(context.Background())
		if err != nil || len(list) != len(want) {
			t.Fatalf("encrypted %v: list: %v, %d sessions, want %d", encrypted, err, len(list), len(want))
		}
		if report, err := r.CheckIndex(context.Background()); err != nil || !report.Clean() {
			t.Fatalf("encrypted %v: check: %v, %+v", encrypted, err, report)
		}
		// Past the limit of 60: folded, no page left.
		w := open(objstore.WithDeferredIndex(), objstore.WithRunFoldAt(60))
		for i := range 12 {
			id := appendNew(t, w, fmt.Sprintf("last round, session %d", i))
			want[id] = 1
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := e.runObjects(t); len(got) != 0 {
			t.Fatalf("encrypted %v: run pages %v after the fold", encrypted, got)
		}
		// A run again, and the deletion of one of its sessions.
		w = open(objstore.WithDeferredIndex())
		var last []string
		for i := range 10 {
			id := appendNew(t, w, fmt.Sprintf("after the fold, session %d", i))
			last, want[id] = append(last, id), 1
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		before := e.runObjects(t)
		d := open()
		at, err := store.Head(context.Background(), d, last[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(context.Background(), store.Tombstone{ID: last[0], Deleted: time.Now(), At: at}); err != nil {
			t.Fatal(err)
		}
		delete(want, last[0])
		if got := e.runObjects(t); len(got) != 1 || slices.Contains(before, got[0]) {
			t.Fatalf("encrypted %v: run pages %v after the deletion, %v before: want the page rewritten without the session", encrypted, got, before)
		}
		list, err = open().List(context.Background())
		if err != nil || len(list) != len(want) {
			t.Fatalf("encrypted %v: list at the end: %v, %d sessions, want %d", encrypted, err, len(list), len(want))
		}
		if report, err := open().CheckIndex(context.Background()); err != nil || !report.Clean() {
			t.Fatalf("encrypted %v: check at the end: %v, %+v", encrypted, err, report)
		}
		checkUnnamedPagesRemoved(t, e, opts...)
	}
}

// TestRepairRemovesUnnamedPages: repair deletes a run page no commit
// names (a write whose commit failed left it) once it is a day old, and
// not before (its commit may be on its way).
func TestRepairRemovesUnnamedPages(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	bulkWrite(t, e, nil, 20, nil)
	checkUnnamedPagesRemoved(t, e)
}

// TestFullReadingSweepsUnnamedPages: a full reading of the catalog (a
// sync's first of the day, with the index cache) deletes, beside the
// partitions' reads, the run pages no commit names once they are a day
// old, as repair does, so that what a write cut short left (the
// summaries of sessions deleted since among them) does not wait for a
// repair. It keeps a younger one and every named one, and a reading
// from the cache lists no page.
func TestFullReadingSweepsUnnamedPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	ids := bulkWrite(t, e, nil, 100, nil)
	named := e.runObjects(t)
	if len(named) == 0 {
		t.Fatal("no run page after the bulk write")
	}
	const unnamed = "index/run/00000000deadbeef-000.json.zst"
	e.putRaw(t, e.key(unnamed), []byte("a page whose write's commit failed"))
	at := func(s *objstore.Store, d time.Duration) *objstore.Store {
		objstore.SetNow(s, func() time.Time { return time.Now().Add(d) })
		return s
	}
	list := func(s *objstore.Store) {
		t.Helper()
		if logs, err := s.Logs(ctx); err != nil || len(logs) != len(ids) {
			t.Fatalf("logs: %v, %d of %d", err, len(logs), len(ids))
		}
	}
	// Young: kept.
	list(e.open(t))
	if !slices.Contains(e.runObjects(t), unnamed) {
		t.Fatal("a full reading deleted an unnamed page younger than a day")
	}
	// A day old, read from a cache 5 hours old: no page is listed.
	cache := t.TempDir()
	list(at(e.open(t, objstore.WithIndexCache(cache)), 20*time.Hour))
	fb := e.faults(t)
	list(at(e.openOn(t, fb, objstore.WithIndexCache(cache)), 25*time.Hour))
	if ops := fb.Take(); slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "LIST" && strings.HasPrefix(o.Key, "index/run/") }) {
		t.Errorf("a reading from the cache listed the run pages: %s", describeOps(ops))
	}
	if !slices.Contains(e.runObjects(t), unnamed) {
		t.Fatal("a reading from the cache deleted an unnamed page")
	}
	// A day old, read whole: deleted, and nothing else.
	list(at(e.open(t), 25*time.Hour))
	if got := e.runObjects(t); !slices.Equal(got, named) {
		t.Fatalf("run pages after a full reading a day later: %v, want %v (the unnamed one deleted)", got, named)
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check after the sweep: %v, %+v", err, report)
	}
}

// TestCommitRefusesStalePages: a commit does not first name a run page
// its writer sent more than half a day before (a process suspended
// between its pages and their commit, whose pages a sweep may have
// deleted meanwhile as unnamed): the flush fails, and the next one
// writes the sessions in new pages and commits them.
func TestCommitRefusesStalePages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	var mu sync.Mutex
	var shift time.Duration
	w := e.openOn(t, fb, objstore.WithDeferredIndex())
	objstore.SetNow(w, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(shift)
	})
	var ids []string
	for i := range 100 {
		ids = append(ids, appendNew(t, w, fmt.Sprintf("bulk %d", i)))
	}
	// The lid shuts as the first page goes out, for 13 hours.
	var stale []string
	fb.SetFault(func(o objstore.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/run/") {
			if len(stale) == 0 {
				shift += 13 * time.Hour
			}
			stale = append(stale, o.Key)
		}
		return nil
	})
	if err := w.Flush(ctx); !errors.Is(err, objstore.ErrStalePages) {
		t.Fatalf("flush of pages sent 13 hours ago: %v, want %v", err, objstore.ErrStalePages)
	}
	fb.SetFault(nil)
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("the next flush: %v", err)
	}
	r := e.open(t)
	if logs, err := r.Logs(ctx); err != nil || len(logs) != len(ids) {
		t.Fatalf("logs after the next flush: %v, %d of %d", err, len(logs), len(ids))
	}
	_, c := e.newestCommit(t)
	for _, p := range c.Runs {
		if slices.Contains(stale, p.Key) {
			t.Errorf("the newest commit names %s, sent 13 hours before its commit", p.Key)
		}
	}
	if len(c.Runs) == 0 {
		t.Error("the next flush's commit names no run page")
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkUnnamedPagesRemoved puts a run page no commit names in e's bucket
// and checks that repair keeps it while it is young, deletes it (and
// says so) once it is a day old, and leaves the index clean. The bucket
// (S3's LastModified, through list) says how old it is.
func checkUnnamedPagesRemoved(t *testing.T, e *env, opts ...objstore.Option) {
	t.Helper()
	ctx := context.Background()
	const key = "index/run/00000000deadbeef-000.json.zst"
	e.putRaw(t, e.key(key), []byte("a page whose write's commit failed"))
	if report, err := e.open(t, opts...).CheckIndex(ctx); err != nil || !report.Clean() || !slices.Equal(report.Unnamed, []string{key}) {
		t.Fatalf("check with an unnamed page: %v, clean %v, unnamed %v, want %v", err, report.Clean(), report.Unnamed, []string{key})
	}
	report, err := e.open(t, opts...).RepairIndex(ctx)
	if err != nil || len(report.Removed) != 0 || !slices.Contains(e.runObjects(t), key) {
		t.Fatalf("repair of a young unnamed page: %v, removed %v, pages %v", err, report.Removed, e.runObjects(t))
	}
	later := e.open(t, opts...)
	objstore.SetNow(later, func() time.Time { return time.Now().Add(25 * time.Hour) })
	report, err = later.RepairIndex(ctx)
	if err != nil || !slices.Equal(report.Removed, []string{key}) || len(e.runObjects(t)) != 0 {
		t.Fatalf("repair a day later: %v, removed %v, pages %v", err, report.Removed, e.runObjects(t))
	}
	if report, err := e.open(t, opts...).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check after removing the unnamed page: %v, %+v", err, report)
	}
}

// TestWriterKeepsCatalogCurrent: a sync that lists the bucket, then
// writes a run, caches its catalog as of its own commit as it commits,
// so the next run with that cache reads neither the run's pages nor a
// partition back (the no-op push after a push), and lists every session.
func TestWriterKeepsCatalogCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	want := map[string]bool{}
	// The first round's writer makes the prefix (a first push); the
	// second's finds the first's commit.
	for round := range 2 {
		w := e.open(t, objstore.WithDeferredIndex(), objstore.WithIndexCache(cache))
		if _, err := w.Logs(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Tombstones(ctx); err != nil {
			t.Fatal(err)
		}
		// More than a commit lists (64): the commit omits them, and
		// only the run's pages hold them.
		for i := range 100 {
			want[appendNew(t, w, fmt.Sprintf("round %d bulk %d", round, i))] = true
		}
		// A push flushes and does not Close (replica.Copy); a watch
		// closes at its end.
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(e.runObjects(t)) == 0 {
			t.Fatalf("round %d: no run written", round)
		}
		fb := e.faults(t)
		r := e.openOn(t, fb, objstore.WithIndexCache(cache))
		logs, err := r.Logs(ctx)
		if err != nil || len(logs) != len(want) {
			t.Fatalf("round %d: logs after the push: %v, %d sessions, want %d", round, err, len(logs), len(want))
		}
		for _, l := range logs {
			if !want[l.Info.ID] {
				t.Fatalf("round %d: listed %s, not written", round, l.Info.ID)
			}
		}
		for _, o := range fb.Take() {
			if o.Method == "GET" && (runKeyRe.MatchString(o.Key) || partitionKeyRe.MatchString("pfx/"+o.Key)) {
				t.Fatalf("round %d: the run after the push read %s back", round, o.Key)
			}
		}
	}
}

// TestCatalogThroughOwnFold: a sync whose run is folded at once (past
// the fold limit with the runs before it) caches its catalog as of its
// run's commit before the fold, then of the fold's: the next run with
// that cache reads no partition (else the fold, which retired a page
// its catalog had not applied, sends it to the 256 partitions).
func TestCatalogThroughOwnFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	ids := bulkWrite(t, e, nil, 100, nil)
	w := e.open(t, objstore.WithDeferredIndex(), objstore.WithIndexCache(cache), objstore.WithRunFoldAt(150))
	if logs, err := w.Logs(ctx); err != nil || len(logs) != len(ids) {
		t.Fatalf("logs after the first bulk write: %v, %d, want %d", err, len(logs), len(ids))
	}
	for i := range 100 {
		ids = append(ids, appendNew(t, w, fmt.Sprintf("folded at once %d", i)))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.runObjects(t); len(got) != 0 {
		t.Fatalf("run pages %v: the runs were not folded", got)
	}
	fb := e.faults(t)
	logs, err := e.openOn(t, fb, objstore.WithIndexCache(cache)).Logs(ctx)
	if err != nil || len(logs) != len(ids) {
		t.Fatalf("logs after the fold: %v, %d sessions, want %d", err, len(logs), len(ids))
	}
	if got := partitionReads(fb.Take()); got != 0 {
		t.Fatalf("the catalog cached by the folding sync read %d partitions", got)
	}
}

// TestCatalogThroughFirstPush: a bulk write past the fold limit (a
// first push) goes to the partitions, and its commit omits it; the
// writer holds what it wrote, so the catalog it caches is current and the
// next run reads no partition (it read all 256 once, 4.3 s against 1.5 s
// at 50,000 sessions). The same for a deletion, whose commit purges the
// ones before it.
func TestCatalogThroughFirstPush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	w := e.open(t, objstore.WithDeferredIndex(), objstore.WithIndexCache(cache), objstore.WithRunFoldAt(50))
	if logs, err := w.Logs(ctx); err != nil || len(logs) != 0 {
		t.Fatalf("logs of the empty prefix: %v, %d", err, len(logs))
	}
	var ids []string
	for i := range 100 {
		ids = append(ids, appendNew(t, w, fmt.Sprintf("first push %d", i)))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.runObjects(t); len(got) != 0 {
		t.Fatalf("run pages %v: a write past the fold limit wrote a run", got)
	}
	next := func(name string, want int) map[string]bool {
		t.Helper()
		fb := e.faults(t)
		logs, err := e.openOn(t, fb, objstore.WithIndexCache(cache)).Logs(ctx)
		if err != nil || len(logs) != want {
			t.Fatalf("%s: %v, %d sessions, want %d", name, err, len(logs), want)
		}
		if got := partitionReads(fb.Take()); got != 0 {
			t.Fatalf("%s: the next run read %d partitions back", name, got)
		}
		listed := map[string]bool{}
		for _, l := range logs {
			listed[l.Info.ID] = true
		}
		return listed
	}
	next("after the first push", len(ids))

	cps, err := w.Checkpoints(ctx, ids[7])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, store.Tombstone{ID: ids[7], Deleted: time.Now(), At: cps[len(cps)-1]}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if listed := next("after a deletion", len(ids)-1); listed[ids[7]] {
		t.Fatalf("after a deletion: %s still listed", ids[7])
	}
}

// TestExitRunsTiered: each writer's Close folds its session into a run of
// its own; runs merge by size tier, so a sync's bigger run is never
// rewritten by the merges of the small ones, the log names a few runs
// however many writers closed, and every session lists at its longest.
func TestExitRunsTiered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 100, nil) {
		want[id] = 1
	}
	_, c := e.newestCommit(t)
	if len(c.Runs) != 1 {
		t.Fatalf("the sync's run: %+v, want one page", c.Runs)
	}
	big := c.Runs[0]
	for i := range 21 {
		w := e.open(t)
		want[appendNew(t, w, fmt.Sprintf("agent %d", i))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		_, c = e.newestCommit(t)
		if !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Key == big.Key }) {
			t.Fatalf("after %d writers the sync's run %s was rewritten: %+v", i+1, big.Key, c.Runs)
		}
		if len(c.Unfolded) != 0 {
			t.Fatalf("after %d writers the set holds %d entries", i+1, len(c.Unfolded))
		}
	}
	// 21 = 16 + 4 + 1: one run per tier below the sync's.
	sizes := map[int64]int{}
	for _, p := range c.Runs {
		sizes[p.Commit] += p.Sessions
	}
	var got []int
	for _, n := range sizes {
		got = append(got, n)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 4, 16, 100}) {
		t.Fatalf("runs after 21 writers closed: %v entries, want [1 4 16 100]", got)
	}
	if stored := e.runObjects(t); len(stored) != len(c.Runs) {
		t.Fatalf("%d run pages stored, %d named: the merges left pages behind", len(stored), len(c.Runs))
	}
	checkListing(t, e, "after the writers", want)
}

// agentExit is an agent's run on e's memory bucket: a Store opened with
// opts appends a new session (noted in want) and closes; it returns the
// requests the Store sent.
func agentExit(t *testing.T, e *env, want map[string]int, text string, opts ...objstore.Option) []objstore.Op {
	t.Helper()
	fb := e.faults(t)
	w := e.openOn(t, fb, opts...)
	want[appendNew(t, w, text)] = 1
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return fb.Take()
}

// tracedExit is agentExit with its Close traced alone: the Store's
// readings at its append are done first (a turn's answer comes later
// than they do), then every request is delayed 100 ms (so that a loaded
// machine does not split a round trip); it returns Close's requests.
func tracedExit(t *testing.T, e *env, want map[string]int, text string, opts ...objstore.Option) []objstore.Op {
	t.Helper()
	ctx := context.Background()
	fb := e.faults(t)
	w := e.openOn(t, fb, opts...)
	want[appendNew(t, w, text)] = 1
	objstore.WaitPrefetches(ctx, w)
	fb.Take()
	fb.SetDelay(400 * time.Millisecond) // so that a loaded machine does not split a round trip: a parallel request was once seen to start 150 ms late
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return fb.Take()
}

// TestAgentFoldsInSteps: a writer that is not a sync (an agent) folds
// runs past the limit a few partitions at a time: the first step, before
// the index was counted, one partition, which counts it (Indexed); the
// next ones as many partitions as hold about 32 entries. Every session
// lists at its longest between the steps, each step retires the pages
// whose partitions are all written, the last the rest; a sync folds
// what is left of a fold under way at once.
func TestAgentFoldsInSteps(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
		want[id] = 1
	}
	_, c := e.newestCommit(t)
	if len(c.Runs) != 3 {
		t.Fatalf("the sync's run: %d pages, want 3", len(c.Runs))
	}
	sync := c.Runs[0].Commit
	closeOne := func(step int) []string {
		t.Helper()
		var written []string
		for _, o := range agentExit(t, e, want, fmt.Sprint("agent ", step), objectsFoldAt(50)) {
			if o.Method == "PUT" && partitionKeyRe.MatchString("pfx/"+o.Key) {
				written = append(written, o.Key)
			}
		}
		checkListing(t, e, fmt.Sprint("after step ", step), want)
		return written
	}
	if written := closeOne(1); len(written) != 1 {
		t.Fatalf("the first step wrote partitions %v, want one: the index was not counted", written)
	}
	// No writer counted the index: the step did, from the partition it
	// wrote (300 sessions, 1 or a few in each partition).
	if _, c = e.newestCommit(t); c.Indexed < 150 || c.Indexed > 2000 || c.Fold == nil {
		t.Fatalf("after the first step the commit says the index holds %d sessions, fold %+v; want about 300, a fold under way", c.Indexed, c.Fold)
	}
	pages := func() int {
		_, c := e.newestCommit(t)
		n := 0
		for _, p := range c.Runs {
			if p.Commit == sync {
				n++
			}
		}
		return n
	}
	for step := 2; ; step++ {
		_, before := e.newestCommit(t)
		width := max(1, 32*256/int(before.Indexed))
		if written := closeOne(step); len(written) > width {
			t.Fatalf("step %d wrote %d partitions, want at most %d (32 entries of an index of %d)", step, len(written), width, before.Indexed)
		}
		if left := pages(); left > 0 && step == 40 {
			t.Fatalf("after %d steps the sync's run still has %d pages", step, left)
		} else if left == 0 {
			break
		}
		if step == 3 {
			// A sync finishes the fold under way at once.
			for _, id := range bulkWrite(t, e, nil, 10, nil, objectsFoldAt(1000)) {
				want[id] = 1
			}
			if _, c := e.newestCommit(t); c.Fold != nil || pages() != 0 {
				t.Fatalf("after a sync the fold is %+v and the sync's run has %d pages", c.Fold, pages())
			}
			checkListing(t, e, "after the sync", want)
			break
		}
	}
	parts, _ := e.partitions(t)
	if len(parts) < 300 {
		t.Fatalf("the partitions hold %d sessions after the fold, want the sync's 300", len(parts))
	}
	if _, c := e.newestCommit(t); len(e.runObjects(t)) != len(c.Runs) {
		t.Fatalf("%d run pages stored, %d named: the fold left pages behind", len(e.runObjects(t)), len(c.Runs))
	}
}

// TestAgentFoldCompletes: an agent's steps alone finish a fold, retiring
// every page of the runs it took, and the runs written meanwhile stay.
func TestAgentFoldCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
		want[id] = 1
	}
	_, c := e.newestCommit(t)
	sync := c.Runs[0].Commit
	for step := 1; ; step++ {
		w := e.open(t, objectsFoldAt(50))
		want[appendNew(t, w, fmt.Sprint("agent ", step))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		_, c = e.newestCommit(t)
		if !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Commit == sync }) {
			break
		}
		if step == 60 {
			t.Fatalf("after %d steps the fold is %+v", step, c.Fold)
		}
	}
	if c.Fold != nil {
		t.Fatalf("the fold's runs are retired, and the commit still names the fold %+v", c.Fold)
	}
	checkListing(t, e, "after the fold", want)
	parts, _ := e.partitions(t)
	if len(parts) < 300 {
		t.Fatalf("the partitions hold %d sessions after the fold, want the sync's 300", len(parts))
	}
	checkPagesAccounted(t, e, c, "after the fold")
}

// TestFoldStepReadAhead: an exit that takes a step of the fold under
// way finds the step's pages and partitions read at its append
// (prefetchForExit): its Close reads neither, and is four round trips (its
// run, its commit, the partitions, the step's commit; one more for each
// 16 partitions past the first 16), where the reads made it six.
func TestFoldStepReadAhead(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
		want[id] = 1
	}
	agentExit(t, e, want, "the fold's first step", objectsFoldAt(50))
	if _, c := e.newestCommit(t); c.Fold == nil {
		t.Fatal("no fold under way after the first agent's exit")
	}
	ops := tracedExit(t, e, want, "a step", objectsFoldAt(50))
	wrote, reads := 0, 0
	for _, o := range ops {
		switch {
		case o.Method == "PUT" && partitionKeyRe.MatchString("pfx/"+o.Key):
			wrote++
		case o.Method == "GET" && (partitionKeyRe.MatchString("pfx/"+o.Key) || runKeyRe.MatchString(o.Key)):
			reads++
		}
	}
	if wrote == 0 {
		t.Fatalf("the exit took no step of the fold, so the test tests nothing: %s", describeOps(ops))
	}
	// The partitions go 16 at a time (a step here, of 300 sessions in
	// 256 partitions, writes more than one at 100,000 does).
	if want := 4 + (wrote-1)/16; reads != 0 || opRounds(ops) > want {
		t.Errorf("the step's exit: %d reads of pages and partitions (want 0), %d round trips (want %d): %s", reads, opRounds(ops), want, describeOps(ops))
	}
	checkListing(t, e, "after the step", want)
}

// TestFoldStepSharesBudget: an agent's exit on which a step of the fold
// under way and a merge of runs both fall due writes at most its budget
// of entries with the two together: the step is charged what its
// partitions hold once written, and a merge due that fits alone but not
// beside the step is the exit's alone (the step waits for the next
// exit). An exit that stores a commit whole has that much less, and
// takes no step. With a budget both fit in, some exit takes both.
func TestFoldStepSharesBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		budget int
		both   bool // some exit must step and merge
		dirs   bool // the commits carry a dir filter
	}{{32, false, false}, {56, false, false}, {256, true, false}, {56, false, true}, {256, true, true}} {
		t.Run(fmt.Sprint("budget ", tc.budget, " dirs ", tc.dirs), func(t *testing.T) {
			t.Parallel()
			e := newMemEnv(t)
			want := map[string]int{}
			if tc.dirs {
				w := e.open(t)
				want[appendIn(t, w, agent.Project{Dir: "/scratch"}, "outside a git tree")] = 1
				if err := w.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
				want[id] = 1
			}
			merges, both, wholeDuringFold := 0, 0, 0
			for exit := 1; exit <= 12; exit++ {
				_, before := e.newestCommit(t)
				ops := agentExit(t, e, want, fmt.Sprint("agent ", exit), objectsFoldAt(50), objstore.WithMergeBudget(tc.budget))
				_, c := e.newestCommit(t)
				if c.Fold == nil && exit < 5 {
					t.Fatalf("exit %d: no fold under way; the test needs one", exit)
				}
				limit := tc.budget
				if tc.dirs != (before.DirFilter != nil) {
					t.Fatalf("exit %d: a dir filter in the commit before it: %v", exit, before.DirFilter != nil)
				}
				if before.DirFilter != nil {
					limit -= objstore.DirFilterEntries
				}
				folded, partitions := e.foldedBy(t, ops)
				if storedWhole(ops) {
					limit -= objstore.WholeCommitEntries
					if before.Fold != nil {
						wholeDuringFold++
						if partitions > 0 {
							t.Fatalf("exit %d stored a commit whole and took a step of the fold (%d partitions)", exit, partitions)
						}
					}
				}
				// The exit's own run is one entry; a merge writes more.
				merged := runEntriesAdded(before, c) - 1
				if merged > 0 {
					merges++
				}
				if merged > 0 && partitions > 0 {
					both++
					if folded+merged > limit {
						t.Fatalf("exit %d wrote %d entries to %d partitions and merged %d, past a budget of %d", exit, folded, partitions, merged, limit)
					}
				}
			}
			checkListing(t, e, "after the exits", want)
			if merges == 0 {
				t.Fatal("no exit merged runs: the test no longer tests a merge beside a fold")
			}
			if tc.both && both == 0 {
				t.Fatalf("with a budget of %d, no exit both stepped and merged", tc.budget)
			}
			if wholeDuringFold == 0 {
				t.Fatal("no exit stored a commit whole during the fold: the test no longer tests its share")
			}
		})
	}
}

// TestLongSessionSteps: a Store that committed many times (a session of
// many turns, one of whose commits was stored whole long before its
// exit) still takes a step of the fold at its exit: only its last
// commits, its last turn's, are the exit's.
func TestLongSessionSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
		want[id] = 1
	}
	fb := e.faults(t)
	w := e.openOn(t, fb, objectsFoldAt(50))
	id := appendNew(t, w, "a long session")
	want[id] = 1
	for turn := 0; ; turn++ {
		if turn == 100 {
			t.Fatal("no commit number fit after 100 turns")
		}
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{msg(agent.RoleUser, fmt.Sprint("turn ", turn))}); err != nil {
			t.Fatal(err)
		}
		want[id]++
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		// Past a commit stored whole, and none among the last two, nor
		// the Close's (n+1) or the step's (n+2).
		if n, _ := e.newestCommit(t); turn >= 20 && n%objstore.LogFullEvery >= 2 && n%objstore.LogFullEvery <= objstore.LogFullEvery-3 {
			break
		}
	}
	if !storedWhole(fb.Take()) {
		t.Fatal("the session stored no commit whole: the test no longer tests one long before the exit")
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, partitions := e.foldedBy(t, fb.Take()); partitions == 0 {
		t.Fatal("the exit of a long session took no step of the fold: a commit stored whole turns before counted as its own")
	}
	checkListing(t, e, "after the exit", want)
}

// storedWhole reports whether ops stored a commit whole: one whose number
// logFullEvery divides.
func storedWhole(ops []objstore.Op) bool {
	return slices.ContainsFunc(ops, func(o objstore.Op) bool {
		m := logCommitKey.FindStringSubmatch("pfx/" + o.Key)
		if o.Method != "PUT" || o.Err != nil || m == nil {
			return false
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n%objstore.LogFullEvery == 0
	})
}

// foldedBy is how many entries the partitions ops wrote hold now, and
// how many partitions they wrote.
func (e *env) foldedBy(t *testing.T, ops []objstore.Op) (entries, partitions int) {
	t.Helper()
	var names []string
	for _, o := range ops {
		if m := partitionKeyRe.FindStringSubmatch("pfx/" + o.Key); o.Method == "PUT" && m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		return 0, 0
	}
	in, _ := e.partitionsMatching(t, regexp.MustCompile(`^pfx/index/(`+strings.Join(names, "|")+`)\.json\.zst$`))
	return len(in), len(names)
}

// runEntriesAdded is how many entries the run pages commit c names and
// commit before does not hold.
func runEntriesAdded(before, c *manifest.IndexShard) int {
	named := map[string]bool{}
	for _, p := range before.Runs {
		named[p.Key] = true
	}
	n := 0
	for _, p := range c.Runs {
		if !named[p.Key] {
			n += p.Sessions
		}
	}
	return n
}

// TestMergesStepDuringFold: while agents fold runs a partition or two at
// a time (a fold that lasts many exits), the runs written since it
// started merge in steps beside it, so that they do not pile up; the
// fold and the merge each end, and every session lists throughout.
func TestMergesStepDuringFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 3000, nil, objectsFoldAt(100000)) {
		want[id] = 1
	}
	const budget = 40
	during := false // a merge under way during the fold
	for exit := 1; ; exit++ {
		if exit > 400 {
			t.Fatal("the fold did not end in 400 exits")
		}
		_, before := e.newestCommit(t)
		fb := e.faults(t)
		w := e.openOn(t, fb, objectsFoldAt(50), objstore.WithMergeBudget(budget))
		// Exits 2 to 5 write 12 sessions each: four runs of 12, a merge
		// of 48 entries, more than the budget, due during the fold.
		n := 1
		if exit >= 2 && exit <= 5 {
			n = 12
		}
		for i := range n {
			want[appendNew(t, w, fmt.Sprint("agent ", exit, " ", i))] = 1
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		_, c := e.newestCommit(t)
		if exit == 1 && c.Fold == nil {
			t.Fatal("the first exit started no fold: the test needs one")
		}
		// The step and the merge share the budget: what the step's
		// partitions hold is charged, not what they were estimated to.
		if merged := runEntriesAdded(before, c) - n; merged > 0 {
			if folded, partitions := e.foldedBy(t, fb.Take()); folded+merged > budget && partitions > 0 {
				t.Fatalf("exit %d wrote %d entries to %d partitions and merged %d, past a budget of %d", exit, folded, partitions, merged, budget)
			}
		}
		if c.Fold != nil && c.Merge != nil {
			if foldHolds(c, c.Merge.Into) || slices.ContainsFunc(c.Merge.From, func(run int64) bool { return foldHolds(c, run) }) {
				t.Fatalf("exit %d: the merge under way %+v takes runs of the fold under way %+v", exit, *c.Merge, *c.Fold)
			}
			during = true
		}
		if exit%10 == 0 {
			checkListing(t, e, fmt.Sprint("after exit ", exit), want)
		}
		if c.Fold == nil && c.Merge == nil && exit > 5 {
			break
		}
	}
	if !during {
		t.Fatal("no merge went in steps while the fold was under way")
	}
	checkListing(t, e, "after the fold and the merge", want)
	_, c := e.newestCommit(t)
	checkPagesAccounted(t, e, c, "after the steps")
	sizes := map[int64]int{}
	for _, p := range c.Runs {
		sizes[p.Commit] += p.Sessions
	}
	if big := slices.Max(slices.Collect(maps.Values(sizes))); big < 48 {
		t.Fatalf("runs after the fold: %v entries, want the four runs of 12 merged", sizes)
	}
}

// foldHolds reports whether c's fold under way takes run.
func foldHolds(c *manifest.IndexShard, run int64) bool {
	return c.Fold != nil && slices.Contains(c.Fold.From, run)
}

// mergeUnderWay writes three runs of 12 sessions by syncs, then closes
// agents (a session each, noted in want) with a merge budget of budget
// until a commit names a merge under way, which it returns.
func mergeUnderWay(t *testing.T, e *env, want map[string]int, budget int) *manifest.IndexShard {
	t.Helper()
	for range 3 {
		for _, id := range bulkWrite(t, e, nil, 12, nil) {
			want[id] = 1
		}
	}
	for i := range 20 {
		w := e.open(t, objstore.WithMergeBudget(budget))
		want[appendNew(t, w, fmt.Sprint("agent ", i))] = 1
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, c := e.newestCommit(t); c.Merge != nil {
			return c
		}
	}
	t.Fatal("no merge under way after 20 closes")
	return nil
}

// TestFoldDropsMergeItTakes: a fold that starts while a merge is under
// way takes the merge's runs, whose entries it writes to the
// partitions, and drops the merge (its pages stay named until the fold
// retires them), so that merges of the runs written during the fold may
// start; no session is lost.
func TestFoldDropsMergeItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	merge := *mergeUnderWay(t, e, want, 10).Merge
	var c *manifest.IndexShard
	// An exit that stores a commit whole, or would, takes no step: two
	// in a row may not.
	for i := range 3 {
		w := e.open(t, objectsFoldAt(20), objstore.WithMergeBudget(10))
		want[appendNew(t, w, fmt.Sprint("the fold's first step, try ", i))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, c = e.newestCommit(t); c.Fold != nil {
			break
		}
	}
	if c.Fold == nil || c.Merge != nil && c.Merge.Into == merge.Into {
		t.Fatalf("after the fold's first step: fold %+v, merge %+v; want a fold under way and the merge %+v dropped", c.Fold, c.Merge, merge)
	}
	if !foldHolds(c, merge.Into) {
		t.Fatalf("the fold %+v does not take the merge's run %d", *c.Fold, merge.Into)
	}
	checkListing(t, e, "after the fold's first step", want)
	for i := 0; c.Fold != nil; i++ {
		if i == 100 {
			t.Fatalf("the fold did not end in 100 exits: %+v", *c.Fold)
		}
		w := e.open(t, objectsFoldAt(20), objstore.WithMergeBudget(10))
		want[appendNew(t, w, fmt.Sprint("step ", i))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		_, c = e.newestCommit(t)
		checkListing(t, e, fmt.Sprint("after step ", i), want)
	}
	if slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Commit == merge.Into || slices.Contains(merge.From, p.Commit) }) {
		t.Fatal("a page of the dropped merge's runs is still named after the fold")
	}
	checkPagesAccounted(t, e, c, "after the fold")
}

// TestAgentFoldLimitFromCommit: a writer that read the catalog says in
// its commits how many sessions the index holds (Indexed), and a writer
// without the catalog folds the runs past an eighth of that, not past
// its own minimum; a fold's step that writes enough partitions counts
// them when no writer did.
func TestAgentFoldLimitFromCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	bulkWrite(t, e, nil, 200, nil, partitionsAtClose())
	if _, c := e.newestCommit(t); c.Indexed != 0 {
		t.Fatalf("a commit of a writer without the catalog says %d sessions", c.Indexed)
	}
	counter := e.open(t, objectsFoldAt(1))
	if _, err := counter.Logs(ctx); err != nil { // reads the catalog
		t.Fatal(err)
	}
	appendNew(t, counter, "counted")
	if err := counter.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, c := e.newestCommit(t); c.Indexed < 200 {
		t.Fatalf("the commit of a writer that read the catalog says %d sessions, want at least 200", c.Indexed)
	}
	if err := counter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bulkWrite(t, e, nil, 20, nil, objectsFoldAt(1000))
	agent := e.open(t, objectsFoldAt(1))
	appendNew(t, agent, "agent")
	if err := agent.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, c := e.newestCommit(t)
	total := 0
	for _, p := range c.Runs {
		total += p.Sessions
	}
	if total < 21 || c.Indexed < 200 {
		t.Fatalf("commit %d: the runs hold %d entries, the index %d sessions; want the runs unfolded below an eighth of 200", n, total, c.Indexed)
	}
}

// TestAgentMergesInSteps: a merge of runs bigger than a writer without
// the catalog may rewrite (runMergeBudget) goes a step at a time, each
// Close rewriting about the budget; between the steps every session
// lists and resolves at its longest, the index checks clean, and a
// catalog on disk catches up through the steps without reading a
// partition; the last step leaves one run of all the entries and no page
// behind.
func TestAgentMergesInSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	want := map[string]int{}
	for range 3 {
		for _, id := range bulkWrite(t, e, nil, 12, nil) {
			want[id] = 1
		}
	}
	if _, err := e.open(t, objstore.WithIndexCache(cache)).Logs(ctx); err != nil {
		t.Fatal(err)
	}
	const budget = 10
	stepped := false
	for i := range 40 {
		_, before := e.newestCommit(t)
		w := e.open(t, objstore.WithMergeBudget(budget))
		if i%2 == 1 {
			// As a local-first panto's shipper does: a writer that
			// read the catalog is an agent all the same.
			if _, err := w.Logs(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want[appendNew(t, w, fmt.Sprint("agent ", i))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		_, c := e.newestCommit(t)
		written := runEntriesAdded(before, c)
		// Its own session's run, merged at once or not, and at most the
		// budget besides (a partition's entries at least).
		if written > budget+1 {
			t.Fatalf("close %d wrote %d entries in run pages, want at most %d", i, written, budget+1)
		}
		stepped = stepped || c.Merge != nil
		checkListing(t, e, fmt.Sprint("after close ", i), want)
		fb := e.faults(t)
		if logs, err := e.openOn(t, fb, objstore.WithIndexCache(cache)).Logs(ctx); err != nil || len(logs) != len(want) {
			t.Fatalf("after close %d: cached listing: %v, %d sessions, want %d", i, err, len(logs), len(want))
		}
		if got := partitionReads(fb.Take()); got != 0 {
			t.Fatalf("after close %d: the cached catalog read %d partitions to catch up", i, got)
		}
		if stepped && c.Merge == nil {
			break
		}
	}
	if !stepped {
		t.Fatal("no merge went in steps")
	}
	_, c := e.newestCommit(t)
	if c.Merge != nil {
		t.Fatalf("the merge is not done after 40 closes: %+v", *c.Merge)
	}
	sizes := map[int64]int{}
	for _, p := range c.Runs {
		sizes[p.Commit] += p.Sessions
	}
	if big := slices.Max(slices.Collect(maps.Values(sizes))); big < 40 {
		t.Fatalf("runs after the merge: %v entries, want one of the 3 runs of 12 and the 4 closes' at least", sizes)
	}
	checkPagesAccounted(t, e, c, "after the steps")
}

// TestSyncFinishesMerge: a sync (WithDeferredIndex) finishes
// a merge under way at once.
func TestSyncFinishesMerge(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	want := map[string]int{}
	mergeUnderWay(t, e, want, 4)
	for _, id := range bulkWrite(t, e, nil, 10, nil) {
		want[id] = 1
	}
	_, c := e.newestCommit(t)
	if c.Merge != nil {
		t.Fatalf("a sync left the merge under way: %+v", *c.Merge)
	}
	// A sync deletes what it retires at once, and what the agents'
	// steps left in Discarded beside its run.
	if stored := e.runObjects(t); len(stored) != len(c.Runs) || len(c.Discarded) != 0 {
		t.Fatalf("%d run pages stored, %d named, discarded %v", len(stored), len(c.Runs), c.Discarded)
	}
	checkListing(t, e, "after the sync", want)
}

// TestMergeStepsRace: agents close at once, each
// taking the next step of the same merge; a step another took first
// retires nothing, so no named page is deleted and every session lists.
func TestMergeStepsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for range 3 {
		for _, id := range bulkWrite(t, e, nil, 12, nil) {
			want[id] = 1
		}
	}
	var mu sync.Mutex
	for round := range 6 {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := e.open(t, objstore.WithMergeBudget(3))
				id := appendNew(t, s, fmt.Sprintf("round %d writer %d", round, w))
				if err := s.Close(ctx); err != nil {
					t.Error(err)
				}
				mu.Lock()
				want[id] = 1
				mu.Unlock()
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		checkListing(t, e, fmt.Sprint("after round ", round), want)
	}
}

// TestMergeDroppedByOlderPanto: a panto that predates the merge in steps
// drops the field from the commit it writes; what was merged and what
// was not are then runs like any other: every session lists at its
// longest, and later writers merge them by size tier, leaving no page
// behind.
func TestMergeDroppedByOlderPanto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for range 3 {
		for _, id := range bulkWrite(t, e, nil, 12, nil) {
			want[id] = 1
		}
	}
	closeOne := func(i int) {
		t.Helper()
		w := e.open(t, objstore.WithMergeBudget(6))
		want[appendNew(t, w, fmt.Sprint("agent ", i))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	for ; ; i++ {
		closeOne(i)
		if _, c := e.newestCommit(t); c.Merge != nil && c.Merge.Next > "40" {
			break
		}
		if i == 20 {
			t.Fatal("no merge under way past partition 40 after 20 closes")
		}
	}
	// The older panto's commit: the same, without the field.
	n, _ := e.newestCommit(t)
	codec, _ := manifest.NewCodec()
	key := "pfx/" + commitKey(n)
	c, err := codec.DecodeIndexShard(commitKey(n), e.rawObject(t, key))
	if err != nil {
		t.Fatal(err)
	}
	c.Merge = nil
	data, err := codec.EncodeIndexShard(commitKey(n), c)
	if err != nil {
		t.Fatal(err)
	}
	e.putRaw(t, key, data)
	checkListing(t, e, "after the field was dropped", want)
	for j := range 40 {
		closeOne(i + 1 + j)
		checkListing(t, e, fmt.Sprint("close ", j, " after the field was dropped"), want)
	}
	_, last := e.newestCommit(t)
	checkPagesAccounted(t, e, last, "after the closes")
	// Merged by size tier as before: at most 3 runs of a tier of 4x, and
	// the runs of a merge under way (the runs it takes, which stay named
	// until its last step, and the run it writes). The last close may
	// have left a fourth: an exit that stores a commit whole merges 40
	// entries less (runs.go), none with a budget of 6, and the next
	// exit merges. So a few closes more, each checked.
	unmerged := func(last *manifest.IndexShard) string {
		sizes := map[int64]int{}
		for _, p := range last.Runs {
			sizes[p.Commit] += p.Sessions
		}
		tiers := map[int]int{}
		for run, n := range sizes {
			if last.Merge == nil || run != last.Merge.Into && !slices.Contains(last.Merge.From, run) {
				tier := 0
				for ; n >= 4; n /= 4 {
					tier++
				}
				tiers[tier]++
			}
		}
		for tier, count := range tiers {
			if count > 3 {
				return fmt.Sprintf("%d runs of tier %d (entries by run: %v; merge under way: %+v)", count, tier, sizes, last.Merge)
			}
		}
		return ""
	}
	for j := 0; unmerged(last) != ""; j++ {
		if j == objstore.LogFullEvery/4 {
			t.Fatalf("after %d closes, %s: the runs did not merge", 40+j, unmerged(last))
		}
		closeOne(i + 41 + j)
		_, last = e.newestCommit(t)
	}
	checkListing(t, e, "after the merges", want)
}

// TestFoldStepsRace: agents close at once while a fold goes in steps,
// each taking the next step; a step another took first retires nothing,
// so no named page is deleted and every session lists.
func TestFoldStepsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
		want[id] = 1
	}
	var mu sync.Mutex
	for round := range 6 {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := e.open(t, objectsFoldAt(50))
				id := appendNew(t, s, fmt.Sprintf("round %d writer %d", round, w))
				if err := s.Close(ctx); err != nil {
					t.Error(err)
				}
				mu.Lock()
				want[id] = 1
				mu.Unlock()
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		checkListing(t, e, fmt.Sprint("after round ", round), want)
	}
	if _, c := e.newestCommit(t); c.Fold == nil && len(c.Runs) > 0 && c.Runs[0].Sessions == 300 {
		t.Fatal("no fold started")
	}
}
