package localfirst_test

import (
	"context"
	"log/slog"
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
