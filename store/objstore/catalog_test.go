package objstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// partitionReads counts the GETs of index partitions among ops.
func partitionReads(ops []objstore.Op) int {
	n := 0
	for _, op := range ops {
		if op.Method == "GET" && strings.HasPrefix(op.Key, "index/") && !strings.HasPrefix(op.Key, "index/log") {
			n++
		}
	}
	return n
}

// TestCatalogCache: with WithIndexCache a run after a sync reads no
// partition when nothing changed, only the commits after a few changes,
// and the partitions again after a deletion pruned the commits it would
// need, or when the bucket under the URL is another one.
func TestCatalogCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	w := e.open(t)
	ids := []string{agent.NewSessionID(), agent.NewSessionID(), agent.NewSessionID()}
	for _, id := range ids {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("hello " + id[:6])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logsWith := func(name string) ([]store.Log, []objstore.Op) {
		t.Helper()
		fb := e.faults(t)
		s := e.openOn(t, fb, objstore.WithIndexCache(cache))
		logs, err := s.Logs(ctx)
		if err != nil {
			t.Fatalf("%s: Logs: %v", name, err)
		}
		if _, err := s.Tombstones(ctx); err != nil {
			t.Fatalf("%s: Tombstones: %v", name, err)
		}
		return logs, fb.Take()
	}
	lengths := func(logs []store.Log) map[string]int64 {
		m := map[string]int64{}
		for _, l := range logs {
			m[l.Info.ID] = l.Checkpoint.Length
		}
		return m
	}
	truth := func() map[string]int64 {
		logs, err := e.open(t).Logs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lengths(logs)
	}

	logs, ops := logsWith("first run")
	if got := partitionReads(ops); got != 256 {
		t.Errorf("first run read %d partitions, want all 256", got)
	}
	if len(logs) != 3 {
		t.Fatalf("first run: %d sessions, want 3", len(logs))
	}
	logs, ops = logsWith("nothing changed")
	if got := partitionReads(ops); got != 0 {
		t.Errorf("a run with nothing changed read %d partitions, want none: %v", got, ops)
	}
	if !mapsEqual(lengths(logs), truth()) {
		t.Errorf("nothing changed: %v, want %v", lengths(logs), truth())
	}

	// Another Store (no cache) appends to one session and creates one.
	if err := w.AppendMessages(ctx, ids[0], []agent.PersistentMessage{user("more")}); err != nil {
		t.Fatal(err)
	}
	if err := w.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("new")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logs, ops = logsWith("after two appends")
	if got := partitionReads(ops); got != 0 {
		t.Errorf("a run after two appends read %d partitions, want none (the commits say what changed)", got)
	}
	if !mapsEqual(lengths(logs), truth()) {
		t.Errorf("after two appends: %v, want %v", lengths(logs), truth())
	}

	// A deletion deletes the commits before its own: the cache cannot
	// catch up through them, and reads the partitions.
	cps, err := w.Checkpoints(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, store.Tombstone{ID: ids[1], Deleted: time.Now(), At: cps[len(cps)-1]}); err != nil {
		t.Fatal(err)
	}
	logs, ops = logsWith("after a deletion")
	if !mapsEqual(lengths(logs), truth()) || slices.ContainsFunc(logs, func(l store.Log) bool { return l.Info.ID == ids[1] }) {
		t.Errorf("after a deletion: %v, want %v", lengths(logs), truth())
	}
	if got := partitionReads(ops); got != 256 && got != 0 {
		t.Errorf("after a deletion: %d partitions read", got)
	}

}

// TestCatalogCacheOtherBucket: a bucket made anew under a cached URL,
// whose log has as many commits as the one cached, is read, not taken
// for the cached one.
func TestCatalogCacheOtherBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cache := t.TempDir()
	fill := func(e *env, text string) {
		s := e.open(t)
		for range 3 {
			if err := s.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user(text)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first, second := newMemEnv(t), newMemEnv(t) // the same URL
	fill(first, "first")
	if _, err := first.open(t, objstore.WithIndexCache(cache)).Logs(ctx); err != nil {
		t.Fatal(err)
	}
	fill(second, "second")
	logs, err := second.open(t, objstore.WithIndexCache(cache)).Logs(ctx)
	if err != nil || len(logs) != 3 || logs[0].Info.LastUserMessage != "second" {
		t.Fatalf("the second bucket under the cached URL: %v %+v", err, logs)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOpenGuessesNewestCommit: with the catalog cached, Open reads the
// newest commit the last run saw beside its listing of the log, so that
// an unchanged log costs Open one round trip, not two.
func TestOpenGuessesNewestCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	w := e.open(t)
	for range 3 {
		if err := w.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("q")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A long delay: the round trips are told apart by when requests
	// start, and a loaded machine (the race detector, a parallel suite)
	// can hold a goroutine back for a good part of a short one.
	openRounds := func() (int, []objstore.Op) {
		fb := e.faults(t)
		fb.SetDelay(500 * time.Millisecond)
		s := e.openOn(t, fb, objstore.WithIndexCache(cache), objstore.WithOpenSnapshot())
		if _, err := s.Logs(ctx); err != nil { // fills the cache
			t.Fatal(err)
		}
		ops := fb.Take()
		var open []objstore.Op
		for _, op := range ops {
			if !strings.HasPrefix(op.Key, "index/") || strings.HasPrefix(op.Key, "index/log") {
				open = append(open, op)
			}
		}
		return opRounds(open), open
	}
	if got, ops := openRounds(); got != 2 {
		t.Errorf("Open with no cache: %d round trips, want 2 (the listing, then the newest commit): %s", got, describeOps(ops))
	}
	if got, ops := openRounds(); got != 1 {
		t.Errorf("Open with the catalog cached and the log unchanged: %d round trips, want 1: %s", got, describeOps(ops))
	}
}

// TestOpenGuessesNewestCommitWithoutCatalog: a Store that reads no
// catalog (a local-first panto's, whose catch-up plans from its shipped
// record) notes at Close the newest commit it knows, so that the next
// Open on the same cache reads that commit beside its listing: one round
// trip, as with a catalog cached.
func TestOpenGuessesNewestCommitWithoutCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cache := t.TempDir()
	openRounds := func() (int, []objstore.Op) {
		fb := e.faults(t)
		fb.SetDelay(500 * time.Millisecond) // as in TestOpenGuessesNewestCommit
		s := e.openOn(t, fb, objstore.WithIndexCache(cache), objstore.WithOpenSnapshot())
		if _, err := s.Latest(ctx); err != nil {
			t.Fatal(err)
		}
		open := fb.Take()
		// Writes, as panto's turn does, and closes: no catalog read.
		if err := s.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("q")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return opRounds(open), open
	}
	w := e.open(t)
	if err := w.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("q")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ops := openRounds(); got != 2 {
		t.Errorf("Open and Latest with nothing noted: %d round trips, want 2 (the listing, then the newest commit): %s", got, describeOps(ops))
	}
	if got, ops := openRounds(); got != 1 {
		t.Errorf("Open and Latest after a Close that noted the newest commit: %d round trips, want 1: %s", got, describeOps(ops))
	}
}
