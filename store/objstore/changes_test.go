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
