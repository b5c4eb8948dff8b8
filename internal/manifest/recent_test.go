package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
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
