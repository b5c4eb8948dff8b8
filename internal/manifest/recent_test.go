package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
)

// TestDeltaRecent: a recent view grown from a base by the changes of the
// commits after it (sessions appended to, sessions added, the oldest
// trimmed) is stored as what differs from the base's, and WithBase makes
// it whole again, exactly.
func TestDeltaRecent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	entry := func(id string, n int) IndexEntry {
		return IndexEntry{Length: int64(100 * n), SHA256: fmt.Sprintf("%064x", n),
			Info: agent.SessionInfo{ID: id, Modified: t0.Add(time.Duration(n) * time.Second), MessageCount: n}}
	}
	for round := range 200 {
		recent := map[string]IndexEntry{}
		clock := 0
		ids := []string{}
		for range rng.IntN(90) {
			clock++
			id := fmt.Sprintf("%032x", rng.Uint64())
			ids = append(ids, id)
			recent[id] = entry(id, clock)
		}
		TrimRecent(recent)
		base := &IndexShard{Shard: LogName, Through: 16, Recent: maps.Clone(recent)}
		for n := int64(17); n < 32; n++ {
			for range rng.IntN(4) + 1 {
				clock++
				var id string
				if len(ids) > 0 && rng.IntN(2) == 0 {
					id = ids[rng.IntN(len(ids))] // an append to a session seen before
				} else {
					id = fmt.Sprintf("%032x", rng.Uint64())
					ids = append(ids, id)
				}
				if old, ok := recent[id]; !ok || old.Length <= entry(id, clock).Length {
					recent[id] = entry(id, clock)
				}
			}
			TrimRecent(recent)
			delta, ok := DeltaRecent(recent, base.Recent)
			if !ok {
				t.Fatalf("round %d, commit %d: the delta does not give the view back", round, n)
			}
			if len(delta) > len(recent) {
				t.Fatalf("round %d: a delta of %d entries for a view of %d", round, len(delta), len(recent))
			}
			c := &IndexShard{Shard: LogName, Through: n, Base: base.Through, Recent: delta}
			if err := c.WithBase(base); err != nil || !maps.Equal(c.Recent, recent) {
				t.Fatalf("round %d, commit %d: made whole %v: %d entries, want %d", round, n, err, len(c.Recent), len(recent))
			}
		}
	}
	c := &IndexShard{Shard: LogName, Through: 20, Base: 16}
	if err := c.WithBase(&IndexShard{Shard: LogName, Through: 8}); err == nil {
		t.Error("a commit was made whole from another base than its own")
	}
}

// TestRecentWhere: an entry of a recent view carries where its segments
// are (Resume.Where) and nothing of the append state: it encodes without
// hash_state, lines or format, decodes with its tail, and is not
// Resumable, so no append resumes from it.
func TestRecentWhere(t *testing.T) {
	codec, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	id := "0123abcd0123abcd0123abcd0123abcd"
	whole := Resume{HashState: "state", Lines: 5, Format: 1, SummaryVersion: SummaryVersion, Segments: 3, Stored: 1, Tail: "300,610"}
	e := IndexEntry{Info: agent.SessionInfo{ID: id}, Length: 650, SHA256: fmt.Sprintf("%064x", 7), Resume: whole.Where()}
	if e.Resume != (Resume{Segments: 3, Stored: 1, Tail: "300,610"}) {
		t.Fatalf("Where: %+v", e.Resume)
	}
	c := &IndexShard{Shard: LogName, Through: 1, Sessions: map[string]IndexEntry{}, Recent: map[string]IndexEntry{id: e}}
	data, err := codec.EncodeIndexShard("index/log/1", c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := codec.DecodeIndexShard("index/log/1", data)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Recent[id]
	if got.Resume != e.Resume || got.Resumable() {
		t.Fatalf("read back %+v (resumable %v), want %+v", got.Resume, got.Resumable(), e.Resume)
	}
	w, err := json.Marshal(entryToWire(e))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(w), `"resume":{"segments":3,"stored":1,"tail":[300,610]}`) {
		t.Fatalf("encoded %s", w)
	}
}

// TestDeltaRuns: run pages that commits add and retire after a base are
// stored as what differs from the base's (the pages added, the keys
// gone), and WithBase gives the list back exactly, in its order; a
// delta no smaller than the list is refused, and so is one that would
// not give the list back.
func TestDeltaRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	page := func(n int) RunPage {
		return RunPage{Key: fmt.Sprintf("index/run/%016x-%03d.json.zst", n/8, n%8), First: "00", Last: "ff", Sessions: 1 + n%128, Commit: int64(1 + n/8)}
	}
	next := 0
	var runs []RunPage
	for range 40 {
		runs, next = append(runs, page(next)), next+1
	}
	base := &IndexShard{Shard: LogName, Through: 32, Runs: slices.Clone(runs)}
	for n := int64(33); n < 48; n++ {
		for range rng.IntN(3) {
			if len(runs) > 0 {
				i := rng.IntN(len(runs))
				runs = slices.Delete(runs, i, i+1) // retired
			}
		}
		for range rng.IntN(3) + 1 {
			runs, next = append(runs, page(next)), next+1
		}
		added, gone, ok := DeltaRuns(runs, base.Runs)
		if !ok {
			t.Fatalf("commit %d: the delta of %d pages does not give the list back", n, len(runs))
		}
		c := &IndexShard{Shard: LogName, Through: n, Base: base.Through, Runs: added, RunsDelta: true, RunsGone: gone}
		codec, _ := NewCodec()
		data, err := codec.EncodeIndexShard("index/log/x.json.zst", c)
		if err != nil {
			t.Fatal(err)
		}
		c, err = codec.DecodeIndexShard("index/log/x.json.zst", data)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WithBase(base); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Runs, runs) || c.RunsDelta || c.RunsGone != nil {
			t.Fatalf("commit %d: WithBase gave %d pages back, want %d", n, len(c.Runs), len(runs))
		}
	}
	if _, _, ok := DeltaRuns(runs[:1], base.Runs); ok {
		t.Fatal("a delta bigger than the list it stands for accepted")
	}
	swapped := slices.Clone(base.Runs)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	if _, _, ok := DeltaRuns(swapped, base.Runs); ok {
		t.Fatal("a delta that reorders the base's pages accepted")
	}
	bad := &IndexShard{Shard: LogName, Through: 50, RunsDelta: true, RunsGone: []string{page(1).Key}}
	if err := bad.validate(); err == nil {
		t.Fatal("run pages stored against no base accepted")
	}
}
