package objstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store/objstore"
)

// idIn returns a new session id in index shard name.
func idIn(name string) string { return name + agent.NewSessionID()[1:] }

// TestIndexDeltas: two Stores take turns creating sessions in one shard,
// so that each write finds its delta number taken by the other (a 412)
// and re-reads; past 16 deltas the writers fold them into a base, and the
// deltas folded by a base older than the prune delay are deleted. A
// fresh Store and one that read the shard at the start both list every
// session, and no delta is left at or below what the base says is pruned.
func TestIndexDeltas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	a, b := e.open(t), e.open(t)
	objstore.SetIndexPruneAfter(a, 0)
	objstore.SetIndexPruneAfter(b, 0)
	early := e.open(t)
	if _, err := early.List(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 40
	want := map[string]bool{}
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		id := idIn("a")
		want[id] = true
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*objstore.Store{a, b} {
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range map[string]*objstore.Store{"fresh": e.open(t), "early": early, "writer": a} {
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, info := range infos {
			got[info.ID] = true
			if info.MessageCount != 1 {
				t.Errorf("%s: %s has %d messages", name, info.ID, info.MessageCount)
			}
		}
		if len(got) != n || len(want) != n {
			t.Fatalf("%s store lists %d sessions, want %d", name, len(got), n)
		}
		for id := range want {
			if !got[id] {
				t.Fatalf("%s store does not list %s", name, id)
			}
		}
	}
	var base *manifest.IndexShard
	var deltas []int64
	for _, o := range e.readBucket(t) {
		m := indexKey.FindStringSubmatch(o.key)
		switch {
		case m == nil || m[1] != "a":
		case m[3] == "":
			codec, _ := manifest.NewCodec()
			var err error
			if base, err = codec.DecodeIndexShard(o.key, codec.CompressSmaller(o.data)); err != nil {
				t.Fatal(err)
			}
		default:
			k, _ := strconv.ParseInt(m[3], 10, 64)
			deltas = append(deltas, k)
		}
	}
	if base == nil {
		t.Fatal("no base: the deltas were never folded")
	}
	t.Logf("base: through %d, pruned %d; deltas %v", base.Through, base.Pruned, deltas)
	if base.Through < 32 || base.Pruned < 16 || len(base.Sessions) > n {
		t.Fatalf("base after %d deltas: %+v", n, base)
	}
	for _, k := range deltas {
		if k <= base.Pruned {
			t.Errorf("delta %d is still there, the base says up to %d are pruned", k, base.Pruned)
		}
	}
}

// TestIndexConcurrentWriters: Stores writing one shard at once (their
// deltas race for numbers, and group commits within each Store) lose no
// entry.
func TestIndexConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	const stores, writers, sessions = 4, 2, 5
	var mu sync.Mutex
	want := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, stores*writers)
	var all []*objstore.Store
	for range stores {
		s := e.open(t)
		all = append(all, s)
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range sessions {
					id := idIn("b")
					msgs := make([]agent.PersistentMessage, j+1)
					for k := range msgs {
						msgs[k] = user("x")
					}
					if err := s.AppendMessages(ctx, id, msgs); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					want[id] = j + 1
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range all {
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := e.open(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(want) {
		t.Fatalf("%d sessions listed, want %d", len(infos), len(want))
	}
	for _, info := range infos {
		if want[info.ID] != info.MessageCount {
			t.Errorf("%s: %d messages, want %d", info.ID, info.MessageCount, want[info.ID])
		}
	}
}
