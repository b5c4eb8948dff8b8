package replica

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

var t0 = time.Date(2026, 4, 5, 6, 7, 8, 0, time.UTC)

func dirStore(t *testing.T) *fsjsonl.Store {
	t.Helper()
	s, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bucketStore opens a fresh bucket of the shared MinIO, for bulk work as
// panto-sync opens one.
func bucketStore(t *testing.T, prefix string) (*objstore.Store, *miniotest.Server, string) {
	t.Helper()
	srv := miniotest.Shared(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	return openBucket(t, "s3://"+bucket+"/"+prefix), srv, bucket
}

func openBucket(t *testing.T, url string) *objstore.Store {
	t.Helper()
	s, err := objstore.Open(context.Background(), url, objstore.WithDeferredIndex())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batch encodes one batch of n messages of session id.
func batch(t testing.TB, id string, header bool, n int, text string) []byte {
	t.Helper()
	var msgs []agent.PersistentMessage
	for i := range n {
		msgs = append(msgs, agent.PersistentMessage{Message: agent.UserText(fmt.Sprintf("%s %d", text, i)),
			Identity: agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: "m"}})
	}
	b, err := sessionlog.EncodeBatch(id, header, msgs, t0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// write appends raw bytes to session id of s at whatever it holds.
func write(t *testing.T, s store.LogStore, id string, data []byte) {
	t.Helper()
	at, err := checkpointOf(t.Context(), s, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendLog(t.Context(), id, at, data); err != nil {
		t.Fatalf("append to %s: %v", id, err)
	}
}

func bytesOf(t *testing.T, s store.LogStore, id string) []byte {
	t.Helper()
	r, _, err := s.ReadLog(t.Context(), id, 0)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// same fails unless a and b hold the same sessions, byte for byte.
func same(t *testing.T, a, b store.LogStore) {
	t.Helper()
	la, lb := logs(t, a), logs(t, b)
	if len(la) != len(lb) {
		t.Fatalf("%d sessions against %d", len(la), len(lb))
	}
	for id, l := range la {
		if lb[id].Checkpoint != l.Checkpoint {
			t.Fatalf("%s: %v against %v", id, l.Checkpoint, lb[id].Checkpoint)
		}
		if !bytes.Equal(bytesOf(t, a, id), bytesOf(t, b, id)) {
			t.Fatalf("%s: other bytes", id)
		}
	}
}

func logs(t *testing.T, s store.LogStore) map[string]store.Log {
	t.Helper()
	all, err := s.Logs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]store.Log{}
	for _, l := range all {
		m[l.Info.ID] = l
	}
	return m
}

func eventOf(events []Event, id string) Event {
	for _, e := range events {
		if e.ID == id {
			return e
		}
	}
	return Event{}
}

func kinds(events []Event) map[string]Kind {
	m := map[string]Kind{}
	for _, e := range events {
		m[e.ID] = e.Kind
	}
	return m
}

// copyAll runs Copy and returns its summary and events.
func copyAll(t *testing.T, src, dst store.LogStore, opts Options) (Summary, []Event) {
	t.Helper()
	var events []Event
	opts.Report = func(e Event) { events = append(events, e) }
	sum, err := Copy(t.Context(), src, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.FlushErr != nil {
		t.Fatal(sum.FlushErr)
	}
	return sum, events
}

// TestPlanRelations relates every kind of pair of copies, between two
// directories and between a directory and a bucket (where the bucket's
// prefix hashes are only at segment boundaries, so a prefix inside a
// segment is decided by comparing bytes).
func TestPlanRelations(t *testing.T) {
	for _, kind := range []string{"dir", "bucket"} {
		t.Run(kind, func(t *testing.T) {
			src := dirStore(t)
			var dst store.LogStore = dirStore(t)
			if kind == "bucket" {
				dst, _, _ = bucketStore(t, "p")
			}
			h := func(id string) []byte { return batch(t, id, true, 2, "start") }
			tail := func(id, text string) []byte { return batch(t, id, false, 1, text) }
			put := func(s store.LogStore, id string, parts ...[]byte) {
				write(t, s, id, bytes.Join(parts, nil))
			}
			// same; only in src; only in dst
			put(src, "same", h("same"), tail("same", "x"))
			put(dst, "same", h("same"), tail("same", "x"))
			put(src, "src-only", h("src-only"))
			put(dst, "dst-only", h("dst-only"))
			// src ahead by one batch; dst ahead by one batch
			put(src, "src-ahead", h("src-ahead"), tail("src-ahead", "x"))
			put(dst, "src-ahead", h("src-ahead"))
			put(src, "dst-ahead", h("dst-ahead"))
			put(dst, "dst-ahead", h("dst-ahead"), tail("dst-ahead", "x"))
			// the longer side's copy is one segment whose middle is the
			// shorter side's end
			put(src, "inside", h("inside"), tail("inside", "a"))
			put(dst, "inside", h("inside"), tail("inside", "a"), tail("inside", "b"))
			// diverged: same length other bytes; longer with another tail
			put(src, "div-same-len", h("div-same-len"), tail("div-same-len", "x"))
			put(dst, "div-same-len", h("div-same-len"), tail("div-same-len", "y"))
			put(src, "div-longer", h("div-longer"), tail("div-longer", "a"))
			put(dst, "div-longer", h("div-longer"), tail("div-longer", "b"), tail("div-longer", "c"))
			put(src, "div-inside", h("div-inside"), tail("div-inside", "a"), tail("div-inside", "b"))
			put(dst, "div-inside", h("div-inside"), tail("div-inside", "z"), tail("div-inside", "b"), tail("div-inside", "c"))
			if err := store.Flush(t.Context(), dst); err != nil {
				t.Fatal(err)
			}
			plans, err := PlanAll(t.Context(), src, dst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]Relation{"same": Same, "src-only": SrcOnly, "dst-only": DstOnly, "src-ahead": SrcAhead,
				"dst-ahead": DstAhead, "inside": DstAhead, "div-same-len": Diverged, "div-longer": Diverged, "div-inside": Diverged}
			if len(plans) != len(want) {
				t.Fatalf("%d plans, want %d", len(plans), len(want))
			}
			for _, p := range plans {
				if p.Err != nil || p.Relation != want[p.ID] {
					t.Errorf("%s: %v (%v), want %v", p.ID, p.Relation, p.Err, want[p.ID])
				}
			}
			// And the other way round.
			back, err := PlanAll(t.Context(), dst, src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			flip := map[Relation]Relation{Same: Same, SrcOnly: DstOnly, DstOnly: SrcOnly, SrcAhead: DstAhead, DstAhead: SrcAhead, Diverged: Diverged}
			for _, p := range back {
				if p.Relation != flip[want[p.ID]] {
					t.Errorf("reversed %s: %v, want %v", p.ID, p.Relation, flip[want[p.ID]])
				}
			}
		})
	}
}

// TestCopyConverges copies a catalog into another directory, appends on
// the source, and copies again: only the appended bytes move, and both
// hold the same bytes; a dry run writes nothing.
func TestCopyConverges(t *testing.T) {
	src, dst := dirStore(t), dirStore(t)
	g := sessiongen.New(1)
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("%032x", i+1)
		data, err := g.Session(id, 20_000*(i+1), t0)
		if err != nil {
			t.Fatal(err)
		}
		write(t, src, id, data)
		ids = append(ids, id)
	}
	sum, _ := copyAll(t, src, dst, Options{DryRun: true})
	if sum.Counts[Created] != 6 || len(logs(t, dst)) != 0 {
		t.Fatalf("dry run: %+v, and the destination holds %d sessions", sum, len(logs(t, dst)))
	}
	sum, events := copyAll(t, src, dst, Options{})
	if sum.Counts[Created] != 6 || sum.Failed != 0 {
		t.Fatalf("first copy: %+v %v", sum, events)
	}
	same(t, src, dst)
	var appended int64
	for _, id := range ids[:2] {
		b := batch(t, id, false, 3, "more")
		write(t, src, id, b)
		appended += int64(len(b))
	}
	sum, events = copyAll(t, src, dst, Options{})
	if sum.Bytes != appended || sum.Counts[Appended] != 2 || sum.Counts[Unchanged] != 4 {
		t.Fatalf("incremental copy moved %d bytes in %v, want %d in 2 appends", sum.Bytes, kinds(events), appended)
	}
	same(t, src, dst)
	if sum, _ := copyAll(t, src, dst, Options{}); sum.Bytes != 0 || sum.Counts[Unchanged] != 6 {
		t.Fatalf("no-op copy: %+v", sum)
	}
}

// TestCopyInChunks: a log longer than the chunk size is copied in many
// appends of whole batches (one larger than a chunk goes whole), into a
// directory and into a bucket, and reads back byte for byte; the bucket
// holds no segment much larger than a chunk.
func TestCopyInChunks(t *testing.T) {
	src := dirStore(t)
	id := "0123456789abcdef0123456789abcdef"
	data, err := sessiongen.New(7).Session(id, 300_000, t0)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, batch(t, id, false, 1, strings.Repeat("a very long line ", 5_000))...) // one batch of ~90 KB
	write(t, src, id, data)
	bucket, srv, name := bucketStore(t, "chunks")
	for _, dst := range []store.LogStore{dirStore(t), bucket} {
		sum, events := copyAll(t, src, dst, Options{ChunkSize: 32 << 10})
		if sum.Bytes != int64(len(data)) || sum.Counts[Created] != 1 {
			t.Fatalf("copy in chunks: %+v %+v", sum, events)
		}
		if got := bytesOf(t, dst, id); !bytes.Equal(got, data) {
			t.Fatalf("%T: %d bytes read back, want %d", dst, len(got), len(data))
		}
	}
	// Every segment object is at most a chunk, but for the one batch
	// larger than that.
	sizes := map[string]int64{}
	for obj := range srv.Client(t).ListObjects(t.Context(), name, minioListOpts("chunks/sessions/"+id+"/seg/")) {
		sizes[obj.Key] = obj.Size
	}
	cps, err := bucket.Checkpoints(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) < 8 {
		t.Errorf("%d segments for %d bytes in chunks of 32 KB", len(cps), len(data))
	}
	prev := int64(0)
	for _, cp := range cps {
		seg := data[prev:cp.Length]
		// With a chunk size of 1, every chunk is one batch.
		first, err := sessionlog.NewBatches(bytes.NewReader(seg), "segment", 1).Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(seg) > 32<<10 && len(first) != len(seg) {
			t.Errorf("a segment of %d raw bytes holds more than one batch", len(seg))
		}
		prev = cp.Length
	}
}

// cancelOnAppend is a destination whose appends end the copy's context
// as they are made: the copy's caller gives up while a chunk is being
// written (a search stopping at --limit while its reads pull sessions).
type cancelOnAppend struct {
	*fsjsonl.Store
	cancel context.CancelFunc
}

func (c cancelOnAppend) AppendLog(ctx context.Context, id string, at store.Checkpoint, data []byte) (store.Checkpoint, error) {
	c.cancel()
	return c.Store.AppendLog(ctx, id, at, data)
}

// TestCancelledDuringAppend: a copy whose context ends while a chunk is
// appended finishes that chunk and starts no other; when that chunk was
// the last, the copy is whole, and says so (it said "interrupted after
// N bytes", and local-first took the copied session for one it had to
// send); when more was left, it is interrupted after that chunk.
func TestCancelledDuringAppend(t *testing.T) {
	src := dirStore(t)
	id := "0123456789abcdef0123456789abcdee"
	data, err := sessiongen.New(9).Session(id, 100_000, t0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, src, id, data)
	plans := []Plan{{ID: id, Src: logs(t, src)[id].Checkpoint, Relation: SrcOnly}}
	for _, tc := range []struct {
		chunk int
		kind  Kind
	}{{DefaultChunkSize, Created}, {16 << 10, Failed}} {
		ctx, cancel := context.WithCancel(t.Context())
		dst := cancelOnAppend{Store: dirStore(t), cancel: cancel}
		e := Transfer(ctx, src, dst, plans, Options{Concurrency: 1, ChunkSize: tc.chunk})[0]
		cancel()
		held := int64(len(bytesOf(t, dst, id)))
		if e.Kind != tc.kind || e.Bytes != held || (tc.kind == Created) != (held == int64(len(data))) || held == 0 {
			t.Errorf("chunks of %d: %s, %d bytes moved (%v), the destination holds %d of %d; want %s", tc.chunk, e.Kind, e.Bytes, e.Err, held, len(data), tc.kind)
		}
		if tc.kind == Failed && held > int64(tc.chunk) {
			t.Errorf("chunks of %d: %d bytes copied after the context ended", tc.chunk, held)
		}
	}
}

// TestKeepBoth: a diverged session is stored under a derived id, once,
// keeping its project; running again finds it, and a copy cut short is
// completed.
func TestKeepBoth(t *testing.T) {
	src, dst := dirStore(t), dirStore(t)
	id := "ab000000000000000000000000000001"
	project := agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Dir: "/src/proj"}
	start, err := sessionlog.EncodeBatchIn(project, id, true, []agent.PersistentMessage{{Message: agent.UserText("start")}}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	write(t, src, id, append(append([]byte{}, start...), batch(t, id, false, 200, "local")...))
	write(t, dst, id, append(append([]byte{}, start...), batch(t, id, false, 1, "remote")...))
	before := bytesOf(t, dst, id)
	sum, _ := copyAll(t, src, dst, Options{})
	if sum.Diverged != 1 {
		t.Fatalf("copy of a diverged session: %+v", sum)
	}
	// Cut a keep-both copy short: the first chunk only.
	plans, err := PlanAll(t.Context(), src, dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	newID := forkID(id, plans[0].Src.SHA256, plans[0].Dst.SHA256)
	r, _, _ := src.ReadLog(t.Context(), id, 0)
	fork, _, err := forkReader(r, newID, id)
	if err != nil {
		t.Fatal(err)
	}
	first, err := sessionlog.NewBatches(fork, "fork", 4096).Next()
	if err != nil {
		t.Fatal(err)
	}
	write(t, dst, newID, first)
	r.Close()

	sum, events := copyAll(t, src, dst, Options{KeepBoth: true})
	if e := eventOf(events, id); sum.Counts[KeptBoth] != 1 || e.NewID != newID || e.Bytes == 0 || e.Note == "" {
		t.Fatalf("keep both after a cut: %+v %+v", sum, events)
	}
	copied := bytesOf(t, dst, newID)
	orig := bytesOf(t, src, id)
	if !bytes.Equal(copied[bytes.IndexByte(copied, '\n'):], orig[bytes.IndexByte(orig, '\n'):]) {
		t.Fatal("the kept copy is not the source's log after its header")
	}
	if !bytes.Contains(copied[:bytes.IndexByte(copied, '\n')], []byte(`"forked_from":"`+id+`"`)) {
		t.Fatalf("the kept copy's header does not link the original: %s", copied[:bytes.IndexByte(copied, '\n')])
	}
	if !bytes.Equal(bytesOf(t, dst, id), before) {
		t.Fatal("keep-both touched the destination's copy")
	}
	if kept, err := dst.Resolve(t.Context(), newID); err != nil || kept.Info.Project != project {
		t.Fatalf("the kept copy lists project %+v (%v), want %+v", kept, err, project)
	}
	// Again: found, nothing moves, no second copy.
	sum, events = copyAll(t, src, dst, Options{KeepBoth: true})
	if sum.Bytes != 0 || eventOf(events, id).NewID != newID || len(logs(t, dst)) != 2 {
		t.Fatalf("keep both again: %+v %+v, %d sessions", sum, events, len(logs(t, dst)))
	}
}

// listing is a LogStore whose listing holds extra entries: how a bucket
// anyone can write to could name sessions.
type listing struct {
	*fsjsonl.Store
	extra []store.Log
}

func (l listing) Logs(ctx context.Context) ([]store.Log, error) {
	logs, err := l.Store.Logs(ctx)
	return append(logs, l.extra...), err
}

// TestRefusedIDs: ids that could escape a store are refused before any
// path or key is made of them, and the rest of the copy goes on.
func TestRefusedIDs(t *testing.T) {
	dst := dirStore(t)
	src := listing{Store: dirStore(t)}
	write(t, src.Store, "good", batch(t, "good", true, 1, "ok"))
	for _, id := range []string{"../evil", "/etc/passwd", "a/b", "..", `a\b`} {
		src.extra = append(src.extra, store.Log{Info: agent.SessionInfo{ID: id}, Checkpoint: store.Checkpoint{Length: 10, SHA256: "x"}})
	}
	sum, events := copyAll(t, src, dst, Options{})
	if sum.Counts[Refused] != 5 || sum.Counts[Created] != 1 {
		t.Fatalf("copy with escaping ids: %+v %v", sum, kinds(events))
	}
	entries, _ := os.ReadDir(filepath.Dir(dst.Dir()))
	for _, e := range entries {
		if e.Name() == "evil" || e.Name() == "etc" {
			t.Fatalf("an escaping id reached the file system: %s", e.Name())
		}
	}
}

// TestCopyBuckets: dir → bucket → another bucket's prefix → dir, byte for
// byte, and incremental at every hop.
func TestCopyBuckets(t *testing.T) {
	dir := dirStore(t)
	g := sessiongen.New(3)
	for i := range 5 {
		id := fmt.Sprintf("%032x", 100+i)
		data, err := g.Session(id, 30_000, t0)
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, id, data)
	}
	a, srv, _ := bucketStore(t, "one")
	b := openBucket(t, "s3://"+srv.NewBucket(t)+"/two/deep")
	back := dirStore(t)
	hops := [][2]store.LogStore{{dir, a}, {a, b}, {b, back}}
	for _, hop := range hops {
		if sum, _ := copyAll(t, hop[0], hop[1], Options{}); sum.Counts[Created] != 5 {
			t.Fatalf("hop: %+v", sum)
		}
	}
	same(t, dir, back)
	id := fmt.Sprintf("%032x", 102)
	more := batch(t, id, false, 2, "appended")
	write(t, dir, id, more)
	for _, hop := range hops {
		// A fresh handle on each bucket, as another run would open.
		if sum, _ := copyAll(t, hop[0], hop[1], Options{}); sum.Bytes != int64(len(more)) || sum.Counts[Appended] != 1 {
			t.Fatalf("incremental hop: %+v", sum)
		}
	}
	same(t, dir, back)
}

func minioListOpts(prefix string) minio.ListObjectsOptions {
	return minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
}

// TestPullV2Bucket: a bucket written by main in format 2 (the fixture of
// store/objstore) pulls into a directory byte for byte, and takes a push
// of what was appended locally, written in format 3.
func TestPullV2Bucket(t *testing.T) {
	srv := miniotest.Shared(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	fixture := filepath.Join("..", "store", "objstore", "testdata", "v2-bucket")
	root := filepath.Join(fixture, "bucket")
	c := srv.Client(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		_, err = c.PutObject(t.Context(), bucket, "old/"+filepath.ToSlash(rel), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	remote := openBucket(t, "s3://"+bucket+"/old")
	local := dirStore(t)
	if sum, _ := copyAll(t, remote, local, Options{}); sum.Counts[Created] != 4 || sum.Failed != 0 {
		t.Fatalf("pull of the v2 bucket: %+v", sum)
	}
	files, _ := filepath.Glob(filepath.Join(fixture, "jsonl", "*.jsonl"))
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(local.Dir(), filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s pulled as %d bytes, the fixture holds %d (%v)", filepath.Base(f), len(got), len(want), err)
		}
	}
	id := "d00d1234567890abcdef1234567890ab"
	more := batch(t, id, false, 1, "appended locally")
	write(t, local, id, more)
	if sum, _ := copyAll(t, local, remote, Options{}); sum.Bytes != int64(len(more)) || sum.Counts[Appended] != 1 {
		t.Fatalf("push to the v2 bucket: %+v", sum)
	}
	same(t, local, openBucket(t, "s3://"+bucket+"/old"))
}

// tombstoneOf deletes session id of s at what s holds, now.
func deleteNow(t *testing.T, s interface {
	store.LogStore
	store.Deleter
}, id string) store.Tombstone {
	t.Helper()
	at, err := checkpointOf(t.Context(), s, id)
	if err != nil {
		t.Fatal(err)
	}
	tomb := store.Tombstone{ID: id, Deleted: time.Now().UTC().Truncate(time.Second), At: at}
	if err := s.Delete(t.Context(), tomb); err != nil {
		t.Fatal(err)
	}
	return tomb
}

// TestCopyCarriesDeletions: a deletion on the source reaches the
// destination's copy, and a copy that does not have the session keeps the
// tombstone; a session deleted in the destination is never brought back;
// one written to after the deletion is a conflict, left alone, which
// KeepBoth resolves by keeping the survivor as a new session.
func TestCopyCarriesDeletions(t *testing.T) {
	for _, kind := range []string{"dir", "bucket"} {
		t.Run(kind, func(t *testing.T) {
			a := dirStore(t)
			var b interface {
				store.LogStore
				store.Deleter
			} = dirStore(t)
			if kind == "bucket" {
				b, _, _ = bucketStore(t, "del")
			}
			ids := []string{"d1000000000000000000000000000001", "d2000000000000000000000000000002", "d3000000000000000000000000000003", "d4000000000000000000000000000004"}
			for _, id := range ids {
				write(t, a, id, batch(t, id, true, 2, "hello "+id))
			}
			copyAll(t, a, b, Options{})
			// 1: deleted in a; b holds what was deleted.
			deleteNow(t, a, ids[0])
			// 2: deleted in a at a later point than b holds (b is behind).
			write(t, a, ids[1], batch(t, ids[1], false, 1, "more in a"))
			deleteNow(t, a, ids[1])
			// 3: deleted in a; b was written to after (more bytes).
			deleteNow(t, a, ids[2])
			write(t, b, ids[2], batch(t, ids[2], false, 1, "written in b after the deletion"))
			// 4: deleted in b; a still holds it: a copy a→b must not bring it back.
			deleteNow(t, b, ids[3])
			// 5: a tombstone of a session b never had.
			ghost := "d5000000000000000000000000000005"
			if err := a.Delete(t.Context(), store.Tombstone{ID: ghost, Deleted: time.Now(), At: store.Checkpoint{Length: 10, SHA256: strings.Repeat("a", 64)}}); err != nil {
				t.Fatal(err)
			}
			if err := store.Flush(t.Context(), b); err != nil {
				t.Fatal(err)
			}
			dry, events := copyAll(t, a, b, Options{DryRun: true})
			if dry.Counts[Deleted] != 3 || !eventOf(events, ids[0]).DryRun {
				t.Errorf("dry run: %+v", dry)
			}
			sum, events := copyAll(t, a, b, Options{})
			want := map[string]Kind{ids[0]: Deleted, ids[1]: Deleted, ids[2]: Conflicted, ids[3]: Skipped, ghost: Deleted}
			for id, k := range want {
				if got := eventOf(events, id).Kind; got != k {
					t.Errorf("%s: %v, want %v", id, got, k)
				}
			}
			if sum.Diverged != 1 {
				t.Errorf("summary: %+v, want the conflict counted", sum)
			}
			bl := logs(t, b)
			if _, ok := bl[ids[0]]; ok {
				t.Errorf("%s still in the destination", ids[0])
			}
			if _, ok := bl[ids[1]]; ok {
				t.Errorf("%s still in the destination", ids[1])
			}
			if _, ok := bl[ids[2]]; !ok {
				t.Errorf("the conflicted %s was touched", ids[2])
			}
			if _, ok := logs(t, a)[ids[3]]; !ok {
				t.Errorf("%s, deleted in the destination, went from the source", ids[3])
			}
			if err := b.AppendMessages(t.Context(), ghost, []agent.PersistentMessage{{Message: agent.UserText("x")}}); !errors.Is(err, agent.ErrSessionDeleted) {
				t.Errorf("the buried %s takes appends in the destination: %v", ghost, err)
			}
			// The conflict, resolved: b's survivor is kept as a new session,
			// and the deletion goes through.
			survivor := bytesOf(t, b, ids[2])
			sum, events = copyAll(t, a, b, Options{KeepBoth: true})
			e := eventOf(events, ids[2])
			if e.Kind != KeptBoth || e.NewID == "" {
				t.Fatalf("keep-both of a deletion conflict: %+v", e)
			}
			kept := bytesOf(t, b, e.NewID)
			if !bytes.Equal(kept[bytes.IndexByte(kept, '\n'):], survivor[bytes.IndexByte(survivor, '\n'):]) {
				t.Error("the kept copy is not the survivor")
			}
			if _, err := b.Load(t.Context(), ids[2]); !errors.Is(err, agent.ErrSessionDeleted) {
				t.Errorf("after keep-both the original is not deleted: %v", err)
			}
			// Once more: nothing to do.
			if sum, _ := copyAll(t, a, b, Options{KeepBoth: true}); sum.Bytes != 0 || sum.Diverged != 0 || sum.Failed != 0 {
				t.Errorf("a second run: %+v", sum)
			}
		})
	}
}

// rawLogs is a source that serves logs as bytes, whatever their format:
// how a bucket a newer panto wrote reads (objstore serves the segments a
// manifest lists without decoding them).
type rawLogs struct {
	store.LogStore // unused: a source is only listed and read
	logs           map[string][]byte
}

func (r rawLogs) Logs(context.Context) ([]store.Log, error) {
	var out []store.Log
	for id, b := range r.logs {
		out = append(out, store.Log{Info: agent.SessionInfo{ID: id}, Checkpoint: store.Checkpoint{Length: int64(len(b)), SHA256: hexSum(b)}})
	}
	return out, nil
}

func (r rawLogs) ReadLog(_ context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	b := r.logs[id]
	return io.NopCloser(bytes.NewReader(b[from:])), store.Checkpoint{Length: int64(len(b)), SHA256: hexSum(b)}, nil
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestCopyRefusesNewerFormat: sync never appends to, nor creates, a log of
// a newer line format: a pulled tail of a session whose local copy a newer
// panto wrote, and a new session of that format, both fail with a one-line
// error saying to upgrade, and the destination is left as it was.
func TestCopyRefusesNewerFormat(t *testing.T) {
	newer := func(b []byte) []byte {
		return bytes.Replace(b, fmt.Appendf(nil, `"version":%d,`, sessionlog.Version), fmt.Appendf(nil, `"version":%d,`, sessionlog.Version+1), 1)
	}
	tail, fresh := "newer-tail", "newer-new"
	head := newer(batch(t, tail, true, 2, "a newer panto's"))
	src := rawLogs{logs: map[string][]byte{
		tail:  append(append([]byte{}, head...), batch(t, tail, false, 1, "its next batch")...),
		fresh: newer(batch(t, fresh, true, 1, "another")),
	}}
	dst := dirStore(t)
	path, _ := dst.Path(tail)
	if err := os.WriteFile(path, head, 0o600); err != nil {
		t.Fatal(err)
	}
	var events []Event
	sum, err := Copy(t.Context(), src, dst, Options{Report: func(e Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 2 {
		t.Errorf("copy of two sessions of a newer format: %+v %v", sum, kinds(events))
	}
	for _, id := range []string{tail, fresh} {
		ev := eventOf(events, id)
		if ev.Kind != Failed || !errors.Is(ev.Err, sessionlog.ErrNewerVersion) || strings.Contains(ev.Err.Error(), "\n") || !strings.Contains(ev.Err.Error(), "upgrade panto") {
			t.Errorf("%s: %v %v, want failed with one line saying to upgrade panto", id, ev.Kind, ev.Err)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, head) {
		t.Errorf("the local copy of a newer format was changed: %d bytes, were %d", len(got), len(head))
	}
	if _, err := os.Stat(filepath.Join(dst.Dir(), fresh+".jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a new session of a newer format was created: %v", err)
	}
}

// TestForkReaderBytes: the keep-both copy's header is the line format's
// own (sessionlog.EncodeHeader), byte for byte what sync has always
// written, and every line after it is the original's.
func TestForkReaderBytes(t *testing.T) {
	id, newID := "ab000000000000000000000000000001", "cd000000000000000000000000000002"
	header := `{"type":"session","version":1,"id":"` + id + `","created":"2026-01-02T03:04:05.000000006Z","more":1}` + "\n"
	rest := `{"type":"message","ts":"2026-01-02T03:04:05Z","role":"user","content":[{"type":"text","text":"<a & b>"}]}` + "\n"
	want := `{"type":"session","version":1,"id":"` + newID + `","created":"2026-01-02T03:04:05.000000006Z","forked_from":"` + id + `","more":1}` + "\n" + rest
	r, grew, err := forkReader(strings.NewReader(header+rest), newID, id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("fork =\n%s\nwant\n%s", got, want)
	}
	if grew != int64(len(want)-len(header)-len(rest)) {
		t.Errorf("grew = %d, want %d", grew, len(want)-len(header)-len(rest))
	}
}

// TestCoveredHooks: a copy shorter than what the other side deleted, not
// a prefix of it (a turn written here while the other side continued
// and deleted the session), goes with the deletion by the tombstone's
// rule, and is a conflict when the side that knows what it wrote says
// so: SrcCovered for a push of it, DstCovered for a pull onto it.
func TestCoveredHooks(t *testing.T) {
	id := "c1000000000000000000000000000001"
	setup := func(t *testing.T) (deleted, survivor *fsjsonl.Store) {
		deleted, survivor = dirStore(t), dirStore(t)
		write(t, deleted, id, batch(t, id, true, 1, "the first turn"))
		copyAll(t, deleted, survivor, Options{})
		write(t, deleted, id, batch(t, id, false, 3, "the other side's longer turns, then deleted"))
		deleteNow(t, deleted, id)
		write(t, survivor, id, batch(t, id, false, 1, "here"))
		return deleted, survivor
	}
	never := func(string, store.Tombstone, store.Checkpoint) bool { return false }
	t.Run("pull", func(t *testing.T) {
		deleted, survivor := setup(t)
		_, events := copyAll(t, deleted, survivor, Options{DstCovered: never})
		if k := eventOf(events, id).Kind; k != Conflicted {
			t.Errorf("with DstCovered false: %v, want Conflicted", k)
		}
		_, events = copyAll(t, deleted, survivor, Options{})
		if k := eventOf(events, id).Kind; k != Deleted {
			t.Errorf("by the tombstone's rule: %v, want Deleted", k)
		}
	})
	t.Run("push", func(t *testing.T) {
		deleted, survivor := setup(t)
		_, events := copyAll(t, survivor, deleted, Options{SrcCovered: never})
		if k := eventOf(events, id).Kind; k != Conflicted {
			t.Errorf("with SrcCovered false: %v, want Conflicted", k)
		}
		_, events = copyAll(t, survivor, deleted, Options{})
		if e := eventOf(events, id); e.Kind != Skipped || e.Relation != DstDeleted {
			t.Errorf("by the tombstone's rule: %v %v, want Skipped, DstDeleted", e.Kind, e.Relation)
		}
	})
}
