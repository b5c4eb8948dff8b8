package main

import (
	"strings"
	"testing"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 4)
	e.must(t, 0, "push", "--dir", dir, "--include", ids[0], "--include", ids[1], "--include", ids[2], e.url)
	appendBatch(t, dir, ids[1], false)
	remoteOnly := newSession(t, t.TempDir(), 1)
	e.remoteAppend(t, remoteOnly)
	e.remoteAppend(t, ids[2])

	r := e.must(t, 0, "status", "--dir", dir, "--json", e.url)
	evs, sum := events(t, r.stdout)
	got := map[string]string{}
	for _, ev := range evs {
		got[ev.ID] = ev.Action
	}
	want := map[string]string{ids[0]: "same", ids[1]: "push-tail", ids[2]: "pull-tail", ids[3]: "push-new", remoteOnly: "pull-new"}
	for id, a := range want {
		if got[id] != a {
			t.Errorf("status of %s = %s, want %s", id, got[id], a)
		}
	}
	if sum.Sessions != len(want) {
		t.Errorf("status covered %d sessions, want %d", sum.Sessions, len(want))
	}
	// Text: one line per session that differs, none for the same one.
	r = e.must(t, 0, "status", "--dir", dir, e.url)
	if strings.Contains(r.stdout, ids[0]) || !strings.Contains(r.stdout, ids[3]) || !strings.Contains(r.stdout, "push-new") {
		t.Errorf("status text:\n%s", r.stdout)
	}
	r = e.must(t, 0, "status", "--dir", dir, "--include", ids[1], "--json", e.url)
	if evs, _ := events(t, r.stdout); len(evs) != 1 || evs[0].ID != ids[1] {
		t.Errorf("--include: %+v", evs)
	}
	r = e.must(t, 0, "status", "--dir", dir, "--exclude", "*", "--json", e.url)
	if evs, _ := events(t, r.stdout); len(evs) != 0 {
		t.Errorf("--exclude '*': %+v", evs)
	}
}
