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

	"github.com/panto-dev/panto/internal/testkit/sessiongen"
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
	written, err := g.Catalog(*dir, *sessions, *mb*1e6)
	if err != nil {
		log.Fatalf("gencatalog: %v", err)
	}
	fmt.Printf("wrote %d sessions, %d bytes\n", *sessions, written)
}
