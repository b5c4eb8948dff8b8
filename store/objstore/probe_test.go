package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestProbeRefusesLaxServers: Open refuses, in one line that names the
// behaviour, a server that ignores If-None-Match, one that ignores only
// If-Match, and one that answers NotImplemented; nothing is appended. Six
// handles appending to one session through a server that ignores the
// headers would keep a fraction of what they were told was stored.
func TestProbeRefusesLaxServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct{ mode, want string }{
		{miniotest.DropConditions, "If-Match"},
		{miniotest.DropIfMatch, "If-Match"},
		{miniotest.DropIfNoneMatch, "If-None-Match"},
		{miniotest.RefuseConditions, "NotImplemented"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			e := newEnv(t)
			lax, conditional := miniotest.LaxProxy(t, e.srv, tt.mode)
			// Twice: on a fresh prefix (the probe object is created by the
			// first Open) and on one that has it.
			for round := range 2 {
				_, err := objstore.Open(ctx, e.url, e.reach(objstore.WithEndpoint(lax))...)
				if !errors.Is(err, objstore.ErrConditionalWrites) || !errors.Is(err, objstore.ErrOpen) {
					t.Fatalf("round %d: Open through a %s server: %v, want ErrConditionalWrites", round, tt.mode, err)
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "use a server") {
					t.Errorf("round %d: the error does not say, in one line, what is wrong and what to do: %q", round, msg)
				}
			}
			if conditional.Load() == 0 {
				t.Fatal("the probe sent no conditional PUT")
			}
			// The honest server, on the same prefix, opens.
			s := e.open(t)
			if err := s.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("fine")}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestProbeObjects: a fresh prefix gets both probe objects at its first
// Open; a prefix that has only the create probe's (written before the
// replace probe had an object of its own) gets the other at its next
// Open, which opens; every later Open is the two refused PUTs alone, of
// two objects, in one round trip.
func TestProbeObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.open(t)
	has := func(key string) bool {
		_, ok := e.srv.Objects(t, e.bucket)[key]
		return ok
	}
	if !has("pfx/panto-probe.json") || !has("pfx/panto-probe-replace.json") {
		t.Fatalf("a fresh prefix's probe objects: %v", e.srv.Objects(t, e.bucket))
	}
	if err := e.srv.Client(t).RemoveObject(ctx, e.bucket, "pfx/panto-probe-replace.json", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	e.open(t)
	if !has("pfx/panto-probe-replace.json") {
		t.Fatal("the replace probe's object was not made again")
	}
	rec := &recorder{delay: 50 * time.Millisecond}
	e.open(t, rec.option())
	var probes []request
	for _, q := range rec.take() {
		if strings.Contains(q.path, "/panto-probe") {
			probes = append(probes, q)
		}
	}
	if len(probes) != 2 || probes[0].path == probes[1].path || probes[0].status != 412 || probes[1].status != 412 || rounds(probes) != 1 {
		t.Fatalf("an Open's probes: %+v", probes)
	}
}

// TestProbeAtFirstWrite: a Store opened to read (WithProbeAtFirstWrite)
// sends no probe at Open nor in its listings; its first write sends the
// probe before the write's own request, its second none; through a
// server that ignores the conditions, Open and the listing work and the
// first write is refused in one line, nothing written.
func TestProbeAtFirstWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := newMemEnv(t)
	appendNew(t, mem.open(t), "there before")
	fb := mem.faults(t)
	s := mem.openOn(t, fb, objstore.WithProbeAtFirstWrite())
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range fb.Take() {
		if o.Method == "PUT" {
			t.Fatalf("Open and a listing of a reader's Store sent %s %s", o.Method, o.Key)
		}
	}
	appendNew(t, s, "the first write")
	ops := fb.Take()
	probe := slices.IndexFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && strings.Contains(o.Key, "panto-probe") })
	seg := slices.IndexFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && strings.Contains(o.Key, "/seg/") })
	if probe < 0 || seg < 0 || ops[seg].Start.Before(ops[probe].End) {
		t.Fatalf("the first write's requests: %+v; want the probe, then the segment", ops)
	}
	appendNew(t, s, "the second write")
	for _, o := range fb.Take() {
		if strings.Contains(o.Key, "panto-probe") {
			t.Fatalf("the second write probed again: %s %s", o.Method, o.Key)
		}
	}

	e := newEnv(t)
	appendNew(t, e.open(t), "there before")
	lax, _ := miniotest.LaxProxy(t, e.srv, miniotest.DropConditions)
	r, err := objstore.Open(ctx, e.url, e.reach(objstore.WithEndpoint(lax), objstore.WithProbeAtFirstWrite())...)
	if err != nil {
		t.Fatalf("a reader's Open through a server that drops the conditions: %v", err)
	}
	if list, err := r.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("a reader's listing: %v, %d sessions", err, len(list))
	}
	id := agent.NewSessionID()
	err = r.AppendMessages(ctx, id, []agent.PersistentMessage{user("refused")})
	if !errors.Is(err, objstore.ErrConditionalWrites) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the first write through that server: %v, want ErrConditionalWrites in one line", err)
	}
	if _, err := e.open(t).Load(ctx, id); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("the refused write left the session: %v", err)
	}
}

// TestProbeBesideFirstWrite: on a machine whose probe of the prefix
// passed more than a day ago, Open sends no probe, and the first write
// sends it beside its own request (both under way at once), then notes
// the pass again; on a machine that never saw it pass, Open probes, and a
// probe that finds the credentials may not write forgets the note, so
// that the next Open probes at once (and a local-first panto refuses the
// turn before it is taken).
func TestProbeBesideFirstWrite(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	appendNew(t, e.open(t), "there before")
	cache := t.TempDir()
	probes := func(ops []objstore.Op) int {
		n := 0
		for _, o := range ops {
			if o.Method == "PUT" && strings.Contains(o.Key, "panto-probe") {
				n++
			}
		}
		return n
	}
	note := func() string {
		t.Helper()
		marks, _ := filepath.Glob(filepath.Join(cache, "*.probed"))
		if len(marks) > 1 {
			t.Fatalf("probe notes in the cache: %v", marks)
		}
		if len(marks) == 0 {
			return ""
		}
		return marks[0]
	}
	opts := []objstore.Option{objstore.WithIndexCache(cache)}

	fb := e.faults(t)
	e.openOn(t, fb, opts...)
	if n := probes(fb.Take()); n == 0 || note() == "" {
		t.Fatalf("a machine's first Open: %d probe PUTs, note %q; want the probe and its note", n, note())
	}
	ageProbeNote(t, note())
	fb = e.faults(t)
	fb.SetDelay(20 * time.Millisecond)
	s := e.openOn(t, fb, opts...)
	if n := probes(fb.Take()); n != 0 {
		t.Fatalf("an Open a day after the last pass sent %d probe PUTs; the first write should", n)
	}
	appendNew(t, s, "the first write")
	ops := fb.Take()
	probe := slices.IndexFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && strings.Contains(o.Key, "panto-probe") })
	seg := slices.IndexFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && strings.Contains(o.Key, "/seg/") })
	if probe < 0 || seg < 0 || !ops[seg].Start.Before(ops[probe].End) || !ops[probe].Start.Before(ops[seg].End) {
		t.Fatalf("the first write's requests: %+v; want the probe and the segment under way at once", describeOps(ops))
	}
	fb = e.faults(t)
	e.openOn(t, fb, opts...)
	if n := probes(fb.Take()); n != 0 {
		t.Fatalf("the first write's probe was not noted: the next Open sent %d probe PUTs", n)
	}

	// The credentials lose the right to write: the probe finds out at
	// the first write, which fails, and the note goes.
	ageProbeNote(t, note())
	fb = e.faults(t)
	s = e.openOn(t, fb, opts...)
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "PUT" {
			return objstore.ErrForbidden
		}
		return nil
	})
	if err := s.AppendMessages(context.Background(), agent.NewSessionID(), []agent.PersistentMessage{user("refused")}); err == nil {
		t.Fatal("a write with credentials that may not write succeeded")
	}
	if s.WriteRefused() == nil || note() != "" {
		t.Fatalf("after a refused probe: WriteRefused %v, note %q; want the refusal and no note", s.WriteRefused(), note())
	}
	fb.Take()
	r := e.openOn(t, fb, opts...)
	if n := probes(fb.Take()); n == 0 || r.WriteRefused() == nil {
		t.Fatalf("the Open after a refusal: %d probe PUTs, WriteRefused %v; want the probe at Open and the refusal", n, r.WriteRefused())
	}
}

// ageProbeNote makes the probe noted at path 25 hours old.
func ageProbeNote(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-25 * time.Hour).UTC().Format(time.RFC3339Nano)
	if err := os.WriteFile(path, []byte(old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestProbeBesideRefusesLaxServer: a server swapped under a prefix
// whose probe passed on this machine more than a day ago, for one that
// ignores the conditions. The first write, sent beside the probe, fails
// in one line that says why (it may have landed: a server that ignores
// the conditions took it); every write after it probes first and is
// refused before it is sent, and the next Open refuses the prefix.
func TestProbeBesideRefusesLaxServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	appendNew(t, e.open(t), "there before")
	lax, _ := miniotest.LaxProxy(t, e.srv, miniotest.DropConditions)
	cache := t.TempDir()
	opts := e.reach(objstore.WithEndpoint(lax), objstore.WithIndexCache(cache))
	// The note of a pass a day old, where this endpoint's would be.
	reader, err := objstore.Open(ctx, e.url, append(opts, objstore.WithProbeAtFirstWrite())...)
	if err != nil {
		t.Fatal(err)
	}
	path := objstore.ProbeNotePath(reader)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ageProbeNote(t, path)
	s, err := objstore.Open(ctx, e.url, opts...)
	if err != nil {
		t.Fatalf("an Open that leaves the probe to the first write: %v", err)
	}
	first := agent.NewSessionID()
	err = s.AppendMessages(ctx, first, []agent.PersistentMessage{user("beside the probe")})
	if !errors.Is(err, objstore.ErrConditionalWrites) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the first write beside the probe: %v, want ErrConditionalWrites in one line", err)
	}
	second := agent.NewSessionID()
	err = s.AppendMessages(ctx, second, []agent.PersistentMessage{user("after the probe")})
	if !errors.Is(err, objstore.ErrConditionalWrites) {
		t.Fatalf("a write after the probe failed: %v, want ErrConditionalWrites", err)
	}
	if _, err := e.open(t).Load(ctx, second); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("the write after the failed probe left its session: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed probe left the note of the last pass (%v): the next Open would not probe", err)
	}
	if _, err := objstore.Open(ctx, e.url, opts...); !errors.Is(err, objstore.ErrConditionalWrites) {
		t.Fatalf("the next Open: %v, want ErrConditionalWrites", err)
	}
}

// TestProbeOfACancelledWrite: the write that sends the probe ends (its
// context cancelled) while the probe is under way; a deletion waiting
// for that probe (a write that is not tried again) sends its own and
// succeeds.
func TestProbeOfACancelledWrite(t *testing.T) {
	t.Parallel()
	e := newMemEnv(t)
	w := e.open(t)
	cut, victim := appendNew(t, w, "its deletion is cut short"), appendNew(t, w, "deleted")
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithProbeAtFirstWrite())
	logs := mustLogs(t, s)
	// The first probe's PUTs wait until the write that sent them has
	// ended, and fail as a cancelled request does.
	release := make(chan struct{})
	var cutShort atomic.Int32
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "PUT" && strings.Contains(o.Key, "panto-probe") && cutShort.Add(1) <= 2 {
			<-release
			return context.Canceled
		}
		return nil
	})
	first, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.Delete(first, store.Tombstone{ID: cut, Deleted: time.Now(), At: logs[cut].Checkpoint})
	}()
	for cutShort.Load() == 0 {
		time.Sleep(time.Millisecond) // its probe is under way
	}
	deleted := make(chan error, 1)
	go func() {
		deleted <- s.Delete(context.Background(), store.Tombstone{ID: victim, Deleted: time.Now(), At: logs[victim].Checkpoint})
	}()
	time.Sleep(20 * time.Millisecond) // the second deletion waits for the probe
	cancel()
	close(release)
	if err := <-done; err == nil {
		t.Fatal("the cancelled deletion succeeded")
	}
	if err := <-deleted; err != nil {
		t.Fatalf("a deletion waiting for another write's probe, cut short: %v", err)
	}
	if _, err := e.open(t).Load(context.Background(), victim); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Fatalf("the session is still there: %v", err)
	}
}

// TestReaderWritesNoMarker: a Store opened to read (WithProbeAtFirstWrite)
// on a prefix that holds no store writes nothing there (a mistyped
// --store is left as it was), says so (Created), and lists it empty; its
// first write, if any, makes the marker, and what it wrote is there for
// any Store. A marker another writer made meanwhile is the one its
// write goes on under: written beside that writer's sessions, or, when
// that prefix is encrypted and the reader has no key, refused as its
// Open there would have been.
func TestReaderWritesNoMarker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	r := e.open(t, objstore.WithProbeAtFirstWrite())
	if list, err := r.List(ctx); err != nil || len(list) != 0 || !r.Created() {
		t.Fatalf("a reader of an empty prefix: %v, %d sessions, Created %v", err, len(list), r.Created())
	}
	if objs := e.rawBucket(t); len(objs) != 0 {
		t.Fatalf("a reader's Open and listing wrote %d objects, the first %s", len(objs), objs[0].key)
	}
	mine := appendNew(t, r, "the reader's first write")
	if e.maybeRawObject(t, "pfx/panto-store.json") == nil {
		t.Fatal("the reader's first write made no marker")
	}
	if list, err := e.open(t).List(ctx); err != nil || len(list) != 1 || list[0].ID != mine {
		t.Fatalf("another Store lists %v, %+v; want %s", err, list, mine)
	}

	// Another writer makes the marker between the reader's Open and its write.
	e = newMemEnv(t)
	r = e.open(t, objstore.WithProbeAtFirstWrite())
	theirs := appendNew(t, e.open(t), "the other writer's")
	mine = appendNew(t, r, "the reader's")
	got := map[string]bool{}
	list, err := e.open(t).List(ctx)
	for _, s := range list {
		got[s.ID] = true
	}
	if err != nil || len(got) != 2 || !got[theirs] || !got[mine] {
		t.Fatalf("after both wrote: %v, %+v", err, list)
	}

	e = newMemEnv(t)
	r = e.open(t, objstore.WithProbeAtFirstWrite())
	appendNew(t, e.open(t, objstore.WithKey(newKey(t))), "sealed")
	err = r.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{user("in clear")})
	if !errors.Is(err, objstore.ErrKeyRequired) {
		t.Fatalf("a reader's write to a prefix made encrypted meanwhile: %v, want ErrKeyRequired", err)
	}
}
