package objstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
	// before it, bases too), and the next one is stored against it.
	deleteAll(t, e.open(t), all[0].ID)
	d, _ := e.newestCommit(t)
	if c, _ := stored(d); c.Base != 0 {
		t.Fatalf("the deletion's commit %d is stored against %d", d, c.Base)
	}
	s := e.open(t)
	appendNew(t, s, "after the deletion")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := stored(d + 1); d%16 != 15 && c.Base != d {
		t.Fatalf("the commit after the deletion's is stored against %d, want %d", c.Base, d)
	}
	list, err := e.open(t).ListNewest(ctx, 3, nil)
	if err != nil || len(list) != 3 || list[0].MessageCount != 1 || slices.ContainsFunc(list, func(i agent.SessionInfo) bool { return i.ID == all[0].ID }) {
		t.Fatalf("after the deletion: %v, %v", err, infoIDs(list))
	}
}
