package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// allBytes reads every object of the env's bucket, and the decompressed
// bytes of the zstd ones, for scanning.
func (e *env) allBytes(t *testing.T) []byte {
	t.Helper()
	var all []byte
	for _, b := range e.objects(t) {
		all = append(all, b...)
	}
	return all
}

// objects reads every object of the env's bucket by key, the zstd ones
// followed by their decompressed bytes.
func (e *env) objects(t *testing.T) map[string][]byte {
	t.Helper()
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	all := e.srv.Objects(t, e.bucket)
	for key, b := range all {
		if raw, err := dec.DecodeAll(b, nil); err == nil {
			all[key] = append(b, raw...)
		}
	}
	return all
}

// deleteLocal deletes session id of dir as panto rm does.
func deleteLocal(t *testing.T, dir, id string) {
	t.Helper()
	st, err := fsjsonl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	at, err := store.Head(t.Context(), st, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(t.Context(), store.Tombstone{ID: id, Deleted: time.Now().UTC().Truncate(time.Second), At: at}); err != nil {
		t.Fatal(err)
	}
}

// marks returns a stretch of text from each session of dir that no
// other session of dir holds, to look for in a bucket after the sessions
// are deleted. Unique, because the sessions' text is drawn from a few
// words: the first 40 bytes of a message were once found in another
// session's (TestDeletionsKilled failed on that, 1 run in 25), and so,
// once, were the first 40 bytes of each text of a session of one
// message; so every 40 bytes from a text on, 8 apart, are candidates.
func marks(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	const width = 40
	files := readCatalog(t, dir)
	elsewhere := func(name string, mark []byte) bool {
		for other, data := range files {
			if other != name && bytes.Contains(data, mark) {
				return true
			}
		}
		return false
	}
	out := map[string][]byte{}
	for name, data := range files {
		var mark []byte
		for rest := data; mark == nil; {
			i := bytes.Index(rest, []byte(`"text":"`))
			if i < 0 {
				t.Fatalf("no text in %s that no other session holds", name)
			}
			rest = rest[i+len(`"text":"`):]
			text := rest // to the line's end: a quote in the text is escaped
			if end := bytes.IndexByte(text, '\n'); end >= 0 {
				text = text[:end]
			}
			for k := 0; k+width <= len(text) && mark == nil; k += 8 {
				if m := text[k : k+width]; !elsewhere(name, m) {
					mark = m
				}
			}
		}
		out[strings.TrimSuffix(name, ".jsonl")] = mark
	}
	return out
}

// TestDeletionsKilled: a push carrying deletions, and a pull carrying
// them back, killed at random moments, converge: once a run completes, the
// bucket lists none of the deleted sessions and holds none of their text,
// the other machine's files are gone, and nothing comes back.
func TestDeletionsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, ids := catalog(t, 40)
	e.must(t, 0, "push", "--dir", a, e.url)
	b := t.TempDir()
	e.must(t, 0, "pull", "--dir", b, e.url)
	gone := ids[:30]
	text := marks(t, a)
	for _, id := range gone {
		deleteLocal(t, a, id)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	kill := func(left func() int, args ...string) {
		t.Helper()
		for i := 0; i < 5; i++ {
			cmd := e.command(t, args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			t.Logf("%s killed: %d sessions left", args[0], left())
		}
	}
	readable := func() int {
		n := 0
		for _, id := range ids {
			if _, _, err := e.objstore(t).ReadLog(t.Context(), id, 0); err == nil {
				n++
			}
		}
		return n
	}
	kill(readable, "push", "--dir", a, "--quiet", e.url)
	e.must(t, 0, "push", "--dir", a, e.url)
	logs := e.remoteLogs(t)
	objects := e.objects(t)
	for _, id := range gone {
		if _, ok := logs[id]; ok {
			t.Errorf("the bucket still lists deleted session %s", id)
		}
		for key, b := range objects {
			if bytes.Contains(b, text[id]) {
				t.Errorf("object %s holds text of deleted session %s", key, id)
			}
		}
	}
	if len(logs) != len(ids)-len(gone) {
		t.Errorf("the bucket lists %d sessions, want %d", len(logs), len(ids)-len(gone))
	}

	kill(func() int { return len(readCatalog(t, b)) }, "pull", "--dir", b, "--quiet", e.url)
	e.must(t, 0, "pull", "--dir", b, e.url)
	left := readCatalog(t, b)
	for _, id := range gone {
		if _, ok := left[id+".jsonl"]; ok {
			tombs, _ := e.objstore(t).Tombstones(t.Context())
			listed := false
			for _, tb := range tombs {
				listed = listed || tb.ID == id
			}
			_, _, err := e.objstore(t).ReadLog(t.Context(), id, 0)
			t.Errorf("B still has deleted session %s after pull (the bucket lists its tombstone: %v; reading it: %v)", id, listed, err)
		}
	}
	if len(left) != len(ids)-len(gone) {
		t.Errorf("B holds %d sessions, want %d", len(left), len(ids)-len(gone))
	}
	// Nothing comes back: both push again, a fresh pull gets only the rest.
	e.must(t, 0, "push", "--dir", b, e.url)
	e.must(t, 0, "push", "--dir", a, e.url)
	fresh := t.TempDir()
	e.must(t, 0, "pull", "--dir", fresh, e.url)
	if got := readCatalog(t, fresh); len(got) != len(ids)-len(gone) {
		t.Errorf("a fresh pull got %d sessions, want %d", len(got), len(ids)-len(gone))
	}
	entries, _ := os.ReadDir(filepath.Join(fresh, ".panto-deleted"))
	if len(entries) != len(gone) {
		t.Errorf("a fresh pull recorded %d tombstones, want %d", len(entries), len(gone))
	}
}
