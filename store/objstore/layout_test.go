package objstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// object is one object of the bucket, read back with minio-go.
type object struct {
	key  string
	data []byte // decompressed when the key ends in .zst
}

// readBucket reads every object under the env's prefix with minio-go,
// independently of the code under test.
func (e *env) readBucket(t testing.TB) []object {
	t.Helper()
	ctx := context.Background()
	c := e.srv.Client(t)
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	var out []object
	for info := range c.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if info.Err != nil {
			t.Fatalf("list: %v", info.Err)
		}
		o, err := c.GetObject(ctx, e.bucket, info.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(o)
		o.Close()
		if err != nil {
			t.Fatalf("read %s: %v", info.Key, err)
		}
		if strings.HasSuffix(info.Key, ".zst") {
			if data, err = dec.DecodeAll(data, nil); err != nil {
				t.Fatalf("%s is not a zstd frame: %v", info.Key, err)
			}
		}
		out = append(out, object{key: info.Key, data: data})
	}
	return out
}

// TestLayout reads the bucket back with minio-go: the objects are those
// the layout says, and the segments, decompressed and concatenated, are
// exactly the bytes of the line codec for the same appends at the same
// times: byte for byte the file store/fsjsonl writes.
func TestLayout(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	clock := fixedClock()
	s := e.open(t, objstore.WithClock(clock), objstore.WithCompactThreshold(0))
	id := "c0ffee" + agent.NewSessionID()[6:]
	batches := [][]agent.PersistentMessage{
		{user("first"), msg(agent.RoleAssistant, "answer")},
		{msg(agent.RoleSystem, "be brief")},
		{user("second"), msg(agent.RoleAssistant, "a"), msg(agent.RoleAssistant, "b")},
	}
	fs, err := fsjsonl.Open(t.TempDir(), fsjsonl.WithClock(fixedClock()))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := s.AppendMessages(ctx, id, b); err != nil {
			t.Fatal(err)
		}
		if err := fs.AppendMessages(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	path, err := fs.Path(id)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := e.readBucket(t)
	var keys []string
	var segs []byte
	for _, o := range objs {
		keys = append(keys, o.key)
		if strings.Contains(o.key, "/seg/") {
			segs = append(segs, o.data...)
		}
	}
	segKey := regexp.MustCompile(`^pfx/sessions/` + id + `/seg/\d{20}\.jsonl\.zst$`)
	nseg := 0
	for _, k := range keys {
		switch {
		case k == "pfx/panto-store.json", k == "pfx/sessions/"+id+"/manifest.json", k == "pfx/index/c.json.zst":
		case segKey.MatchString(k):
			nseg++
		default:
			t.Errorf("unexpected object %s", k)
		}
	}
	if nseg != len(batches) || len(keys) != len(batches)+3 {
		t.Fatalf("objects %q", keys)
	}
	if !bytes.Equal(segs, want) {
		t.Fatalf("segments hold\n%s\nwant\n%s", segs, want)
	}
	// Segment names are raw byte offsets, in order.
	var pos int64
	for _, o := range objs {
		if segKey.MatchString(o.key) {
			if want := manifest.SegmentName(pos); !strings.HasSuffix(o.key, want) {
				t.Fatalf("segment %s, want %s", o.key, want)
			}
			pos += int64(len(o.data))
		}
	}
	// The manifest and the index shard say the same as the bytes.
	log, err := sessionlog.Parse("want", want)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case strings.HasSuffix(o.key, "manifest.json"):
			m, err := manifest.Decode(o.data)
			if err != nil {
				t.Fatal(err)
			}
			if m.Length != int64(len(want)) || len(m.Segments) != 3 || m.Info().MessageCount != log.Info.MessageCount {
				t.Fatalf("manifest %+v", m)
			}
		case strings.HasSuffix(o.key, "index/c.json.zst"):
			var sh manifest.IndexShard
			if err := json.Unmarshal(o.data, &sh); err != nil {
				t.Fatal(err)
			}
			e := sh.Sessions[id]
			if e.Length != int64(len(want)) || e.Info.MessageCount != 6 || e.Info.LastUserMessage != "second" || !e.Info.Modified.Equal(t0.Add(3*time.Second)) {
				t.Fatalf("index entry %+v", e)
			}
		case strings.HasSuffix(o.key, "panto-store.json"):
			if !bytes.Contains(o.data, []byte(`"version":1`)) {
				t.Fatalf("marker %s", o.data)
			}
		}
	}
}

// TestRequestsPerAppend: a steady-state append is at most 3 PUTs in at
// most 2 sequential round trips, and no GET or LIST.
func TestRequestsPerAppend(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	rec := &recorder{}
	s := e.open(t, rec.option(), objstore.WithCompactThreshold(0))
	sess := s.Create()
	if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user("first")}); err != nil {
		t.Fatal(err)
	}
	first := rec.take()
	for _, q := range first {
		t.Logf("first append: %s %s %d", q.method, q.path, q.status)
	}
	for i := 0; i < 5; i++ {
		if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user("more")}); err != nil {
			t.Fatal(err)
		}
		reqs := rec.take()
		if n := count(reqs, "PUT"); n > 3 || len(reqs) != n {
			t.Fatalf("append %d: %d requests, %d PUTs: %+v", i, len(reqs), n, reqs)
		}
		if r := rounds(reqs); r > 2 {
			t.Fatalf("append %d: %d sequential round trips", i, r)
		}
	}
	// List, resolve and latest cost one GET per shard at most, no LIST.
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.take(); len(reqs) != manifest.Shards || count(reqs, "GET") != len(reqs) || slices.ContainsFunc(reqs, func(r request) bool { return strings.Contains(r.path, "list-type") }) {
		t.Fatalf("list: %+v", reqs)
	}
	if _, err := s.Resolve(ctx, sess.Info.ID[:3]); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.take(); len(reqs) != 1 {
		t.Fatalf("resolve: %d requests", len(reqs))
	}
}

// TestNoKeyInBucket: an API key that reaches the store (in provenance, the
// only place an agent could leak it) appears in no object.
func TestNoKeyInBucket(t *testing.T) {
	const key = "sk-panto-test-KEYMARKER-0123456789"
	ctx := context.Background()
	e := newEnv(t)
	s := e.open(t, objstore.WithCompactThreshold(2))
	id := agent.NewSessionID()
	prov := []agent.Message{agent.UserText("Authorization: Bearer " + key)}
	for i := 0; i < 4; i++ {
		pm := user("question")
		pm.Conversation = prov
		pm.ToolsAvailable = []agent.ToolDecl{{Name: "t", Description: key, InputSchema: map[string]any{"k": key}}}
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{pm}); err != nil {
			t.Fatal(err)
		}
	}
	objs := e.readBucket(t)
	if len(objs) < 4 {
		t.Fatalf("only %d objects", len(objs))
	}
	for _, o := range objs {
		if bytes.Contains(o.data, []byte(key)) || strings.Contains(o.key, key) {
			t.Errorf("%s holds the key", o.key)
		}
	}
}
