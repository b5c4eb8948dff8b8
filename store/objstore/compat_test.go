package objstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

const v2Fixture = "testdata/v2-bucket"

// uploadFixture puts the objects of a fixture bucket under the env's
// prefix, with minio-go.
func uploadFixture(t *testing.T, e *env, dir string) {
	t.Helper()
	root := filepath.Join(dir, "bucket")
	c := e.srv.Client(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		_, err = c.PutObject(context.Background(), e.bucket, "pfx/"+filepath.ToSlash(rel), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestV2Bucket: a bucket written by main in format 2 lists, loads and
// reads back byte for byte, verifies, and takes appends, which are
// written in index format 4 (and upgrade the marker first).
func TestV2Bucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	uploadFixture(t, e, v2Fixture)
	var want []agent.SessionInfo
	data, err := os.ReadFile(filepath.Join(v2Fixture, "list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	s := e.open(t)
	got, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List of the v2 bucket:\n got %+v\nwant %+v", got, want)
	}
	for _, info := range want {
		raw, err := os.ReadFile(filepath.Join(v2Fixture, "jsonl", info.ID+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		read, err := readRaw(ctx, s, info.ID, 0)
		if err != nil || !bytes.Equal(read, raw) {
			t.Fatalf("%s: ReadLog: %v, %d bytes, want the fixture's %d", info.ID, err, len(read), len(raw))
		}
		log, err := sessionlog.Parse("fixture", raw)
		if err != nil {
			t.Fatal(err)
		}
		conv, err := s.Load(ctx, info.ID)
		if err != nil || !reflect.DeepEqual(conv.Messages, log.Messages) {
			t.Fatalf("%s: Load: %v", info.ID, err)
		}
		if err := s.Verify(ctx, info.ID); err != nil {
			t.Fatalf("%s: Verify: %v", info.ID, err)
		}
	}
	// Nothing was written by reading: the marker is still version 1.
	if m := e.object(t, "pfx/panto-store.json"); !strings.Contains(string(m), `"version":1`) {
		t.Fatalf("reading upgraded the marker: %s", m)
	}

	// An append: the marker goes to 3 and requires index format 4, the
	// new documents are version 3, and everything still reads through a
	// fresh Store.
	id := "0a5e1f2b3c4d5e6f708192a3b4c5d6e7"
	w := e.open(t, objstore.WithManifestInterval(1))
	if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user("after the upgrade")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := e.object(t, "pfx/panto-store.json"); string(m) != `{"format":"panto-objstore","version":3,"requires":["index-bases","index-log"]}` {
		t.Fatalf("marker after a write: %s", m)
	}
	if m := e.object(t, "pfx/sessions/"+id+"/manifest.json"); !strings.HasPrefix(string(m), `{"version":3,`) {
		t.Fatalf("manifest after a write: %.60s", m)
	}
	fresh := e.open(t)
	conv, err := fresh.Load(ctx, id)
	if err != nil || len(conv.Messages) != 41 || conv.Messages[40].Text() != "after the upgrade" {
		t.Fatalf("load after the append: %v", err)
	}
	if err := fresh.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
	logs, err := sessionsOf(ctx, fresh)
	if err != nil || logs[id].Info.MessageCount != 41 || logs[id].Info.LastUserMessage != "after the upgrade" || len(logs) != 4 {
		t.Fatalf("list after the append: %v %+v (%d sessions)", err, logs[id].Info, len(logs))
	}
	// The compacted session (a v2 manifest with pending deletes) takes an
	// append and another compaction.
	c := "c0ffee00112233445566778899aabbcc"
	if err := fresh.AppendMessages(ctx, c, []agent.PersistentMessage{user("more")}); err != nil {
		t.Fatal(err)
	}
	// Format 2 summaries never folded token totals: the append folded
	// the whole log again rather than resume from the stale summary.
	if err := fresh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(v2Fixture, "jsonl", c+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := sessionlog.Parse("fixture", raw)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Info.Usage == (agent.Usage{}) {
		t.Fatalf("the fixture session %s has no usage to fold", c)
	}
	if logs, err := sessionsOf(ctx, e.open(t)); err != nil || logs[c].Info.Usage != parsed.Info.Usage || logs[c].Info.MessageCount != 11 {
		t.Fatalf("list after an append to a format 2 session: %v, usage %+v, want %+v", err, logs[c].Info.Usage, parsed.Info.Usage)
	}
	if err := fresh.Compact(ctx, c); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(e.object(t, "pfx/sessions/"+c+"/manifest.json"))
	if err != nil || len(m.Segments) != 1 || len(m.Pending) == 0 {
		t.Fatalf("compacted manifest: %v, %+v", err, m)
	}
	if conv, err := e.open(t).Load(ctx, c); err != nil || len(conv.Messages) != 11 {
		t.Fatalf("load after compaction: %v", err)
	}
	if _, err := fresh.AppendLog(ctx, c, store.Checkpoint{}, []byte("x")); err == nil {
		t.Fatal("a malformed append was accepted")
	}
}

// object reads one object of the env's bucket with minio-go.
func (e *env) object(t *testing.T, key string) []byte {
	t.Helper()
	for _, o := range e.readBucket(t) {
		if o.key == key {
			return o.data
		}
	}
	t.Fatalf("no object %s", key)
	return nil
}
