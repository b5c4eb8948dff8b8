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
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

var (
	projectC = agent.Project{Remote: "host.test/team/c", Root: "/src/c", Dir: "/src/c"}
	// atRoot knows only its directory, the root of c's work tree: a
	// session of another agent imported on a machine without the tree.
	atRoot = agent.Project{Dir: projectC.Root}
)

// deleteIn deletes session id through s, at its last checkpoint.
func deleteIn(t *testing.T, s *objstore.Store, id string) {
	t.Helper()
	ctx := context.Background()
	cps, err := s.Checkpoints(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: cps[len(cps)-1]}); err != nil {
		t.Fatal(err)
	}
}

// headName is the name of the head of the sessions whose project's Key
// is key, as a head's Claims and Claimed spell it.
func headName(key string) string {
	return strings.TrimSuffix(strings.TrimPrefix(objstore.ProjectHeadKey(key), "index/head/"), ".json.zst")
}

// readHead decodes the head of key (nil: there is none).
func (e *env) readHead(t *testing.T, key string) *manifest.IndexShard {
	t.Helper()
	data := e.maybeRawObject(t, e.key(objstore.ProjectHeadKey(key)))
	if data == nil {
		return nil
	}
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := codec.DecodeIndexShard(objstore.ProjectHeadKey(key), data)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// readsKey reports whether ops read key.
func readsKey(ops []objstore.Op, key string) bool {
	return slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "GET" && o.Key == key })
}

// TestClaimedRoot: sessions of another agent imported at the root of
// work tree c on a machine without the tree know only their directory,
// and sit in the root's head: c's page read it beside c's own, five
// requests. A turn in the tree claims the root's head for c's (its fold
// writes the claim, copies what the root's head holds, and says so in
// its commit), and c's page reads c's head alone, four requests, and
// lists them. After the claim, another import at the root, and a
// deletion of one, reach c's head before their commits. A panto that
// predates claims drops ClaimsSince from its commit, so the claim is not
// trusted and c's page reads the root's head again, until the next turn
// in the tree claims again.
func TestClaimedRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	rootHead := e.key(objstore.ProjectHeadKey(projectC.Root))
	// newer pushes c's sessions out of the newest commit's recent view
	// (and folds them), so that c's page reads the heads.
	newer := func(s *objstore.Store, what string) {
		for i := range manifest.RecentSize + 10 {
			appendIn(t, s, projectB, fmt.Sprint(what, " ", i))
		}
	}
	closeStore := func(s *objstore.Store) {
		t.Helper()
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	page := func(what string, wantRoot bool) {
		t.Helper()
		ops := checkedPage(t, e, projectC, what)
		readRoot := readsKey(ops, strings.TrimPrefix(rootHead, "pfx/"))
		want := 4
		if wantRoot {
			want = 5
		}
		if readRoot != wantRoot || len(ops) != want || readsPartitions(ops) || readsDirsHead(ops) {
			t.Fatalf("%s: c's page read the root's head %v (want %v), the partitions %v, the dirs head %v, in %d requests (want %d): %s",
				what, readRoot, wantRoot, readsPartitions(ops), readsDirsHead(ops), len(ops), want, describeOps(ops))
		}
	}
	holds := func(doc *manifest.IndexShard, id string) bool {
		_, ok := doc.Sessions[id]
		return doc != nil && ok
	}

	imp := e.open(t)
	var imported []string
	for i := range 12 {
		imported = append(imported, appendIn(t, imp, atRoot, fmt.Sprint("imported at c's root ", i)))
	}
	newer(imp, "b")
	closeStore(imp)
	page("before a turn in the tree", true)

	tree := e.open(t)
	appendIn(t, tree, projectC, "a turn in c")
	newer(tree, "b after c's turn")
	closeStore(tree)
	_, c := e.newestCommit(t)
	if c.ClaimsSince == 0 || !manifest.DirFilterMayHoldClaim(c.DirFilter, projectC.Root, projectC.Key()) {
		t.Fatalf("after a turn in c's tree the newest commit says claims since %d, the claim %v; want both", c.ClaimsSince, manifest.DirFilterMayHoldClaim(c.DirFilter, projectC.Root, projectC.Key()))
	}
	if root := e.readHead(t, projectC.Root); root == nil || !slices.Contains(root.Claims, headName(projectC.Key())) {
		t.Fatalf("the root's head does not name c's as a claimer: %+v", root)
	}
	own := e.readHead(t, projectC.Key())
	if _, ok := own.Claimed[headName(projectC.Root)]; !ok || !holds(own, imported[0]) {
		t.Fatalf("c's head records the claim %v, holds an imported session %v; want both", own.Claimed, holds(own, imported[0]))
	}
	page("after the claim", false)

	// The check counts in c's head the sessions of the root it claimed:
	// one missing there (and so from c's page) is a fault of c's head.
	ownKey := e.key(objstore.ProjectHeadKey(projectC.Key()))
	kept := e.rawObject(t, ownKey)
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	delete(own.Sessions, imported[5])
	lacking, err := codec.EncodeIndexShard(objstore.ProjectHeadKey(projectC.Key()), own)
	if err != nil {
		t.Fatal(err)
	}
	e.putRaw(t, ownKey, lacking)
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !slices.Equal(report.Heads, []string{headName(projectC.Key())}) {
		t.Fatalf("check of c's head lacking a session of the root it claimed: heads %v, %v; want c's", report.Heads, err)
	}
	e.putRaw(t, ownKey, kept)

	// Another machine without the tree imports one more at the root:
	// its fold puts it in c's head too.
	more := e.open(t)
	late := appendIn(t, more, atRoot, "imported at c's root after the claim")
	newer(more, "b after the late import")
	closeStore(more)
	if !holds(e.readHead(t, projectC.Key()), late) {
		t.Fatal("an import at the root after the claim is not in c's head")
	}
	page("after an import since the claim", false)

	// A deletion at the root takes the session out of c's head too.
	del := e.open(t)
	deleteIn(t, del, imported[3])
	closeStore(del)
	if holds(e.readHead(t, projectC.Key()), imported[3]) {
		t.Fatal("a deleted session at the root is still in c's head")
	}
	page("after a deletion at the root", false)

	// The index as claims leave it is sound. With c's head damaged,
	// repair rebuilds every head exactly, which drops c's claim (the
	// sessions it brought are not c's), so c's page reads the root's
	// head again, and the next turn claims again.
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check with a claim: %+v, %v; want clean", report, err)
	}
	e.putRaw(t, e.key(objstore.ProjectHeadKey(projectC.Key())), []byte("not a head"))
	if report, err := e.open(t).RepairIndex(ctx); err != nil || len(report.Heads) != 1 {
		t.Fatalf("repair of c's damaged head: %+v, %v", report, err)
	}
	if own := e.readHead(t, projectC.Key()); len(own.Claimed) != 0 || holds(own, imported[0]) {
		t.Fatalf("after repair c's head records claims %v, holds an imported session %v; want neither", own.Claimed, holds(own, imported[0]))
	}
	page("after repair", true)
	if report, err := e.open(t).CheckIndex(ctx); err != nil || !report.Clean() {
		t.Fatalf("check after repair: %+v, %v; want clean", report, err)
	}
	repaired := e.open(t)
	appendIn(t, repaired, projectC, "a turn in c after repair")
	newer(repaired, "b after repair")
	closeStore(repaired)
	page("after a turn since repair", false)

	// A panto that predates claims writes the root's head, which drops
	// its claims, and a commit, which drops ClaimsSince. The next import
	// at the root, by this version, finds no claim in the root's head
	// and does not write c's.
	root := e.readHead(t, projectC.Root)
	root.Claims = nil
	unclaimed, err := codec.EncodeIndexShard(objstore.ProjectHeadKey(projectC.Root), root)
	if err != nil {
		t.Fatal(err)
	}
	e.putRaw(t, rootHead, unclaimed)
	e.rewriteNewestCommit(t, func(c *manifest.IndexShard) {
		c.Base, c.BaseETag, c.ClaimsSince = 0, "", 0
	})
	older, _ := e.newestCommit(t)
	after := e.open(t)
	unseen := appendIn(t, after, atRoot, "imported at c's root after the older panto")
	newer(after, "b after the older panto")
	closeStore(after)
	if holds(e.readHead(t, projectC.Key()), unseen) {
		t.Fatal("an import at the root whose head lost its claims reached c's head")
	}
	if _, c := e.newestCommit(t); c.ClaimsSince != older+1 {
		t.Fatalf("the commits after an older panto's (%d) say claims since %d, want the first of them, %d", older, c.ClaimsSince, older+1)
	}
	page("after an older panto's commit", true)

	again := e.open(t)
	appendIn(t, again, projectC, "another turn in c")
	newer(again, "b after c's second turn")
	closeStore(again)
	page("after the next turn in the tree", false)
	if !holds(e.readHead(t, projectC.Key()), unseen) {
		t.Fatal("the claim made again did not bring in what the root's head took since the older panto")
	}
}

// TestClaimRace: imports at the root of c's tree, by machines without
// the tree, race turns in the tree that claim the root's head, each
// over a link with some latency so that their heads' reads and writes
// interleave; after every round c's page is the full listing's, whether
// it read the root's head or trusted c's claim of it.
func TestClaimRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	seed := e.open(t)
	appendIn(t, seed, atRoot, "imported at c's root first")
	if err := seed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	trusted := 0
	for round := range 4 {
		errs := make(chan error, 3)
		write := func(p agent.Project, what string) {
			fb := e.faults(t)
			fb.SetDelay(500 * time.Microsecond)
			s := e.openOn(t, fb)
			for i := range 3 {
				id := agent.NewSessionID()
				if err := s.AppendMessagesIn(ctx, p, id, []agent.PersistentMessage{user(fmt.Sprint(what, " ", round, " ", i))}); err != nil {
					errs <- err
					return
				}
			}
			for i := range manifest.RecentSize / 2 {
				id := agent.NewSessionID()
				if err := s.AppendMessagesIn(ctx, projectB, id, []agent.PersistentMessage{user(fmt.Sprint(what, " b ", round, " ", i))}); err != nil {
					errs <- err
					return
				}
			}
			errs <- s.Close(ctx)
		}
		go write(atRoot, "imported")
		go write(atRoot, "imported elsewhere")
		go write(projectC, "a turn in c")
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		ops := checkedPage(t, e, projectC, fmt.Sprint("round ", round))
		if !readsKey(ops, objstore.ProjectHeadKey(projectC.Root)) {
			trusted++
		}
	}
	if trusted == 0 {
		t.Fatal("c's page read the root's head in every round: no claim was trusted")
	}
}

// TestClaimOfAnIncompleteRoot: more sessions imported at c's root than
// the root's head keeps, then the newest of them deleted, leave that
// head holding fewer than it keeps and not Complete (it lacks the
// oldest, dropped for room). c's head, holding older sessions of its
// own, claims it: it must keep nothing older than the root's oldest,
// or c's page would take c's old sessions for the page's end and miss
// the dropped ones newer than them. The page is the full listing's.
func TestClaimOfAnIncompleteRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	for i := range 10 {
		appendIn(t, w, projectC, fmt.Sprint("an old turn in c ", i))
	}
	var imported []string
	for i := range manifest.HeadSize + 6 {
		imported = append(imported, appendIn(t, w, atRoot, fmt.Sprint("imported at c's root ", i)))
	}
	for i := range manifest.RecentSize + 10 {
		appendIn(t, w, projectB, fmt.Sprint("b ", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	del := e.open(t)
	for _, id := range imported[len(imported)-20:] {
		deleteIn(t, del, id)
	}
	if err := del.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if root := e.readHead(t, projectC.Root); root == nil || root.Complete || len(root.Sessions) >= manifest.HeadSize {
		t.Fatalf("the root's head: %+v; want one not Complete, holding fewer than %d", root, manifest.HeadSize)
	}
	tree := e.open(t)
	appendIn(t, tree, projectC, "a turn in c")
	for i := range manifest.RecentSize + 10 {
		appendIn(t, tree, projectB, fmt.Sprint("b after c's turn ", i))
	}
	if err := tree.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if own := e.readHead(t, projectC.Key()); own == nil || len(own.Claimed) == 0 || own.Complete {
		t.Fatalf("c's head after the turn: %+v; want a claim, not Complete", own)
	}
	checkedPage(t, e, projectC, "after the claim of a root's head that is not Complete")
}
