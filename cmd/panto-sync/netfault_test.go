package main

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/faultnet"
)

// TestSyncFaultsOnTheWire runs push, pull and copy through a proxy that
// resets, stalls and delays connections: each run succeeds or fails with
// one-line errors, and once the wire is clean again, one more run of each
// converges: every session byte for byte, nothing lost, nothing twice,
// and the bucket's index whole.
func TestSyncFaultsOnTheWire(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	e := newEnv(t)
	px := faultnet.New(t, e.srv.Endpoint())
	faults := []faultnet.Fault{
		{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}, Toxicity: 0.9},
		{Type: "reset_peer", Attributes: map[string]int64{"timeout": 5}, Toxicity: 0.6},
		{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}, Stream: "upstream", Toxicity: 0.6},
		{Type: "timeout", Attributes: map[string]int64{"timeout": 100}, Toxicity: 0.6},
		{Type: "latency", Attributes: map[string]int64{"latency": 200, "jitter": 200}},
	}
	dir, _ := catalog(t, 16)
	other := "s3://" + e.srv.NewBucket(t) + "/copy"
	into := filepath.Join(t.TempDir(), "pulled")
	runs := [][]string{
		{"push", "--dir", dir, e.url},
		{"pull", "--dir", into, e.url},
		{"copy", e.url, other},
	}
	failed := 0
	for round := range 6 {
		f := faults[rng.IntN(len(faults))]
		if round == 0 {
			f = faults[0] // most answers lost: some run fails, whatever the draw
		}
		if _, err := px.Add(f); err != nil {
			t.Fatal(err)
		}
		// Sessions grow between rounds, so that faults meet tails too.
		for _, name := range readCatalogIDs(t, dir)[:2] {
			appendBatch(t, dir, name, false)
		}
		for _, args := range runs {
			args = append([]string{args[0], "--endpoint", px.URL(), "--stall-timeout", "1s", "--json"}, args[1:]...)
			r := e.run(t, args...)
			if r.code != 0 && r.code != 1 {
				t.Fatalf("round %d (%s): %s exited %d\n%s\n%s", round, f.Type, args[0], r.code, r.stdout, r.stderr)
			}
			for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if line != "" && !strings.HasPrefix(line, "panto-sync: ") {
					t.Errorf("round %d (%s): %s wrote a line that is not one error: %q", round, f.Type, args[0], line)
				}
			}
			if r.code == 1 {
				failed++
				if r.stdout != "" {
					events(t, r.stdout) // still one JSON object per event, and a summary
				}
			}
		}
		px.Clear()
	}
	t.Logf("%d of %d runs failed under the faults", failed, 6*len(runs))
	// A clean wire: each converges in one more run.
	for _, args := range runs {
		e.must(t, 0, append([]string{args[0], "--endpoint", px.URL()}, args[1:]...)...)
	}
	e.must(t, 0, "verify", e.url)
	e.must(t, 0, "verify", other)
	sameCatalog(t, dir, into)
	back := t.TempDir()
	e.must(t, 0, "pull", "--dir", back, other)
	sameCatalog(t, dir, back)
}
