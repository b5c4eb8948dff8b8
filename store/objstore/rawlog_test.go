package objstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestAppendRaw: raw appends land only at the expected length and hash,
// and read back byte for byte; Sessions reports length and hash from the
// index.
func TestAppendRaw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t)
	id := agent.NewSessionID()
	b1, _ := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{user("a")}, t0)
	b2, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("b"), user("c")}, t0)
	b3, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("d")}, t0)
	if _, err := s.Checkpoints(ctx, id); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("checkpoints of a missing session: %v", err)
	}
	if err := appendRaw(ctx, s, id, 0, "", b2); err == nil {
		t.Fatal("a first segment without a header was accepted")
	}
	if err := appendRaw(ctx, s, id, 0, "", b1[:len(b1)-1]); err == nil {
		t.Fatal("a torn line was accepted")
	}
	fb := e.faults(t)
	s = e.openOn(t, fb)
	fb.Take() // Open's marker read
	if err := appendRaw(ctx, s, id, 0, "", append(append([]byte{}, b1...), b2...)); err != nil {
		t.Fatal(err)
	}
	// A new session costs no manifest: a HEAD of seg/0 (this Store did
	// not create the prefix, so the session may be one its index lost:
	// the HEAD spares sending the whole log to find out), the segment
	// PUT, then the PUT of the index log's next commit, which holds the
	// entry unfolded (no partition is read or written).
	if ops := fb.Take(); countOps(ops, "HEAD") != 1 || countOps(ops, "PUT") != 2 || countOps(ops, "GET") != 0 || len(ops) != 3 ||
		!slices.ContainsFunc(ops, func(o objstore.Op) bool {
			return o.Method == "PUT" && o.Key == "index/log/00000000000000000001.json.zst"
		}) ||
		slices.ContainsFunc(ops, func(o objstore.Op) bool { return strings.HasSuffix(o.Key, "manifest.json") }) {
		t.Fatalf("append of a new session: %+v", ops)
	}
	// A raw append of a new session over an existing one is refused, and
	// sends no segment: the HEAD found it.
	fb = e.faults(t)
	other := e.openOn(t, fb)
	fb.Take()
	if err := appendRaw(ctx, other, id, 0, "", b1); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("second creation: %v", err)
	}
	if ops := fb.Take(); slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && strings.Contains(o.Key, "/seg/") }) {
		t.Fatalf("the creation of an existing session sent a segment: %+v", ops)
	}
	// A Store that created the prefix knows every session in it is its
	// own: its first append of a session makes no HEAD.
	fresh := newMemEnv(t)
	fb = fresh.faults(t)
	mine := fresh.openOn(t, fb)
	fb.Take()
	if err := appendRaw(ctx, mine, id, 0, "", b1); err != nil {
		t.Fatal(err)
	}
	if ops := fb.Take(); countOps(ops, "HEAD") != 0 {
		t.Fatalf("a new session in a prefix this Store created: %+v", ops)
	}
	l := int64(len(b1) + len(b2))
	h := sum(append(append([]byte{}, b1...), b2...))
	other = e.open(t)
	for _, c := range []struct {
		length int64
		sha    string
	}{{int64(len(b1)), sum(b1)}, {l, sum(b1)}, {l + 1, h}} {
		err := appendRaw(ctx, other, id, c.length, c.sha, b3)
		if !errors.Is(err, store.ErrChanged) {
			t.Fatalf("append at %d %s: %v", c.length, c.sha, err)
		}
	}
	if err := appendRaw(ctx, other, id, l, h, b3); err != nil {
		t.Fatal(err)
	}
	// s's cache is stale: its raw append at the old end must fail...
	b4, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("other")}, t0)
	if err := appendRaw(ctx, s, id, l, h, b4); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("append through a stale store: %v", err)
	}
	// ... and so must a repeat of the append that already happened (a
	// re-run of the same push), saying what the log holds: nothing is
	// written twice, and the caller learns that it wrote nothing.
	var changed *store.ChangedError
	all3 := append(append(append([]byte{}, b1...), b2...), b3...)
	if err := appendRaw(ctx, s, id, l, h, b3); !errors.As(err, &changed) || changed.Have != (store.Checkpoint{Length: int64(len(all3)), SHA256: sum(all3)}) {
		t.Fatalf("repeated append of the same bytes: %v", err)
	}
	all := append(append(append([]byte{}, b1...), b2...), b3...)
	if err := other.Flush(ctx); err != nil { // its checkpoint may linger
		t.Fatal(err)
	}
	raw, err := readRaw(ctx, e.open(t), id, 0)
	if err != nil || string(raw) != string(all) {
		t.Fatalf("read back %v %q", err, raw)
	}
	sessions, err := sessionsOf(ctx, e.open(t))
	if err != nil {
		t.Fatal(err)
	}
	if r := sessions[id]; r.Length != int64(len(all)) || r.SHA256 != sum(all) || r.Info.MessageCount != 4 {
		t.Fatalf("sessions: %+v", sessions)
	}
	cps, err := e.open(t).Checkpoints(ctx, id)
	if err != nil || len(cps) != 2 || cps[0] != (store.Checkpoint{Length: l, SHA256: h}) || cps[1].SHA256 != sum(all) {
		t.Fatalf("checkpoints %v %+v", err, cps)
	}
}

// TestBulkWriterCutShort: a bulk writer (WithDeferredIndex: panto-sync,
// panto import) cut short before its Flush leaves sessions no listing
// shows; the next run's append of the same bytes at the empty log is
// refused, saying what the log holds, and its Flush lists them again.
func TestBulkWriterCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	cut := e.open(t, objstore.WithDeferredIndex())
	id := agent.NewSessionID()
	data := []byte(`{"type":"session","version":1,"id":"` + id + `","created":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"type":"message","ts":"2026-01-01T00:00:01Z","role":"user","content":[{"type":"text","text":"imported"}]}` + "\n")
	at, err := cut.AppendLog(ctx, id, store.Checkpoint{}, data)
	if err != nil {
		t.Fatal(err)
	}
	// cut is never flushed nor closed: its process died.
	rerun := e.open(t, objstore.WithDeferredIndex())
	if logs, err := sessionsOf(ctx, rerun); err != nil || len(logs) != 0 {
		t.Fatalf("before the re-run: %d sessions listed (%v), want none", len(logs), err)
	}
	_, err = rerun.AppendLog(ctx, id, store.Checkpoint{}, data)
	var changed *store.ChangedError
	if !errors.As(err, &changed) || changed.Have != at {
		t.Fatalf("the re-run's append: %v, want a ChangedError saying the log holds %v", err, at)
	}
	if err := rerun.Close(ctx); err != nil {
		t.Fatal(err)
	}
	logs, err := sessionsOf(ctx, e.open(t))
	if err != nil || len(logs) != 1 || logs[id].Checkpoint != at {
		t.Errorf("after the re-run: %v (%v), want session %s at %v", logs, err, id, at)
	}
}
