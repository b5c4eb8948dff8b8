package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// requestCounter is a reverse proxy in front of MinIO that counts the
// requests and the request body bytes that go through it, so a test can
// tell how much a command sent.
type requestCounter struct {
	URL   string
	mu    sync.Mutex
	count map[string]int // by class (LIST, or the method), and by sessionPrefix+class for session objects
	sent  int64          // request body bytes, as they arrive (chunked ones too)
	// chunked counts the requests whose body came without a length
	// (Transfer-Encoding: chunked), so a test can tell it sent one.
	chunked int
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
		class := miniotest.RequestClass(r)
		probe := strings.HasSuffix(r.URL.Path, "/panto-probe.json") || strings.HasSuffix(r.URL.Path, "/panto-probe-replace.json")
		rc.mu.Lock()
		// Open's probe of conditional writes (two small PUTs, of two
		// objects) is counted apart: it is not data.
		if probe {
			rc.count[probePrefix+class]++
		} else {
			rc.count[class]++
			if strings.Contains(r.URL.Path, "/sessions/") || strings.Contains(r.URL.Query().Get("prefix"), "sessions/") {
				rc.count[sessionPrefix+class]++
			}
		}
		if r.ContentLength < 0 {
			rc.chunked++
		}
		rc.mu.Unlock()
		if !probe && r.Body != nil {
			// Count what is read of the body, not what ContentLength
			// says: a chunked body has none (-1).
			r.Body = &countingBody{ReadCloser: r.Body, rc: rc}
		}
		proxy.ServeHTTP(w, r) // the Host header stays the proxy's, which is what was signed
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	rc *requestCounter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.rc.mu.Lock()
	b.rc.sent += int64(n)
	b.rc.mu.Unlock()
	return n, err
}

// take returns the counts since the last take and resets them.
func (rc *requestCounter) take() (map[string]int, int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c, s := rc.count, rc.sent
	rc.count, rc.sent, rc.chunked = map[string]int{}, 0, 0
	return c, s
}

// sessionPrefix marks, in the counts, the requests for a session's objects
// (its segments and manifest, or a LIST of them) rather than the index or
// the marker; probePrefix those of Open's conditional-write probe.
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

// TestRequestCounter: the counter sees a LIST for what it is however it
// is spelled (a path that names no session object, the prefix in the
// query), and counts a chunked body's bytes.
func TestRequestCounter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newRequestCounter(t, e.srv.Endpoint())
	do := func(method, path string, body io.Reader) {
		t.Helper()
		req, err := http.NewRequest(method, rc.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do("GET", "/"+e.bucket+"?list-type=2&prefix=panto/sessions/", nil)
	do("GET", "/"+e.bucket+"/?prefix=panto/sessions/&delimiter=/", nil)
	do("GET", "/"+e.bucket, nil)
	do("GET", "/"+e.bucket+"/panto/sessions/x/manifest.json", nil)
	// An io.Reader that is not a bytes/strings reader: the client sends
	// it chunked, with no Content-Length.
	do("PUT", "/"+e.bucket+"/panto/index/0.json.zst", io.MultiReader(strings.NewReader("0123456789"), strings.NewReader("abcdef")))
	rc.mu.Lock()
	chunked := rc.chunked
	rc.mu.Unlock()
	if chunked != 1 {
		t.Fatalf("%d requests came chunked, want the PUT: the test of a chunked body sent none", chunked)
	}
	c, sent := rc.take()
	if c["LIST"] != 3 || c[sessionPrefix+"LIST"] != 2 || c["GET"] != 1 || c[sessionPrefix+"GET"] != 1 || c["PUT"] != 1 {
		t.Errorf("counts %v: want 3 LISTs (2 of sessions), 1 GET of a session object, 1 PUT", c)
	}
	if sent != 16 {
		t.Errorf("a chunked body of 16 bytes was counted as %d", sent)
	}
}
