package objstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestCommitsStoredAgainstABase: the commits between two multiples of 16
// store against the last whole commit only the recent entries that
// differ from its view, so a commit of a turn is a few KB; a reader's
// Open reads the newest commit and its base together, and lists what
// the whole view says; a deletion's commit is stored whole.
func TestCommitsStoredAgainstABase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	// In the partitions: the deletion below then commits once.
	w := e.open(t, partitionsAtClose())
	for i := range manifest.RecentSize + 10 {
		appendNew(t, w, fmt.Sprintf("session %d", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	codec, _ := manifest.NewCodec()
	stored := func(n int64) (*manifest.IndexShard, int) {
		t.Helper()
		data := e.rawObject(t, "pfx/"+commitKey(n))
		c, err := codec.DecodeIndexShard(commitKey(n), data)
		if err != nil {
			t.Fatal(err)
		}
		return c, len(data)
	}
	n, whole := e.newestCommit(t)
	for k := n - 5; k <= n; k++ {
		c, size := stored(k)
		switch {
		case k%16 == 0 && c.Base != 0:
			t.Errorf("commit %d is stored against %d; a multiple of 16 is stored whole", k, c.Base)
		case k%16 != 0 && (c.Base != k-k%16 || len(c.Recent) >= manifest.RecentSize/4):
			t.Errorf("commit %d: base %d, %d recent entries stored (%d bytes); want base %d and a few", k, c.Base, len(c.Recent), size, k-k%16)
		}
		t.Logf("commit %d: base %d, %d recent entries, %d bytes", k, c.Base, len(c.Recent), size)
	}
	if len(whole.Recent) != manifest.RecentSize {
		t.Fatalf("the newest commit made whole holds %d sessions, want %d", len(whole.Recent), manifest.RecentSize)
	}
	// A reader: the LIST, then the newest commit and its base at once.
	fb := e.faults(t)
	r := e.openOn(t, fb)
	ops := fb.Take()
	if n%16 != 0 && (!slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == commitKey(n) }) ||
		!slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == commitKey(n-n%16) })) {
		t.Fatalf("Open's requests: %+v; want the GETs of commit %d and its base %d", ops, n, n-n%16)
	}
	// With an index cache, the base read once is kept on disk: the
	// next Open reads the newest commit alone.
	cache := t.TempDir()
	fb = e.faults(t)
	e.openOn(t, fb, objstore.WithIndexCache(cache))
	fb.Take()
	fb = e.faults(t)
	e.openOn(t, fb, objstore.WithIndexCache(cache))
	ops = fb.Take()
	if n%16 != 0 && slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Key == commitKey(n-n%16) }) {
		t.Fatalf("an Open with the base on disk: %+v; want no read of the base", ops)
	}
	if gets := countOps(ops, "GET"); gets > 2 {
		t.Fatalf("an Open with the base on disk: %d GETs (%+v), want the marker's and the newest commit's", gets, ops)
	}
	all, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := r.ListNewest(ctx, 10, nil)
	if err != nil || !slices.EqualFunc(page, all[:10], func(a, b agent.SessionInfo) bool { return a.ID == b.ID }) {
		t.Fatalf("the first page: %v, %v; want %v", err, infoIDs(page), infoIDs(all[:10]))
	}
	// A deletion's commit is stored whole (it deletes every commit
	// before it, bases too), and the next ones are stored against it:
	// its purge's, which takes the session out of Unpurged, and the
	// next writer's.
	deleteAll(t, e.open(t), all[0].ID)
	newest, _ := e.newestCommit(t)
	d := newest - 1
	if c, _ := stored(d); c.Base != 0 || !slices.Contains(c.Unpurged, all[0].ID) {
		t.Fatalf("the deletion's commit %d is stored against %d, unpurged %v", d, c.Base, c.Unpurged)
	}
	if c, _ := stored(newest); newest%16 != 0 && c.Base != d || len(c.Unpurged) != 0 {
		t.Fatalf("the purge's commit %d is stored against %d, unpurged %v; want against %d, none", newest, c.Base, c.Unpurged, d)
	}
	s := e.open(t)
	appendNew(t, s, "after the deletion")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := stored(newest + 1); newest%16 != 0 && (newest+1)%16 != 0 && c.Base != d {
		t.Fatalf("the commit after the deletion's purge is stored against %d, want %d", c.Base, d)
	}
	list, err := e.open(t).ListNewest(ctx, 3, nil)
	if err != nil || len(list) != 3 || list[0].MessageCount != 1 || slices.ContainsFunc(list, func(i agent.SessionInfo) bool { return i.ID == all[0].ID }) {
		t.Fatalf("after the deletion: %v, %v", err, infoIDs(list))
	}
}

// TestCommitAfterBulkWriteIsBase: a commit whose view changed by more
// than half since its base (a bulk write of newer sessions) is stored
// whole, so the turns after it send what changed since it (they sent
// the whole view, 11 KB a commit at 100,000 sessions, until the next
// multiple of 16); a reader's Open finds it in the log's listing and
// reads it with the newest commit and the multiple of 16, in one round
// trip, and lists what the whole view says.
func TestCommitAfterBulkWriteIsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	bulkWrite(t, e, nil, manifest.RecentSize+10, nil)
	for i := range 2 {
		w := e.open(t)
		appendNew(t, w, fmt.Sprint("before ", i))
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	bulkWrite(t, e, nil, manifest.RecentSize+10, nil)
	bulk, c := e.newestCommit(t)
	if bulk%16 == 0 {
		t.Fatalf("the bulk write's commit is %d, a multiple of 16: the test needs another", bulk)
	}
	codec, _ := manifest.NewCodec()
	stored := func(n int64) (*manifest.IndexShard, int) {
		t.Helper()
		data := e.rawObject(t, "pfx/"+commitKey(n))
		c, err := codec.DecodeIndexShard(commitKey(n), data)
		if err != nil {
			t.Fatal(err)
		}
		return c, len(data)
	}
	if s, _ := stored(bulk); s.Base != 0 || len(c.Recent) != manifest.RecentSize {
		t.Fatalf("the bulk write's commit %d is stored against %d", bulk, s.Base)
	}
	_, wholeSize := stored(bulk)
	w := e.open(t)
	appendNew(t, w, "after")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := e.newestCommit(t)
	for k := bulk + 1; k <= n && k%16 != 0; k++ {
		if s, size := stored(k); s.Base != bulk || size*2 > wholeSize {
			t.Fatalf("commit %d after the bulk write's: base %d, %d bytes; want base %d and under half of its %d", k, s.Base, size, bulk, wholeSize)
		}
	}
	fb := e.faults(t)
	fb.SetDelay(20 * time.Millisecond) // so that requests sent together overlap
	r := e.openOn(t, fb)
	var gets []string
	var newest, base objstore.Op
	for _, o := range fb.Take() {
		if o.Method == "GET" && strings.Contains(o.Key, "index/log/") {
			gets = append(gets, o.Key)
		}
		switch {
		case o.Method == "GET" && o.Key == commitKey(n):
			newest = o
		case o.Method == "GET" && o.Key == commitKey(bulk):
			base = o
		}
	}
	if base.Start.IsZero() || !base.Start.Before(newest.End) || len(gets) > 3 {
		t.Fatalf("Open read the commits %v; want %d (the base the listing shows) with the newest, %d, and the multiple of 16", gets, bulk, n)
	}
	list, err := r.ListNewest(ctx, 3, nil)
	if err != nil || len(list) != 3 || list[0].LastUserMessage != "after" {
		t.Fatalf("the newest page after the bulk write: %v, %+v", err, list)
	}
}

// TestCachedCatalogKeepsBase: a sync that caches its catalog keeps the
// base of its newest commit on disk beside it, so the next run, which
// finds the log where the sync left it, reads the newest commit alone.
func TestCachedCatalogKeepsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	bulkWrite(t, e, nil, manifest.RecentSize+10, nil)
	cache := t.TempDir()
	w := e.open(t, objstore.WithDeferredIndex(), objstore.WithIndexCache(cache))
	if _, err := w.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		appendNew(t, w, fmt.Sprint("pushed ", i))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := e.newestCommit(t)
	codec, _ := manifest.NewCodec()
	c, err := codec.DecodeIndexShard(commitKey(n), e.rawObject(t, "pfx/"+commitKey(n)))
	if err != nil || c.Base == 0 {
		t.Fatalf("the push's commit %d: %v, stored against %d; the test needs one stored against a base", n, err, c.Base)
	}
	fb := e.faults(t)
	logs, err := e.openOn(t, fb, objstore.WithIndexCache(cache)).Logs(ctx)
	if err != nil || len(logs) != manifest.RecentSize+22 {
		t.Fatalf("the next run's listing: %v, %d sessions", err, len(logs))
	}
	for _, o := range fb.Take() {
		if o.Method == "GET" && o.Key == commitKey(c.Base) {
			t.Fatalf("the next run read the base %d of the newest commit %d back", c.Base, n)
		}
	}
}

// TestRunPagesAgainstBase: a commit stored against a base stores its run
// pages as what changed since the base's (manifest.IndexShard.RunsDelta),
// not the whole list, which grows with the entries in runs; readers make
// it whole, and list every session. A prefix whose marker predates the
// feature takes it at its first commit that names pages.
func TestRunPagesAgainstBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	e.open(t) // creates the prefix
	// The marker as a panto before the feature wrote it.
	old := strings.Replace(string(e.object(t, "pfx/panto-store.json")), `,"`+manifest.FeatureIndexRunDeltas+`"`, "", 1)
	objstore.MemPut(e.mem, "pfx/panto-store.json", []byte(old))
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 600, nil, objectsFoldAt(5000)) {
		want[id] = 1
	}
	for i := range 20 {
		w := e.open(t, objectsFoldAt(5000))
		want[appendNew(t, w, fmt.Sprint("turn ", i))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if m := string(e.object(t, "pfx/panto-store.json")); !strings.Contains(m, `"`+manifest.FeatureIndexRunDeltas+`"`) {
		t.Fatalf("the marker %s does not require %s after commits that name pages", m, manifest.FeatureIndexRunDeltas)
	}
	codec, _ := manifest.NewCodec()
	whole := e.logCommits(t)
	deltas := 0
	for _, o := range e.rawBucket(t) {
		if logCommitKey.MatchString(o.key) {
			c, err := codec.DecodeIndexShard(o.key, o.data)
			if err != nil {
				t.Fatal(err)
			}
			if c.RunsDelta {
				deltas++
				if len(c.Runs)+len(c.RunsGone) >= len(whole[c.Through].Runs) {
					t.Fatalf("commit %d stores %d pages and %d gone for a list of %d", c.Through, len(c.Runs), len(c.RunsGone), len(whole[c.Through].Runs))
				}
			}
		}
	}
	if deltas == 0 {
		t.Fatal("no commit stores its run pages against its base")
	}
	checkListing(t, e, "with run pages stored against bases", want)
}
