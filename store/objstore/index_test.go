package objstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store/objstore"
)

// idIn returns a new session id in index shard name.
func idIn(name string) string { return name + agent.NewSessionID()[1:] }

// TestIndexLegacyDeltas: a prefix an earlier writer of format 3 wrote
// (index deltas after the bases, no index-bases feature in the marker) is
// read whole: its readers apply the deltas. The first write of this
// version folds them into the base it writes and adds the feature; from
// then on a reader reads the bases alone, and a later write deletes the
// deltas the base folded once the prune delay has passed.
func TestIndexLegacyDeltas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	put := func(key string, data []byte) { t.Helper(); e.putRaw(t, e.key(key), data) }
	put("panto-store.json", []byte(`{"format":"panto-objstore","version":3}`))
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	want := map[string]bool{}
	for k := 1; k <= n; k++ {
		id := idIn("a")
		want[id] = true
		delta := manifest.NewIndexShard("a")
		delta.Put(manifest.IndexEntry{Info: agent.SessionInfo{ID: id, Created: t0, Modified: t0, MessageCount: 1}, Length: 10, SHA256: strings.Repeat("0", 64)})
		data, err := codec.EncodeIndexShard("index/a.json.zst", delta)
		if err != nil {
			t.Fatal(err)
		}
		put(fmt.Sprintf("index/a/%020d.json.zst", k), data)
	}
	lists := func(name string, s *objstore.Store, n int) {
		t.Helper()
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, info := range infos {
			got[info.ID] = true
		}
		for id := range want {
			if !got[id] {
				t.Fatalf("%s: %s is not listed", name, id)
			}
		}
		if len(infos) != n {
			t.Fatalf("%s: %d sessions listed, want %d", name, len(infos), n)
		}
	}
	lists("a reader of the legacy deltas", e.open(t), n)

	w := e.open(t)
	objstore.SetIndexPruneAfter(w, 0)
	id := idIn("a")
	want[id] = true
	if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("new")}); err != nil {
		t.Fatal(err)
	}
	if m := e.object(t, "pfx/panto-store.json"); !strings.Contains(string(m), manifest.FeatureIndexBases) {
		t.Fatalf("marker after a write of this version: %s", m)
	}
	base, err := codec.DecodeIndexShard("index/a.json.zst", codec.CompressSmaller(e.object(t, "pfx/index/a.json.zst")))
	if err != nil || base.Through != n || len(base.Sessions) != n+1 {
		t.Fatalf("the base the write made: %v, through %d, %d sessions", err, base.Through, len(base.Sessions))
	}
	fb := e.faults(t)
	r := e.openOn(t, fb)
	fb.Take()
	lists("a reader after the fold", r, n+1)
	if ops := fb.Take(); slices.ContainsFunc(ops, func(o objstore.Op) bool { return strings.HasPrefix(o.Key, "index/a/") }) {
		t.Errorf("a reader of a prefix with index-bases probed a delta: %+v", ops)
	}

	// The next write deletes the deltas the base folded (the prune delay
	// is 0 for w).
	if err := w.AppendMessages(ctx, idIn("a"), []agent.PersistentMessage{user("newer")}); err != nil {
		t.Fatal(err)
	}
	for _, o := range e.readBucket(t) {
		if strings.HasPrefix(o.key, "pfx/index/a/") {
			t.Errorf("delta %s is left after the base folding it was pruned", o.key)
		}
	}
	lists("a reader after the prune", e.open(t), n+2)
}

// TestIndexConcurrentWriters: Stores writing one shard at once (their
// base replacements race, and group commits within each Store) lose no
// entry.
func TestIndexConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
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

// TestOpenSnapshot: with WithOpenSnapshot, the listings right after Open
// serve the index as Open read it, with no request, and with the Store's
// own writes; a session another Store adds is listed once the snapshot's
// two seconds are over. Without the option every listing reads the index.
func TestOpenSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	if err := e.open(t).AppendMessages(ctx, idIn("1"), []agent.PersistentMessage{user("before")}); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithOpenSnapshot())
	now := time.Now()
	objstore.SetNow(s, func() time.Time { return now })
	fb.Take()
	if err := e.open(t).AppendMessages(ctx, idIn("2"), []agent.PersistentMessage{user("by another")}); err != nil {
		t.Fatal(err)
	}
	own := idIn("3")
	if err := s.AppendMessages(ctx, own, []agent.PersistentMessage{user("own")}); err != nil {
		t.Fatal(err)
	}
	fb.Take()
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ops := fb.Take(); len(ops) != 0 || len(infos) != 2 {
		t.Fatalf("list in the snapshot: %d sessions, %d requests, want 2 (Open's and its own) and none", len(infos), len(ops))
	}
	now = now.Add(3 * time.Second)
	if infos, err = s.List(ctx); err != nil || len(infos) != 3 {
		t.Fatalf("list after the snapshot: %v, %d sessions, want 3", err, len(infos))
	}
	plain := e.open(t)
	if err := e.open(t).AppendMessages(ctx, idIn("4"), []agent.PersistentMessage{user("later")}); err != nil {
		t.Fatal(err)
	}
	if infos, err := plain.List(ctx); err != nil || len(infos) != 4 {
		t.Fatalf("list without the option: %v, %d sessions, want 4", err, len(infos))
	}
}
