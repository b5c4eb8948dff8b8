package localfirst_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestFailingGateway: a proxy or gateway before the bucket that answers
// 503 (or 502, 500) is no answer: panto works from this machine's copy,
// says so, keeps the turn, and the next run sends it once the gateway
// passes requests on again. The 503 at Open was an error that was not
// "unreachable": the shipper gave up for the run ("cannot send to …:
// ServiceUnavailable").
func TestFailingGateway(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	target, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := status.Load(); code != 0 {
			http.Error(w, http.StatusText(int(code)), int(code))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer gateway.Close()
	m := newMachine(t, srv, srv.NewBucket(t))
	m.endpoint = gateway.URL
	ctx := context.Background()

	status.Store(http.StatusServiceUnavailable)
	s := m.open()
	sess := s.Create()
	if err := sess.Append(ctx, []agent.PersistentMessage{user("through a failing gateway")}); err != nil {
		t.Fatalf("append behind a gateway answering 503: %v", err)
	}
	for _, note := range m.notes {
		if strings.Contains(note, "cannot send") {
			t.Errorf("told %q: the shipper gave up on a gateway that will pass requests on again", note)
		}
	}
	err = s.Close(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "1 message not yet sent") {
		t.Fatalf("Close behind the failing gateway: %v, want it to say 1 message is left", err)
	}
	status.Store(0)
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close once the gateway passes requests on: %v", err)
	}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, []string{"through a failing gateway"}) {
		t.Fatalf("the bucket holds %q", got)
	}
}
