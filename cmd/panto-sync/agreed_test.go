package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// TestPullKeepsATurnWrittenWhileDeletedElsewhere: a session pushed from
// here, continued and deleted on another machine after a turn was
// written here, is not deleted with that turn by the next pull: the
// record of where this catalog and the bucket agreed (written by the
// push, read by the pull: another run of another command) says the
// bucket never held the turn. Judged by length, as it was, the shorter
// copy here was taken for one behind the deletion, and the turn was
// gone.
func TestPullKeepsATurnWrittenWhileDeletedElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	id := newSession(t, dir, 2)
	e.must(t, 0, "push", "--dir", dir, e.url)
	turn := appendBatch(t, dir, id, false)
	continueAndDeleteElsewhere(t, e, id)

	r := e.must(t, 0, "pull", "--on-diverge", "keep-both", "--dir", dir, e.url)
	kept := localKeptCopyOf(t, dir, id)
	if kept == "" {
		t.Fatalf("the turn written here is in no session of the catalog; pull said:\n%s", r.stdout)
	}
	if got := fileLength(dir, kept); got < int64(len(turn)) {
		t.Errorf("the kept session holds %d bytes, less than the turn's %d", got, len(turn))
	}
	// Without keep-both the session is a conflict, both copies left alone.
	dir2 := t.TempDir()
	id2 := newSession(t, dir2, 2)
	e.must(t, 0, "push", "--dir", dir2, e.url)
	appendBatch(t, dir2, id2, false)
	continueAndDeleteElsewhere(t, e, id2)
	// status says what pull will do.
	if r := e.run(t, "status", "--dir", dir2, e.url); !strings.Contains(r.stdout, "1 deletion conflicts") {
		t.Errorf("status does not foresee the conflict:\n%s", r.stdout)
	}
	r = e.must(t, exitDiverged, "pull", "--dir", dir2, e.url)
	if !strings.Contains(r.stdout, "with a turn the remote never had") {
		t.Errorf("pull does not say why the shorter copy is a conflict:\n%s", r.stdout)
	}
	if fileLength(dir2, id2) == 0 {
		t.Error("pull deleted the catalog's copy, with its turn")
	}
}

// TestWatchKeepsATurnWrittenWhileStopped is the same for a watch that
// was not running when the turn was written: the record it kept before
// it stopped judges the copy at its next start.
func TestWatchKeepsATurnWrittenWhileStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	w, stop := startWatch(t, e, e.srv.Endpoint(), "--poll", "1h", "--dir", dir, e.url)
	eventually(t, "watch starts", func() bool { return w.saw("watching") })
	id := newSession(t, dir, 2)
	eventually(t, "the session reaches the bucket", func() bool { return bucketLength(t, e, id) == fileLength(dir, id) })
	if code := stop(); code != 0 {
		t.Fatalf("watch exited %d", code)
	}

	turn := appendBatch(t, dir, id, false)
	continueAndDeleteElsewhere(t, e, id)
	w, stop = startWatch(t, e, e.srv.Endpoint(), "--poll", "1h", "--dir", dir, e.url)
	defer stop()
	var kept string
	eventually(t, "the turn written here reaches the bucket, in a session linked to the deleted one", func() bool {
		kept = keptCopyOf(t, e, id)
		return kept != ""
	})
	if got := bucketLength(t, e, kept); got < int64(len(turn)) {
		t.Errorf("the kept session holds %d bytes, less than the turn's %d", got, len(turn))
	}
}

// localKeptCopyOf is the id of the catalog's session whose header links
// id (a copy kept both ways), "" when there is none.
func localKeptCopyOf(t *testing.T, dir, id string) string {
	t.Helper()
	cat, err := fsjsonl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cat.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range list {
		if info.Parent == id {
			return info.ID
		}
	}
	return ""
}

// TestAgreementsJournal: the record outlives its run, the last line of a
// session wins, a forgotten session is judged by the tombstone's rule, a
// diverged one's copies are never held by the other side, a torn line is
// skipped, and a journal of mostly stale lines is rewritten to one line
// a session.
func TestAgreementsJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sync", "x.agreed")
	cp := func(n int64, sum string) store.Checkpoint {
		return store.Checkpoint{Length: n, SHA256: sum + "00000000000000000000000000000000000000000000000000"}
	}
	at10, at20 := cp(10, "00000000000000aa"), cp(20, "00000000000000bb")
	tomb := store.Tombstone{ID: "s", At: cp(30, "00000000000000cc")}

	a := loadAgreements(path)
	if !a.covered("s", tomb, at10) {
		t.Fatal("with no agreement a shorter copy is not judged by the tombstone's rule")
	}
	a.note(replica.Event{Plan: replica.Plan{ID: "s", Src: at10}, Kind: replica.Created})
	a.note(replica.Event{Plan: replica.Plan{ID: "s", Src: at20}, Kind: replica.Appended})
	a.note(replica.Event{Plan: replica.Plan{ID: "gone", Src: at10}, Kind: replica.Unchanged})
	a.note(replica.Event{Plan: replica.Plan{ID: "gone"}, Kind: replica.Deleted})
	a.note(replica.Event{Plan: replica.Plan{ID: "dry", Src: at10}, Kind: replica.Created, DryRun: true})
	a.note(replica.Event{Plan: replica.Plan{ID: "d", Src: at10}, Kind: replica.Unchanged})
	a.note(replica.Event{Plan: replica.Plan{ID: "d", Src: at20, Dst: cp(20, "00000000000000dd")}, Kind: replica.KeptBoth})
	a.save()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("torn 12") // a run cut short mid-line
	f.Close()

	b := loadAgreements(path)
	switch {
	case b.covered("s", tomb, at10):
		t.Error("a copy behind the last agreement is taken as held whole")
	case !b.covered("s", tomb, at20):
		t.Error("the copy at the last agreement is not behind the deletion")
	case !b.covered("gone", tomb, at20) || !b.covered("dry", tomb, at20):
		t.Error("a forgotten or dry-run session is not judged by the tombstone's rule")
	}
	if b.covered("d", tomb, at10) || b.covered("d", tomb, at20) {
		t.Error("a copy of a diverged session is taken as held whole by the side that deleted it")
	}
	if _, ok := b.at["torn"]; ok {
		t.Error("a torn line was read")
	}

	for i := 0; i < 1100; i++ {
		n := int64(i%2*10 + 10)
		b.note(replica.Event{Plan: replica.Plan{ID: "s", Src: cp(n, "00000000000000aa")}, Kind: replica.Appended})
	}
	b.save()
	c := loadAgreements(path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != len(c.at) || len(c.at) != 2 {
		t.Errorf("after a rewrite the journal has %d lines for %d sessions, want 2 and 2", lines, len(c.at))
	}
	if again := loadAgreements(path); len(again.at) != 2 || again.covered("d", tomb, at10) {
		t.Errorf("the rewritten journal reads as %d sessions, a diverged one judged by length: %v", len(again.at), again.covered("d", tomb, at10))
	}
	if c.at["s"] != agreedOf(cp(20, "00000000000000aa")) {
		t.Errorf("after a rewrite s agreed at %+v", c.at["s"])
	}
}

// BenchmarkLoadAgreements reads the record of a catalog of 100,000
// sessions, one line each: what every push, pull and copy that compares
// sessions (not one that finds both sides unchanged) and every watch
// start pays.
func BenchmarkLoadAgreements(b *testing.B) {
	path := filepath.Join(b.TempDir(), "x.agreed")
	a := loadAgreements(path)
	for i := 0; i < 100_000; i++ {
		id := fmt.Sprintf("%032x", i*7919)
		a.note(replica.Event{Plan: replica.Plan{ID: id, Src: store.Checkpoint{Length: int64(1000 + i), SHA256: fmt.Sprintf("%064x", i)}}, Kind: replica.Created})
	}
	a.save()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := loadAgreements(path); len(got.at) != 100_000 {
			b.Fatalf("read %d agreements", len(got.at))
		}
	}
	b.ReportMetric(float64(fi.Size()), "file-bytes")
}
