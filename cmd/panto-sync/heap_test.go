package main

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestGovernHeap: the soft memory limit follows what is live, headroom
// past it, so that a run whose catalog alone passes a fixed limit does not
// spend its CPU collecting (a limit below what is live makes the
// collector run without pause).
func TestGovernHeap(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const headroom = 16 << 20
	live := make([][]byte, 64) // 64 MiB that stay live
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	governHeap(ctx, headroom)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		limit := debug.SetMemoryLimit(-1)
		if limit >= 64<<20+headroom && limit != math.MaxInt64 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the soft memory limit is %d MiB with 64 MiB live; want at least %d MiB", limit>>20, (64<<20+headroom)>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(live)
}
