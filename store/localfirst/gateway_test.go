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
	worksBehind(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
	})
}

// TestCaptivePortal: a captive portal on the endpoint's plain http (hotel
// Wi-Fi) that answers every request with a redirect to its sign-in page,
// or with that page, is no answer either: panto works from this
// machine's copy and sends the turn once the portal lets requests
// through. Open failed ("Found: Found", or the page taken for the store
// marker: "is not a panto store marker"), and the prompt was refused.
func TestCaptivePortal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer http.HandlerFunc
	}{
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://127.0.0.1:1/login?continue="+url.QueryEscape(r.URL.String()))
			w.WriteHeader(http.StatusFound)
		}},
		{"page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte("<!DOCTYPE html><html><body><form>Hotel Wi-Fi: sign in</form></body></html>"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			worksBehind(t, tc.answer)
		})
	}
}

// worksBehind runs a session behind a proxy to the bucket that gives
// answer to every request, then lets requests through: the turn is kept
// on this machine, Close says it is left, and the next run sends it.
func worksBehind(t *testing.T, answer http.HandlerFunc) {
	srv := miniotest.Shared(t)
	target, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	var blocked atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if blocked.Load() {
			answer(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer gateway.Close()
	m := newMachine(t, srv, srv.NewBucket(t))
	m.endpoint = gateway.URL
	ctx := context.Background()

	blocked.Store(true)
	s := m.open()
	sess := s.Create()
	if err := sess.Append(ctx, []agent.PersistentMessage{user("through the proxy")}); err != nil {
		t.Fatalf("append behind the proxy: %v", err)
	}
	for _, note := range m.notes {
		if strings.Contains(note, "cannot send") {
			t.Errorf("told %q: the shipper gave up on a proxy that will pass requests on again", note)
		}
	}
	err = s.Close(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "1 message not yet sent") {
		t.Fatalf("Close behind the proxy: %v, want it to say 1 message is left", err)
	}
	blocked.Store(false)
	s = m.open()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close once the proxy passes requests on: %v", err)
	}
	if got := texts(t, bucketStore(t, m), sess.Info.ID); !equal(got, []string{"through the proxy"}) {
		t.Fatalf("the bucket holds %q", got)
	}
}
