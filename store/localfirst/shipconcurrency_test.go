package localfirst_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

// countingDeleter is a bucket store that counts the deletions under way
// at once, each held a moment so that those sent together overlap.
type countingDeleter struct {
	store.LogStore
	mu            sync.Mutex
	now, most, of int
}

func (c *countingDeleter) Unwrap() agent.SessionStore { return c.LogStore }

func (c *countingDeleter) Tombstones(ctx context.Context) ([]store.Tombstone, error) {
	return store.Tombstones(ctx, c.LogStore)
}

func (c *countingDeleter) Delete(ctx context.Context, t store.Tombstone) error {
	c.mu.Lock()
	c.now++
	c.most = max(c.most, c.now)
	c.of++
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	time.Sleep(50 * time.Millisecond)
	return store.Delete(ctx, c.LogStore, t)
}

// TestShipConcurrency: the shipper sends four sessions at once unless
// asked for more (ShipConcurrency: panto rm and prune ask for sixteen),
// and every deletion reaches the bucket by Close either way.
func TestShipConcurrency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ask, most int
	}{{0, 4}, {16, 16}} {
		t.Run(fmt.Sprint(tc.ask), func(t *testing.T) {
			t.Parallel()
			srv := miniotest.Shared(t)
			m := newMachine(t, srv, srv.NewBucket(t))
			ctx := context.Background()
			w := bucketStore(t, m)
			var ids []string
			for i := range 24 {
				id := agent.NewSessionID()
				if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("doomed ", i))}); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := store.Close(ctx, w); err != nil {
				t.Fatal(err)
			}
			counted := &countingDeleter{}
			s, err := localfirst.Open(ctx, localfirst.Options{
				Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable,
				OpenBucket: func(ctx context.Context) (store.LogStore, error) {
					b, err := m.openBucket(ctx)
					counted.LogStore = b
					return counted, err
				},
				ReadTimeout: 10 * time.Second, CloseTimeout: 60 * time.Second, ShipConcurrency: tc.ask,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				at, err := store.Head(ctx, s, id)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			counted.mu.Lock()
			most, of := counted.most, counted.of
			counted.mu.Unlock()
			if of != len(ids) || most > tc.most || tc.ask > 4 && most <= 4 {
				t.Errorf("ShipConcurrency %d: %d deletions sent, at most %d at once; want %d, at most %d and more than 4 when asked", tc.ask, of, most, len(ids), tc.most)
			}
			tombs, err := store.Tombstones(ctx, bucketStore(t, m))
			if err != nil || len(tombs) != len(ids) {
				t.Errorf("the bucket lists %d tombstones (%v), want %d", len(tombs), err, len(ids))
			}
		})
	}
}
