package main

import (
	"strings"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestLaxServersRefused: a push to a server that ignores or refuses the
// conditional headers (each lax kind: MinIO behind miniotest's LaxProxy)
// fails at Open with exit 1 and one line that names the missing
// behaviour; no session reaches the bucket.
func TestLaxServersRefused(t *testing.T) {
	t.Parallel()
	miniotest.Lax(t, func(t *testing.T, srv *miniotest.Server) {
		e := newEnvOn(t, srv)
		dir, _ := catalog(t, 3)
		r := e.run(t, "push", "--dir", dir, e.url)
		msg := strings.TrimRight(r.stderr, "\n")
		if r.code != 1 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto-sync: ") {
			t.Fatalf("push through %s: exit %d, stderr %q; want exit 1 and one line", srv.Kind.Name, r.code, r.stderr)
		}
		for _, want := range []string{"does not honour conditional writes", srv.Kind.Refusal()} {
			if !strings.Contains(msg, want) {
				t.Errorf("push through %s: %q does not say %q", srv.Kind.Name, msg, want)
			}
		}
		if n := len(e.segments(t)); n != 0 {
			t.Errorf("push through %s stored %d sessions", srv.Kind.Name, n)
		}
	})
}
