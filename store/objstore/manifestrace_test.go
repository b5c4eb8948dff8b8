package objstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
)

// TestManifestOverUnknownOne: a Store that read a session through its
// index entry, which said no manifest was stored, writes its manifest
// over the one another Store stored meanwhile: refused once, it reads
// that one, sees that its own state extends it, and writes over it,
// without probing again for the segments it has; and the log reads back
// whole.
func TestManifestOverUnknownOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	id := agent.NewSessionID()
	appendN := func(name string, from, n int) {
		s := e.openOn(t, fb)
		if from > 0 {
			if _, err := s.Load(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		for i := from; i < from+n; i++ {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	appendN("a", 0, 3) // 3 segments, no manifest
	b := e.openOn(t, fb)
	if _, err := b.Load(ctx, id); err != nil { // its state: no manifest stored
		t.Fatal(err)
	}
	appendN("another", 3, 6) // 9 segments: its checkpoint stores a manifest
	fb.Take()
	if err := b.AppendMessages(ctx, id, []agent.PersistentMessage{user("m9")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var puts, refused int
	var readManifest bool
	for _, op := range fb.Take() {
		switch {
		case op.Method == "PUT" && strings.HasSuffix(op.Key, "/manifest.json"):
			puts++
			if op.Precondition() {
				refused++
			}
		case op.Method == "GET" && strings.HasSuffix(op.Key, "/manifest.json"):
			readManifest = true
		case op.Method == "GET" && strings.Contains(op.Key, "/seg/") && readManifest:
			t.Errorf("after reading the stored manifest, a probe of %s", op.Key)
		}
	}
	if puts != 2 || refused != 1 {
		t.Errorf("%d manifest PUTs, %d of them refused; want the refused one and the one over the stored manifest", puts, refused)
	}
	conv, err := e.open(t).Load(ctx, id)
	if err != nil || len(conv.Messages) != 10 || conv.Messages[9].Text() != "m9" {
		t.Fatalf("load: %v", err)
	}
	if err := e.open(t).Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
}
