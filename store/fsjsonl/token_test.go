package fsjsonl

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// TestListingToken: the token stays while nothing but the summary cache
// changes (a listing writes it), and moves with an append, a new
// session, a deletion, and a rewrite that keeps the file's size and
// mtime.
func TestListingToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	a, b := agent.NewSessionID(), agent.NewSessionID()
	mustAppend(t, s, a, msgs("first", 2))
	token := func() string {
		t.Helper()
		tok, err := s.ListingToken(ctx)
		if err != nil || tok == "" {
			t.Fatalf("ListingToken: %q, %v", tok, err)
		}
		return tok
	}
	last := token()
	same := func(what string) {
		t.Helper()
		if got := token(); got != last {
			t.Fatalf("%s moved the token", what)
		}
	}
	moved := func(what string) {
		t.Helper()
		got := token()
		if got == last {
			t.Fatalf("%s left the token as it was", what)
		}
		last = got
	}
	same("nothing")
	if _, err := s.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatalf("the listing wrote no cache: %v", err)
	}
	same("a listing (its cache)")
	mustAppend(t, s, a, msgs("more", 1))
	moved("an append")
	mustAppend(t, s, b, msgs("another", 1))
	moved("a new session")

	// The listing right after a token lists from the token's stats: the
	// directory as the token named it, not an append made between them;
	// the listing after it sees the append.
	length := func() int64 {
		t.Helper()
		logs, err := s.Logs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			if l.Info.ID == b {
				return l.Checkpoint.Length
			}
		}
		t.Fatalf("session %s not listed", b)
		return 0
	}
	named := length()
	token()
	mustAppend(t, s, b, msgs("after the token", 1))
	if got := length(); got != named {
		t.Fatalf("the listing after a token shows %d bytes of %s, the token named %d", got, b, named)
	}
	if got := length(); got <= named {
		t.Fatalf("the next listing shows %d bytes of %s, not the append past %d", got, b, named)
	}
	last = token()

	path := filepath.Join(dir, a+".jsonl")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	moved("a rewrite of the same size and mtime")

	at, err := store.Head(ctx, s, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Tombstone{ID: b, Deleted: time.Now().UTC(), At: at}); err != nil {
		t.Fatal(err)
	}
	moved("a deletion")
}
