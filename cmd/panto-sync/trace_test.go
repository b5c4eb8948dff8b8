package main

import (
	"regexp"
	"strings"
	"testing"
)

// traceLine is one request of the trace: method, key, status, bytes, ms.
var traceLine = regexp.MustCompile(`msg=s3 method=(GET|PUT|HEAD|DELETE) key=/\S+ status=\d{3} sent=\d+ received=\d+ ms=[0-9.]+`)

// TestTrace: -v (and PANTO_TRACE=1) logs each S3 request on stderr, one
// line each, with no credential in it; without them nothing is logged.
func TestTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 3)
	r := e.must(t, 0, "push", "-v", "--dir", dir, e.url)
	lines := traceLine.FindAllString(r.stderr, -1)
	segs := 0
	for _, l := range lines {
		if strings.Contains(l, "method=PUT") && strings.Contains(l, "/seg/") && strings.Contains(l, "status=200") {
			segs++
		}
	}
	if segs != len(ids) {
		t.Errorf("the trace shows %d segment PUTs, want %d:\n%s", segs, len(ids), r.stderr)
	}
	for _, secret := range []string{e.srv.SecretKey(), e.srv.AccessKey(), "Authorization", "Signature="} {
		if strings.Contains(r.stderr, secret) {
			t.Errorf("the trace holds %q", secret)
		}
	}
	r = e.runEnv(t, []string{"PANTO_TRACE=1"}, "push", "--dir", dir, e.url)
	if r.code != 0 || len(traceLine.FindAllString(r.stderr, -1)) == 0 {
		t.Errorf("PANTO_TRACE=1: exit %d, no trace in %q", r.code, r.stderr)
	}
	if r := e.must(t, 0, "push", "--dir", dir, e.url); strings.Contains(r.stderr, "msg=s3") {
		t.Errorf("a trace without -v: %q", r.stderr)
	}
}
