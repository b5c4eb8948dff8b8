package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// widePartitionKeyRe matches a partition of a widened index.
var widePartitionKeyRe = regexp.MustCompile(`^pfx/index/([0-9a-f]{3})\.json\.zst$`)

// widePartitions reads the partitions of three characters behind the
// store's back: their sessions and tombstones, each filed in its own.
func (e *env) widePartitions(t *testing.T) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone) {
	t.Helper()
	return e.partitionsMatching(t, widePartitionKeyRe)
}

// TestWidenIndex: a sync whose catalog holds more sessions than the
// limit moves the index to partitions of three characters: every session
// (those of the partitions, of a run and unfolded) and tombstone goes to
// its new partition, one commit says so, and the marker requires the
// feature. Readers list, resolve, load and check it clean. Stores that
// read the index before the move and write after it do not lose what
// they write: entries written to the old partitions go to a run when
// their commit finds the move, a deletion buries in the new partition,
// and the deleted session's old partition is deleted.
func TestWidenIndex(t *testing.T) {
	t.Parallel()
	for name, newEnv := range map[string]func(testing.TB) *env{"memory": newMemEnv, "MinIO": newEnv} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			widenIndex(t, newEnv(t))
		})
	}
}

func widenIndex(t *testing.T, e *env) {
	ctx := context.Background()
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 40, nil, partitionsAtClose()) {
		want[id] = 1
	}
	// Deleted after the move, by a Store opened before it: no summary of
	// it may be left in the old partitions either.
	folder := e.open(t, partitionsAtClose())
	victim := appendNew(t, folder, "the victim's secret prompt")
	want[victim] = 1
	if err := folder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if narrow, _ := e.partitions(t); narrow[victim].Info.ID != victim {
		t.Fatalf("%s is not in its partition before the move", victim)
	}
	for _, id := range bulkWrite(t, e, nil, 40, nil, objectsFoldAt(1000)) {
		want[id] = 1
	}
	unfolder := e.open(t) // not closed: its Close would fold them
	for i := range 3 {
		want[appendNew(t, unfolder, fmt.Sprint("unfolded ", i))] = 1
	}
	var gone string
	for id := range want {
		if id != victim {
			gone = id
			break
		}
	}
	deleteSession(t, e.open(t), gone)
	delete(want, gone)
	_, c := e.newestCommit(t)
	if len(c.Runs) == 0 || len(c.Unfolded) == 0 {
		t.Fatalf("before the move: %d run pages, %d unfolded entries; want some of each", len(c.Runs), len(c.Unfolded))
	}
	// Opened before the move, written to after it.
	staleWriter := e.open(t, objstore.WithDeferredIndex(), partitionsAtClose())
	staleDeleter := e.open(t)

	mover := e.open(t, objstore.WithDeferredIndex(), objstore.WithWideAfter(50))
	if _, err := mover.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	grown := slices.Sorted(func(yield func(string) bool) {
		for id := range want {
			if !yield(id) {
				return
			}
		}
	})[0]
	if err := mover.AppendMessages(ctx, grown, []agent.PersistentMessage{msg(agent.RoleAssistant, "grown by the mover")}); err != nil {
		t.Fatal(err)
	}
	want[grown]++
	if err := mover.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, c := e.newestCommit(t)
	if c.Widened == 0 || c.Widened > n {
		t.Fatalf("the newest commit %d says widened %d; want the move's", n, c.Widened)
	}
	if m := string(e.object(t, "pfx/panto-store.json")); !strings.Contains(m, `"`+manifest.FeatureIndexWide+`"`) {
		t.Fatalf("the marker %s does not require %s", m, manifest.FeatureIndexWide)
	}
	wide, wideTombs := e.widePartitions(t)
	for id := range want {
		if _, ok := wide[id]; !ok {
			t.Fatalf("session %s is in no partition of three characters", id)
		}
	}
	if _, ok := wideTombs[gone]; !ok {
		t.Fatalf("the deleted session %s is not buried in its new partition", gone)
	}
	checkListing(t, e, "after the move", want)

	// A Store that read the old partitions writes to them: its commit
	// finds the move and puts those entries in a run. More than a run
	// takes (an eighth of the index, which the commit counts): the stale
	// Store writes its partitions.
	if err := staleWriter.AppendMessages(ctx, grown, []agent.PersistentMessage{msg(agent.RoleAssistant, "stale")}); err != nil {
		t.Fatal(err)
	}
	want[grown]++
	var stale []string
	for i := range 31 {
		id := appendNew(t, staleWriter, fmt.Sprint("stale ", i))
		want[id] = 1
		stale = append(stale, id)
	}
	if err := staleWriter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Each went to its old partition, which nobody reads since the
	// move, and so to a run too. In memory always; on a server under
	// load the Store may have read a commit after the move before it
	// wrote (CI saw it once in many runs, under -race): its entries then
	// went to their new partitions, which is right too.
	oldParts, _ := e.partitions(t)
	newParts, _ := e.widePartitions(t)
	runs := e.runEntries(t)
	staleWrites := 0
	for _, id := range stale {
		switch {
		case oldParts[id].Info.ID == id:
			staleWrites++
			if runs[id].Info.ID != id {
				t.Fatalf("session %s, which the stale Store wrote to its old partition, is in no run", id)
			}
		case newParts[id].Info.ID != id && runs[id].Info.ID != id:
			t.Fatalf("session %s, which the stale Store wrote, is in no partition of three characters and no run", id)
		}
	}
	switch {
	case staleWrites == 0 && e.mem != nil:
		t.Fatal("the stale Store wrote no session to the old partitions: the test no longer tests a stale write")
	case staleWrites == 0:
		t.Logf("the stale Store learnt of the move before it wrote: the stale write is tested in memory only this time")
	}
	checkListing(t, e, "after a stale Store's write", want)

	// A Store that read the old partitions deletes a session: it buries
	// it in the new one, and deletes the old one that held its summary.
	deleteSession(t, staleDeleter, victim)
	delete(want, victim)
	checkListing(t, e, "after a stale Store's deletion", want)
	if _, tombs := e.widePartitions(t); tombs[victim].ID != victim {
		t.Fatalf("the stale deletion of %s is not buried in its new partition", victim)
	}
	narrow := "pfx/index/" + manifest.PartitionOf(victim, 2) + ".json.zst"
	for _, o := range e.rawBucket(t) {
		if o.key == narrow {
			t.Fatalf("%s, which held the deleted session's summary, is still there", narrow)
		}
	}
	// A partition of three characters lost: the check finds its
	// sessions unindexed, and repair writes it again.
	var only string // a session its partition alone holds
	runs = e.runEntries(t)
	_, newest := e.newestCommit(t)
	for id := range want {
		if _, unfolded := newest.Unfolded[id]; !unfolded && runs[id].Info.ID != id && id != grown {
			only = id
			break
		}
	}
	lost := "pfx/index/" + manifest.PartitionOf(only, 3) + ".json.zst"
	e.removeRaw(t, lost)
	r := e.open(t)
	if report, err := r.CheckIndex(ctx); err != nil || report.Clean() {
		t.Fatalf("check with %s gone: %v, %+v; want sessions unindexed", lost, err, report)
	}
	if _, err := r.RepairIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if wide, _ := e.widePartitions(t); wide[only].Info.ID != only {
		t.Fatalf("repair did not write %s again", lost)
	}
	checkListing(t, e, "after repair", want)
	if hits := e.scanFor(t, "the victim's secret prompt"); len(hits) > 0 {
		t.Fatalf("the deleted session's summary is left in %v", hits)
	}
	if _, err := e.open(t).Load(ctx, victim); !errors.Is(err, agent.ErrSessionDeleted) {
		t.Fatalf("load of the deleted session %s: %v", victim, err)
	}
}

// deleteSession deletes session id through s, at its checkpoint.
func deleteSession(t *testing.T, s *objstore.Store, id string) {
	t.Helper()
	at := mustLogs(t, s)[id].Checkpoint
	if err := s.Delete(context.Background(), store.Tombstone{ID: id, Deleted: time.Now(), At: at}); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
}

// TestWidenCatchesUp: what a writer puts in the old partitions while the
// move writes the new ones (before its first try to commit, and between
// a lost try and the next) reaches the new partitions: the move reads
// the old ones again before each try.
func TestWidenCatchesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, at := range []string{"index/", "index/log/"} {
		t.Run(strings.Trim(at, "/"), func(t *testing.T) {
			e := newMemEnv(t)
			want := map[string]int{}
			for _, id := range bulkWrite(t, e, nil, 60, nil, partitionsAtClose()) {
				want[id] = 1
			}
			// A writer that read the index before the move: it writes
			// its partitions when the move's first PUT under at goes.
			stale := e.open(t, objstore.WithDeferredIndex(), partitionsAtClose())
			var late []string
			for i := range 12 {
				id := appendNew(t, stale, fmt.Sprint("late ", i))
				late, want[id] = append(late, id), 1
			}
			fb := e.faults(t)
			var once sync.Once
			fb.SetFault(func(op objstore.Op) error {
				if op.Method == "PUT" && strings.HasPrefix(op.Key, at) && !strings.HasPrefix(op.Key, "index/head/") {
					once.Do(func() {
						if err := stale.Close(ctx); err != nil {
							t.Error(err)
						}
					})
				}
				return nil
			})
			mover := e.openOn(t, fb, objstore.WithDeferredIndex(), objstore.WithWideAfter(50))
			if _, err := mover.Logs(ctx); err != nil {
				t.Fatal(err)
			}
			id := appendNew(t, mover, "the mover's")
			want[id] = 1
			if err := mover.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if _, c := e.newestCommit(t); c.Widened == 0 {
				t.Fatal("the index did not widen")
			}
			narrow, _ := e.partitions(t)
			wide, _ := e.widePartitions(t)
			for _, id := range late {
				if narrow[id].Info.ID != id {
					t.Fatalf("%s is not in its old partition: the test no longer writes there during the move", id)
				}
				if wide[id].Info.ID != id {
					t.Fatalf("%s, written to its old partition during the move, is not in its new one", id)
				}
			}
			checkListing(t, e, "after the move", want)
		})
	}
}

// TestWideFoldSteps: in a widened index an agent's fold steps write
// partitions of three characters, as many as hold about 32 entries of
// the index (a few of 4,096, not one of 256), and fold a run that was
// written before the move (its pages name partitions of two characters).
func TestWideFoldSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 300, nil, objectsFoldAt(1000)) {
		want[id] = 1 // a run, written before the move
	}
	// A sync that reads the catalog and writes widens first.
	mover := e.open(t, objstore.WithDeferredIndex(), objectsFoldAt(1000), objstore.WithWideAfter(100))
	if _, err := mover.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		want[appendNew(t, mover, fmt.Sprint("after the move ", i))] = 1
	}
	if err := mover.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, c := e.newestCommit(t)
	if c.Widened == 0 || len(c.Runs) == 0 {
		t.Fatalf("widened at %d, %d run pages; want the move, and the runs", c.Widened, len(c.Runs))
	}
	wideKeyRe := regexp.MustCompile(`^index/([0-9a-f]{3})\.json\.zst$`)
	for step := 1; ; step++ {
		if step > 400 {
			t.Fatal("the fold did not end in 400 exits")
		}
		_, before := e.newestCommit(t)
		fb := e.faults(t)
		w := e.openOn(t, fb, objectsFoldAt(50))
		want[appendNew(t, w, fmt.Sprint("agent ", step))] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		var written []string
		for _, o := range fb.Take() {
			if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/") && !strings.HasPrefix(o.Key, "index/log") && !strings.HasPrefix(o.Key, "index/run/") && !strings.HasPrefix(o.Key, "index/head/") {
				if !wideKeyRe.MatchString(o.Key) {
					t.Fatalf("step %d wrote %s, not a partition of three characters", step, o.Key)
				}
				written = append(written, o.Key)
			}
		}
		if before.Indexed > 0 {
			if most := max(1, 32*4096/int(before.Indexed)); len(written) > most {
				t.Fatalf("step %d wrote %d partitions, want at most %d (32 entries of an index of %d)", step, len(written), most, before.Indexed)
			}
		}
		if _, c := e.newestCommit(t); c.Fold == nil && !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return len(p.First) == 2 }) {
			break // the runs of two characters are folded
		}
	}
	checkListing(t, e, "after the fold", want)
}

// TestWidenWaitsForRepair: a damaged partition holds the move back (its
// sessions would go missing without a word) without failing the sync
// that would have moved the index; once repair mends it, the next one
// does.
func TestWidenWaitsForRepair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	ids := bulkWrite(t, e, nil, 60, nil, partitionsAtClose())
	for _, id := range ids {
		want[id] = 1
	}
	sync := func(damage bool) {
		t.Helper()
		w := e.open(t, objstore.WithDeferredIndex(), objstore.WithWideAfter(50))
		if _, err := w.Logs(ctx); err != nil {
			t.Fatal(err)
		}
		if damage {
			// After the catalog's reading: the move finds it when it
			// reads the old partitions again.
			objstore.MemPut(e.mem, partitionKey(ids[0]), []byte("not a partition"))
		}
		want[appendNew(t, w, "a sync's")] = 1
		if err := w.Close(ctx); err != nil {
			t.Fatalf("a sync with a damaged partition: %v", err)
		}
	}
	sync(true)
	if _, c := e.newestCommit(t); c.Widened != 0 {
		t.Fatal("the index widened with a partition damaged")
	}
	if _, err := e.open(t).RepairIndex(ctx); err != nil {
		t.Fatal(err)
	}
	sync(false)
	if _, c := e.newestCommit(t); c.Widened == 0 {
		t.Fatal("the index did not widen after repair")
	}
	checkListing(t, e, "after the move", want)
}

// narrowKeyRe matches a partition of two characters, or a shard of
// format 3 (one), from the store's prefix.
var narrowKeyRe = regexp.MustCompile(`^index/[0-9a-f]{1,2}\.json\.zst$`)

// TestWidenPrunesNarrowInShares: once every Store that read the index
// before the move has read a newer commit, the prunings delete the
// partitions of two characters, a share each in objstore.NarrowPrunes of
// them: no exit's DeleteObjects carries more than 68 of the 272 (all of
// them are 17 KB, half of what a turn may send). After the last share none is left, and the index lists
// every session.
func TestWidenPrunesNarrowInShares(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	want := map[string]int{}
	for _, id := range bulkWrite(t, e, nil, 60, nil, partitionsAtClose()) {
		want[id] = 1
	}
	// A sync that reads the catalog and writes widens first.
	mover := e.open(t, objstore.WithDeferredIndex(), objstore.WithWideAfter(50))
	if _, err := mover.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	want[appendNew(t, mover, "the mover's")] = 1
	if err := mover.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, c := e.newestCommit(t)
	widened := c.Widened
	if widened == 0 {
		t.Fatal("the index did not widen")
	}
	narrowLeft := func() int {
		n := 0
		for _, o := range objstore.MemObjects(e.mem) {
			if narrowKeyRe.MatchString(strings.TrimPrefix(o.Key, "pfx/")) {
				n++
			}
		}
		return n
	}
	if narrowLeft() == 0 {
		t.Fatal("no partition of two characters before the pruning: the test tests nothing")
	}
	// 68 keys are a DeleteObjects body of about 4.4 KB; all 272, 17 KB.
	const perShare = 68
	fb := e.faults(t)
	for round := 0; ; round++ {
		if round > 200 {
			t.Fatalf("the log did not pass commit %d in 200 exits", widened+int64(objstore.NarrowPrunes+1)*objstore.LogKeep)
		}
		w := e.openOn(t, fb)
		for i := range 4 {
			want[appendNew(t, w, fmt.Sprint("after the move ", round, " ", i))] = 1
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for _, o := range fb.Take() {
			if o.Method != "DELETES" {
				continue
			}
			narrow := 0
			for _, k := range o.Keys {
				if narrowKeyRe.MatchString(k) {
					narrow++
				}
			}
			if narrow > perShare {
				t.Fatalf("one DeleteObjects deleted %d partitions of two characters; want at most %d", narrow, perShare)
			}
		}
		if n, _ := e.newestCommit(t); n > widened+int64(objstore.NarrowPrunes+1)*objstore.LogKeep {
			break
		}
	}
	if left := narrowLeft(); left != 0 {
		t.Fatalf("%d partitions of two characters are left after %d prunings", left, objstore.NarrowPrunes)
	}
	checkListing(t, e, "after the pruning", want)
}
