package objstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestResolveRecent: an id prefix of one of the newest sessions (the
// newest commit's recent view) resolves with one LIST of the sessions
// under the prefix and reads no partition; the full id of one, with no
// request beyond that LIST. A prefix of an older session reads the
// partition as before and sends no LIST; one of several sessions, or of
// a deleted one, reads the partition too, and each says what it did
// before: the older session, ambiguous, deleted.
func TestResolveRecent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	var ids []string
	for range manifest.RecentSize + 8 {
		ids = append(ids, appendNew(t, w, "session"))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	r := e.openOn(t, fb)
	fb.Take()

	newest := ids[len(ids)-1]
	for _, q := range []string{newest[:8], newest} {
		sess, err := r.Resolve(ctx, q)
		ops := fb.Take()
		if err != nil || sess.Info.ID != newest || sess.Info.MessageCount != 1 {
			t.Fatalf("Resolve(%q) = %v, %v; want %s", q, sess, err, newest)
		}
		if len(ops) != 1 || ops[0].Method != "LIST" {
			t.Errorf("Resolve(%q) of one of the newest sessions sent %+v; want one LIST", q, ops)
		}
	}
	oldest := ids[0] // past the recent view
	if sess, err := r.Resolve(ctx, oldest[:8]); err != nil || sess.Info.ID != oldest {
		t.Fatalf("Resolve of the oldest session: %v, %v", sess, err)
	}
	ops := fb.Take()
	if !readsPartitions(ops) || countOps(ops, "LIST") != 0 {
		t.Errorf("Resolve of a session past the recent view sent %+v; want its partition's read and no LIST (no round trip more than before)", ops)
	}

	// Two of the newest sessions under one prefix: ambiguous, as the
	// partition says.
	a, b := "abcdef0123456789abcdef0123456789", "abcdef01ffffffffffffffffffffffff"
	for _, id := range []string{a, b} {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("twin")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r = e.openOn(t, fb)
	fb.Take()
	if _, err := r.Resolve(ctx, "abcdef01"); !errors.Is(err, agent.ErrAmbiguousSessionID) {
		t.Errorf("Resolve of two sessions' prefix: %v, want ambiguous", err)
	}
	if ops := fb.Take(); !readsPartitions(ops) {
		t.Errorf("an ambiguous prefix sent %+v; want its partition's read", ops)
	}

	// A deleted one of the newest: deleted, as the partition says.
	logs := mustLogs(t, w)
	if err := w.Delete(ctx, store.Tombstone{ID: newest, Deleted: time.Now().UTC(), At: logs[newest].Checkpoint}); err != nil {
		t.Fatal(err)
	}
	r = e.openOn(t, fb)
	fb.Take()
	if _, err := r.Resolve(ctx, newest[:8]); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("Resolve of a deleted session: %v, want deleted", err)
	}
}

// TestResolveAhead: a Store opened for a command that resolves a prefix
// first (panto show PREFIX, -r PREFIX, rm: WithResolveAhead) sends the
// resolve's LIST with Open's own requests, in no round trip of its own,
// and the resolve of one of the newest sessions then sends nothing; the
// listing serves that one resolve, and one that is not a session id's is
// not sent.
func TestResolveAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	var ids []string
	for range 3 {
		ids = append(ids, appendNew(t, w, "session"))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	fb.SetDelay(100 * time.Millisecond) // so that a loaded machine does not split a round trip
	e.openOn(t, fb)
	plain := opRounds(fb.Take())
	want := ids[1]
	r := e.openOn(t, fb, objstore.WithResolveAhead(want[:8], "not an id!"))
	open := fb.Take()
	if got := opRounds(open); got != plain || countOps(open, "LIST") != 2 {
		t.Errorf("Open with a resolve ahead: %d round trips (%d without), %d LISTs (want the log's and the prefix's): %s", got, plain, countOps(open, "LIST"), describeOps(open))
	}
	sess, err := r.Resolve(ctx, want[:8])
	if err != nil || sess.Info.ID != want {
		t.Fatalf("Resolve(%q) = %v, %v; want %s", want[:8], sess, err, want)
	}
	if ops := fb.Take(); len(ops) != 0 {
		t.Errorf("the resolve Open listed ahead sent %s; want nothing", describeOps(ops))
	}
	if sess, err := r.Resolve(ctx, want[:8]); err != nil || sess.Info.ID != want {
		t.Fatalf("Resolve(%q) again = %v, %v", want[:8], sess, err)
	}
	if ops := fb.Take(); len(ops) != 1 || ops[0].Method != "LIST" {
		t.Errorf("a second resolve of the prefix sent %s; want its own LIST", describeOps(ops))
	}
}
