package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// requestCounter is a reverse proxy in front of MinIO that counts the
// requests and the request body bytes that go through it, so a test can
// tell how much a command sent.
type requestCounter struct {
	URL   string
	mu    sync.Mutex
	count map[string]int // by method, and by sessionPrefix+method for session objects
	sent  int64          // request body bytes
}

func newRequestCounter(t *testing.T, endpoint string) *requestCounter {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{count: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		// Open's probe of conditional writes (two small PUTs of one
		// object) is counted apart: it is not data.
		if strings.HasSuffix(r.URL.Path, "/panto-probe.json") {
			rc.count[probePrefix+r.Method]++
		} else {
			rc.count[r.Method]++
			if strings.Contains(r.URL.Path, "/sessions/") {
				rc.count[sessionPrefix+r.Method]++
			}
			if r.ContentLength > 0 {
				rc.sent += r.ContentLength
			}
		}
		rc.mu.Unlock()
		proxy.ServeHTTP(w, r) // the Host header stays the proxy's, which is what was signed
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// take returns the counts since the last take and resets them.
func (rc *requestCounter) take() (map[string]int, int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c, s := rc.count, rc.sent
	rc.count, rc.sent = map[string]int{}, 0
	return c, s
}

// sessionPrefix marks, in the counts, the requests for a session's objects
// (its segments and manifest) rather than the index or the marker;
// probePrefix those of Open's conditional-write probe.
const (
	sessionPrefix = "session "
	probePrefix   = "probe "
)

func total(c map[string]int) int {
	n := 0
	for k, v := range c {
		if !strings.HasPrefix(k, sessionPrefix) && !strings.HasPrefix(k, probePrefix) {
			n += v
		}
	}
	return n
}
