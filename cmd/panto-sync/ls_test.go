package main

import (
	"strings"
	"testing"
	"time"
)

func TestLs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 3)
	e.must(t, 0, "push", "--dir", dir, e.url)
	time.Sleep(1100 * time.Millisecond) // a later modification time, whatever the clock's resolution
	appendBatch(t, dir, ids[1], false)
	e.must(t, 0, "push", "--dir", dir, e.url)

	r := e.must(t, 0, "ls", "--json", e.url)
	evs, sum := events(t, r.stdout)
	if len(evs) != 3 || sum.Sessions != 3 {
		t.Fatalf("ls: %d sessions, want 3", len(evs))
	}
	if evs[0].ID != ids[1] {
		t.Errorf("ls: first is %s, want the newest %s", evs[0].ID, ids[1])
	}
	r = e.must(t, 0, "ls", e.url)
	if !strings.HasPrefix(r.stdout, "ID") || !strings.Contains(r.stdout, "3 sessions") {
		t.Errorf("ls text:\n%s", r.stdout)
	}
	r = e.must(t, 0, "ls", "--quiet", "--include", ids[2], e.url)
	if strings.TrimSpace(r.stdout) != ids[2] {
		t.Errorf("ls --quiet --include: %q, want %s", r.stdout, ids[2])
	}
	if r := e.run(t, "ls", e.url, "extra"); r.code != 1 || !strings.Contains(r.stderr, "--include") {
		t.Errorf("ls with an extra argument: exit %d, %s", r.code, r.stderr)
	}
}
