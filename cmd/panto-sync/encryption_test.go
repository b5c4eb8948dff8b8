package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// keygen runs panto-sync keygen into dir and returns the file and its key
// id.
func (e *env) keygen(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	r := e.must(t, 0, "keygen", "--json", path)
	var out struct {
		Event, File string
		KeyID       string `json:"key_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Event != "keygen" || out.File != path || len(out.KeyID) != 16 {
		t.Fatalf("keygen --json: %q %v", r.stdout, err)
	}
	return path, out.KeyID
}

// keyLine is the secret line of a key file: what no output may show.
func keyLine(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "PANTO-BUCKET-KEY-1:") {
			return strings.TrimPrefix(l, "PANTO-BUCKET-KEY-1:")
		}
	}
	t.Fatalf("no key line in %s", path)
	return ""
}

// etags is every object of the bucket under prefix with its ETag.
func (e *env) etags(t *testing.T, prefix string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for obj := range e.srv.Client(t).ListObjects(context.Background(), e.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		m[obj.Key] = obj.ETag
	}
	return m
}

func TestKeygen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "bucket.key")
	r := e.must(t, 0, "keygen", path)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", fi.Mode(), err)
	}
	if !strings.Contains(r.stdout, "key id ") || strings.Contains(r.stdout, keyLine(t, path)) {
		t.Fatalf("keygen says %q", r.stdout)
	}
	before, _ := os.ReadFile(path)
	r = e.must(t, 1, "keygen", path)
	if msg := strings.TrimSpace(r.stderr); strings.Contains(msg, "\n") || !strings.Contains(msg, "never overwritten") {
		t.Errorf("keygen over a file: %q", r.stderr)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused keygen changed the key file")
	}
	if r := e.must(t, 1, "keygen"); !strings.Contains(r.stderr, "FILE") {
		t.Errorf("keygen without a file: %q", r.stderr)
	}
	if r := e.must(t, 0, "keygen", "--help"); !strings.Contains(r.stdout, "Examples:") {
		t.Errorf("keygen --help: %q", r.stdout)
	}
}

// TestEncryptedSync: push, pull, status, ls, verify, repair and compact
// of an encrypted bucket, on every server; pull reproduces the catalog
// byte for byte and an incremental push sends the appended bytes alone;
// copy goes from the encrypted bucket into a plaintext directory and on
// into a prefix encrypted with another key, and rekeys a prefix directly.
// No output ever shows the key.
func TestEncryptedSync(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { testEncryptedSync(t, newEnvOn(t, srv)) })
}

func testEncryptedSync(t *testing.T, e *env) {
	keys := t.TempDir()
	k1, id1 := e.keygen(t, keys, "one.key")
	k2, id2 := e.keygen(t, keys, "two.key")
	var outputs []string
	must := func(want int, args ...string) result {
		t.Helper()
		r := e.must(t, want, args...)
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}

	dir, ids := catalog(t, 8)
	r := must(0, "push", "--key-file", k1, "--json", "-v", "--dir", dir, e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["pushed"] != len(ids) {
		t.Fatalf("push: %v", byEvent(evs))
	}
	if marker := e.objectText(t, "panto/panto-store.json"); !strings.Contains(marker, `"encryption"],"encryption":{`) || !strings.Contains(marker, id1) {
		t.Fatalf("marker %s", marker)
	}
	into := filepath.Join(t.TempDir(), "pulled")
	r = e.runEnv(t, []string{"PANTO_KEY_FILE=" + k1}, "pull", "--dir", into, e.url)
	if r.code != 0 {
		t.Fatalf("pull with PANTO_KEY_FILE: %d %s", r.code, r.stderr)
	}
	sameCatalog(t, dir, into)

	// Incremental: two sessions grow; only their tails move.
	var appended int64
	for _, id := range ids[:2] {
		appended += int64(len(appendBatch(t, dir, id, false)))
	}
	segs := e.segments(t)
	r = must(0, "push", "--key-file", k1, "--json", "--dir", dir, e.url)
	if _, sum := events(t, r.stdout); sum.Bytes != appended {
		t.Fatalf("incremental push sent %d bytes, %d were appended", sum.Bytes, appended)
	}
	after := e.segments(t)
	for _, id := range ids {
		want := segs[id]
		if id == ids[0] || id == ids[1] {
			want++
		}
		if after[id] != want {
			t.Errorf("session %s: %d segments after the incremental push, want %d", id, after[id], want)
		}
	}
	r = must(0, "pull", "--key-file", k1, "--json", "--dir", into, e.url)
	if _, sum := events(t, r.stdout); sum.Bytes != appended {
		t.Errorf("incremental pull moved %d bytes, want %d", sum.Bytes, appended)
	}
	sameCatalog(t, dir, into)

	// Divergence is still seen: both copies of a session grow apart.
	appendBatch(t, dir, ids[3], false)
	appendBatch(t, into, ids[3], false)
	must(0, "push", "--key-file", k1, "--dir", into, e.url)
	r = must(3, "status", "--key-file", k1, "--json", "--dir", dir, e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["diverged"] != 1 {
		t.Errorf("status: %v", byEvent(evs))
	}
	must(3, "push", "--key-file", k1, "--dir", dir, e.url)

	r = must(0, "ls", "--key-file", k1, "--json", e.url)
	if evs, _ := events(t, r.stdout); len(evs) != len(ids) {
		t.Errorf("ls: %d sessions", len(evs))
	}
	must(0, "verify", "--key-file", k1, e.url)
	must(0, "repair", "--key-file", k1, e.url)
	must(0, "compact", "--key-file", k1, e.url)

	// Without the key, with another one, and with a key for a plaintext
	// bucket: one line each, nothing written.
	plain := "s3://" + e.bucket + "/plain"
	must(0, "push", "--dir", dir, plain)
	before := e.etags(t, "")
	for _, c := range []struct {
		args []string
		says []string
	}{
		{[]string{"ls", e.url}, []string{"is encrypted", id1, "--key-file"}},
		{[]string{"push", "--dir", dir, e.url}, []string{"is encrypted", id1}},
		{[]string{"pull", "--key-file", k2, "--dir", t.TempDir(), e.url}, []string{id1, id2, "created with"}},
		{[]string{"push", "--key-file", k1, "--dir", dir, plain}, []string{"created without a key"}},
		{[]string{"ls", "--key-file", filepath.Join(keys, "missing.key"), e.url}, []string{"missing.key", "--key-file"}},
		{[]string{"copy", "--dst-key-file", k1, e.url, t.TempDir()}, []string{"never encrypted"}},
	} {
		r := must(1, c.args...)
		msg := strings.TrimRight(r.stderr, "\n")
		if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto-sync: ") {
			t.Errorf("%v: not one line: %q", c.args, r.stderr)
		}
		for _, s := range c.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%v: %q does not say %q", c.args, msg, s)
			}
		}
	}
	if got := e.etags(t, ""); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("a refused command wrote to the bucket")
	}

	// copy: encrypted bucket -> plaintext directory -> another prefix
	// encrypted with another key -> a directory again, byte for byte.
	restored := filepath.Join(t.TempDir(), "restored")
	must(0, "copy", "--src-key-file", k1, e.url, restored)
	sameCatalog(t, into, restored)
	rekeyed := "s3://" + e.bucket + "/rekeyed"
	must(0, "copy", "--dst-key-file", k2, restored, rekeyed)
	if marker := e.objectText(t, "rekeyed/panto-store.json"); !strings.Contains(marker, id2) {
		t.Fatalf("the copy's prefix is not encrypted with the second key: %s", marker)
	}
	again := filepath.Join(t.TempDir(), "again")
	must(0, "pull", "--key-file", k2, "--dir", again, rekeyed)
	sameCatalog(t, into, again)
	// And directly, one encrypted prefix into another, incrementally.
	direct := "s3://" + e.bucket + "/direct"
	r = must(0, "copy", "--json", "--src-key-file", k1, "--dst-key-file", k2, e.url, direct)
	if _, sum := events(t, r.stdout); sum.Counts["copied"] != len(ids) {
		t.Fatalf("rekeying copy: %+v", sum)
	}
	grown := appendBatch(t, into, ids[5], false)
	must(0, "push", "--key-file", k1, "--dir", into, e.url)
	r = e.runEnv(t, []string{"PANTO_KEY_FILE=" + k1, "PANTO_DST_KEY_FILE=" + k2}, "copy", "--json", e.url, direct)
	if _, sum := events(t, r.stdout); r.code != 0 || sum.Bytes != int64(len(grown)) {
		t.Fatalf("incremental rekeying copy: exit %d, %+v, %s", r.code, sum, r.stderr)
	}

	// A flipped byte in the bucket fails its session by name.
	segKey := ""
	for k := range e.etags(t, "panto/sessions/"+ids[6]+"/seg/") {
		segKey = k
	}
	data := []byte(e.objectText(t, segKey))
	data[len(data)-1] ^= 0x01
	if _, err := e.srv.Client(t).PutObject(context.Background(), e.bucket, segKey, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	r = must(1, "verify", "--key-file", k1, "--json", e.url)
	if evs, sum := events(t, r.stdout); sum.Failed != 1 || !strings.Contains(fmt.Sprint(evs), segKey) || !strings.Contains(fmt.Sprint(evs), "fails authentication") {
		t.Errorf("verify of a flipped byte: %+v", evs)
	}

	for _, k := range []string{k1, k2} {
		secret := keyLine(t, k)
		for _, out := range outputs {
			if strings.Contains(out, secret) || strings.Contains(out, secret[:20]) {
				t.Fatalf("an output shows the key of %s", k)
			}
		}
	}
}

// objectText reads one object of the env's bucket as stored.
func (e *env) objectText(t *testing.T, key string) string {
	t.Helper()
	o, err := e.srv.Client(t).GetObject(context.Background(), e.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	data, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(data)
}
