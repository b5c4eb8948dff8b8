package localfirst_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// keyRecorder is a slog.Handler that keeps the key of every request
// objstore's trace logs.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *keyRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *keyRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *keyRecorder) WithGroup(string) slog.Handler            { return r }
func (r *keyRecorder) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "key" {
			r.mu.Lock()
			r.keys = append(r.keys, a.Value.String())
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

// indexReads counts, and forgets, the requests for the index's
// partitions and run pages: what a listing of the whole bucket reads.
func (r *keyRecorder) indexReads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var read []string
	for _, k := range r.keys {
		if wholeIndex.MatchString(k) {
			read = append(read, k)
		}
	}
	r.keys = nil
	return read
}

var wholeIndex = regexp.MustCompile(`/index/([0-9a-f]{2}\.json\.zst|run/)`)

// TestCatchUpFromRecord: the catch-up at each connection plans what the
// shipped record says the bucket lacks, not the whole replica against
// the whole bucket (whose index grows with the archive): a store opened
// on a replica the bucket holds reads no partition of the index, and one
// opened on a replica whose last prompt an earlier process did not send
// sends it, still without. Once a day the catch-up is a full one, which
// carries to the replica a deletion the bucket made.
func TestCatchUpFromRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := miniotest.Shared(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	rec := &keyRecorder{}
	m.trace = slog.New(rec)

	s := m.open()
	var ids []string
	for i := range 3 {
		sess := s.Create()
		if err := sess.Append(ctx, []agent.PersistentMessage{user("prompt " + string(rune('a'+i)))}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.Info.ID)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The first catch-up of a replica is a full one: it may read the
	// whole index.
	rec.indexReads()

	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if read := rec.indexReads(); len(read) != 0 {
		t.Errorf("a catch-up with nothing to send read %d index partitions or run pages, want none: %q", len(read), read)
	}

	// A prompt that reached the replica and not the bucket (its process
	// died first): written to the replica alone.
	local, err := fsjsonl.Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.AppendMessages(ctx, ids[1], []agent.PersistentMessage{user("unsent")}); err != nil {
		t.Fatal(err)
	}
	if err := local.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The append vouches for the session's segments with the newest
	// commit, which holds it (its recent view): no partition is read.
	// (The store's Close may merge runs, reading their pages.)
	for _, k := range rec.indexReads() {
		if !strings.Contains(k, "/run/") {
			t.Errorf("a catch-up that sent session %s read %s", ids[1], k)
		}
	}
	if got, want := texts(t, bucketStore(t, m), ids[1]), []string{"prompt b", "unsent"}; !equal(got, want) {
		t.Fatalf("the bucket holds %q, want %q", got, want)
	}

	// Another machine deletes a session. Within the day, the catch-up
	// does not look for deletions (a read of the session finds it).
	b := bucketStore(t, m)
	at, err := store.Head(ctx, b, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, b, store.Tombstone{ID: ids[2], Deleted: time.Now(), At: at}); err != nil {
		t.Fatal(err)
	}
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := local.Load(ctx, ids[2]); err != nil {
		t.Fatalf("the replica lost session %s before a full catch-up: %v", ids[2], err)
	}
	// A day later, it does: the full catch-up carries the deletion.
	agoRecord(t, m.dir, 25*time.Hour)
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := local.Load(ctx, ids[2]); !errors.Is(err, agent.ErrSessionDeleted) && !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("after a full catch-up the replica still holds session %s deleted in the bucket (%v)", ids[2], err)
	}
	if read := rec.indexReads(); len(read) == 0 {
		t.Errorf("the full catch-up read no index partition nor run page")
	}
}

// agoRecord makes the shipped record of the replica at dir say its last
// full catch-up was ago before now.
func agoRecord(t *testing.T, dir string, ago time.Duration) {
	t.Helper()
	path := filepath.Join(dir, ".panto-shipped.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["full_catch_up"]; !ok {
		t.Fatalf("the shipped record %s holds no full_catch_up", data)
	}
	doc["full_catch_up"] = time.Now().Add(-ago).UTC().Format(time.RFC3339Nano)
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
