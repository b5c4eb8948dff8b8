package objstore_test

import (
	"context"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestChangeToken: the token changes with every write another Store
// makes (an append, in the background or deferred to its Flush; a
// deletion), and not without one.
func TestChangeToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	watcher := e.open(t)
	token := func() string {
		t.Helper()
		tok, err := watcher.ChangeToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	id := agent.NewSessionID()
	for _, tc := range []struct {
		name  string
		write func(t *testing.T)
	}{
		{"an append", func(t *testing.T) {
			w := e.open(t)
			if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("one")}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"a deferred append", func(t *testing.T) {
			w := e.open(t, objstore.WithDeferredIndex())
			if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("two")}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"a session in another shard", func(t *testing.T) {
			w := e.open(t, objstore.WithDeferredIndex())
			other := "0" + id[1:]
			if id[0] == '0' {
				other = "1" + id[1:]
			}
			if err := w.AppendMessages(ctx, other, []agent.PersistentMessage{user("elsewhere")}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"a deletion", func(t *testing.T) {
			w := e.open(t)
			at, err := store.Head(ctx, w, id)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Delete(ctx, store.Tombstone{ID: id, At: at}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		before := token()
		if again := token(); again != before {
			t.Fatalf("before %s: the token changed with no write", tc.name)
		}
		tc.write(t)
		if after := token(); after == before {
			t.Errorf("the token did not change with %s", tc.name)
		}
	}
}

// TestListingToken: a Store's listing token names the index as its Open
// read it: two Opens with no write between have the same; a write
// another Store makes, or the Store's own, gives the next Open another;
// and the Store's own writes do not move its token (a listing after
// them shows more than it names, never less).
func TestListingToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	appendNew(t, e.open(t), "there before")
	token := func(s *objstore.Store) string {
		t.Helper()
		tok, err := s.ListingToken(ctx)
		if err != nil || tok == "" {
			t.Fatalf("ListingToken: %q, %v", tok, err)
		}
		return tok
	}
	first := e.open(t)
	before := token(first)
	if got := token(e.open(t)); got != before {
		t.Fatal("two Opens with no write between have different tokens")
	}
	appendNew(t, first, "its own write")
	if err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if token(first) != before {
		t.Fatal("the Store's own write moved its token")
	}
	after := token(e.open(t))
	if after == before {
		t.Fatal("an Open after a write has the token of the Open before it")
	}
	other := e.open(t)
	appendNew(t, other, "another's write")
	if err := other.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := token(e.open(t)); got == after {
		t.Fatal("an Open after another Store's write has the token of the Open before it")
	}
}
