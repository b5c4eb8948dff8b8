//go:build pprof

package main

// Built with -tags pprof, panto-sync writes a CPU profile of the whole
// run to $PANTO_CPUPROFILE, the allocations of the whole run (go tool
// pprof -sample_index=alloc_space) to $PANTO_MEMPROFILE, and with
// PANTO_MEMSTATS set prints the run's allocations and garbage
// collections to stderr at exit: `go build -tags pprof ./cmd/panto-sync`.

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

func init() {
	stopCPU := func() {}
	if path := os.Getenv("PANTO_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			panic(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
		stopCPU = func() { pprof.StopCPUProfile(); f.Close() }
	}
	memstats := os.Getenv("PANTO_MEMSTATS") != ""
	memprofile := os.Getenv("PANTO_MEMPROFILE")
	if memprofile != "" {
		runtime.MemProfileRate = 64 << 10 // a sample per 64 KB, enough to rank
	}
	stopProfile = func() {
		stopCPU()
		if memprofile != "" {
			if f, err := os.Create(memprofile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}
		if memstats {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Fprintf(os.Stderr, "memstats: %d MB allocated in %d objects, %d GCs (%.1f%% of CPU), %d MB heap peak (sys)\n",
				m.TotalAlloc>>20, m.Mallocs, m.NumGC, 100*m.GCCPUFraction, m.HeapSys>>20)
		}
	}
}
