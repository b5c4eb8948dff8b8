package gcpace

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestGovern: the soft memory limit follows what is live, headroom past
// it, so that a run whose catalog alone passes a fixed limit does not
// spend its CPU collecting (a limit below what is live makes the
// collector run without pause); with onlyAtLimit the collector runs at
// that limit alone (GOGC off).
func TestGovern(t *testing.T) {
	for _, onlyAtLimit := range []bool{false, true} {
		t.Run(fmt.Sprint("onlyAtLimit=", onlyAtLimit), func(t *testing.T) { testGovern(t, onlyAtLimit) })
	}
}

func testGovern(t *testing.T, onlyAtLimit bool) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	before := debug.SetMemoryLimit(-1)
	percent := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(before); debug.SetGCPercent(percent) })
	const headroom = 16 << 20
	live := make([][]byte, 64) // 64 MiB that stay live
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restore := Govern(ctx, headroom, onlyAtLimit)
	if got := debug.SetGCPercent(100); (got < 0) != onlyAtLimit {
		t.Errorf("GOGC is %d after Govern(onlyAtLimit %v)", got, onlyAtLimit)
	}
	if onlyAtLimit {
		debug.SetGCPercent(-1)
	}
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
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("the soft memory limit after restore is %d, want none", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after restore is %d, want 100", got)
	}
}
