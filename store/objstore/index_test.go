package objstore_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store/objstore"
)

// idIn returns a new session id starting with name: in index shard
// name (format 3), in partition name when it has two characters.
func idIn(name string) string { return name + agent.NewSessionID()[len(name):] }

// partitionKey is the key, from the bucket's root, of the index
// partition of session id (format 4: named by its first two characters).
func partitionKey(id string) string {
	return "pfx/index/" + manifest.PartitionOf(id, 2) + ".json.zst"
}

// TestIndexLegacyDeltas: a prefix an earlier writer of format 3 wrote
// (index deltas after the bases, no index-bases feature in the marker) is
// read whole: its readers apply the deltas. The first write of this
// version folds them into the base of the shard, then moves the index to
// format 4: the 256 partitions hold every session, a commit of the index
// log lists them, and the marker requires both features. From then on a
// reader reads neither the deltas nor the 16 shards.
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
	if m := e.object(t, "pfx/panto-store.json"); string(m) != `{"format":"panto-objstore","version":3,"requires":["index-bases","index-log","index-heads","index-unfolded"]}` {
		t.Fatalf("marker after a write of this version: %s", m)
	}
	base, err := codec.DecodeIndexShard("index/a.json.zst", codec.CompressSmaller(e.object(t, "pfx/index/a.json.zst")))
	if err != nil || base.Through != n || len(base.Sessions) != n {
		t.Fatalf("the base the fold made: %v, through %d, %d sessions", err, base.Through, len(base.Sessions))
	}
	entries, _ := e.indexed(t)
	for id := range want {
		if _, ok := entries[id]; !ok {
			t.Errorf("%s is not in the index after the move to format 4", id)
		}
	}
	if len(entries) != n+1 {
		t.Errorf("the index holds %d sessions, want %d", len(entries), n+1)
	}
	if _, c := e.newestCommit(t); c == nil || len(c.Recent) != n+1 {
		t.Fatalf("the newest commit of the index log after the move: %+v", c)
	}
	fb := e.faults(t)
	r := e.openOn(t, fb)
	fb.Take()
	lists("a reader after the move", r, n+1)
	shardOrDelta := regexp.MustCompile(`^index/[0-9a-f](/|\.json\.zst$)`)
	if ops := fb.Take(); slices.ContainsFunc(ops, func(o objstore.Op) bool { return shardOrDelta.MatchString(o.Key) }) {
		t.Errorf("a reader of a format-4 prefix read a shard or delta of format 3: %+v", ops)
	}

	// The next write is a plain one of format 4.
	if err := w.AppendMessages(ctx, idIn("a"), []agent.PersistentMessage{user("newer")}); err != nil {
		t.Fatal(err)
	}
	lists("a reader after the next write", e.open(t), n+2)
	if entries, _ := e.indexed(t); len(entries) != n+2 {
		t.Errorf("the index holds %d sessions, want %d", len(entries), n+2)
	}
}

// TestIndexConcurrentWriters: Stores writing one partition at once (their
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
					id := idIn("b7") // one partition
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

// TestOpenSnapshot: with WithOpenSnapshot, the first page of the
// listing right after Open (ListNewest, Latest) serves the newest commit
// of the index log as Open read it, with no request, and with the
// Store's own writes; a session another Store adds is listed once the
// snapshot's two seconds are over. Without the option every listing
// reads the index. (List reads the 256 partitions, which Open does not
// read in format 4.)
func TestOpenSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	before := idIn("1")
	if err := e.open(t).AppendMessages(ctx, before, []agent.PersistentMessage{user("before")}); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithOpenSnapshot())
	now := time.Now()
	objstore.SetNow(s, func() time.Time { return now })
	fb.Take()
	own := idIn("3")
	if err := s.AppendMessages(ctx, own, []agent.PersistentMessage{user("own")}); err != nil {
		t.Fatal(err)
	}
	other := idIn("2")
	if err := e.open(t).AppendMessages(ctx, other, []agent.PersistentMessage{user("by another")}); err != nil {
		t.Fatal(err)
	}
	fb.Take()
	infos, err := s.ListNewest(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := s.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ops := fb.Take(); len(ops) != 0 || !slices.Equal(infoIDs(infos), []string{own, before}) || latest.Info.ID != own {
		t.Fatalf("newest in the snapshot: %v, latest %s, %d requests; want Open's and its own, and none", infoIDs(infos), latest.Info.ID, len(ops))
	}
	now = now.Add(3 * time.Second)
	if infos, err = s.ListNewest(ctx, 3, nil); err != nil || !slices.Equal(infoIDs(infos), []string{other, own, before}) {
		t.Fatalf("newest after the snapshot: %v, %v, want the other Store's too", err, infoIDs(infos))
	}
	plain := e.open(t)
	later := idIn("4")
	if err := e.open(t).AppendMessages(ctx, later, []agent.PersistentMessage{user("later")}); err != nil {
		t.Fatal(err)
	}
	if latest, err := plain.Latest(ctx); err != nil || latest.Info.ID != later {
		t.Fatalf("latest without the option: %v, want %s", err, later)
	}
	if infos, err := plain.ListNewest(ctx, 4, nil); err != nil || len(infos) != 4 {
		t.Fatalf("newest without the option: %v, %d sessions, want 4", err, len(infos))
	}
	if infos, err := plain.List(ctx); err != nil || len(infos) != 4 {
		t.Fatalf("list without the option: %v, %d sessions, want 4", err, len(infos))
	}
}

// infoIDs are the ids of infos, in order.
func infoIDs(infos []agent.SessionInfo) []string {
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = info.ID
	}
	return ids
}
