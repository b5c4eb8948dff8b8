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

var (
	projectA = agent.Project{Remote: "host.test/team/a", Root: "/src/a", Dir: "/src/a"}
	projectB = agent.Project{Remote: "host.test/team/b", Root: "/src/b", Dir: "/src/b"}
	// importedA knows only its directory, inside a's work tree.
	importedA = agent.Project{Dir: "/src/a/cmd"}
)

// appendIn appends one message of text to a new session of project p
// through s, and returns its id.
func appendIn(t *testing.T, s *objstore.Store, p agent.Project, text string) string {
	t.Helper()
	id := agent.NewSessionID()
	if err := s.AppendMessagesIn(context.Background(), p, id, []agent.PersistentMessage{user(text)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// newestOf is the limit newest sessions of list (newest first) that
// project p holds.
func newestOf(list []agent.SessionInfo, p agent.Project, limit int) []agent.SessionInfo {
	var out []agent.SessionInfo
	for _, info := range list {
		if p.Holds(info.Project) && len(out) < limit {
			out = append(out, info)
		}
	}
	return out
}

// isHeadKey reports whether key, from the store's prefix, is a project head.
func isHeadKey(key string) bool {
	return strings.HasPrefix(key, "index/head/") && strings.HasSuffix(key, ".json.zst")
}

// readsPartitions reports whether ops read a partition of the index.
func readsPartitions(ops []objstore.Op) bool {
	return slices.ContainsFunc(ops, func(o objstore.Op) bool { return partitionKeyRe.MatchString("pfx/" + o.Key) })
}

// TestProjectHeads: a project whose sessions the newest commit's recent
// view does not hold (another project's are newer) lists its newest page
// from its head and the head of the sessions that know only their
// directory, read beside nothing else: no partition, whatever the size
// of the index. The page is the full listing's, after folds, a sync's
// run and a deletion; a page the heads cannot fill (more than they
// hold) is the full listing's, read from the partitions.
func TestProjectHeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	var deleted string
	for i := range 90 {
		id := appendIn(t, w, projectA, fmt.Sprintf("a %d", i))
		if i == 85 {
			deleted = id
		}
		if i%30 == 0 {
			appendIn(t, w, importedA, fmt.Sprintf("imported %d", i))
		}
	}
	for i := range manifest.RecentSize + 10 {
		appendIn(t, w, projectB, fmt.Sprintf("b %d", i))
	}
	if err := w.Close(ctx); err != nil { // folds every entry into the partitions
		t.Fatal(err)
	}
	// A sync's bulk write of b's sessions and a's goes to a run.
	sync := e.open(t, objstore.WithDeferredIndex())
	var synced string // its entry in a run alone when it is deleted
	for i := range 12 {
		synced = appendIn(t, sync, projectA, fmt.Sprintf("a synced %d", i))
		appendIn(t, sync, projectB, fmt.Sprintf("b synced %d", i))
	}
	if err := sync.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(e.runObjects(t)) == 0 {
		t.Fatal("the sync wrote no run")
	}
	// Then more of b's, so that the recent view holds none of a's.
	for i := range manifest.RecentSize {
		appendIn(t, w, projectB, fmt.Sprintf("b later %d", i))
	}
	// synced first: the deletion of deleted folds the run into the partitions.
	for _, id := range []string{synced, deleted} {
		at, err := store.Head(ctx, w, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, newest := e.newestCommit(t)
	for _, info := range newest.Recent {
		if projectA.Holds(info.Info.Project) {
			t.Fatalf("the recent view holds a's session %s: the test lists nothing from the heads", info.Info.ID)
		}
	}

	fb := e.faults(t)
	r := e.openOn(t, fb)
	fb.Take()
	got, err := r.ListNewestIn(ctx, 50, projectA, nil)
	ops := fb.Take()
	want := newestOf(all, projectA, 50)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a's page: %v\n got %v\nwant %v", err, infoIDs(got), infoIDs(want))
	}
	if slices.ContainsFunc(got, func(info agent.SessionInfo) bool { return info.ID == deleted || info.ID == synced }) {
		t.Fatalf("a's page lists a deleted session (%s, %s)", deleted, synced)
	}
	if !slices.ContainsFunc(got, func(info agent.SessionInfo) bool { return info.Project == importedA }) {
		t.Fatalf("a's page lists no session that knows only its directory in a's tree")
	}
	heads := 0
	for _, o := range ops {
		if isHeadKey(o.Key) {
			heads++
		}
	}
	if readsPartitions(ops) || heads != 2 || len(ops) > 4 {
		t.Fatalf("a's page: %d requests %+v; want a's head and the dirs head (and the check for a newer commit), no partition", len(ops), ops)
	}
	// The latest of a's (panto -c).
	if latest, err := r.ListNewestIn(ctx, 1, projectA, nil); err != nil || len(latest) != 1 || latest[0].ID != want[0].ID {
		t.Fatalf("a's latest: %v, %v", err, infoIDs(latest))
	}
	if ops := fb.Take(); readsPartitions(ops) {
		t.Fatalf("a's latest read the partitions: %+v", ops)
	}
	// More than a head holds: the partitions.
	r2 := e.openOn(t, fb)
	fb.Take()
	many, err := r2.ListNewestIn(ctx, manifest.HeadSize+5, projectA, nil)
	if want := newestOf(all, projectA, manifest.HeadSize+5); err != nil || !reflect.DeepEqual(many, want) {
		t.Fatalf("a's first %d: %v\n got %v\nwant %v", manifest.HeadSize+5, err, infoIDs(many), infoIDs(want))
	}
	if ops := fb.Take(); !readsPartitions(ops) {
		t.Fatalf("a's first %d answered from a head of %d", manifest.HeadSize+5, manifest.HeadSize)
	}
	// The heads are what the sessions say.
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check: %v, %+v", err, report)
	}
}

// TestProjectHeadsRepaired: a head that does not decode sends a
// project's page to the partitions (the page is still right); verify
// names it, and repair rebuilds it, after which the page reads it again.
func TestProjectHeadsRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	for i := range 10 {
		appendIn(t, w, projectA, fmt.Sprintf("a %d", i))
	}
	for i := range manifest.RecentSize {
		appendIn(t, w, projectB, fmt.Sprintf("b %d", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := newestOf(all, projectA, 50)
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	var headA string
	for _, o := range e.rawBucket(t) {
		k := strings.TrimPrefix(o.key, "pfx/")
		if !isHeadKey(k) {
			continue
		}
		doc, err := codec.DecodeIndexShard(k, o.data)
		if err == nil && len(doc.Sessions) == len(want) {
			headA = k
		}
	}
	if headA == "" {
		t.Fatal("no head holds a's sessions")
	}
	e.putRaw(t, "pfx/"+headA, []byte("not a head"))
	fb := e.faults(t)
	r := e.openOn(t, fb)
	fb.Take()
	if got, err := r.ListNewestIn(ctx, 50, projectA, nil); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a's page with its head damaged: %v\n got %v\nwant %v", err, infoIDs(got), infoIDs(want))
	}
	if ops := fb.Take(); !readsPartitions(ops) {
		t.Fatalf("a's page answered from a damaged head")
	}
	report, err := e.open(t).CheckIndex(ctx)
	if err != nil || len(report.Heads) != 1 || "index/head/"+report.Heads[0]+".json.zst" != headA {
		t.Fatalf("check: %v, heads %v, want %s", err, report.Heads, headA)
	}
	if report, err := e.open(t).RepairIndex(ctx); err != nil || !slices.Contains(report.Rebuilt, headA) {
		t.Fatalf("repair: %v, %+v", err, report)
	}
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check after repair: %v, %+v", err, report)
	}
	r = e.openOn(t, fb)
	fb.Take()
	if got, err := r.ListNewestIn(ctx, 50, projectA, nil); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a's page after repair: %v, %v", err, infoIDs(got))
	}
	if ops := fb.Take(); readsPartitions(ops) {
		t.Fatalf("a's page after repair read the partitions: %+v", ops)
	}
}

// TestAdoptHeads: a prefix whose writers kept no heads (a marker without
// index-heads) lists a project's page from the partitions, and reads no
// head; the first sync that read the catalog and writes the index gives
// it its heads and requires the feature, after which the page reads a
// head. Repair does the same. The session imported into a's tree, which
// those writers put in no dirs head, is in the dir filter after it,
// though a writer of this version that folded one of another directory
// in the meantime committed a filter of its own.
func TestAdoptHeads(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"sync", "repair"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			w := e.open(t)
			for i := range 10 {
				appendIn(t, w, projectA, fmt.Sprintf("a %d", i))
			}
			appendIn(t, w, importedA, "imported into a's tree")
			for i := range manifest.RecentSize {
				appendIn(t, w, projectB, fmt.Sprintf("b %d", i))
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// What an earlier version left: no heads, no feature, no
			// commit that says the dirs head holds a session.
			for _, o := range e.rawBucket(t) {
				if isHeadKey(strings.TrimPrefix(o.key, "pfx/")) {
					e.removeRaw(t, o.key)
				}
			}
			marker := string(e.rawObject(t, "pfx/panto-store.json"))
			e.putRaw(t, "pfx/panto-store.json", []byte(strings.Replace(marker, `,"index-heads"`, "", 1)))
			e.rewriteNewestCommit(t, func(c *manifest.IndexShard) {
				c.Base, c.BaseETag, c.DirHead, c.DirFilter, c.DirKeys = 0, "", false, nil, false
			})
			// A panto of this version folds a session of a scratch
			// directory before the heads are adopted.
			later := e.open(t)
			appendIn(t, later, agent.Project{Dir: "/scratch/later"}, "before the adoption")
			if err := later.Close(ctx); err != nil {
				t.Fatal(err)
			}
			all, err := e.open(t).List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := newestOf(all, projectA, 50)
			fb := e.faults(t)
			r := e.openOn(t, fb)
			fb.Take()
			if got, err := r.ListNewestIn(ctx, 50, projectA, nil); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("a's page without heads: %v, %v", err, infoIDs(got))
			}
			if ops := fb.Take(); !readsPartitions(ops) || slices.ContainsFunc(ops, func(o objstore.Op) bool { return isHeadKey(o.Key) }) {
				t.Fatalf("a's page without heads: %+v; want the partitions, no head", ops)
			}
			switch by {
			case "sync":
				s := e.open(t, objstore.WithDeferredIndex())
				if _, err := s.Logs(ctx); err != nil { // a sync reads the catalog
					t.Fatal(err)
				}
				want = append([]agent.SessionInfo{{ID: appendIn(t, s, projectA, "a synced")}}, want...) // 11 of at most 50
				if err := s.Close(ctx); err != nil {
					t.Fatal(err)
				}
			case "repair":
				if _, err := e.open(t).RepairIndex(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if m := string(e.rawObject(t, "pfx/panto-store.json")); !strings.Contains(m, `"index-heads"`) {
				t.Fatalf("marker after the %s: %s", by, m)
			}
			r = e.openOn(t, fb)
			fb.Take()
			got, err := r.ListNewestIn(ctx, 50, projectA, nil)
			if err != nil || !reflect.DeepEqual(infoIDs(got), infoIDs(want)) {
				t.Fatalf("a's page after the %s: %v\n got %v\nwant %v", by, err, infoIDs(got), infoIDs(want))
			}
			if ops := fb.Take(); readsPartitions(ops) {
				t.Fatalf("a's page after the %s read the partitions: %+v", by, ops)
			}
			if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
				t.Fatalf("check after the %s: %v, %+v", by, err, report)
			}
			if _, c := e.newestCommit(t); !c.DirHead || !c.DirKeys || !manifest.DirFilterMayHoldBelow(c.DirFilter, projectA.Root) {
				t.Fatalf("after the %s: dir head %v, dir keys %v, a filter that may hold a session below a's root %v; want all", by, c.DirHead, c.DirKeys, manifest.DirFilterMayHoldBelow(c.DirFilter, projectA.Root))
			}
			checkedPage(t, e, projectA, "after the "+by)
		})
	}
}
