// Command gencatalog writes a realistic panto session catalog for the
// sync benchmark: session files in the real line format (the
// internal/sessionlog codec), with varied prose, code, tool calls and
// tool results, sized like real sessions (a few KB to a few MB).
//
//	go run ./bench/gencatalog -dir DIR -sessions 1000 -mb 200
//	go run ./bench/gencatalog -dir DIR -append 0.1   # one more message in 10% of the sessions
//
// Output is deterministic for a given -seed.
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/panto-dev/panto/internal/sessiongen"
)

func main() {
	dir := flag.String("dir", "", "catalog directory to write")
	sessions := flag.Int("sessions", 1000, "number of sessions")
	mb := flag.Float64("mb", 200, "approximate total size in MB")
	appendFrac := flag.Float64("append", 0, "instead of generating: append one user message to this fraction of the existing sessions")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *dir == "" {
		log.Fatal("gencatalog: pass -dir DIR")
	}
	g := sessiongen.New(*seed)
	if *appendFrac > 0 {
		n, bytes, err := g.AppendSome(*dir, *appendFrac)
		if err != nil {
			log.Fatalf("gencatalog: %v", err)
		}
		fmt.Printf("appended %d bytes to %d sessions\n", bytes, n)
		return
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatalf("gencatalog: %v", err)
	}
	// Session sizes: log-normal, scaled to the total.
	sizes := make([]float64, *sessions)
	var sum float64
	for i := range sizes {
		sizes[i] = math.Exp(g.Rand().NormFloat64() * 1.0)
		sum += sizes[i]
	}
	total := *mb * 1e6
	var written int64
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	for i, s := range sizes {
		target := int(s / sum * total)
		id := fmt.Sprintf("%016x%016x", g.Rand().Uint64(), g.Rand().Uint64()) // random like agent.NewSessionID, but seeded
		at := start.Add(time.Duration(i) * 7 * time.Minute)
		data, err := g.Session(id, target, at)
		if err != nil {
			log.Fatalf("gencatalog: %v", err)
		}
		if err := os.WriteFile(filepath.Join(*dir, id+".jsonl"), data, 0o644); err != nil {
			log.Fatalf("gencatalog: %v", err)
		}
		written += int64(len(data))
	}
	fmt.Printf("wrote %d sessions, %d bytes\n", *sessions, written)
}
