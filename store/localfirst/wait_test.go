package localfirst_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

// TestOpenWaitsOnce: a bucket that gives no answer at Open costs that one
// wait; the reads that follow go straight to the replica instead of
// waiting for it again (each read's own bound, ReadTimeout, is an hour
// here: a read that waited would outlive the test).
func TestOpenWaitsOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bucket func(ctx context.Context) (store.LogStore, error)
	}{
		{"frozen", func(ctx context.Context) (store.LogStore, error) { <-ctx.Done(); return nil, ctx.Err() }},
		{"refused", func(ctx context.Context) (store.LogStore, error) {
			return nil, objstore.ErrOpen // IsUnreachable below says it gave no answer
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var told atomic.Int32
			openCtx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			s, err := localfirst.Open(openCtx, localfirst.Options{
				Dir: t.TempDir(), Name: "s3://b/p", OpenBucket: tc.bucket,
				Unreachable: func(error) bool { return true },
				ReadTimeout: time.Hour, CloseTimeout: time.Millisecond,
				Notify: func(string) { told.Add(1) },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			done := make(chan error, 1)
			go func() { _, err := s.List(context.Background()); done <- err }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("List waited for the bucket after Open had waited for it")
			}
			if told.Load() != 1 {
				t.Errorf("told the user %d times that the bucket is unreachable, want once", told.Load())
			}
		})
	}
}

// countingHandler counts the S3 requests a trace logs.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestContinueAsksOnce: continuing a session this machine wrote (panto
// -c: Latest, then Load) costs the requests of the bucket's Open alone,
// whose reading of the index says whether anything changed; the
// replica answers the rest.
func TestContinueAsksOnce(t *testing.T) {
	srv := miniotest.Shared(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	first := m.open()
	sess := first.Create()
	if err := sess.Append(ctx, []agent.PersistentMessage{user("one"), user("two")}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var requests atomic.Int64
	opened := make(chan struct{})
	var once sync.Once
	s, err := localfirst.Open(ctx, localfirst.Options{
		Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable, ReadTimeout: 10 * time.Second,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			b, err := objstore.Open(ctx, m.url, objstore.WithEndpoint(srv.Endpoint()), objstore.WithS3Options(srv.SetCredentials),
				objstore.WithOpenSnapshot(), objstore.WithTrace(slog.New(countingHandler{&requests})))
			once.Do(func() { close(opened) })
			return b, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	<-opened
	atOpen := requests.Load()
	latest, err := s.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Info.ID != sess.Info.ID {
		t.Fatalf("Latest is %s, want %s", latest.Info.ID, sess.Info.ID)
	}
	if _, err := s.Load(ctx, latest.Info.ID); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - atOpen; n != 0 {
		t.Errorf("Latest and Load sent %d requests to the bucket after its Open, want none", n)
	}
}

// keyHandler records the method and key of every S3 request a trace
// logs.
type keyHandler struct {
	mu   *sync.Mutex
	keys *[]string
}

func (h keyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h keyHandler) Handle(_ context.Context, r slog.Record) error {
	var method, key string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "method":
			method = a.Value.String()
		case "key":
			key = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	*h.keys = append(*h.keys, method+" "+key)
	h.mu.Unlock()
	return nil
}
func (h keyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h keyHandler) WithGroup(string) slog.Handler      { return h }

// tracedOther is a session of three messages machine a wrote, and
// machine b, whose bucket requests (method and key) reads returns.
func tracedOther(t *testing.T) (a, b *machine, id string, reads func(ok func(key string) bool) map[string]int) {
	t.Helper()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b = newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()
	sa := a.open()
	sess := sa.Create()
	for _, text := range []string{"one", "two", "three"} {
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	b.trace = slog.New(keyHandler{&mu, &keys})
	// reads counts the GETs of the session's objects whose key ok takes.
	reads = func(ok func(string) bool) map[string]int {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]int{}
		for _, k := range keys {
			if strings.HasPrefix(k, "GET ") && strings.Contains(k, "/sessions/"+sess.Info.ID+"/") && ok(k) {
				seen[k]++
			}
		}
		if len(seen) == 0 {
			t.Fatalf("no read of the session's objects among %q", keys)
		}
		return seen
	}
	return a, b, sess.Info.ID, reads
}

// TestResolveReadsOnce: opening another machine's session by a prefix of
// its id (panto -r PREFIX, panto show PREFIX: Resolve, then Load) reads
// each of its objects once: the resolve says the bucket's checkpoint of
// it, so bringing it into the replica asks the bucket nothing before
// reading its bytes, and the Load right after asks nothing again.
func TestResolveReadsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b, id, reads := tracedOther(t)
	sb := b.open()
	defer sb.Close(ctx)
	found, err := sb.Resolve(ctx, id[:8])
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, sb, found.Info.ID); !equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("machine b reads %q", got)
	}
	for k, n := range reads(func(string) bool { return true }) {
		if n > 1 {
			t.Errorf("%s read %d times, want once", k, n)
		}
	}
}

// TestListedReadsOnce: a command that lists the bucket, then reads the
// sessions it listed one after another for longer than a listing stands
// alone (panto search and usage over a whole archive: a minute on a slow
// link) reads each session's objects once, as listed, each read keeping
// the listing standing. Past its first two seconds each read asked the
// bucket for the session's end (its segment read whole, its manifest and
// the probe past it), then read the segment again: four requests where
// one does.
func TestListedReadsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	sa := a.open()
	var ids []string
	texts := []string{"one", "two", "three", "four", "five"}
	for _, text := range texts {
		sess := sa.Create()
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.Info.ID)
	}
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	b.trace = slog.New(keyHandler{&mu, &keys})
	sb := b.open()
	defer sb.Close(ctx)
	logs, err := sb.Logs(ctx)
	if err != nil || len(logs) != len(ids) {
		t.Fatalf("b lists %d sessions (%v), want %d", len(logs), err, len(ids))
	}
	for i, id := range ids {
		if i > 0 {
			// Well within the 2 s a read keeps the listing standing, on a
			// loaded machine too; the last read 3.2 s after the listing.
			time.Sleep(800 * time.Millisecond)
		}
		r, _, err := sb.ReadLog(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil || !strings.Contains(string(data), texts[i]) {
			t.Fatalf("session %d reads %q (%v)", i, data, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ids {
		seen := map[string]int{}
		for _, k := range keys {
			if strings.Contains(k, "/sessions/"+id+"/") {
				seen[k]++
			}
		}
		if len(seen) != 1 {
			t.Errorf("session %d (read %.1f s after the listing): requests %v, want its one segment read once", i, 0.8*float64(i), seen)
		}
		for k, n := range seen {
			if n > 1 {
				t.Errorf("session %d: %s read %d times, want once", i, k, n)
			}
		}
	}
}

// TestRemoveReadsTwice: deleting another machine's session by a prefix
// (panto rm PREFIX: Resolve, the checkpoint to delete at, Delete, then
// Close, which ships the deletion) reads each of its objects at most
// twice: once into the replica, and once by the bucket's deletion, which
// must see the log's end for its commit point. The shipper plans the
// deletion from the checkpoint the resolve gave, and reading the
// checkpoint asks the bucket nothing (each read four times before).
func TestRemoveReadsTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, id, reads := tracedOther(t)
	sb := b.open()
	found, err := sb.Resolve(ctx, id[:8])
	if err != nil {
		t.Fatal(err)
	}
	at, err := store.Head(ctx, sb, found.Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, sb, store.Tombstone{ID: found.Info.ID, Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bucketStore(t, a).Resolve(ctx, id); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("the bucket resolves the deleted session: %v", err)
	}
	for k, n := range reads(func(k string) bool { return !strings.Contains(k, "?") }) {
		// The first segment a third time: the deletion replaces it by
		// its tombstone with If-Match, and reads its ETag beside its
		// commit point.
		if want := 2; n > want && !(strings.HasSuffix(k, "/seg/00000000000000000000.jsonl.zst") && n == want+1) {
			t.Errorf("%s: %d times, want at most %d", k, n, want)
		}
	}
}
