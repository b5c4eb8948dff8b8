package objstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/faultnet"
	"github.com/panto-dev/panto/store/objstore"
)

// netFaults are the faults of the wire tests: connections reset while
// data flows, connections that stall until the client gives up, and
// latency spikes.
var netFaults = []faultnet.Fault{
	// The answer is lost after the server acted on the request.
	{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}},
	{Type: "reset_peer", Attributes: map[string]int64{"timeout": 5}, Toxicity: 0.5},
	// The request is cut before the server has it all.
	{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}, Stream: "upstream", Toxicity: 0.5},
	{Type: "timeout", Attributes: map[string]int64{"timeout": 100}, Toxicity: 0.7},
	{Type: "latency", Attributes: map[string]int64{"latency": 150, "jitter": 150}},
	{Type: "slicer", Attributes: map[string]int64{"average_size": 64, "size_variation": 32, "delay": 1000}},
}

// TestAppendFaultsOnTheWire appends through a proxy that resets, stalls and
// delays connections: every append either succeeds or fails with one
// line, and afterwards the session holds every acknowledged batch exactly
// once, in order, and any other batch at most once, whole.
func TestAppendFaultsOnTheWire(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	e := newEnv(t)
	px := faultnet.New(t, e.srv.Endpoint())
	s := e.open(t, objstore.WithEndpoint(px.URL()), objstore.WithIdleTimeout(500*time.Millisecond), objstore.WithMaxAttempts(3), objstore.WithManifestInterval(2), objstore.WithCompactThreshold(4))
	id := agent.NewSessionID()
	// A first append on a clean wire, so that the faults meet appends that
	// go straight to their segment PUT.
	acked := []string{"start"}
	tried := map[string]bool{"start": true}
	if err := s.AppendMessages(context.Background(), id, []agent.PersistentMessage{user("start"), msg(agent.RoleAssistant, "start answer")}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for round := range 8 {
		// Round 0 loses every answer: the path where a write landed and
		// its answer did not is always taken.
		f := netFaults[0]
		if round > 0 {
			f = netFaults[rng.IntN(len(netFaults))]
		}
		if _, err := px.Add(f); err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			text := fmt.Sprintf("round %d batch %d", round, k)
			tried[text] = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(text), msg(agent.RoleAssistant, text+" answer")})
			cancel()
			switch {
			case err == nil:
				acked = append(acked, text)
			case strings.Contains(err.Error(), "\n"):
				t.Errorf("round %d (%s): an error of more than one line: %q", round, f.Type, err)
			default:
				if failed == 0 {
					t.Logf("round %d (%s): %v", round, f.Type, err)
				}
				failed++
			}
		}
		px.Clear()
	}
	_ = s.Flush(context.Background())
	t.Logf("%d of %d appends acknowledged, %d failed", len(acked), len(tried), failed)
	if failed == 0 {
		t.Fatal("no append failed: the faults did not reach the store")
	}

	clean := e.open(t)
	conv, err := clean.Load(context.Background(), id)
	if err != nil {
		if len(acked) == 0 {
			return
		}
		t.Fatalf("load after the faults: %v", err)
	}
	seen := map[string]int{}
	var order []string
	for i := 0; i < len(conv.Messages); i += 2 {
		text := conv.Messages[i].Text()
		if !tried[text] || i+1 >= len(conv.Messages) || conv.Messages[i+1].Text() != text+" answer" {
			t.Fatalf("message %d %q is not the first of a whole batch of the test", i, text)
		}
		seen[text]++
		order = append(order, text)
	}
	for text, n := range seen {
		if n > 1 {
			t.Errorf("%q stored %d times", text, n)
		}
	}
	k := 0
	for _, text := range order {
		if k < len(acked) && text == acked[k] {
			k++
		}
	}
	if k != len(acked) {
		t.Errorf("the acknowledged batches are not all there in order: %d of %d found", k, len(acked))
	}
	// And the index converges: the next append through a clean wire
	// brings it up to date.
	if err := clean.AppendMessages(context.Background(), id, []agent.PersistentMessage{user("after")}); err != nil {
		t.Fatal(err)
	}
	if err := clean.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs, err := sessionsOf(context.Background(), e.open(t))
	if err != nil || logs[id].Info.MessageCount != len(conv.Messages)+1 {
		t.Errorf("index after the faults: %v %+v, want %d messages", err, logs[id], len(conv.Messages)+1)
	}
}
