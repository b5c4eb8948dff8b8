package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// The bucket is the truth: a lost or damaged index, or a file edited
// behind panto's back, never hides, loses or silently forks a session.

// removeObjects deletes every object of the env's bucket under prefix, as
// a lifecycle rule or a mistaken `aws s3 rm` would.
func (e *env) removeObjects(t *testing.T, prefix string) int {
	t.Helper()
	ctx := context.Background()
	c := e.srv.Client(t)
	n := 0
	for obj := range c.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if err := c.RemoveObject(ctx, e.bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestIndexDeleted: with the bucket's index/ objects deleted, verify says
// sessions are missing from the index and to run repair (exit 1); a push
// from the original catalog puts their entries back without sending their
// data; repair does the same from the bucket alone.
func TestIndexDeleted(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { testIndexDeleted(t, newEnvOn(t, srv)) })
}

func testIndexDeleted(t *testing.T, e *env) {
	dir, ids := catalog(t, 6)
	e.must(t, 0, "push", "--dir", dir, e.url)
	if n := e.removeObjects(t, "panto/index/"); n == 0 {
		t.Fatal("no index object to delete")
	}
	r := e.must(t, 1, "verify", "--json", e.url)
	evs, _ := events(t, r.stdout)
	if got := byEvent(evs); got["unindexed"] != len(ids) || got["verified"] != len(ids) {
		t.Errorf("verify of a bucket without its index: %v", got)
	}
	if !strings.Contains(r.stderr, "panto-sync repair") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("verify does not say, in one line, to run repair: %q", r.stderr)
	}

	// push: every session is found in the bucket, none is sent again, and
	// the index lists them all afterwards.
	rc := newRequestCounter(t, e.srv.Endpoint())
	r = e.must(t, 0, "push", "--dir", dir, "--endpoint", rc.URL, "--json", e.url)
	evs, sum := events(t, r.stdout)
	if sum.Bytes != 0 || byEvent(evs)["unchanged"] != len(ids) {
		t.Errorf("push to a bucket that lost its index: %+v %v", sum, byEvent(evs))
	}
	if c, sent := rc.take(); c[sessionPrefix+"PUT"] != 0 || sent > 64<<10 {
		t.Errorf("push sent %d bytes and %d session PUTs to put entries back", sent, c[sessionPrefix+"PUT"])
	}
	if got := len(e.remoteLogs(t)); got != len(ids) {
		t.Errorf("after the push the index lists %d sessions, want %d", got, len(ids))
	}
	e.must(t, 0, "verify", e.url)

	// repair, from the bucket alone.
	e.removeObjects(t, "panto/index/")
	r = e.must(t, 0, "repair", "--dry-run", "--json", e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["unindexed"] != len(ids) {
		t.Errorf("repair --dry-run: %v", byEvent(evs))
	}
	if got := len(e.remoteLogs(t)); got != 0 {
		t.Errorf("repair --dry-run wrote the index: %d sessions listed", got)
	}
	r = e.must(t, 0, "repair", e.url)
	if !strings.Contains(r.stdout, "rebuilt") {
		t.Errorf("repair output: %s", r.stdout)
	}
	if got := len(e.remoteLogs(t)); got != len(ids) {
		t.Errorf("after repair the index lists %d sessions, want %d", got, len(ids))
	}
	e.must(t, 0, "verify", e.url)
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
}

// TestIndexShardDamaged: one index partition overwritten with garbage
// hides only the sessions it lists: ls lists the others and says which shard is damaged
// and to run repair (exit 1); status, push and pull go on with the rest;
// verify names it; repair rebuilds it.
func TestIndexShardDamaged(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { testIndexShardDamaged(t, newEnvOn(t, srv)) })
}

func testIndexShardDamaged(t *testing.T, e *env) {
	dir, ids := catalog(t, 24)
	e.must(t, 0, "push", "--dir", dir, e.url)
	e.must(t, 0, "repair", e.url) // folds each shard's deltas into a base
	// A partition of the index (format 4: an id's first two characters).
	shard := ids[0][:2]
	inShard := 0
	for _, id := range ids {
		if id[:2] == shard {
			inShard++
		}
	}
	key := "panto/index/" + shard + ".json.zst"
	garbage := []byte("this is not an index shard")
	if _, err := e.srv.Client(t).PutObject(context.Background(), e.bucket, key, bytes.NewReader(garbage), int64(len(garbage)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// A machine whose cached catalog predates the damage lists from the
	// cache; this one has none, and reads the partitions.
	e.cache = t.TempDir()
	r := e.must(t, 1, "ls", "--json", e.url)
	if evs, _ := events(t, r.stdout); len(evs) != len(ids)-inShard {
		t.Errorf("ls with a damaged shard lists %d sessions, want the other %d", len(evs), len(ids)-inShard)
	}
	msg := strings.TrimSpace(r.stderr)
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "index shard "+shard) || !strings.Contains(msg, "panto-sync repair") {
		t.Errorf("ls does not name the shard and the repair in one line: %q", r.stderr)
	}
	// The other sessions still sync: an append elsewhere is pushed, and a
	// pull into a new directory gets them (and fails for the rest).
	var other string
	for _, id := range ids {
		if id[:2] != shard {
			other = id
			break
		}
	}
	appendBatch(t, dir, other, false)
	r = e.must(t, 1, "push", "--dir", dir, "--json", e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["pushed"] < 1 {
		t.Errorf("push with a damaged shard: %v", byEvent(evs))
	}
	// The push found the hidden sessions unlisted and read them: their
	// entries went to the index log (unfolded, which the damaged
	// partition does not hold back), so the pull gets them too.
	into := t.TempDir()
	e.must(t, 1, "pull", "--dir", into, e.url)
	if got := len(readCatalog(t, into)); got != len(ids) {
		t.Errorf("pull with a damaged shard wrote %d sessions, want all %d (the push indexed the hidden ones again)", got, len(ids))
	}
	if !bytes.Equal(readCatalog(t, into)[other+".jsonl"], readCatalog(t, dir)[other+".jsonl"]) {
		t.Error("the session appended while the shard was damaged did not come back whole")
	}
	e.must(t, 1, "status", "--dir", dir, e.url)
	r = e.must(t, 1, "verify", "--json", e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["damaged-shard"] != 1 || byEvent(evs)["verified"] != len(ids) {
		t.Errorf("verify with a damaged shard: %v", byEvent(evs))
	}
	e.must(t, 0, "repair", e.url)
	e.must(t, 0, "verify", e.url)
	r = e.must(t, 0, "ls", "--json", e.url)
	if evs, _ := events(t, r.stdout); len(evs) != len(ids) {
		t.Errorf("ls after repair: %d sessions, want %d", len(evs), len(ids))
	}
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
}

// TestEditedFileDiverges: a change below what was pushed is divergence,
// whatever the file's size and mtime say: one character of a middle line
// changed in place (same size, the mtime put back), and an edit followed by
// an append. push and status exit 3 and touch neither side.
func TestEditedFileDiverges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 3)
	e.must(t, 0, "push", "--dir", dir, e.url)
	// edit changes one letter of the first message's text, in place: the
	// size stays, the mtime is put back.
	edit := func(id string) {
		t.Helper()
		path := filepath.Join(dir, id+".jsonl")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		i := bytes.Index(data, []byte(`"text":"`))
		if i < 0 {
			t.Fatalf("no text in %s", path)
		}
		i += len(`"text":"`)
		for data[i] < 'a' || data[i] > 'z' || data[i-1] == '\\' { // a letter, not an escape
			i++
		}
		data[i] -= 'a' - 'A'
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.Stat(path); after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
			t.Fatal("test setup: the edit changed the size or the mtime")
		}
	}
	check := func(what, id string) {
		t.Helper()
		remote := e.remoteBytes(t, id)
		local, _ := os.ReadFile(filepath.Join(dir, id+".jsonl"))
		for _, cmd := range []string{"status", "push"} {
			r := e.must(t, 3, cmd, "--dir", dir, "--json", e.url)
			for _, ev := range evs(t, r.stdout) {
				if ev.ID == id && ev.Event != "diverged" {
					t.Errorf("%s: %s says %s of %s, want diverged", what, cmd, ev.Event, id)
				}
			}
		}
		if got := e.remoteBytes(t, id); !bytes.Equal(got, remote) {
			t.Errorf("%s: push touched the bucket's copy", what)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, id+".jsonl")); !bytes.Equal(got, local) {
			t.Errorf("%s: the local file was touched", what)
		}
	}
	// One letter of a line in the middle, in place.
	edit(ids[0])
	check("edited in place", ids[0])
	// An edit, then an append that grows the file as an append alone would.
	edit(ids[1])
	appendBatch(t, dir, ids[1], false)
	check("edited, then appended", ids[1])
}

func evs(t *testing.T, out string) []Event {
	t.Helper()
	e, _ := events(t, out)
	return e
}
