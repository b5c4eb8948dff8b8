package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store/objstore"
)

// TestReadTailInOneRound: the index entry lists where the segments the
// stored manifest does not list begin (Resume.Tail), so that a reader
// sends their GETs with the manifest's instead of probing for one after
// another: a load of a session of six segments and no manifest is one
// round trip, and of one whose manifest lags by three segments two (the
// manifest with the tail, then the segments it lists); Checkpoints of
// either is one round trip more than nothing, whatever the tail's length.
func TestReadTailInOneRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t, objstore.WithCompactThreshold(0))
	grow := func(id string, n int) []string {
		var want []string
		for i := 0; i < n; i++ {
			want = append(want, fmt.Sprint("m", i))
			if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user(want[i])}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return want
	}
	for _, c := range []struct {
		name     string
		segments int
		rounds   int
	}{
		{"no manifest", 6, 1},    // 5 past seg/0: no manifest yet
		{"manifest lags", 12, 2}, // the manifest lists 9, the tail is 3
	} {
		t.Run(c.name, func(t *testing.T) {
			id := agent.NewSessionID()
			want := grow(id, c.segments)
			fb := e.faults(t)
			// Long enough that a loaded machine (the race detector, a
			// parallel suite) does not split a round trip in two.
			fb.SetDelay(300 * time.Millisecond)
			r := e.openOn(t, fb)
			if _, err := r.List(ctx); err != nil {
				t.Fatal(err)
			}
			fb.Take()
			conv, err := r.Load(ctx, id)
			if err != nil || strings.Join(texts(conv), ",") != strings.Join(want, ",") {
				t.Fatalf("load: %v %q", err, texts(conv))
			}
			ops := fb.Take()
			for _, o := range ops {
				t.Logf("load: %s %s %v", o.Method, o.Key, o.Err)
			}
			probed := countOps(ops, "GET")
			if got := opRounds(ops); got != c.rounds || probed < c.segments-9+1 {
				t.Errorf("the load of %d segments took %d round trips (%d GETs), want %d", c.segments, got, probed, c.rounds)
			}
			r2 := e.openOn(t, fb)
			if _, err := r2.List(ctx); err != nil {
				t.Fatal(err)
			}
			fb.Take()
			cps, err := r2.Checkpoints(ctx, id)
			if err != nil || len(cps) != c.segments {
				t.Fatalf("checkpoints: %v, %d of them, want %d", err, len(cps), c.segments)
			}
			if got := opRounds(fb.Take()); got != 1 {
				t.Errorf("checkpoints of %d segments took %d round trips, want 1", c.segments, got)
			}
		})
	}
}

// The tail is a hint: a reader given a wrong one reads the session all
// the same (checked as a probed segment is), and the wire drops one that
// is not an ascending offset per unlisted segment inside the log.
func TestTailIsAHint(t *testing.T) {
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	sh := manifest.NewIndexShard("a")
	hs := strings.Repeat("x", 8)
	for _, c := range []struct {
		tail string
		keep bool
	}{
		{"0,10,20", true},
		{"0,20,10", false}, // not ascending
		{"0,10", false},    // one short
		{"0,10,99", false}, // past the log's end
	} {
		id := idIn("a")
		sh.Put(manifest.IndexEntry{Info: agent.SessionInfo{ID: id}, Length: 30, SHA256: strings.Repeat("0", 64),
			Resume: manifest.Resume{HashState: hs, Lines: 3, Format: 1, Segments: 3, Tail: c.tail}})
		data, err := codec.EncodeIndexShard("index/a.json.zst", sh)
		if err != nil {
			t.Fatal(err)
		}
		back, err := codec.DecodeIndexShard("index/a.json.zst", data)
		if err != nil {
			t.Fatal(err)
		}
		if got := back.Sessions[id].Resume.Tail; (got == c.tail) != c.keep || !c.keep && got != "" {
			t.Errorf("tail %q read back as %q, want kept: %v", c.tail, got, c.keep)
		}
	}
}

// TestResumedAppendKeepsTail: an append that resumes from the index entry
// (a sync's tail at the indexed checkpoint: no read of the session) knows
// where the segments before it begin only from the entry's tail, and
// writes that tail on with its own segment's offset.
func TestResumedAppendKeepsTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	id := idIn("3")
	for i := 0; i < 3; i++ {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lister := e.open(t)
	logs, err := sessionsOf(ctx, lister)
	if err != nil {
		t.Fatal(err)
	}
	at := logs[id].Checkpoint
	batch, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{user("m3")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	resumed := e.openOn(t, fb, partitionsAtClose())
	if _, err := sessionsOf(ctx, resumed); err != nil {
		t.Fatal(err)
	}
	fb.Take()
	if err := appendRaw(ctx, resumed, id, at.Length, at.SHA256, batch); err != nil {
		t.Fatal(err)
	}
	if err := resumed.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countOps(fb.Take(), "GET"); n != 0 {
		t.Fatalf("the append read %d objects: it did not resume from the entry", n)
	}
	if err := resumed.Close(ctx); err != nil { // folds the entry into its partition
		t.Fatal(err)
	}
	var offs []string
	for _, k := range segmentKeys(t, e, id) {
		var o int64
		if _, err := fmt.Sscanf(k, "seg/%020d.jsonl.zst", &o); err != nil {
			t.Fatalf("segment %s: %v", k, err)
		}
		offs = append(offs, fmt.Sprint(o))
	}
	codec, _ := manifest.NewCodec()
	key := partitionKey(id)
	sh, err := codec.DecodeIndexShard(key, codec.CompressSmaller(e.object(t, key)))
	if err != nil {
		t.Fatal(err)
	}
	r := sh.Sessions[id].Resume
	if len(offs) != 4 || r.Segments != 4 || r.Stored != 0 || r.Tail != strings.Join(offs, ",") {
		t.Fatalf("after the resumed append: segments %v, the entry says %+v", offs, r)
	}
}

// closedSession writes a session of project p (none: the zero Project)
// in six one-message segments through a new Store, closes it (its entry
// moves to a run) and returns the session's id and texts.
func closedSession(t *testing.T, e *env, p agent.Project) (string, []string) {
	t.Helper()
	ctx := context.Background()
	w := e.open(t)
	id := agent.NewSessionID()
	var want []string
	for i := range 6 {
		want = append(want, fmt.Sprint("m", i))
		if err := w.AppendMessagesIn(ctx, p, id, []agent.PersistentMessage{user(want[i])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return id, want
}

// loadInOneRound loads session id through r, a Store on fb, checks that
// it reads want, and that it took one round trip and read nothing of the
// index: the listing before it (what) told it where the segments are.
func loadInOneRound(t *testing.T, fb *objstore.FaultBucket, r *objstore.Store, id string, want []string, what string) {
	t.Helper()
	fb.Take()
	conv, err := r.Load(context.Background(), id)
	if err != nil || strings.Join(texts(conv), ",") != strings.Join(want, ",") {
		t.Fatalf("load: %v %q", err, texts(conv))
	}
	ops := fb.Take()
	if got := opRounds(ops); got != 1 {
		for _, o := range ops {
			t.Logf("load: %s %s %v", o.Method, o.Key, o.Err)
		}
		t.Errorf("the load of a session of %d segments after %s took %d round trips, want 1", len(want), what, got)
	}
	for _, o := range ops {
		if strings.HasPrefix(o.Key, "index/") {
			t.Errorf("the load read %s: %s holds the session's entry", o.Key, what)
		}
	}
}

// TestResumeAfterCloseInOneRound: a writer's Close moves its sessions'
// entries out of the commit's unfolded set into a run, which a reader
// that found the session through the newest commit (`panto -c`: Latest)
// has not read. The commit's recent view says where the session's
// segments are (Resume.Where), so the load that follows is one round
// trip, not one per segment, and reads no partition; and the view
// vouches for the probed segments as the partition would.
func TestResumeAfterCloseInOneRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	id, want := closedSession(t, e, agent.Project{})
	fb := e.faults(t)
	fb.SetDelay(100 * time.Millisecond)
	r := e.openOn(t, fb)
	latest, err := r.Latest(ctx)
	if err != nil || latest.Info.ID != id {
		t.Fatalf("latest: %v %+v", err, latest)
	}
	loadInOneRound(t, fb, r, id, want, "Latest")

	// The segment at the end the view names is gone: the view vouches
	// for it, so the load says what is missing instead of returning
	// the shorter log.
	var last string
	for _, o := range objstore.MemObjects(e.mem) {
		if strings.Contains(o.Key, id+"/seg/") {
			last = o.Key
		}
	}
	objstore.MemDelete(e.mem, last)
	r2 := e.openOn(t, fb)
	if _, err := r2.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Load(ctx, id); !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatalf("load without its last segment: %v, want ErrCorrupt", err)
	}
}

// TestProjectResumeInOneRound: `panto -c` in a work tree whose sessions
// the newest commit's recent view does not hold (another project's are
// newer) finds the session in its project's head, which says where its
// segments are as the recent view does: the load that follows is one
// round trip and reads no partition.
func TestProjectResumeInOneRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	id, want := closedSession(t, e, projectA)
	w := e.open(t)
	for i := range manifest.RecentSize + 1 {
		appendIn(t, w, projectB, fmt.Sprint("b", i))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	fb.SetDelay(100 * time.Millisecond)
	r := e.openOn(t, fb)
	newest, err := r.ListNewestIn(ctx, 1, projectA, nil)
	if err != nil || len(newest) != 1 || newest[0].ID != id {
		t.Fatalf("the newest of project a: %v %+v", err, newest)
	}
	if !slices.ContainsFunc(fb.Take(), func(o objstore.Op) bool { return isHeadKey(o.Key) }) {
		t.Fatal("the newest of project a was not read from its head")
	}
	loadInOneRound(t, fb, r, id, want, "the project's head")
}
