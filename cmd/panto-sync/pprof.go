//go:build pprof

package main

// Built with -tags pprof, panto-sync writes a CPU profile of the whole
// run to $PANTO_CPUPROFILE: `go build -tags pprof ./cmd/panto-sync`.

import (
	"os"
	"runtime/pprof"
)

func init() {
	path := os.Getenv("PANTO_CPUPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
}
