package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// secretTexts are what the deleted session holds; no object may hold any
// of them once the deletion has reached the bucket.
var secretTexts = []string{"my password is hunter2-tr0ub4dor", "AWS_SECRET=deleted-session-secret"}

// scanFor returns the keys of the objects of the env's bucket (decompressed
// where they are zstd) that hold any of texts.
func (e *env) scanFor(t *testing.T, texts ...string) []string {
	t.Helper()
	var hits []string
	for _, o := range e.readBucket(t) {
		for _, text := range texts {
			if bytes.Contains(o.data, []byte(text)) {
				hits = append(hits, o.key)
				break
			}
		}
	}
	return hits
}

func deleteAll(t *testing.T, s *objstore.Store, id string) store.Tombstone {
	t.Helper()
	logs, err := sessionsOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	tomb := store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: logs[id].Checkpoint}
	if err := s.Delete(context.Background(), tomb); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	return tomb
}

// TestDeleteLeavesNoContent: after a deletion, no object of the bucket
// holds any of the session's text — not its segments, compacted or not,
// nor its manifest, nor the index (base or deltas) — while another session
// of the same shard keeps its own; a reader holding a manifest from before
// the deletion is told it was deleted, and the marker requires tombstones.
func TestDeleteLeavesNoContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	s := e.open(t, objstore.WithManifestInterval(2), objstore.WithCompactThreshold(3), objstore.WithCompactGrace(time.Hour))
	id := "a0" + agent.NewSessionID()[2:]
	other := "a1" + agent.NewSessionID()[2:] // the same index shard
	for i, text := range secretTexts {
		for k := range 3 {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(text), msg(agent.RoleAssistant, "noted "+text)}); err != nil {
				t.Fatal(err)
			}
			_ = i + k
		}
	}
	if err := s.AppendMessages(ctx, other, []agent.PersistentMessage{user("keep me")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, id); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, secretTexts...); len(hits) == 0 {
		t.Fatal("test setup: the secrets are nowhere in the bucket before the deletion")
	}
	// A reader that has read the manifest before the deletion.
	early := e.open(t)
	if _, err := early.Load(ctx, id); err != nil {
		t.Fatal(err)
	}

	deleteAll(t, s, id)
	if hits := e.scanFor(t, secretTexts...); len(hits) > 0 {
		t.Errorf("after the deletion these objects still hold the session's text: %v", hits)
	}
	if conv, err := e.open(t).Load(ctx, other); err != nil || conv.Messages[0].Text() != "keep me" {
		t.Errorf("the other session of the shard: %v", err)
	}
	for _, r := range []*objstore.Store{early, e.open(t)} {
		_, err := r.Load(ctx, id)
		if !errors.Is(err, agent.ErrSessionDeleted) || errors.Is(err, objstore.ErrCorrupt) {
			t.Errorf("Load of a deleted session: %v, want ErrSessionDeleted and not ErrCorrupt", err)
		}
	}
	if m := e.object(t, "pfx/panto-store.json"); !strings.Contains(string(m), `"tombstones"`) {
		t.Errorf("the marker does not require tombstones: %s", m)
	}
	// The index is whole, and a repair changes nothing.
	report, err := e.open(t).CheckIndex(ctx)
	if err != nil || !report.Clean() {
		t.Errorf("index after the deletion: %+v, %v", report, err)
	}
}

// TestDeleteInterrupted: a deletion cut off at any request after its
// commit point leaves the session deleted (reads say so), and the next
// Delete finishes it: nothing of its content is left.
func TestDeleteInterrupted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for cut := 1; cut <= 20; cut++ {
		e := newMemEnv(t)
		s := e.open(t)
		id := agent.NewSessionID()
		for range 3 {
			if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(secretTexts[0])}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		at := mustLogs(t, s)[id].Checkpoint
		fb := e.faults(t)
		d := e.openOn(t, fb, objstore.WithMaxAttempts(1))
		var n atomic.Int64
		committed := atomic.Bool{}
		fb.SetFault(func(op objstore.Op) error {
			if isPutOp(op, ".jsonl.zst") && !committed.Load() {
				committed.Store(true) // the commit point goes through
				return nil
			}
			if committed.Load() && n.Add(1) >= int64(cut) {
				return objstore.ErrInjected
			}
			return nil
		})
		err := d.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at})
		if err == nil && n.Load() < int64(cut) {
			continue // finished before the cut
		}
		if _, lerr := e.open(t).Load(ctx, id); !errors.Is(lerr, agent.ErrSessionDeleted) {
			t.Fatalf("cut %d: Load after a deletion cut after its commit point: %v", cut, lerr)
		}
		// A sync lists the tombstones before it plans. One listed means
		// the deletion's content is gone (after the listing, which
		// finishes a purge of the index cut short); one not listed yet is
		// planned for deletion again, which finishes it.
		tombs, err := e.open(t).Tombstones(ctx)
		if err != nil {
			t.Fatalf("cut %d: Tombstones: %v", cut, err)
		}
		if !slices.ContainsFunc(tombs, func(tb store.Tombstone) bool { return tb.ID == id }) {
			if err := e.open(t).Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now(), At: at}); err != nil {
				t.Fatalf("cut %d: the second Delete: %v", cut, err)
			}
		}
		if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
			t.Fatalf("cut %d: content left after the deletion was finished: %v", cut, hits)
		}
		if logs := mustLogs(t, e.open(t)); len(logs) != 0 {
			t.Fatalf("cut %d: Logs after the deletion: %v", cut, logs)
		}
	}
}

func mustLogs(t *testing.T, s *objstore.Store) map[string]store.Log {
	t.Helper()
	logs, err := sessionsOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// TestDeletionsCutAfterCommit: a sync's deletions (a Store opened for
// bulk work, whose flush commits the tombstones, buries the sessions
// partition by partition and purges the run pages covering each) cut
// after any of its index writes leave nothing of the deleted sessions'
// text behind once the next sync has listed the tombstones (which
// finishes the purges a commit says are pending: IndexShard.Unpurged)
// and deleted again what it still lists. Before, a cut between a
// partition's burial and its pages' purge left the summaries in a named
// page for good: every listing said the sessions were deleted, so no
// sync carried the deletions again.
func TestDeletionsCutAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for cut := 1; cut < 64; cut++ { // until a flush makes all its index writes
		e := newMemEnv(t)
		ids, doomed := seedDoomed(t, e)
		s, fb, logs := openToCut(t, e)
		var writes atomic.Int32
		fb.SetFault(func(o objstore.Op) error {
			if int(writes.Load()) >= cut {
				return errors.New("killed")
			}
			return nil
		})
		fb.SetLose(func(o objstore.Op) bool {
			if o.Method == "PUT" && strings.Contains(o.Key, "index/") {
				writes.Add(1)
			}
			return false
		})
		for _, id := range doomed {
			if err := s.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: logs[id].Checkpoint}); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.Flush(ctx) // cut part way
		whole := int(writes.Load()) < cut

		// The next sync: it lists the tombstones, then deletes again what
		// the bucket still lists.
		next := e.open(t, objstore.WithDeferredIndex())
		if _, err := next.Tombstones(ctx); err != nil {
			t.Fatalf("cut %d: Tombstones: %v", cut, err)
		}
		listed, err := sessionsOf(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range doomed {
			if l, ok := listed[id]; ok {
				if err := next.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: l.Checkpoint}); err != nil {
					t.Fatalf("cut %d: Delete again: %v", cut, err)
				}
			}
		}
		if err := next.Flush(ctx); err != nil {
			t.Fatalf("cut %d: Flush: %v", cut, err)
		}
		if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
			t.Errorf("cut %d: the deleted sessions' text is left in %v", cut, hits)
		}
		if logs := mustLogs(t, e.open(t)); len(logs) != len(ids)-len(doomed) {
			t.Errorf("cut %d: %d sessions listed, want %d", cut, len(logs), len(ids)-len(doomed))
		}
		if whole {
			t.Logf("a flush makes %d index writes; cut after each of them", cut-1)
			return
		}
	}
	t.Fatal("the flush was cut 63 times")
}

// seedDoomed seeds e's bucket with 24 sessions through a bulk Store (a
// run's page holds them all); every third, doomed, holds
// secretTexts[0].
func seedDoomed(t *testing.T, e *env) (ids, doomed []string) {
	t.Helper()
	seed := e.open(t, objstore.WithDeferredIndex())
	for i := range 24 { // more than a commit's unfolded few: a run
		text := fmt.Sprintf("kept session %d", i)
		if i%3 == 0 {
			text = secretTexts[0] + fmt.Sprint(i)
		}
		id := appendNew(t, seed, text)
		ids = append(ids, id)
		if i%3 == 0 {
			doomed = append(doomed, id)
		}
	}
	if err := seed.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, secretTexts[0]); !slices.ContainsFunc(hits, func(k string) bool { return strings.Contains(k, "/index/run/") }) {
		t.Fatalf("the seed wrote no run page holding the sessions' summaries: %v", hits)
	}
	return ids, doomed
}

// openToCut opens a bulk Store (a sync's) on a fault wrapper of e's
// bucket, and lists its sessions.
func openToCut(t *testing.T, e *env) (*objstore.Store, *objstore.FaultBucket, map[string]store.Log) {
	t.Helper()
	fb := e.faults(t)
	s := e.openOn(t, fb, objstore.WithDeferredIndex())
	logs, err := sessionsOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return s, fb, logs
}

// cutDeletions seeds e's bucket with 24 sessions (a run; every third
// holds secretTexts[0]), then deletes those with a bulk Store whose
// flush is cut right after the deletions' commit (beforePages: before
// its first write of a run page, once the partitions buried them). It
// returns the ids deleted.
func cutDeletions(t *testing.T, e *env, beforePages bool) []string {
	t.Helper()
	ctx := context.Background()
	_, doomed := seedDoomed(t, e)
	s, fb, logs := openToCut(t, e)
	var committed atomic.Bool
	fb.SetFault(func(o objstore.Op) error {
		if beforePages && o.Method == "PUT" && strings.Contains(o.Key, "index/run/") {
			committed.Store(true)
		}
		if committed.Load() {
			return errors.New("killed")
		}
		return nil
	})
	fb.SetLose(func(o objstore.Op) bool {
		if !beforePages && o.Method == "PUT" && strings.Contains(o.Key, "index/log/") {
			committed.Store(true)
		}
		return false
	})
	for _, id := range doomed {
		if err := s.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: logs[id].Checkpoint}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Flush(ctx) // cut short
	if !committed.Load() {
		t.Fatal("the flush was not cut")
	}
	if _, c := e.newestCommit(t); len(c.Unpurged) != len(doomed) {
		t.Fatalf("the deletions' commit names %d sessions unpurged, want %d", len(c.Unpurged), len(doomed))
	}
	return doomed
}

// TestDeletionCutAgedNote: a deletion cut short right after its commit,
// whose note a later writer carried on past the hour the commits carry
// its tombstones, is still finished by the next listing of tombstones:
// the tombstones are found in the sessions' first segments, the
// partitions bury them and the runs' pages lose their summaries.
func TestDeletionCutAgedNote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	doomed := cutDeletions(t, e, false)
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	w := e.open(t)
	objstore.SetNow(w, later)
	appendNew(t, w, "two hours later")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, c := e.newestCommit(t); len(c.Tombstones) != 0 || len(c.Unpurged) != len(doomed) {
		t.Fatalf("two hours later, commit %d carries %d tombstones and %d unpurged sessions; want none and %d", n, len(c.Tombstones), len(c.Unpurged), len(doomed))
	}
	next := e.open(t, objstore.WithDeferredIndex())
	objstore.SetNow(next, later)
	tombs, err := next.Tombstones(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tombs) != len(doomed) {
		t.Errorf("%d tombstones listed, want %d", len(tombs), len(doomed))
	}
	if err := next.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkDeletionsFinished(t, e, 24-len(doomed)+1)
}

// TestRepairFinishesDeletions: repair finishes a deletion cut short
// after its commit, or after its partitions buried the sessions, note
// and all (it finishes every deletion it finds: sweepBuried).
func TestRepairFinishesDeletions(t *testing.T) {
	t.Parallel()
	for _, beforePages := range []bool{false, true} {
		e := newMemEnv(t)
		doomed := cutDeletions(t, e, beforePages)
		if _, err := e.open(t).RepairIndex(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkDeletionsFinished(t, e, 24-len(doomed))
	}
}

// checkDeletionsFinished checks that no object of e's bucket holds
// secretTexts[0], that no commit's note is left, and that the bucket
// lists live sessions.
func checkDeletionsFinished(t *testing.T, e *env, live int) {
	t.Helper()
	if hits := e.scanFor(t, secretTexts[0]); len(hits) > 0 {
		t.Errorf("the deleted sessions' text is left in %v", hits)
	}
	if n, c := e.newestCommit(t); len(c.Unpurged) != 0 || len(c.Discarded) != 0 {
		t.Errorf("commit %d still notes unpurged sessions %v, discarded pages %v", n, c.Unpurged, c.Discarded)
	}
	if logs := mustLogs(t, e.open(t)); len(logs) != live {
		t.Errorf("%d sessions listed, want %d", len(logs), live)
	}
}

// TestDeleteRoundTrips: a deletion's round trips do not grow with the
// session's segments (its objects go in one DeleteObjects, after one
// listing of its prefix: they were deleted one request each, 31 round
// trips for 30 segments), and what burying it in the index reads (its
// partition, the run page over it) goes out with the deletion's first
// reads, not after its commit; the project head's reading goes with the
// commit point, and the listing of the session's objects with seg/0's
// tombstone. So do the head's burial and the run page written anew
// without the session (neither waits for the objects' deletion), which
// the deletion's commit names in the place of the page that held it; the
// listing of the index log whose older commits the deletion's commit
// deletes goes with that commit, and the deletion of the page it retired
// with the burial.
func TestDeleteRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t, objstore.WithCompactThreshold(0))
	grow := func(n int) string {
		id := agent.NewSessionID()
		for i := range n {
			if err := w.AppendMessagesIn(ctx, projectA, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	first, short, long := grow(1), grow(1), grow(20)
	logs, err := sessionsOf(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	took := map[string]int{}
	for _, c := range []struct {
		name string
		id   string
	}{{"first deletion", first}, {"1 segment", short}, {"20 segments", long}} {
		fb := e.faults(t)
		fb.SetDelay(100 * time.Millisecond) // so that a loaded machine does not split a round trip
		r := e.openOn(t, fb)
		fb.Take()
		if err := r.Delete(ctx, store.Tombstone{ID: c.id, Deleted: time.Now().UTC(), At: logs[c.id].Checkpoint}); err != nil {
			t.Fatal(err)
		}
		ops := fb.Take()
		took[c.name] = opRounds(ops)
		if n := countOps(ops, "DELETE"); n > 1 {
			t.Errorf("%s: %d DELETE requests, want the session's objects in one DeleteObjects: %s", c.name, n, describeOps(ops))
		}
		var partitionRead, pageRead, firstCommit, firstCommitEnd, burial, logPurged, headRead, commitPoint, seg0, listing time.Time
		var headWrite, pageWrite, swept, logListed, pageDeleted, burialEnd time.Time
		for _, o := range ops {
			switch {
			case o.Method == "GET" && isHeadKey(o.Key):
				headRead = o.Start
			case o.Method == "PUT" && isHeadKey(o.Key):
				headWrite = o.Start
			case o.Method == "PUT" && strings.HasPrefix(o.Key, "index/run/") && pageWrite.IsZero():
				pageWrite = o.Start
			case o.Method == "DELETES" && slices.ContainsFunc(o.Keys, func(k string) bool { return strings.HasPrefix(k, "sessions/") }):
				swept = o.End
			case o.Method == "LIST" && o.Key == "index/log/" && logListed.IsZero():
				logListed = o.Start
			case o.Method == "DELETES" && slices.ContainsFunc(o.Keys, func(k string) bool { return strings.HasPrefix(k, "index/run/") }):
				pageDeleted = o.Start
			case o.Method == "PUT" && strings.HasSuffix(o.Key, "/seg/00000000000000000000.jsonl.zst"):
				seg0 = o.End
			case o.Method == "PUT" && strings.Contains(o.Key, "/seg/") && commitPoint.IsZero():
				commitPoint = o.End
			case o.Method == "LIST" && strings.HasPrefix(o.Key, "sessions/"):
				listing = o.Start
			case o.Method == "PUT" && strings.HasPrefix(o.Key, "index/") && !strings.Contains(o.Key[len("index/"):], "/") && burial.IsZero():
				burial, burialEnd = o.Start, o.End
			case o.Method == "DELETES" && slices.ContainsFunc(o.Keys, func(k string) bool { return strings.HasPrefix(k, "index/log/") }) && logPurged.IsZero():
				logPurged = o.End
			case o.Method == "GET" && strings.HasPrefix(o.Key, "index/run/") && pageRead.IsZero():
				pageRead = o.Start
			case o.Method == "GET" && strings.HasPrefix(o.Key, "index/") && !strings.Contains(o.Key[len("index/"):], "/") && partitionRead.IsZero():
				partitionRead = o.Start
			case o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") && firstCommit.IsZero():
				firstCommit, firstCommitEnd = o.Start, o.End
			}
		}
		if pageDeleted.IsZero() || !pageDeleted.Before(burialEnd) {
			t.Errorf("%s: the run page the deletion's commit retired was deleted at %v, the partition's burial answered at %v: want it deleted beside the burial: %s", c.name, pageDeleted, burialEnd, describeOps(ops))
		}
		if headWrite.IsZero() || swept.IsZero() || !headWrite.Before(swept) {
			t.Errorf("%s: the project's head buried the session at %v, the session's objects were deleted by %v: want the burial beside seg/0's tombstone: %s", c.name, headWrite, swept, describeOps(ops))
		}
		if c.name == "1 segment" && (pageWrite.IsZero() || !pageWrite.Before(swept)) {
			t.Errorf("%s: the run page was written anew at %v, the session's objects deleted by %v: want it written beside seg/0's tombstone: %s", c.name, pageWrite, swept, describeOps(ops))
		}
		// The deletion's commit retires the page that held the session
		// (its purge made ahead): the commit after the burial clears the
		// purge note, and no commit retires pages between them.
		if n := countCommits(ops); n > 2 {
			t.Errorf("%s: %d commits, want 2 (the deletion's, with its pages, and the one that clears the purge note): %s", c.name, n, describeOps(ops))
		}
		if logListed.IsZero() || !logListed.Before(firstCommitEnd) {
			t.Errorf("%s: the index log was listed at %v, after the deletion's commit (answered at %v): want the listing beside it: %s", c.name, logListed, firstCommitEnd, describeOps(ops))
		}
		if firstCommit.IsZero() || partitionRead.IsZero() || !partitionRead.Before(firstCommit) {
			t.Errorf("%s: the partition was read at %v, the deletion committed at %v: want it read before: %s", c.name, partitionRead, firstCommit, describeOps(ops))
		}
		if !pageRead.IsZero() && !pageRead.Before(firstCommit) {
			t.Errorf("%s: the run page was read after the deletion's commit: %s", c.name, describeOps(ops))
		}
		if burial.IsZero() || logPurged.IsZero() || !burial.Before(logPurged) {
			t.Errorf("%s: the partition buried the session at %v, the older commits were deleted by %v: want the burial beside their deletion: %s", c.name, burial, logPurged, describeOps(ops))
		}
		if !headRead.IsZero() && !headRead.Before(commitPoint) {
			t.Errorf("%s: the project's head was read after the commit point: %s", c.name, describeOps(ops))
		}
		if listing.IsZero() || seg0.IsZero() || !listing.Before(seg0) {
			t.Errorf("%s: the session's objects were listed after seg/0's tombstone: %s", c.name, describeOps(ops))
		}
		// The refresh reads seg/0 with the manifest; the tombstone's
		// If-Match takes that read's ETag.
		if n := countGets(ops, "sessions/"+c.id+"/seg/00000000000000000000.jsonl.zst"); n > 1 {
			t.Errorf("%s: seg/0 read %d times, want once: %s", c.name, n, describeOps(ops))
		}
		t.Logf("%s: %d round trips: %s", c.name, took[c.name], describeOps(ops))
	}
	if took["20 segments"] > took["1 segment"] {
		t.Errorf("deleting a session of 20 segments took %d round trips, one of 1 segment %d: want no more", took["20 segments"], took["1 segment"])
	}
}

// TestDeletionsAtOnce: a Store's deletions that run at once (panto rm of
// many sessions, prune) share the index's commits and purges, and none
// waits behind another's burial in its partition or its deletion of the
// older commits: 24 sessions go in about the round trips of a few, not
// of 24, and the run pages they all read ahead are read once. Each still goes to the end: no stored byte holds a deleted
// session's text, no commit says a purge is owed, the rest still list.
func TestDeletionsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	var doomed, kept []string
	for i := range 24 {
		doomed = append(doomed, appendNew(t, w, fmt.Sprintf("doomed-%02d", i)))
	}
	for i := range 4 {
		kept = append(kept, appendNew(t, w, fmt.Sprintf("kept-%d", i)))
	}
	logs, err := sessionsOf(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fb := e.faults(t)
	d := e.openOn(t, fb)
	fb.Take()
	fb.SetDelay(50 * time.Millisecond) // so that a loaded machine does not split a round trip
	var wg sync.WaitGroup
	for _, id := range doomed {
		wg.Go(func() {
			if err := d.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: logs[id].Checkpoint}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ops := fb.Take()
	// One deletion is 7 (TestDeleteRoundTrips); these took 37
	// to 39 when each burial in its partition, and each deletion of the
	// older commits, waited for the index log's writer lock.
	if rounds := opRounds(ops); rounds > 16 {
		t.Errorf("%d deletions at once took %d round trips (%d commits), want at most 16: %s", len(doomed), rounds, countCommits(ops), describeOps(ops))
	}
	// Each reads the run pages over its partition ahead: one GET of
	// each page serves them all.
	gets := map[string]int{}
	for _, o := range ops {
		if o.Method == "GET" && strings.HasPrefix(o.Key, "index/run/") {
			if gets[o.Key]++; gets[o.Key] == 2 {
				t.Errorf("run page %s read more than once", o.Key)
			}
		}
	}
	if hits := e.scanFor(t, "doomed-"); len(hits) > 0 {
		t.Errorf("stored objects still hold deleted sessions' text: %v", hits)
	}
	if _, c := e.newestCommit(t); len(c.Unpurged) > 0 {
		t.Errorf("the newest commit says %d purges are owed", len(c.Unpurged))
	}
	left, err := sessionsOf(ctx, e.open(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != len(kept) {
		t.Errorf("%d sessions listed, want the %d kept", len(left), len(kept))
	}
}

// countCommits counts the commits of the index log that ops created.
func countCommits(ops []objstore.Op) int {
	n := 0
	for _, o := range ops {
		if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") && o.Err == nil {
			n++
		}
	}
	return n
}

// onceAfterCommitPoint has fb run fn once, when an operation match picks
// has been answered, past a deletion's commit point (the PUT of a
// segment; Open lists and reads the index before it).
func onceAfterCommitPoint(fb *objstore.FaultBucket, match func(objstore.Op) bool, fn func()) {
	var once sync.Once
	var past atomic.Bool
	fb.SetLose(func(o objstore.Op) bool {
		if o.Method == "PUT" && strings.Contains(o.Key, "/seg/") {
			past.Store(true)
		}
		if past.Load() && match(o) {
			once.Do(fn)
		}
		return false
	})
}

// TestDeletionPurgesCommitsMadeBesideIt: the listing of the index log
// whose older commits a deletion's commit deletes goes out beside that
// commit, so it misses a commit another writer makes after it: the
// deletion's commit then follows that one, which may hold the deleted
// session's summary (in its recent view, or in its base's), and deletes
// it by number.
func TestDeletionPurgesCommitsMadeBesideIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	doomed := appendNew(t, w, "doomed-beside")
	kept := appendNew(t, w, "kept")
	logs := mustLogs(t, w)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	other := e.open(t) // its reading of the log holds the doomed session
	fb := e.faults(t)
	d := e.openOn(t, fb)
	committed := make(chan struct{})
	onceAfterCommitPoint(fb, func(o objstore.Op) bool { return o.Method == "LIST" && o.Key == "index/log/" }, func() {
		defer close(committed)
		if err := other.AppendMessages(ctx, kept, []agent.PersistentMessage{user("kept, grown")}); err != nil {
			t.Error(err)
		}
		if err := other.Flush(ctx); err != nil {
			t.Error(err)
		}
	})
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") {
			select { // the deletion's commit comes after the other's
			case <-committed:
			case <-time.After(10 * time.Second):
			}
		}
		return nil
	})
	if err := d.Delete(ctx, store.Tombstone{ID: doomed, Deleted: time.Now().UTC(), At: logs[doomed].Checkpoint}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-committed:
	default:
		t.Fatal("the deletion did not list the index log")
	}
	if hits := e.scanFor(t, "doomed-beside"); len(hits) > 0 {
		t.Errorf("stored objects still hold the deleted session's text: %v", hits)
	}
	// Every commit before the deletion's is gone: any may hold the
	// summary (a commit relative to a base holds it by that base).
	ops := fb.Take()
	var deletion int64
	for _, o := range ops {
		if m := logCommitKey.FindStringSubmatch(e.key(o.Key)); m != nil && o.Method == "PUT" && o.Err == nil && deletion == 0 {
			deletion, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	for _, o := range e.rawBucket(t) {
		if m := logCommitKey.FindStringSubmatch(o.key); m != nil {
			if n, _ := strconv.ParseInt(m[1], 10, 64); n < deletion {
				t.Errorf("commit %d is still there, before the deletion's (%d): %s", n, deletion, describeOps(ops))
			}
		}
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := mustLogs(t, e.open(t)); len(left) != 1 || left[kept].Length <= logs[kept].Length {
		t.Errorf("listed %v, want the kept session, grown", left)
	}
}

// TestDeletionPageWrittenAheadNotTaken: a deletion writes the run page
// that will hold its partition's sessions without it beside seg/0's
// tombstone, for its commit to name in the place of the page that held
// it. Where another Store deletes a session of that page in between, the
// page written ahead holds that session's summary. If the other purged
// the page first, the commit finds the page it replaces retired, names
// neither, and the deletion deletes the page it wrote; if the other's
// deletion was cut short after its commit, the commit names it, and the
// purge after the burial takes the other session out too (its commit
// noted it as unpurged). Either way no page no commit names is left, and
// no page holds either summary.
func TestDeletionPageWrittenAheadNotTaken(t *testing.T) {
	t.Parallel()
	for _, cutShort := range []bool{false, true} {
		t.Run(fmt.Sprintf("other cut short %v", cutShort), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			w := e.open(t)
			first := appendNew(t, w, "doomed-first")
			second := appendNew(t, w, "doomed-second")
			for i := range 4 {
				appendNew(t, w, fmt.Sprint("kept ", i))
			}
			logs := mustLogs(t, w)
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if len(e.runObjects(t)) == 0 {
				t.Fatal("no run page to purge")
			}
			ob := e.faults(t)
			var otherCommitted atomic.Bool
			if cutShort {
				ob.SetLose(func(o objstore.Op) bool {
					if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/log/") && o.Err == nil {
						otherCommitted.Store(true)
					}
					return false
				})
				ob.SetFault(func(o objstore.Op) error {
					if otherCommitted.Load() {
						return objstore.ErrInjected
					}
					return nil
				})
			}
			other := e.openOn(t, ob)
			fb := e.faults(t)
			d := e.openOn(t, fb)
			onceAfterCommitPoint(fb, func(o objstore.Op) bool { return o.Method == "PUT" && strings.HasPrefix(o.Key, "index/run/") }, func() {
				err := other.Delete(ctx, store.Tombstone{ID: second, Deleted: time.Now().UTC(), At: logs[second].Checkpoint})
				if (err != nil) != cutShort {
					t.Errorf("the other deletion: %v", err)
				}
			})
			if err := d.Delete(ctx, store.Tombstone{ID: first, Deleted: time.Now().UTC(), At: logs[first].Checkpoint}); err != nil {
				t.Fatal(err)
			}
			ops := fb.Take()
			pages := 0
			for _, o := range ops {
				if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/run/") {
					pages++
				}
			}
			// The page written ahead, and the purge's after the burial:
			// of the other's page where the other purged first (the
			// commit found the page it replaces retired, and named
			// neither: had it named the page written ahead beside the
			// other's, that one would need a page of its own too), of the
			// page written ahead where the other was cut short (it holds
			// the other's session).
			if want := 2; pages != want {
				t.Errorf("the deletion wrote %d run pages, want %d: %s", pages, want, describeOps(ops))
			}
			if !cutShort {
				if hits := e.scanFor(t, "doomed-first", "doomed-second"); len(hits) > 0 {
					t.Errorf("stored objects still hold the deleted sessions' text: %v: %s", hits, describeOps(ops))
				}
			}
			_, c := e.newestCommit(t)
			named := map[string]bool{}
			for _, p := range c.Runs {
				named[p.Key] = true
			}
			// The page the other wrote ahead, cut short, is left for
			// repair, which deletes the pages no commit names a day later
			// (as it does those of any write of pages cut short).
			for _, o := range ob.Take() {
				if o.Method == "PUT" && strings.HasPrefix(o.Key, "index/run/") {
					named[o.Key] = true
				}
			}
			for _, k := range e.runObjects(t) {
				if !named[k] {
					t.Errorf("run page %s is named by no commit: %s", k, describeOps(ops))
				}
			}
			for _, p := range c.Runs {
				doc := e.runPage(t, p.Key)
				for _, id := range []string{first, second} {
					if _, ok := doc.Sessions[id]; ok {
						t.Errorf("run page %s, named by the newest commit, holds deleted session %s", p.Key, id)
					}
				}
			}
			if left := mustLogs(t, e.open(t)); len(left) != 4 {
				t.Errorf("%d sessions listed, want the 4 kept", len(left))
			}
		})
	}
}

// TestDeletionFailedBeforeItsCommit: a deletion that fails after the
// commit point and before its commit (here the DeleteObjects of the
// session's objects) leaves no run page it wrote ahead for that commit:
// no commit names them. The next deletion finishes it.
func TestDeletionFailedBeforeItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMemEnv(t)
	w := e.open(t)
	doomed := appendNew(t, w, "doomed-failed")
	for i := range 3 {
		appendNew(t, w, fmt.Sprint("kept ", i))
	}
	logs := mustLogs(t, w)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	runsBefore := e.runObjects(t)
	if len(runsBefore) == 0 {
		t.Fatal("no run page to purge")
	}
	fb := e.faults(t)
	d := e.openOn(t, fb)
	fb.SetFault(func(o objstore.Op) error {
		if o.Method == "DELETES" && slices.ContainsFunc(o.Keys, func(k string) bool { return strings.HasPrefix(k, "sessions/") }) {
			return objstore.ErrInjected
		}
		return nil
	})
	tomb := store.Tombstone{ID: doomed, Deleted: time.Now().UTC(), At: logs[doomed].Checkpoint}
	if err := d.Delete(ctx, tomb); err == nil {
		t.Fatal("the deletion went through its failed DeleteObjects")
	}
	ops := fb.Take()
	if !slices.ContainsFunc(ops, func(o objstore.Op) bool { return o.Method == "PUT" && strings.HasPrefix(o.Key, "index/run/") }) {
		t.Fatalf("the deletion wrote no run page ahead: %s", describeOps(ops))
	}
	if got := e.runObjects(t); !slices.Equal(got, runsBefore) {
		t.Errorf("run pages %v, want those before the deletion %v: %s", got, runsBefore, describeOps(ops))
	}
	fb.SetFault(nil)
	if err := d.Delete(ctx, tomb); err != nil {
		t.Fatal(err)
	}
	if hits := e.scanFor(t, "doomed-failed"); len(hits) > 0 {
		t.Errorf("stored objects still hold the deleted session's text: %v", hits)
	}
	if left := mustLogs(t, e.open(t)); len(left) != 3 {
		t.Errorf("%d sessions listed, want the 3 kept", len(left))
	}
}

// TestStaleAppenderAfterDeletion: a writer whose view of a session is a
// few seconds old (another writer appended since) appends after the
// session was deleted. Its position held the other writer's segment,
// which the deletion took away: the append must fail as deleted, not
// land in the deleted session's prefix (where no listing finds it and
// nothing deletes it), and the other writer's text must stay gone.
// In an encrypted prefix too: the tombstones put in the segments' place
// are sealed as seg/0's is.
func TestStaleAppenderAfterDeletion(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) { t.Parallel(); staleAppenderAfterDeletion(t, true) })
	t.Run("encrypted", func(t *testing.T) { t.Parallel(); staleAppenderAfterDeletion(t, false, objstore.WithKey(newKey(t))) })
}

// staleAppenderAfterDeletion is the test in a prefix opened with opts;
// plain, it also looks for the texts in every object.
func staleAppenderAfterDeletion(t *testing.T, plain bool, opts ...objstore.Option) {
	ctx := context.Background()
	e := newMemEnv(t)
	stale, other := e.open(t, opts...), e.open(t, opts...)
	id := agent.NewSessionID()
	if err := stale.AppendMessages(ctx, id, []agent.PersistentMessage{user("the first turn")}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Load(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := other.AppendMessages(ctx, id, []agent.PersistentMessage{user(secretTexts[0])}); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deleteAll(t, other, id)

	err := stale.AppendMessages(ctx, id, []agent.PersistentMessage{user(secretTexts[1])})
	if !errors.Is(err, agent.ErrSessionDeleted) {
		t.Errorf("the stale writer's append after the deletion: %v, want ErrSessionDeleted", err)
	}
	if !plain {
		return
	}
	if hits := e.scanFor(t, secretTexts...); len(hits) > 0 {
		t.Errorf("these objects hold the deleted session's text or the append made after it: %v", hits)
	}
}

// TestDeletionFences: a deletion leaves in the session's prefix its two
// tombstones (seg/0 and the commit point) and, in place of each segment
// written in the last compactGrace, a tombstone as well; the segments of
// a session last written before that are deleted.
func TestDeletionFences(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		grace  time.Duration
		fences int
	}{{"written a moment ago", time.Hour, 3}, {"written more than the grace ago", time.Millisecond, 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			s := e.open(t, objstore.WithCompactGrace(c.grace))
			id := agent.NewSessionID()
			for i := range 4 {
				if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("turn ", i))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			deleteAll(t, s, id)
			var left []string
			for _, o := range e.readBucket(t) {
				if strings.Contains(o.key, "/sessions/"+id+"/") {
					left = append(left, o.key)
					if !bytes.Contains(o.data, []byte(`"deleted"`)) {
						t.Errorf("%s is left and is not a tombstone: %q", o.key, o.data)
					}
				}
			}
			if want := 2 + c.fences; len(left) != want {
				t.Errorf("the deletion left %d objects, want %d: %v", len(left), want, left)
			}
		})
	}
}
