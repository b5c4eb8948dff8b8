package objstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// object is one object of the bucket, read back with minio-go.
type object struct {
	key  string
	data []byte // decompressed when the key ends in .zst
}

// rawObject is one object of the bucket as stored: no decompression.
type rawObject struct {
	key, etag string
	data      []byte
}

// rawBucket reads every object of the env's bucket with minio-go (or,
// of a memory bucket, from its map), as stored.
func (e *env) rawBucket(t testing.TB) []rawObject {
	t.Helper()
	if e.mem != nil {
		var out []rawObject
		for _, o := range objstore.MemObjects(e.mem) {
			out = append(out, rawObject{key: o.Key, etag: o.ETag, data: o.Data})
		}
		return out
	}
	ctx := context.Background()
	c := e.srv.Client(t)
	var out []rawObject
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
		out = append(out, rawObject{key: info.Key, etag: info.ETag, data: data})
	}
	return out
}

// readBucket reads every object under the env's prefix with minio-go,
// independently of the code under test, decompressed when the key ends in
// .zst (a plaintext prefix's).
func (e *env) readBucket(t testing.TB) []object {
	t.Helper()
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	var out []object
	for _, o := range e.rawBucket(t) {
		data := o.data
		if strings.HasSuffix(o.key, ".zst") {
			var err error
			if data, err = dec.DecodeAll(data, nil); err != nil {
				t.Fatalf("%s is not a zstd frame: %v", o.key, err)
			}
		}
		out = append(out, object{key: o.key, data: data})
	}
	return out
}

var indexKey = regexp.MustCompile(`^pfx/index/([0-9a-f])(\.json\.zst|/(\d{20})\.json\.zst)$`)

// indexEntries reads index shard name from objs as a reader would, with
// encoding/json: the base, then the deltas after its Through in order.
func indexEntries(t testing.TB, objs []object, name string) map[string]manifest.IndexEntry {
	t.Helper()
	// The shard as docs/DESIGN.md spells it, read independently of
	// internal/manifest's decoder.
	type entry struct {
		Length          int64     `json:"length"`
		SHA256          string    `json:"sha256"`
		Created         time.Time `json:"created"`
		Modified        time.Time `json:"modified"`
		Messages        int       `json:"messages"`
		LastUserMessage string    `json:"last_user_message"`
		Model           string    `json:"model"`
	}
	type shard struct {
		Version  int              `json:"version"`
		Through  int64            `json:"through"`
		Sessions map[string]entry `json:"sessions"`
	}
	decode := func(data []byte) shard {
		var sh shard
		if err := json.Unmarshal(data, &sh); err != nil {
			t.Fatal(err)
		}
		if sh.Version != manifest.Version {
			t.Fatalf("index shard of version %d, want %d", sh.Version, manifest.Version)
		}
		return sh
	}
	put := func(out map[string]manifest.IndexEntry, id string, e entry) {
		if old, ok := out[id]; !ok || old.Length <= e.Length {
			out[id] = manifest.IndexEntry{Length: e.Length, SHA256: e.SHA256, Info: agent.SessionInfo{
				ID: id, Created: e.Created, Modified: e.Modified, MessageCount: e.Messages, LastUserMessage: e.LastUserMessage, Model: e.Model}}
		}
	}
	out := map[string]manifest.IndexEntry{}
	deltas := map[int64][]byte{}
	var through int64
	for _, o := range objs {
		m := indexKey.FindStringSubmatch(o.key)
		if m == nil || m[1] != name {
			continue
		}
		if m[3] == "" {
			base := decode(o.data)
			through = base.Through
			for id, e := range base.Sessions {
				put(out, id, e)
			}
			continue
		}
		n, _ := strconv.ParseInt(m[3], 10, 64)
		deltas[n] = o.data
	}
	for n := through + 1; deltas[n] != nil; n++ {
		for id, e := range decode(deltas[n]).Sessions {
			put(out, id, e)
		}
	}
	return out
}

// TestLayout reads the bucket back with minio-go: the objects are those
// the layout says, and the segments, decompressed and concatenated, are
// exactly the bytes of the line codec for the same appends at the same
// times: byte for byte the file store/fsjsonl writes.
func TestLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	clock := fixedClock()
	s := e.open(t, objstore.WithClock(clock), objstore.WithCompactThreshold(0), objstore.WithManifestInterval(1))
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
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
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
	nseg, nindex := 0, 0
	for _, k := range keys {
		switch {
		case k == "pfx/panto-store.json", k == "pfx/panto-probe.json", k == "pfx/panto-probe-replace.json", k == "pfx/sessions/"+id+"/manifest.json":
		case segKey.MatchString(k):
			nseg++
		case indexKey.MatchString(k) && strings.HasPrefix(k, "pfx/index/c"):
			nindex++
		default:
			t.Errorf("unexpected object %s", k)
		}
	}
	if nseg != len(batches) || nindex == 0 || len(keys) != len(batches)+4+nindex {
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
		case strings.HasSuffix(o.key, "panto-store.json"):
			if !bytes.Equal(o.data, []byte(`{"format":"panto-objstore","version":3,"requires":["index-bases"]}`)) {
				t.Fatalf("marker %s", o.data)
			}
		}
	}
	entry := indexEntries(t, objs, "c")[id]
	if entry.Length != int64(len(want)) || entry.Info.MessageCount != 6 || entry.Info.LastUserMessage != "second" || !entry.Info.Modified.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("index entry %+v", entry)
	}
}

// TestLayoutOneSegment: a session whose log is one segment has no
// manifest (docs/DESIGN.md §P2): the segment and the
// index entry say everything; the append that adds a second segment
// creates the manifest.
func TestLayoutOneSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	s := e.open(t, objstore.WithClock(fixedClock()), objstore.WithCompactThreshold(0))
	id := "c0ffee" + agent.NewSessionID()[6:]
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("only"), msg(agent.RoleAssistant, "answer")}); err != nil {
		t.Fatal(err)
	}
	objs := e.readBucket(t)
	var keys []string
	var seg []byte
	for _, o := range objs {
		keys = append(keys, o.key)
		if o.key == "pfx/sessions/"+id+"/"+manifest.SegmentName(0) {
			seg = o.data
		}
	}
	entry := indexEntries(t, objs, "c")[id]
	slices.Sort(keys)
	want := []string{"pfx/index/c.json.zst", "pfx/panto-probe-replace.json", "pfx/panto-probe.json", "pfx/panto-store.json", "pfx/sessions/" + id + "/" + manifest.SegmentName(0)}
	if !slices.Equal(keys, want) {
		t.Fatalf("objects %q, want %q", keys, want)
	}
	if entry.Length != int64(len(seg)) || entry.SHA256 != sum(seg) || entry.Info.MessageCount != 2 || entry.Info.LastUserMessage != "only" {
		t.Fatalf("index entry %+v for a %d-byte segment", entry, len(seg))
	}
	fresh := e.open(t, objstore.WithManifestInterval(1))
	conv, err := fresh.Load(ctx, id)
	if err != nil || strings.Join(texts(conv), ",") != "only,answer" {
		t.Fatalf("load: %v %q", err, texts(conv))
	}
	if cps, err := fresh.Checkpoints(ctx, id); err != nil || len(cps) != 1 || cps[0] != (store.Checkpoint{Length: entry.Length, SHA256: entry.SHA256}) {
		t.Fatalf("checkpoints: %v %+v", err, cps)
	}
	if err := fresh.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := fresh.AppendMessages(ctx, id, []agent.PersistentMessage{user("more")}); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, e, id)
	if len(m.Segments) != 2 || m.Segments[0].Length != int64(len(seg)) || m.Segments[0].SHA256 != entry.SHA256 || m.Info().MessageCount != 3 {
		t.Fatalf("manifest after the second append: %+v", m)
	}
}

// TestRequestsPerAppend: the first append of a session is 2 PUTs (segment,
// index shard) and the shard's GET; a steady-state append is 1 PUT on the
// caller's path and a checkpoint of 1 PUT (index shard), or 2 in parallel
// (index shard and manifest) every 8 segments; no GET or LIST.
func TestRequestsPerAppend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	rec := e.faults(t)
	s := e.openOn(t, rec, objstore.WithCompactThreshold(0))
	rec.Take() // Open's marker read (and creation)
	sess := s.Create()
	if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user("first")}); err != nil {
		t.Fatal(err)
	}
	// The first append of a session writes its segment and its index
	// entry, no manifest: the segment PUT, then the PUT of the shard's
	// base, from the reading Open made: two round trips.
	first := rec.Take()
	for _, o := range first {
		t.Logf("first append: %s %s %v", o.Method, o.Key, o.Err)
	}
	if len(first) != 2 || countOps(first, "PUT") != 2 || opRounds(first) != 2 || !strings.HasSuffix(first[0].Key, "/"+manifest.SegmentName(0)) ||
		slices.ContainsFunc(first, func(o objstore.Op) bool { return strings.HasSuffix(o.Key, "manifest.json") }) {
		t.Fatalf("first append: %+v", first)
	}
	// The first append waited for its index entry; later ones return at
	// their commit point: one PUT, one round trip. The checkpoint follows
	// in the background: the index shard's PUT (If-Match), and with the
	// append that brings 8 segments past the manifest (none yet: the first
	// segment does not count), the manifest PUT in parallel with it; no
	// GET.
	for i := 0; i < 10; i++ {
		segments := i + 2
		withManifest := segments == 9
		var release func()
		alone := func() bool { return false }
		if withManifest {
			release, alone = checkpointsTogether(rec)
		} else {
			rec.SetFault(nil)
		}
		if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user("more")}); err != nil {
			t.Fatal(err)
		}
		if withManifest {
			onPath := rec.Take()
			if len(onPath) != 1 || !isSegmentPut(onPath[0]) {
				t.Fatalf("append %d: the append made %+v, want its segment PUT alone", i, onPath)
			}
			release()
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		reqs := rec.Take()
		if alone() {
			t.Fatalf("append %d: the manifest and index PUTs were not in flight together: %+v", i, reqs)
		}
		if !withManifest {
			if len(reqs) != 2 || !isSegmentPut(reqs[0]) || !strings.HasPrefix(reqs[1].Key, "index/") || countOps(reqs, "PUT") != 2 || opRounds(reqs) != 2 {
				t.Fatalf("append with %d segments: %+v, want the segment PUT then the index shard PUT", segments, reqs)
			}
			continue
		}
		if len(reqs) != 2 || countOps(reqs, "PUT") != 2 || opRounds(reqs) != 1 ||
			!slices.ContainsFunc(reqs, func(o objstore.Op) bool { return strings.HasSuffix(o.Key, "manifest.json") }) {
			t.Fatalf("checkpoint of the append with %d segments: %+v", segments, reqs)
		}
	}
	// List, resolve and latest cost one GET per shard (its base, a 304
	// when cached), all at once, no LIST.
	rec.SetFault(nil)
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.Take(); len(reqs) != manifest.Shards || countOps(reqs, "GET") != len(reqs) || countOps(reqs, "LIST") != 0 {
		t.Fatalf("list: %+v", reqs)
	}
	if _, err := s.Resolve(ctx, sess.Info.ID[:3]); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.Take(); len(reqs) != 1 {
		t.Fatalf("resolve: %d requests", len(reqs))
	}
}

// TestNoKeyInBucket: an API key that reaches the store (in provenance, the
// only place an agent could leak it) appears in no object.
func TestNoKeyInBucket(t *testing.T) {
	t.Parallel()
	const key = "sk-panto-test-KEYMARKER-0123456789"
	ctx := context.Background()
	e := newMemEnv(t)
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
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
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

// checkpointsTogether holds the manifest PUT and the index PUT of the next
// checkpoint until release is called and both have been issued, so that
// the test sees the append's own requests alone and the round-trip count
// does not depend on how the scheduler runs the two goroutines on a
// loaded machine. alone reports whether the wait timed out: the two were
// not issued concurrently.
func checkpointsTogether(rec *objstore.FaultBucket) (release func(), alone func() bool) {
	var mu sync.Mutex
	arrived := 0
	both := make(chan struct{})
	released := make(chan struct{})
	var timedOut atomic.Bool
	rec.SetFault(func(o objstore.Op) error {
		if !isPutOp(o, "manifest.json") && !(isPutOp(o, ".json.zst") && strings.HasPrefix(o.Key, "index/")) {
			return nil
		}
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(both)
		}
		mu.Unlock()
		<-released
		select {
		case <-both:
		case <-time.After(5 * time.Second):
			timedOut.Store(true)
		}
		return nil
	})
	return sync.OnceFunc(func() { close(released) }), timedOut.Load
}

func isSegmentPut(o objstore.Op) bool {
	return o.Method == "PUT" && strings.Contains(o.Key, "/seg/")
}
