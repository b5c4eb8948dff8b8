package main

import (
	"context"
	"testing"
)

func TestCompact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 3)
	e.must(t, 0, "push", "--dir", dir, e.url)
	id := ids[0]
	for i := 0; i < 3; i++ {
		appendBatch(t, dir, id, false)
		e.must(t, 0, "push", "--dir", dir, e.url)
	}
	checkpoints := func() int {
		cps, err := e.objstore(t).Checkpoints(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return len(cps)
	}
	if n := checkpoints(); n != 4 {
		t.Fatalf("%d checkpoints after 4 pushes, want 4", n)
	}
	r := e.must(t, 0, "compact", "--dry-run", "--json", e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["would-compact"] != 1 || checkpoints() != 4 {
		t.Errorf("dry-run compact: %v, %d checkpoints", byEvent(evs), checkpoints())
	}
	r = e.must(t, 0, "compact", "--json", e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["compacted"] != 1 || byEvent(evs)["unchanged"] != 2 {
		t.Errorf("compact: %v", byEvent(evs))
	}
	if n := checkpoints(); n != 1 {
		t.Errorf("%d checkpoints after compact, want 1", n)
	}
	// Sync does not notice: nothing to push, and a pull reproduces the files.
	r = e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	if _, sum := events(t, r.stdout); sum.Bytes != 0 {
		t.Errorf("push after compact moved %d bytes", sum.Bytes)
	}
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
	// A pull of a local copy that stops inside the compacted segment reads
	// the overlap and appends the rest.
	appendBatch(t, dir, id, false)
	e.must(t, 0, "push", "--dir", dir, e.url)
	e.must(t, 0, "compact", e.url, id)
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
}
