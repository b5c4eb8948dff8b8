package objstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			// Listed, then not there: deleted in between, or listed by
			// a node of a loaded cluster that could not read it (a run
			// of the objstore tests met one, a commit of the log; the
			// cause was not traced). Either way no reader finds it.
			t.Logf("%s was listed, then not found: left out", info.Key)
			continue
		}
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

// indexKey matches an index partition (two hex characters, format 4) or
// a shard of format 3 (one), and the legacy deltas after a shard.
var indexKey = regexp.MustCompile(`^pfx/index/([0-9a-f]{1,2})(\.json\.zst|/(\d{20})\.json\.zst)$`)

// logCommitKey matches a commit of the index log (format 4).
var logCommitKey = regexp.MustCompile(`^pfx/index/log/(\d{20})\.json\.zst$`)

// docEntry is a session of an index document as docs/DESIGN.md spells
// it, read independently of internal/manifest's decoder.
type docEntry struct {
	Length          int64           `json:"length"`
	SHA256          string          `json:"sha256"`
	Created         time.Time       `json:"created"`
	Modified        time.Time       `json:"modified"`
	Messages        int             `json:"messages"`
	LastUserMessage string          `json:"last_user_message"`
	Model           string          `json:"model"`
	Resume          json.RawMessage `json:"resume"`
}

// indexDoc is an index partition, shard, delta or log commit as
// docs/DESIGN.md spells it.
type indexDoc struct {
	Version  int                 `json:"version"`
	Shard    string              `json:"shard"`
	Through  int64               `json:"through"`
	Sessions map[string]docEntry `json:"sessions"`
	Recent   map[string]docEntry `json:"recent"`
	Unfolded map[string]docEntry `json:"unfolded"`
}

func decodeIndexDoc(t testing.TB, data []byte) indexDoc {
	t.Helper()
	var doc indexDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != manifest.Version {
		t.Fatalf("index document of version %d, want %d", doc.Version, manifest.Version)
	}
	return doc
}

func (e docEntry) indexEntry(id string) manifest.IndexEntry {
	return manifest.IndexEntry{Length: e.Length, SHA256: e.SHA256, Info: agent.SessionInfo{
		ID: id, Created: e.Created, Modified: e.Modified, MessageCount: e.Messages, LastUserMessage: e.LastUserMessage, Model: e.Model}}
}

// indexEntries reads index partition (or shard) name from objs as a
// reader would, with encoding/json: the base, then the deltas after its
// Through in order.
func indexEntries(t testing.TB, objs []object, name string) map[string]manifest.IndexEntry {
	t.Helper()
	put := func(out map[string]manifest.IndexEntry, id string, e docEntry) {
		if old, ok := out[id]; !ok || old.Length <= e.Length {
			out[id] = e.indexEntry(id)
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
			base := decodeIndexDoc(t, o.data)
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
		for id, e := range decodeIndexDoc(t, deltas[n]).Sessions {
			put(out, id, e)
		}
	}
	return out
}

// indexedEntry is session id's entry as a reader finds it in objs, read
// with encoding/json: its partition's, or the newest commit's unfolded
// one when that is longer (docs/DESIGN.md §P3).
func indexedEntry(t testing.TB, objs []object, id string) manifest.IndexEntry {
	t.Helper()
	e, ok := indexEntries(t, objs, manifest.PartitionOf(id, 2))[id]
	if commit, found := newestCommitDoc(t, objs); found {
		if u, unfolded := commit.Unfolded[id]; unfolded && (!ok || u.Length > e.Length) {
			if u.Resume == nil {
				t.Fatalf("the unfolded entry of %s has no resume", id)
			}
			return u.indexEntry(id)
		}
	}
	return e
}

// newestCommitDoc reads the newest commit of the index log in objs with
// encoding/json, and checks that it says its own number; ok is false
// when the log has none.
func newestCommitDoc(t testing.TB, objs []object) (doc indexDoc, ok bool) {
	t.Helper()
	var newest int64
	var data []byte
	for _, o := range objs {
		if m := logCommitKey.FindStringSubmatch(o.key); m != nil {
			if n, _ := strconv.ParseInt(m[1], 10, 64); n > newest {
				newest, data = n, o.data
			}
		}
	}
	if data == nil {
		return indexDoc{}, false
	}
	doc = decodeIndexDoc(t, data)
	if doc.Shard != "log" || doc.Through != newest {
		t.Fatalf("index log commit %d says shard %q, through %d", newest, doc.Shard, doc.Through)
	}
	return doc, true
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
	nseg, nlog, npart := 0, 0, 0
	for _, k := range keys {
		switch {
		case k == "pfx/panto-store.json", k == "pfx/panto-probe.json", k == "pfx/panto-probe-replace.json", k == "pfx/sessions/"+id+"/manifest.json":
		case segKey.MatchString(k):
			nseg++
		case k == "pfx/index/c0.json.zst":
			// The session's partition (format 4): its first two
			// characters; written when the entry is folded (Close).
			npart++
		case logCommitKey.MatchString(k):
			nlog++
		default:
			t.Errorf("unexpected object %s", k)
		}
	}
	if nseg != len(batches) || nlog == 0 || len(keys) != len(batches)+4+npart+nlog {
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
			if !bytes.Equal(o.data, []byte(`{"format":"panto-objstore","version":3,"requires":["index-bases","index-log","index-unfolded","index-heads","index-run-deltas"]}`)) {
				t.Fatalf("marker %s", o.data)
			}
		}
	}
	entry := indexedEntry(t, objs, id)
	if entry.Length != int64(len(want)) || entry.Info.MessageCount != 6 || entry.Info.LastUserMessage != "second" || !entry.Info.Modified.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("index entry %+v", entry)
	}
	// The newest commit of the index log lists it as the partition does,
	// without the append state (a listing needs none), with where its
	// segments are (a reader sends their GETs at once).
	commit, _ := newestCommitDoc(t, objs)
	recent, ok := commit.Recent[id]
	if !ok || len(commit.Recent) != 1 || string(recent.Resume) != `{"segments":3,"stored":3}` || recent.indexEntry(id) != entry {
		t.Fatalf("the newest index log commit lists %+v, want the partition's %+v with resume {segments: 3, stored: 3}", commit.Recent, entry)
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
	entry := indexedEntry(t, objs, id)
	slices.Sort(keys)
	want := []string{"pfx/index/log/00000000000000000001.json.zst", "pfx/panto-probe-replace.json", "pfx/panto-probe.json", "pfx/panto-store.json", "pfx/sessions/" + id + "/" + manifest.SegmentName(0)}
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

// TestRequestsPerAppend: the first append of a session is its segment's
// PUT, then the PUT of the index log's next commit, which holds its entry
// unfolded (no partition is read or written); a steady-state append is 1
// PUT on the caller's path and a checkpoint of the commit's PUT (with the
// HEAD of the commit before it), with the manifest's PUT in parallel
// every 8 segments; no GET, no LIST. The Store's Close folds the entry
// into its partition: the partition's GET and PUT, then a commit.
func TestRequestsPerAppend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	rec := e.faults(t)
	s := e.openOn(t, rec, objstore.WithCompactThreshold(0))
	rec.Take() // Open's marker read (and creation), and the log's LIST
	sess := s.Create()
	// A delay per request, so that requests sent together overlap.
	rec.SetDelay(200 * time.Millisecond)
	if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user("first")}); err != nil {
		t.Fatal(err)
	}
	rec.SetDelay(0)
	partition := "index/" + manifest.PartitionOf(sess.Info.ID, 2) + ".json.zst"
	isPartitionPut := func(o objstore.Op) bool { return o.Method == "PUT" && o.Key == partition }
	isCommitPut := func(o objstore.Op, n int) bool {
		return o.Method == "PUT" && o.Key == fmt.Sprintf("index/log/%020d.json.zst", n) && o.IfNoneMatch == "*"
	}
	commitOp := func(method string, n int) func(objstore.Op) bool {
		return func(o objstore.Op) bool {
			return o.Method == method && o.Key == fmt.Sprintf("index/log/%020d.json.zst", n)
		}
	}
	// The first append of a session writes its segment and its index
	// entry, no manifest: two round trips.
	first := rec.Take()
	for _, o := range first {
		t.Logf("first append: %s %s %v", o.Method, o.Key, o.Err)
	}
	if len(first) != 2 || opRounds(first) != 2 || !isSegmentPut(first[0]) || !isCommitPut(first[1], 1) {
		t.Fatalf("first append: %+v", first)
	}
	// The first append waited for its index entry; later ones return at
	// their commit point: one PUT, one round trip. The checkpoint follows
	// in the background: the log's next commit, and with the append that
	// brings 8 segments past the manifest (none yet: the first segment
	// does not count), the manifest PUT in parallel with it; no GET.
	for i := 0; i < 10; i++ {
		segments := i + 2
		commit := i + 2
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
		// The commit goes with the HEAD of the commit before it (still
		// there: the log was not pruned past this Store's reading).
		c := slices.IndexFunc(reqs, func(o objstore.Op) bool { return isCommitPut(o, commit) })
		checked := slices.ContainsFunc(reqs, commitOp("HEAD", commit-1))
		if slices.ContainsFunc(reqs, isPartitionPut) || countOps(reqs, "GET") != 0 || c < 0 || !checked {
			t.Fatalf("append with %d segments: %+v, want the segment PUT, the commit's PUT and the HEAD of the one before", segments, reqs)
		}
		if !withManifest && len(reqs) != 3 {
			t.Fatalf("append with %d segments: %+v, want 3 requests", segments, reqs)
		}
		if withManifest && (len(reqs) != 3 || !slices.ContainsFunc(reqs, func(o objstore.Op) bool { return strings.HasSuffix(o.Key, "manifest.json") })) {
			t.Fatalf("checkpoint of the append with %d segments: %+v", segments, reqs)
		}
	}
	// Close folds the session's entry into a run of one page (not its
	// partition, 80 KB at 100,000 sessions), then commits it (which
	// takes the entry out of the unfolded set), by the commit the last
	// append's checkpoint made a moment ago: no check for a newer one.
	rec.SetFault(nil)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := rec.Take()
	p := slices.IndexFunc(reqs, func(o objstore.Op) bool { return o.Method == "PUT" && runKeyRe.MatchString(o.Key) })
	c := slices.IndexFunc(reqs, func(o objstore.Op) bool { return isCommitPut(o, 12) })
	if len(reqs) != 3 || p < 0 || reqs[p].IfNoneMatch != "*" || c < 0 || reqs[c].Start.Before(reqs[p].End) ||
		slices.ContainsFunc(reqs, func(o objstore.Op) bool { return o.Key == partition }) ||
		!slices.ContainsFunc(reqs, commitOp("HEAD", 11)) {
		t.Fatalf("close: %+v, want the run page's PUT, then commit 12 (and the HEAD of 11)", reqs)
	}
	// List costs one GET per partition (a 304 when cached) after the
	// check for a newer commit (the GET of the next, a 404, and the HEAD
	// of the newest), no LIST; resolve of a session the newest commit
	// holds one LIST of the sessions under the prefix (resolveRecent);
	// latest the check alone.
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.Take(); len(reqs) != manifest.Shards*manifest.Shards+2 || countOps(reqs, "GET") != len(reqs)-1 {
		t.Fatalf("list: %d requests, %d GETs", len(reqs), countOps(reqs, "GET"))
	}
	if _, err := s.Resolve(ctx, sess.Info.ID[:3]); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.Take(); len(reqs) != 1 || reqs[0].Method != "LIST" || reqs[0].Key != "sessions/"+sess.Info.ID[:3] {
		t.Fatalf("resolve: %+v, want one LIST", reqs)
	}
	if latest, err := s.Latest(ctx); err != nil || latest.Info.ID != sess.Info.ID {
		t.Fatalf("latest: %v", err)
	}
	if reqs := rec.Take(); len(reqs) != 2 || !slices.ContainsFunc(reqs, commitOp("GET", 13)) || !slices.ContainsFunc(reqs, commitOp("HEAD", 12)) {
		t.Fatalf("latest: %+v, want the GET of commit 13 and the HEAD of 12", reqs)
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
		index := isPutOp(o, ".json.zst") && strings.HasPrefix(o.Key, "index/")
		if !isPutOp(o, "manifest.json") && !index {
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
