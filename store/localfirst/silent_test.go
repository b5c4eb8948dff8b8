package localfirst_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/faultnet"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

// openCounted opens machine m's local-first store through link, with the
// bucket's answers counted (localfirst.Options.Answers, as panto's),
// waits of readTimeout and a ListTimeout and a connection idle timeout
// of an hour: a listing that waits for either never ends in a test.
func openCounted(t *testing.T, m *machine, link *faultnet.Proxy, readTimeout time.Duration, answers *atomic.Int64) *localfirst.Store {
	t.Helper()
	s, err := localfirst.Open(context.Background(), localfirst.Options{
		Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable, Answers: answers.Load,
		ReadTimeout: readTimeout, ListTimeout: time.Hour, CloseTimeout: 30 * time.Second, MaxBackoff: 200 * time.Millisecond,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			return objstore.Open(ctx, m.url, objstore.WithEndpoint(link.URL()), objstore.WithS3Options(m.srv.SetCredentials),
				objstore.WithIdleTimeout(time.Hour), objstore.WithOnAnswer(func() { answers.Add(1) }))
		},
		Notify: func(s string) { m.mu.Lock(); m.notes = append(m.notes, s); m.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// within runs f, and fails the test when it has not returned after a
// minute: it waits on a bucket that will never answer.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits on the frozen bucket after a minute", what)
	}
}

// TestFrozenAfterOpenLists: a bucket that stopped answering after Open
// (it accepts connections and never answers) holds a listing only until
// it has answered nothing of it for the short timeout: the listing is
// this machine's copy, the user is told once, and a read that follows
// goes to the replica without waiting again. It waited the listing's
// whole ListTimeout (30 s in panto) and a stall before /sessions and
// panto sessions listed anything.
func TestFrozenAfterOpenLists(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	link := faultnet.New(t, srv.Endpoint())
	m := newMachine(t, srv, srv.NewBucket(t))
	m.endpoint = link.URL()
	ids := m.newSessions("written before the freeze")
	ctx := context.Background()
	var answers atomic.Int64
	s := openCounted(t, m, link, 2*time.Second, &answers)
	if s.Offline() {
		t.Fatal("the bucket did not answer Open")
	}
	if _, err := link.Add(faultnet.Fault{Type: "timeout", Attributes: map[string]int64{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	var list []agent.SessionInfo
	var err error
	within(t, "List", func() { list, err = s.List(ctx) })
	if err != nil || len(list) != 1 || list[0].ID != ids[0] {
		t.Fatalf("List of a frozen bucket: %v (%v), want this machine's session %s", list, err, ids[0])
	}
	if m.told("bucket unreachable") == "" {
		t.Errorf("not told the bucket is unreachable: %q", m.notes)
	}
	within(t, "a read after the listing", func() {
		if got := texts(t, s, ids[0]); !equal(got, []string{"written before the freeze"}) {
			t.Errorf("the read finds %q", got)
		}
	})
	if !s.Offline() {
		t.Error("Offline is false while the open bucket does not answer")
	}
	link.Clear()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSlowBucketLists: a bucket that answers every request of a listing,
// slowly, so that the listing takes longer than the short timeout in
// all, is listed: the short timeout bounds the wait for its first
// answer, not the listing (a listing that reads many index partitions
// over a slow link).
func TestSlowBucketLists(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	link := faultnet.New(t, srv.Endpoint())
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ids := a.newSessions("from a", "from a again")
	ctx := context.Background()
	var answers atomic.Int64
	const readTimeout = 2 * time.Second
	s := openCounted(t, b, link, readTimeout, &answers)
	defer s.Close(ctx)
	if s.Offline() {
		t.Fatal("the bucket did not answer Open")
	}
	// Each answer comes 1.2 s after its request: the listing's first
	// within the short timeout, the listing as a whole past it.
	if _, err := link.Add(faultnet.Fault{Type: "latency", Attributes: map[string]int64{"latency": 1200}}); err != nil {
		t.Fatal(err)
	}
	before, start := answers.Load(), time.Now()
	list, err := s.List(ctx)
	took, asked := time.Since(start), answers.Load()-before
	t.Logf("the listing took %v, %d answers", took, asked)
	if err != nil || len(list) != 2 {
		t.Fatalf("List of a slow bucket: %v (%v), want the bucket's 2 sessions %q; told %q", list, err, ids, b.notes)
	}
	if n := b.told("unreachable"); n != "" {
		t.Errorf("told %q of a bucket that answers", n)
	}
	if took <= readTimeout {
		t.Logf("the listing took %v, within the short timeout: this run tells nothing of a longer one", took)
	}
}
