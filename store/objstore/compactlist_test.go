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
	"github.com/panto-dev/panto/store/objstore"
)

// TestCompactionListsReplacedSealed: in an encrypted prefix, the list of
// replaced objects is sealed, and read back: after the grace period a
// compaction deletes the list and everything it names.
func TestCompactionListsReplacedSealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	key := newKey(t)
	const grace = time.Minute
	s := e.open(t, objstore.WithKey(key), objstore.WithCompactThreshold(8), objstore.WithCompactGrace(grace), objstore.WithManifestInterval(1))
	id := agent.NewSessionID()
	for i := 0; i < 9; i++ {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	keys := segmentKeys(t, e, id)
	if len(keys) != 11 || !slices.ContainsFunc(keys, manifest.IsReplacedList) {
		t.Fatalf("after compaction: objects %q, want seg/0, 8 replaced, the merged one and their list", keys)
	}
	later := e.open(t, objstore.WithKey(key))
	objstore.SetNow(later, func() time.Time { return time.Now().Add(grace + time.Second) })
	if err := later.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	if keys := segmentKeys(t, e, id); len(keys) != 2 {
		t.Fatalf("after the grace period: objects %q", keys)
	}
	if conv, err := e.open(t, objstore.WithKey(key)).Load(ctx, id); err != nil || len(conv.Messages) != 9 {
		t.Fatalf("load after compaction: %v", err)
	}
}

// TestCompactionListsReplaced: a compaction that replaces more than a
// few objects names them in one list object, and its manifest records
// one pending delete, of the list; after the grace period a compaction
// deletes the list and everything it names. A damaged list deletes
// nothing it names, and does not stop compaction.
func TestCompactionListsReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	const grace = time.Minute
	s := e.open(t, objstore.WithCompactThreshold(8), objstore.WithCompactGrace(grace), objstore.WithManifestInterval(1))
	id := agent.NewSessionID()
	appendN := func(s *objstore.Store, n int) {
		for i := 0; i < n; i++ {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendN(s, 9) // 9 segments: past the threshold, one run
	m := readManifest(t, e, id)
	if len(m.Segments) != 1 || len(m.Pending) != 1 || !manifest.IsReplacedList(m.Pending[0].Name) {
		t.Fatalf("after compaction: segments %+v pending %+v", m.Segments, m.Pending)
	}
	list := m.Pending[0].Name
	var listed []string
	for _, o := range e.readBucket(t) {
		if o.key == e.key("sessions/"+id+"/"+list) {
			listed = strings.Fields(string(o.data))
		}
	}
	want := []string{}
	for _, key := range segmentKeys(t, e, id) {
		if key != manifest.SegmentName(0) && key != m.Segments[0].Name() && key != list {
			want = append(want, key)
		}
	}
	if len(want) != 8 || !slices.Equal(listed, want) {
		t.Fatalf("the list names %q, want the 8 replaced segments %q", listed, want)
	}

	// Past the grace period, another store's compaction deletes them.
	later := e.open(t)
	objstore.SetNow(later, func() time.Time { return time.Now().Add(grace + time.Second) })
	if err := later.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	m = readManifest(t, e, id)
	if keys := segmentKeys(t, e, id); len(keys) != 2 || len(m.Pending) != 0 {
		t.Fatalf("after the grace period: objects %q pending %+v", keys, m.Pending)
	}
	if conv, err := e.open(t).Load(ctx, id); err != nil || len(conv.Messages) != 9 {
		t.Fatalf("load after compaction: %v", err)
	}

	// A damaged list: the compaction past its grace period drops it and
	// deletes the list alone.
	appendN(s, 16) // the 16 new segments merge, and then with the first merge
	m = readManifest(t, e, id)
	var damaged string
	for _, p := range m.Pending {
		if manifest.IsReplacedList(p.Name) {
			damaged = p.Name
		}
	}
	if damaged == "" {
		t.Fatalf("no list in pending %+v", m.Pending)
	}
	objstore.MemPut(e.mem, e.key("sessions/"+id+"/"+damaged), []byte("not a list"))
	if err := e.open(t).Verify(ctx, id); !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), damaged) {
		t.Errorf("verify with a damaged list: %v", err)
	}
	before := len(segmentKeys(t, e, id))
	objstore.SetNow(later, func() time.Time { return time.Now().Add(2*grace + time.Second) })
	if err := later.Compact(ctx, id); err != nil {
		t.Fatalf("compaction with a damaged list: %v", err)
	}
	m = readManifest(t, e, id)
	keys := segmentKeys(t, e, id)
	if len(m.Pending) != 0 || slices.Contains(keys, damaged) || len(keys) >= before {
		t.Fatalf("after the damaged list's grace period: objects %q (%d before) pending %+v", keys, before, m.Pending)
	}
	if err := e.open(t).Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// TestLongSessionCompaction: 150 turns of six appends, each turn a
// process of its own (`panto -c`), as in an afternoon's work. The
// manifest, which a turn rewrites, stays small however many objects
// compaction replaced within the grace period, and the bytes compaction
// writes grow as the session times its logarithm, not its square.
func TestLongSessionCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	id := agent.NewSessionID()
	body := strings.Repeat("a line of the conversation, ", 30)
	largest := 0
	for turn := 0; turn < 150; turn++ {
		s := e.open(t)
		if turn > 0 {
			if _, err := s.Load(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 6; i++ {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint(turn, " ", i, " ", body))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for _, o := range e.rawBucket(t) {
			if o.key == e.key("sessions/"+id+"/manifest.json") {
				largest = max(largest, len(o.data))
			}
		}
	}
	m := readManifest(t, e, id)
	// Within the grace period every merged object written is still
	// there, under the name of its range.
	var merged int64
	for _, key := range segmentKeys(t, e, id) {
		var start, end int64
		if n, _ := fmt.Sscanf(key, "seg/%d-%d.c.jsonl.zst", &start, &end); n == 2 {
			merged += end - start
		}
	}
	t.Logf("%d bytes of log in %d segments; the largest manifest %d bytes, %d pending deletes; compaction wrote %d bytes (%.1f times the log)",
		m.Length, len(m.Segments), largest, len(m.Pending), merged, float64(merged)/float64(m.Length))
	if largest > 16<<10 {
		t.Errorf("the manifest grew to %d bytes", largest)
	}
	if merged > 8*m.Length {
		t.Errorf("compaction wrote %d bytes for a log of %d", merged, m.Length)
	}
	if len(m.Segments) > 40 {
		t.Errorf("%d segments", len(m.Segments))
	}
}

// TestCompactionReadsAtOnce: a compaction's GETs of the segments it
// merges go out together (a writer's runs as panto exits), not a few at
// a time: each of them starts before any of them is answered; and the
// list of the replaced objects is written beside the merge, not after.
func TestCompactionReadsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithCompactThreshold(0), objstore.WithManifestInterval(1))
	// Another Store, which has none of the segments in hand, nor an index
	// entry that names them (it opened before they were written).
	other := e.openOn(t, fb)
	id := agent.NewSessionID()
	const n = 24
	for i := 0; i < n; i++ {
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fb.Take()
	fb.SetDelay(20 * time.Millisecond) // so that what goes out together overlaps, also on a loaded machine
	if err := other.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	var gets []objstore.Op
	var mergedPut, listPut objstore.Op
	for _, op := range fb.Take() {
		switch {
		case op.Method == "GET" && op.Err == nil && strings.Contains(op.Key, "/seg/"):
			gets = append(gets, op)
		case op.Method == "PUT" && strings.HasSuffix(op.Key, ".c.jsonl.zst"):
			mergedPut = op
		case op.Method == "PUT" && strings.Contains(op.Key, "/seg/replaced-"):
			listPut = op
		}
	}
	if len(gets) != n {
		t.Fatalf("the compaction read %d segments, want %d", len(gets), n)
	}
	if mergedPut.Key == "" || listPut.Key == "" || !listPut.Start.Before(mergedPut.End) {
		t.Errorf("the list's PUT (%v to %v) waited for the merged object's (%v to %v)",
			listPut.Start, listPut.End, mergedPut.Start, mergedPut.End)
	}
	lastStart, firstEnd := gets[0].Start, gets[0].End
	for _, op := range gets {
		if op.Start.After(lastStart) {
			lastStart = op.Start
		}
		if op.End.Before(firstEnd) {
			firstEnd = op.End
		}
	}
	if !lastStart.Before(firstEnd) {
		t.Errorf("a segment's GET started %v after the first answer: the compaction read in waves", lastStart.Sub(firstEnd))
	}
}

// TestCompactionMergesWhatItHas: a compaction merges the segments its
// Store appended, or read in a load (panto -c), without reading them
// again; and what it merged reads back as the log.
func TestCompactionMergesWhatItHas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	fb := e.faults(t)
	id := agent.NewSessionID()
	// segmentGets counts the GETs of each segment that found it.
	segmentGets := func() map[string]int {
		n := map[string]int{}
		for _, op := range fb.Take() {
			if op.Method == "GET" && op.Err == nil && strings.Contains(op.Key, "/seg/") {
				n[op.Key]++
			}
		}
		return n
	}
	appendN := func(s *objstore.Store, from, n int) {
		for i := from; i < from+n; i++ {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	opts := []objstore.Option{objstore.WithCompactThreshold(0), objstore.WithManifestInterval(1)}
	writer := e.openOn(t, fb, opts...)
	appendN(writer, 0, 12)
	fb.Take()
	if err := writer.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	// At most the probe at the end its index entry knew, which may be
	// behind the manifest.
	if n := segmentGets(); len(n) > 1 {
		t.Errorf("the compaction by the Store that appended the segments read %d of them", len(n))
	}
	// A new Store loads the session, appends, and compacts: the merged
	// segment it loaded and its own appends are in hand, so no segment
	// is read twice.
	next := e.openOn(t, fb, opts...)
	if _, err := next.Load(ctx, id); err != nil {
		t.Fatal(err)
	}
	appendN(next, 12, 12)
	if err := next.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	for key, n := range segmentGets() {
		if n > 1 {
			t.Errorf("the load and the compaction read %s %d times", key, n)
		}
	}
	conv, err := e.open(t).Load(ctx, id)
	if err != nil || len(conv.Messages) != 24 || conv.Messages[23].Text() != "m23" {
		t.Fatalf("load after the compactions: %v", err)
	}
	if err := e.open(t).Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionBesideCheckpoint: the exit of a turn that compacts
// writes the index entry and the compaction at once (the compaction
// writes the manifest the checkpoint would have): Close is two round
// trips, the merged objects and the run, then the manifest and the
// commit, where the compaction followed the checkpoint's two. The log
// reads back whole, the manifest lists the merged object, and the
// session lists at its length.
func TestCompactionBesideCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	id := agent.NewSessionID()
	setup := e.open(t)
	for i := range 30 {
		if err := setup.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := setup.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	w := e.openOn(t, fb)
	if _, err := w.Load(ctx, id); err != nil {
		t.Fatal(err)
	}
	for i := 30; i < 36; i++ {
		if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	fb.Take()
	// Longer than the merge's compression under -race on a loaded
	// machine, which would otherwise split a round trip in two.
	fb.SetDelay(100 * time.Millisecond)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ops := fb.Take()
	merged := slices.ContainsFunc(ops, func(o objstore.Op) bool { return isPutOp(o, ".c.jsonl.zst") })
	if !merged || opRounds(ops) > 2 {
		t.Errorf("Close: merged %v in %d round trips, want a merge in 2: %s", merged, opRounds(ops), describeOps(ops))
	}
	m := readManifest(t, e, id)
	if len(m.Segments) != 1 || !m.Segments[0].Merged {
		t.Fatalf("the manifest after Close lists %d segments, want the merged one", len(m.Segments))
	}
	r := e.open(t)
	conv, err := r.Load(ctx, id)
	if err != nil || len(conv.Messages) != 36 || conv.Messages[35].Text() != "m35" {
		t.Fatalf("load: %v", err)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].MessageCount != 36 {
		t.Fatalf("list: %v, %+v", err, list)
	}
	if err := r.Verify(ctx, id); err != nil {
		t.Fatal(err)
	}
}
