package stall_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent/stall"
)

// TestSilenceFails: a server silent past the limit fails the exchange
// with *stall.Error, before its headers and between two chunks of its
// body; one that streams a byte within each limit, for longer than the
// limit in all, does not.
func TestSilenceFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/no-headers":
			<-r.Context().Done()
		case "/mid-body":
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/slow":
			for range 8 {
				io.WriteString(w, "x")
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
		}
	}))
	defer srv.Close()
	const idle = 200 * time.Millisecond
	client := stall.Client(idle)
	get := func(path string) (string, error) {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, path := range []string{"/no-headers", "/mid-body"} {
		start := time.Now()
		_, err := get(path)
		var st *stall.Error
		if !errors.As(err, &st) || st.After != idle {
			t.Errorf("%s: %v, want a *stall.Error", path, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s failed after %s", path, d)
		}
	}
	if body, err := get("/slow"); err != nil || body != strings.Repeat("x", 8) {
		t.Errorf("/slow: %q, %v", body, err)
	}
}
