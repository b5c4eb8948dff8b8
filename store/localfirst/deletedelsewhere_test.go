package localfirst_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

// TestDeletedElsewhere: a session machine a wrote and b continued and
// deleted is neither listed nor continued on a, whose copy is behind the
// deleted log, nor read on c, which read it before; none of its bytes
// come back to the bucket.
func TestDeletedElsewhere(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()

	ids := a.newSessions("kept", "from a") // the one to delete is the newest
	keep, deleted := ids[0], ids[1]

	// c read the session too.
	c := newMachine(t, srv, bucket)
	sc := c.open()
	if got := texts(t, sc, deleted); !equal(got, []string{"from a"}) {
		t.Fatalf("c reads %q", got)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}

	writeThenDelete(t, b, deleted, "from b")

	sa := a.open()
	list, err := sa.ListNewest(ctx, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range list {
		if info.ID == deleted {
			t.Errorf("a lists %s, which b deleted", deleted)
		}
	}
	latest, err := sa.Latest(ctx)
	if err != nil {
		t.Fatalf("Latest on a: %v", err)
	}
	if latest.Info.ID != keep {
		t.Fatalf("a continues %s, want %s (the newest not deleted)", latest.Info.ID, keep)
	}
	_, err = sa.Resolve(ctx, deleted)
	var gone *agent.DeletedError
	if !errors.As(err, &gone) {
		t.Fatalf("a resolves the deleted session: %v, want a DeletedError", err)
	}
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc = c.open()
	_, err = sc.Load(ctx, deleted)
	if !errors.As(err, &gone) {
		t.Errorf("c loads the deleted session: %v, want a DeletedError", err)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	noText(t, srv, bucket, "from a", "from b")
}

// newSessions has machine m write a session of each text, in turn (each
// the newer by the clock), close, and say their ids.
func (m *machine) newSessions(texts ...string) []string {
	m.t.Helper()
	ctx := context.Background()
	s := m.open()
	var ids []string
	for _, text := range texts {
		time.Sleep(10 * time.Millisecond)
		sess := s.Create()
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			m.t.Fatal(err)
		}
		ids = append(ids, sess.Info.ID)
	}
	if err := s.Close(ctx); err != nil {
		m.t.Fatal(err)
	}
	return ids
}

// writeThenDelete has machine m append text to session id, as it
// resolves it, then delete the session, and close.
func writeThenDelete(t *testing.T, m *machine, id, text string) {
	t.Helper()
	ctx := context.Background()
	s := m.open()
	sess, err := s.Resolve(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
		t.Fatal(err)
	}
	at, err := store.Head(ctx, s, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, s, store.Tombstone{ID: id, Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// noText fails when an object of bucket holds one of texts (compressed
// or not).
func noText(t *testing.T, srv *miniotest.Server, bucket string, texts ...string) {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for key, data := range srv.Objects(t, bucket) {
		if plain, err := dec.DecodeAll(data, nil); err == nil {
			data = plain
		}
		for _, text := range texts {
			if strings.Contains(string(data), text) {
				t.Errorf("%s holds %q", key, text)
			}
		}
	}
}

// TestWrittenWhileDeletedElsewhere: machine a appends to a session that
// b continued and deleted meanwhile. a's copy is shorter than what b
// deleted, but not a prefix of it: a's turn is kept, in a new session
// linked to the deleted one, and b's deleted turn does not come back.
func TestWrittenWhileDeletedElsewhere(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()

	id := a.newSessions("from a")[0]
	sa := a.open()
	onA, err := sa.Resolve(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	writeThenDelete(t, b, id, "from b, a longer turn than a's, then deleted with the session")

	if err := onA.Append(ctx, []agent.PersistentMessage{user("a, after")}); err != nil {
		t.Fatal(err)
	}
	if err := sa.Close(ctx); err != nil {
		t.Fatalf("Close on a: %v", err)
	}
	note := a.told("deleted on another machine")
	if note == "" {
		t.Fatalf("a was not told that its turn went to a new session; told %q", a.notes)
	}

	bs := bucketStore(t, a)
	list, err := bs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kept *agent.SessionInfo
	for i, info := range list {
		if info.ID == id {
			t.Fatalf("the bucket lists the deleted session %s", id)
		}
		if info.Parent == id {
			kept = &list[i]
		}
	}
	if kept == nil {
		t.Fatalf("the bucket holds no session linked to %s: %v", id, list)
	}
	if got, want := texts(t, bs, kept.ID), []string{"from a", "a, after"}; !equal(got, want) {
		t.Fatalf("the kept session holds %q, want %q", got, want)
	}
	sa = a.open()
	defer sa.Close(ctx)
	if got := texts(t, sa, kept.ID); !equal(got, []string{"from a", "a, after"}) {
		t.Fatalf("a's replica holds %q in the kept session", got)
	}
	noText(t, srv, bucket, "from b, a longer turn than a's, then deleted with the session")
}

// heldDeletions is the bucket's store with its deletions held until
// release is closed: what the bucket lists while the shipper has not
// sent a deletion yet.
type heldDeletions struct {
	*objstore.Store
	release chan struct{}
}

func (h *heldDeletions) Delete(ctx context.Context, t store.Tombstone) error {
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Store.Delete(ctx, t)
}

// TestDeletedHereNotListed: a session deleted on this machine while the
// bucket did not answer is neither listed nor continued once it answers
// again, before the shipper sent the deletion; then the deletion reaches
// the bucket.
func TestDeletedHereNotListed(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	ids := m.newSessions("kept", "deleted offline") // the one to delete is the newest
	keep, deleted := ids[0], ids[1]

	m.offline = true
	s := m.open()
	at, err := store.Head(ctx, s, deleted)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, s, store.Tombstone{ID: deleted, Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err == nil || !strings.Contains(err.Error(), "1 deletion not yet sent") {
		t.Fatalf("Close offline: %v, want it to say the deletion is left", err)
	}

	m.offline = false
	held := &heldDeletions{release: make(chan struct{})}
	s, err = localfirst.Open(ctx, localfirst.Options{
		Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable, ReadTimeout: 10 * time.Second, CloseTimeout: 30 * time.Second,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			b, err := m.openBucket(ctx)
			if err != nil {
				return nil, err
			}
			held.Store = b.(*objstore.Store)
			return held, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	newest, err := s.ListNewest(ctx, 1, nil)
	if err != nil || len(newest) != 1 || newest[0].ID != keep {
		t.Errorf("ListNewest(1): %+v (%v), want %s, the newest not deleted", newest, err, keep)
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := s.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range all {
		if info.ID == deleted {
			t.Errorf("List lists %s, deleted on this machine", deleted)
		}
	}
	for _, l := range logs {
		if l.Info.ID == deleted {
			t.Errorf("Logs lists %s, deleted on this machine", deleted)
		}
	}
	if latest, err := s.Latest(ctx); err != nil || latest.Info.ID != keep {
		t.Errorf("Latest: %v, want %s (the newest not deleted)", err, keep)
	}

	close(held.release)
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close online: %v", err)
	}
	var gone *agent.DeletedError
	if _, err := bucketStore(t, m).Resolve(ctx, deleted); !errors.As(err, &gone) {
		t.Errorf("the bucket resolves %s: %v, want a DeletedError", deleted, err)
	}
}

// TestDeletedOnBothSides: a session deleted on this machine while the
// bucket did not answer, and on another machine meanwhile, is left to
// send no more once the bucket answers: Close says nothing is left, then
// and at the next run.
func TestDeletedOnBothSides(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()
	id := a.newSessions("deleted twice")[0]
	remove := func(m *machine) error {
		t.Helper()
		s := m.open()
		if _, err := s.Resolve(ctx, id); err != nil {
			t.Fatal(err)
		}
		at, err := store.Head(ctx, s, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(ctx, s, store.Tombstone{ID: id, Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
			t.Fatal(err)
		}
		return s.Close(ctx)
	}
	a.offline = true
	if err := remove(a); err == nil || !strings.Contains(err.Error(), "1 deletion not yet sent") {
		t.Fatalf("Close offline: %v, want it to say the deletion is left", err)
	}
	a.offline = false
	if err := remove(b); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		s := a.open()
		if _, err := s.List(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("run %d back online: Close: %v, want nothing left to send", run, err)
		}
	}
}
