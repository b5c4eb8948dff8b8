package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestCrashPoints stops an append at each point between its commit and
// its last checkpoint (the process "dies": every later request fails); a
// fresh Store then loads, lists and appends correctly.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// crash reports whether the request (in order) is the first one
		// the dead process no longer makes.
		crash func(op objstore.Op, segDone, manifestDone bool) bool
		// indexAfterManifest holds index PUTs until the manifest PUT is
		// done: the two run in parallel, and without this the index may
		// be written before the crash point is reached.
		indexAfterManifest bool
	}{
		{"after segment PUT", func(op objstore.Op, segDone, _ bool) bool { return segDone }, false},
		{"after manifest PUT", func(op objstore.Op, _, manifestDone bool) bool { return manifestDone }, true},
		{"before index PUT", func(op objstore.Op, _, _ bool) bool {
			return isPutOp(op, ".json.zst") && strings.HasPrefix(op.Key, "index/")
		}, false},
	}
	// before is the number of appends before the crashed one: a new
	// session (its first append writes no manifest, so it has no "after
	// manifest PUT" point: TestRequestsPerAppend checks there is no such
	// PUT), a one-segment session (the crashed append creates the
	// manifest) and a session with a manifest (If-Match).
	for _, c := range cases {
		for _, before := range []int{2, 1, 0} {
			newSession := before == 0
			name := c.name
			switch before {
			case 0:
				if c.name == "after manifest PUT" {
					continue
				}
				name += " of a new session"
			case 1:
				name += " of a one-segment session"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				e := newMemEnv(t)
				id := agent.NewSessionID()
				var want []string
				for i := range before {
					s := e.open(t, objstore.WithManifestInterval(1))
					text := fmt.Sprint("before", i)
					if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(text)}); err != nil {
						t.Fatal(err)
					}
					// Its checkpoints land before the next Store opens:
					// the crash under test is the next append's.
					if err := s.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					want = append(want, text)
				}
				fb := e.faults(t)
				// Interval 1: every append after the first writes the
				// manifest, so that each crash point exists.
				s := e.openOn(t, fb, objstore.WithMaxAttempts(1), objstore.WithManifestInterval(1))
				if !newSession {
					if _, err := s.Load(ctx, id); err != nil { // warm the caches
						t.Fatal(err)
					}
				}
				var segDone, manifestDone, dead atomic.Bool
				fb.SetFault(func(op objstore.Op) error {
					if c.indexAfterManifest && op.Method == "PUT" && strings.HasPrefix(op.Key, "index/") {
						for deadline := time.Now().Add(10 * time.Second); !manifestDone.Load() && time.Now().Before(deadline); {
							time.Sleep(time.Millisecond)
						}
					}
					if dead.Load() || c.crash(op, segDone.Load(), manifestDone.Load()) {
						dead.Store(true)
						return objstore.ErrInjected
					}
					if isPutOp(op, ".jsonl.zst") {
						defer segDone.Store(true)
					}
					if isPutOp(op, "manifest.json") {
						defer manifestDone.Store(true)
					}
					return nil
				})
				// The segment committed, so the append is durable whatever
				// happened to the checkpoints after it.
				if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("crashed"), user("batch")}); err != nil {
					t.Logf("append reported %v", err)
				}
				// The checkpoints are written in the background: the
				// crash happens there.
				if err := s.Flush(ctx); err == nil && !newSession {
					t.Error("Flush of a dead process's checkpoints reported no error")
				}
				if !segDone.Load() || !dead.Load() {
					t.Fatalf("the fault did not fire (segment %v)", segDone.Load())
				}
				fresh := e.open(t)
				conv, err := fresh.Load(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, "crashed", "batch")
				if got := texts(conv); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("loaded %q, want %q", got, want)
				}
				if _, err := fresh.Resolve(ctx, id); err != nil {
					t.Fatalf("resolve by full id: %v", err)
				}
				// The index may lag (it says `before` messages, from before
				// the crash) but is never wrong; a session the index never
				// knew was put back by resolving its full id.
				infos, err := e.open(t).List(ctx)
				if err != nil || len(infos) != 1 || infos[0].ID != id {
					t.Fatalf("list after resolve: %v %+v", err, infos)
				}
				if n := infos[0].MessageCount; n != len(want) && (newSession || n != before) {
					t.Fatalf("list after resolve: %d messages, want %d (or %d, lagging)", n, len(want), before)
				}
				if err := fresh.AppendMessages(ctx, id, []agent.PersistentMessage{user("after")}); err != nil {
					t.Fatal(err)
				}
				if err := fresh.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				want = append(want, "after")
				conv, err = e.open(t).Load(ctx, id)
				if err != nil || strings.Join(texts(conv), ",") != strings.Join(want, ",") {
					t.Fatalf("after the next append: %v %q", err, texts(conv))
				}
				infos, err = e.open(t).List(ctx)
				if err != nil || len(infos) != 1 || infos[0].ID != id || infos[0].MessageCount != len(want) || infos[0].LastUserMessage != "after" {
					t.Fatalf("list after the next append: %v %+v", err, infos)
				}
				if err := fresh.Verify(ctx, id); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestServerKilledMidAppend kills MinIO while appends are in flight and
// restarts it: each append either failed and is absent, or succeeded and
// is present; none is half there or twice.
func TestServerKilledMidAppend(t *testing.T) {
	t.Parallel()
	srv := miniotest.New(t)
	bucketName := srv.NewBucket(t)
	e := &env{srv: srv, bucket: bucketName, url: "s3://" + bucketName}
	ctx := context.Background()
	s := e.open(t)
	id := agent.NewSessionID()
	if err := s.AppendMessages(ctx, id, batchOf(0, 0)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		b   int
		err error
	}
	results := make(chan result, 100)
	stop := make(chan struct{})
	go func() {
		defer close(results)
		for b := 1; ; b++ {
			select {
			case <-stop:
				return
			default:
			}
			actx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := s.AppendMessages(actx, id, batchOf(0, b))
			cancel()
			results <- result{b, err}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	srv.Kill()
	time.Sleep(1500 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	var ok, failed, unknown []int
	for r := range results {
		switch {
		case errors.Is(r.err, objstore.ErrOutcomeUnknown):
			unknown = append(unknown, r.b)
			t.Logf("batch %d: %v", r.b, r.err)
		case r.err != nil:
			failed = append(failed, r.b)
			t.Logf("batch %d: %v", r.b, r.err)
		default:
			ok = append(ok, r.b)
		}
	}
	t.Logf("%d appends succeeded, %d failed", len(ok), len(failed))
	// Once the server is back, the same Store appends again.
	last := 1000
	if err := s.AppendMessages(ctx, id, batchOf(0, last)); err != nil {
		t.Fatalf("append after the restart: %v", err)
	}
	ok = append(ok, last)
	conv, err := e.open(t).Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]int{}
	for _, m := range texts(conv) {
		present[m]++
	}
	for _, b := range ok {
		for _, pm := range batchOf(0, b) {
			if present[pm.Message.Text()] != 1 {
				t.Errorf("succeeded batch %d: %q present %d times", b, pm.Message.Text(), present[pm.Message.Text()])
			}
		}
	}
	for _, b := range failed {
		for _, pm := range batchOf(0, b) {
			if present[pm.Message.Text()] != 0 {
				t.Errorf("failed batch %d is present", b)
			}
		}
	}
	// A batch whose outcome could not be known is whole or absent, never
	// half, and never twice.
	for _, b := range unknown {
		batch := batchOf(0, b)
		first := present[batch[0].Message.Text()]
		for _, pm := range batch {
			if n := present[pm.Message.Text()]; n != first || n > 1 {
				t.Errorf("batch %d of unknown outcome: %q present %d times, its first message %d times", b, pm.Message.Text(), n, first)
			}
		}
	}
}

// TestFlippedByte: a segment altered in the bucket fails Load and Verify
// with an error naming the object.
func TestFlippedByte(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithCompactThreshold(0))
	id := agent.NewSessionID()
	for i := 0; i < 3; i++ {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(strings.Repeat("text ", 20))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Replace the middle segment by one whose raw bytes differ in one
	// byte (re-compressed, so that the zstd frame itself is valid).
	objs := e.readBucket(t)
	var segs []object
	for _, o := range objs {
		if strings.Contains(o.key, "/seg/") {
			segs = append(segs, o)
		}
	}
	key := segs[1].key
	raw := bytes.Clone(segs[1].data)
	i := bytes.Index(raw, []byte("text"))
	raw[i] ^= 0x01
	codec, _ := manifest.NewCodec()
	comp := codec.Compress(raw)
	e.putRaw(t, key, comp)
	for what, err := range map[string]error{
		"load":   func() error { _, err := e.open(t).Load(ctx, id); return err }(),
		"verify": e.open(t).Verify(ctx, id),
	} {
		if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want ErrCorrupt naming %s", what, err, key)
		}
	}
	// A flipped bit in the compressed frame is caught too.
	comp[len(comp)/2] ^= 0x10
	e.putRaw(t, key, comp)
	if _, err := e.open(t).Load(ctx, id); !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
		t.Errorf("load of a damaged frame: %v", err)
	}
}

// TestFlippedByteNoManifest: a segment no manifest lists — the only
// segment of a session (its first append writes no manifest), or one
// appended after the manifest (written every 8 segments) — is checked
// against the index entry: a byte flipped in it (re-compressed, so that
// the frame and the lines are valid) fails Load, ReadRaw, Checkpoints and
// Verify with ErrCorrupt naming the object; so does a damaged frame, and a
// segment the index counts that is gone.
func TestFlippedByteNoManifest(t *testing.T) {
	t.Parallel()
	t.Run("one segment", func(t *testing.T) { testFlippedByteNoManifest(t, 1) })
	t.Run("past the manifest", func(t *testing.T) { testFlippedByteNoManifest(t, 11) })
}

func testFlippedByteNoManifest(t *testing.T, appends int) {
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithCompactThreshold(0))
	id := agent.NewSessionID()
	for range appends {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(strings.Repeat("text ", 20))}); err != nil {
			t.Fatal(err)
		}
		// One checkpoint per append, so that the manifest lists 9.
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var key string
	var raw []byte
	for _, o := range e.readBucket(t) {
		if strings.HasSuffix(o.key, "manifest.json") && appends == 1 {
			t.Fatalf("a one-segment session has a manifest: %s", o.key)
		}
		if strings.Contains(o.key, "/seg/") && o.key > key {
			key, raw = o.key, bytes.Clone(o.data)
		}
	}
	if appends > 1 {
		if m := readManifest(t, e, id); len(m.Segments) != 9 {
			t.Fatalf("the manifest lists %d segments, want 9", len(m.Segments))
		}
	}
	if raw == nil {
		t.Fatalf("no %s", key)
	}
	calls := func() map[string]error {
		fresh := e.open(t)
		_, load := fresh.Load(ctx, id)
		_, read := readRaw(ctx, fresh, id, 0)
		_, cps := fresh.Checkpoints(ctx, id)
		return map[string]error{"load": load, "readraw": read, "checkpoints": cps, "verify": fresh.Verify(ctx, id)}
	}
	for what, err := range calls() {
		if err != nil {
			t.Fatalf("%s of the intact session: %v", what, err)
		}
	}
	put := func(key string, data []byte) { t.Helper(); e.putRaw(t, key, data) }
	flipped := bytes.Clone(raw)
	flipped[bytes.Index(flipped, []byte("text"))] ^= 0x01 // "uext": still valid JSON
	codec, _ := manifest.NewCodec()
	comp := codec.Compress(flipped)
	put(key, comp)
	for what, err := range calls() {
		if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s of a flipped byte: %v, want ErrCorrupt naming %s", what, err, key)
		}
	}
	// A flipped bit in the compressed frame: the frame's checksum.
	comp[len(comp)/2] ^= 0x10
	put(key, comp)
	for what, err := range calls() {
		if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s of a damaged frame: %v, want ErrCorrupt naming %s", what, err, key)
		}
	}
	if appends > 1 {
		return
	}
	// The intact segment back, then a second one the index counts but
	// no manifest lists, deleted: the missing object is named.
	put(key, codec.Compress(raw))
	more, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("more")}, t0)
	if err != nil {
		t.Fatal(err)
	}
	key2 := e.key("sessions/" + id + "/" + manifest.SegmentName(int64(len(raw))))
	fb := e.faults(t)
	w := e.openOn(t, fb, objstore.WithMaxAttempts(1))
	fb.SetFault(func(op objstore.Op) error {
		if isPutOp(op, "manifest.json") {
			return objstore.ErrInjected
		}
		return nil
	})
	if err := appendRaw(ctx, w, id, int64(len(raw)), sum(raw), more); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if remote, err := sessionsOf(ctx, e.open(t)); err != nil || remote[id].Length != int64(len(raw)+len(more)) {
		t.Fatalf("the index should count both segments: %v %+v", err, remote[id])
	}
	for what, err := range calls() {
		if err != nil {
			t.Fatalf("%s of two segments without a manifest: %v", what, err)
		}
	}
	e.removeRaw(t, key2)
	for what, err := range calls() {
		if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key2) {
			t.Errorf("%s with a missing segment: %v, want ErrCorrupt naming %s", what, err, key2)
		}
	}
}

// TestVerifyTamperedManifest: a manifest whose intermediate prefix hash was
// altered still loads (every segment's own hash holds) but fails Verify,
// which names the segment whose boundary is wrong.
func TestVerifyTamperedManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithCompactThreshold(0), objstore.WithManifestInterval(1))
	id := agent.NewSessionID()
	// One checkpoint per append, so that the index entry says the stored
	// manifest lists segments and a Load reads it (an entry written with
	// the first manifest says none is stored, and a Load probes past it).
	for i := 0; i < 3; i++ {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("m")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := readManifest(t, e, id)
	m.Segments[0].PrefixSHA256 = strings.Repeat("ab", 32)
	data, err := manifest.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	key := e.key("sessions/" + id + "/manifest.json")
	e.putRaw(t, key, data)
	fresh := e.open(t)
	if _, err := fresh.Load(ctx, id); err != nil {
		t.Fatalf("load: %v", err)
	}
	err = fresh.Verify(ctx, id)
	if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), manifest.SegmentName(0)) || !strings.Contains(err.Error(), "prefix hash") {
		t.Fatalf("verify: %v", err)
	}
	// A manifest that no longer decodes fails Load, naming it.
	e.putRaw(t, key, []byte("{"))
	if _, err := fresh.Load(ctx, id); !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
		t.Fatalf("load of a broken manifest: %v", err)
	}
}

// TestAppendRawRetryRepairsIndex: a push that died after committing its
// segment but before the index learned of it is repaired by the re-run,
// which is told the log holds its bytes already (so it plans again from
// there) and writes the checkpoints the dead one did not: for a new
// session and for a tail.
func TestAppendRawRetryRepairsIndex(t *testing.T) {
	t.Parallel()
	for _, tail := range []bool{false, true} {
		name := "new session"
		if tail {
			name = "tail"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newMemEnv(t)
			id := agent.NewSessionID()
			head, err := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{user("first")}, t0)
			if err != nil {
				t.Fatal(err)
			}
			more, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("pushed"), user("twice")}, t0)
			if err != nil {
				t.Fatal(err)
			}
			var expectLen int64
			expectSum, data, count := "", head, 1
			if tail {
				if err := appendRaw(ctx, e.open(t), id, 0, "", head); err != nil {
					t.Fatal(err)
				}
				expectLen, expectSum, data, count = int64(len(head)), sum(head), more, 3
			}
			fb := e.faults(t)
			s := e.openOn(t, fb, objstore.WithMaxAttempts(1))
			var dead atomic.Bool
			fb.SetFault(func(op objstore.Op) error {
				if dead.Load() || isPutOp(op, ".json.zst") && strings.HasPrefix(op.Key, "index/") {
					dead.Store(true)
					return objstore.ErrInjected
				}
				return nil
			})
			_ = appendRaw(ctx, s, id, expectLen, expectSum, data) // committed; the index PUT dies
			_ = s.Flush(ctx)
			if !dead.Load() {
				t.Fatal("the fault did not fire")
			}
			if remote, err := sessionsOf(ctx, e.open(t)); err != nil || remote[id].Length != expectLen {
				t.Fatalf("before the re-run the index should lag at %d: %v %+v", expectLen, err, remote)
			}
			rerun := e.open(t)
			all := append(append([]byte{}, head...), more...)
			if !tail {
				all = head
			}
			var changed *store.ChangedError
			if err := appendRaw(ctx, rerun, id, expectLen, expectSum, data); !errors.As(err, &changed) || changed.Have.Length != int64(len(all)) {
				t.Fatalf("re-run: %v, want a ChangedError saying the log holds %d bytes", err, len(all))
			}
			if err := rerun.Flush(ctx); err != nil {
				t.Fatalf("re-run: %v", err)
			}
			remote, err := sessionsOf(ctx, e.open(t))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := remote[id]
			if !ok || got.Length != int64(len(all)) || got.SHA256 != sum(all) || got.Info.MessageCount != count {
				t.Fatalf("index after the re-run: %+v (present %v), want %d bytes, %d messages", got, ok, len(all), count)
			}
		})
	}
}

// TestFlushReportsFailedCheckpoints: appends whose checkpoints cannot be
// written (the bucket stopped answering but for segment PUTs) succeed;
// Flush then says, in one line, how many sessions' checkpoints failed (or
// that the deferred index was not written) and why, and a later Flush
// that can write them succeeds.
func TestFlushReportsFailedCheckpoints(t *testing.T) {
	t.Parallel()
	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferred=%v", deferred), func(t *testing.T) {
			ctx := context.Background()
			e := newMemEnv(t)
			fb := e.faults(t)
			opts := []objstore.Option{objstore.WithMaxAttempts(1)}
			want := "checkpoint of session "
			if deferred {
				opts = append(opts, objstore.WithDeferredIndex())
				want = "index not written"
			}
			s := e.openOn(t, fb, opts...)
			var down atomic.Bool
			fb.SetFault(func(op objstore.Op) error {
				if down.Load() && !strings.Contains(op.Key, "/seg/") {
					return objstore.ErrInjected
				}
				return nil
			})
			down.Store(true)
			for range 3 {
				id := s.Create().Info.ID // a new session needs no read
				for range 2 {
					if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("m")}); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := s.Flush(ctx)
			if err == nil || !strings.Contains(err.Error(), want) || !deferred && !strings.Contains(err.Error(), "and 2 other sessions") {
				t.Fatalf("flush with the index unreachable: %v, want %q", err, want)
			}
			down.Store(false)
			if err := s.Flush(ctx); err != nil {
				t.Fatalf("flush once the bucket answers: %v", err)
			}
			infos, err := e.open(t).List(ctx)
			if err != nil || len(infos) != 3 {
				t.Fatalf("list after the flush: %v, %d sessions, want 3", err, len(infos))
			}
			for _, info := range infos {
				if info.MessageCount != 2 {
					t.Errorf("%s: %d messages, want 2", info.ID, info.MessageCount)
				}
			}
		})
	}
}

// TestCutAtEachRequest: a writer's Nth request at the seam is cut, for
// every N until a run ends before its Nth request: appends, their
// background checkpoints, compactions and the deletion of the segments
// they replaced are cut at each point, in two ways:
//
//   - the writer dies: its Nth request and every later one fail before
//     they reach the bucket;
//   - the answer is lost: the Nth request is carried out, the writer is
//     told it failed, and it goes on.
//
// A fresh Store then loads every batch the writer acknowledged, each
// whole and once, and a batch it did not acknowledge whole or not at all,
// in the order written; it appends after them, lists the session with
// every message and verifies it.
func TestCutAtEachRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// cut installs the cut at request n on fb; next counts a request
		// and returns its number.
		cut func(fb *objstore.FaultBucket, n int, next func() int)
	}{
		{"the writer dies", func(fb *objstore.FaultBucket, n int, next func() int) {
			fb.SetFault(func(objstore.Op) error {
				if next() >= n {
					return objstore.ErrInjected
				}
				return nil
			})
		}},
		{"the answer is lost", func(fb *objstore.FaultBucket, n int, next func() int) {
			fb.SetLose(func(objstore.Op) bool { return next() == n })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for n := 1; ; n++ {
				if n > 1000 {
					t.Fatal("the writer still makes requests after 1000")
				}
				if !cutAt(t, n, c.cut) {
					t.Logf("the writer makes %d requests; each was cut", n-1)
					return
				}
			}
		})
	}
}

// cutAt is one run of TestCutAtEachRequest, cut at request n. It reports
// whether the writer made that request.
func cutAt(t *testing.T, n int, cut func(fb *objstore.FaultBucket, n int, next func() int)) bool {
	const batches = 7
	ctx := context.Background()
	e := newMemEnv(t)
	id := agent.NewSessionID()
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithMaxAttempts(1), objstore.WithManifestInterval(2),
		objstore.WithCompactThreshold(3), objstore.WithCompactGrace(0))
	var mu sync.Mutex
	made := 0
	cut(fb, n, func() int { mu.Lock(); defer mu.Unlock(); made++; return made })
	acked := map[int]bool{}
	for b := range batches {
		if err := s.AppendMessages(ctx, id, batchOf(0, b)); err == nil {
			acked[b] = true
		}
	}
	flushed := s.Flush(ctx)
	mu.Lock()
	reached := made >= n
	mu.Unlock()
	if !reached {
		if flushed != nil || len(acked) != batches {
			t.Fatalf("a writer never cut: %d of %d appends acknowledged, flush: %v", len(acked), batches, flushed)
		}
		return false
	}
	fresh := e.open(t)
	conv, err := fresh.Load(ctx, id)
	if errors.Is(err, agent.ErrSessionNotFound) && len(acked) == 0 {
		conv, err = &agent.Conversation{}, nil
	}
	if err != nil {
		t.Fatalf("cut at request %d: load: %v", n, err)
	}
	present := checkCutBatches(t, n, texts(conv), acked)
	if err := fresh.AppendMessages(ctx, id, batchOf(1, 0)); err != nil {
		t.Fatalf("cut at request %d: the next append: %v", n, err)
	}
	if err := fresh.Flush(ctx); err != nil {
		t.Fatalf("cut at request %d: flush: %v", n, err)
	}
	want := present + len(batchOf(1, 0))
	infos, err := e.open(t).List(ctx)
	if err != nil || len(infos) != 1 || infos[0].ID != id || infos[0].MessageCount != want {
		t.Fatalf("cut at request %d: list: %v %+v, want %s with %d messages", n, err, infos, id, want)
	}
	if err := e.open(t).Verify(ctx, id); err != nil {
		t.Fatalf("cut at request %d: verify: %v", n, err)
	}
	return true
}

// checkCutBatches checks the messages of a log whose writer died: batches
// of writer 0 in increasing order, each whole and once, every one in
// acked present. It returns the number of messages.
func checkCutBatches(t *testing.T, n int, msgs []string, acked map[int]bool) int {
	t.Helper()
	last := -1
	for i := 0; i < len(msgs); {
		var w, b, m int
		if _, err := fmt.Sscanf(msgs[i], "w%d-b%d-m%d", &w, &b, &m); err != nil || w != 0 || m != 0 || b <= last {
			t.Fatalf("cut at request %d: message %d %q does not start the next batch (after b%d): %q", n, i, msgs[i], last, msgs)
		}
		for j, pm := range batchOf(w, b) {
			if i+j >= len(msgs) || msgs[i+j] != pm.Message.Text() {
				t.Fatalf("cut at request %d: batch b%d is not whole at message %d: %q", n, b, i, msgs)
			}
		}
		for skipped := last + 1; skipped < b; skipped++ {
			if acked[skipped] {
				t.Fatalf("cut at request %d: acknowledged batch b%d is missing: %q", n, skipped, msgs)
			}
		}
		last = b
		i += len(batchOf(w, b))
	}
	for b := range acked {
		if b > last {
			t.Fatalf("cut at request %d: acknowledged batch b%d is missing: %q", n, b, msgs)
		}
	}
	return len(msgs)
}
