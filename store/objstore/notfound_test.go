package objstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/objstore"
)

// TestSegmentNotFoundAtFirst: a distributed MinIO with a node down has
// answered 404 for a segment written moments before through another node
// (TestClusterLosesANode, once, with the suite loading the machine). A
// segment the manifest lists or the index vouches for is asked for again,
// backing off, before the session is called corrupt: with every segment
// of a session answering 404 the first two times it is asked for, a load,
// an append by another Store and the load after it read the whole
// session.
func TestSegmentNotFoundAtFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t, objstore.WithCompactThreshold(0))
	id := agent.NewSessionID()
	var want []string
	for i := range 6 {
		want = append(want, fmt.Sprint("m", i))
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user(want[i])}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			// The manifest lists the first two segments; the other
			// four are found by probing, past it.
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Flushed, not closed: the index entry stays in the commit log
	// (a Close would move it to a run), where a reader finds it.
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	fb := e.faults(t)
	var mu sync.Mutex
	asked := map[string]int{}
	missed := 0
	fb.SetFault(func(op objstore.Op) error {
		if op.Method != "GET" || !strings.HasPrefix(op.Key, "sessions/"+id+"/seg/") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if asked[op.Key] == 2 {
			return nil
		}
		asked[op.Key]++
		missed++
		return fmt.Errorf("get %s: %w", op.Key, objstore.ErrNotFound)
	})
	check := func(what string) {
		t.Helper()
		r := e.openOn(t, fb)
		conv, err := r.Load(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Join(texts(conv), ","); got != strings.Join(want, ",") {
			t.Fatalf("%s: read %q, want %q", what, got, strings.Join(want, ","))
		}
	}
	check("the load")

	a := e.openOn(t, fb)
	want = append(want, "m6")
	if err := a.AppendMessages(ctx, id, []agent.PersistentMessage{user("m6")}); err != nil {
		t.Fatalf("the append: %v", err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Forget which segments were asked for: each answers 404 twice more.
	mu.Lock()
	clear(asked)
	mu.Unlock()
	check("the load after the append")
	if missed < 14 {
		t.Errorf("%d GETs of segments were answered 404, want two for each of the 7 segments at least", missed)
	}
}
