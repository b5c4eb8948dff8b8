// Package gcpace paces the garbage collector of a command that moves far
// more bytes than it holds: a sync of a 1 GB session (panto-sync), a show
// or a search of one (panto). Left to its default (GOGC=100), the
// collector lets the heap grow to twice what is live before it runs: with
// much live (a bucket's catalog) that doubles the peak, and with little
// (a session streamed a message at a time) it runs every few megabytes,
// which made panto show of a 300 MB session spend 4 s of its 13 in the
// collector. Govern sets the soft memory limit at what is live plus a
// headroom instead, measured again after every collection.
package gcpace

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Govern keeps the soft memory limit (debug.SetMemoryLimit) at what is
// live plus headroom, set again after every collection (when what is
// live is measured) until ctx ends; an idle process is not woken for it.
// With onlyAtLimit, the collector runs only at that limit (GOGC off), for
// a command whose live heap is small beside what it allocates; else it
// also runs as GOGC says, the limit bounding the peak. A fixed limit
// fails the other way: once what is live passes it the collector runs
// without pause (a no-op pull of 100,000 sessions, whose catalog is about
// 250 MB live, took 7 s, 38% of its CPU in the collector).
//
// The user's GOMEMLIMIT, or with onlyAtLimit GOGC, is left as set: it
// is the user's tuning. The returned func puts the collector back as it
// was (and stops following what is live), for a caller that governs one
// command of a longer process.
func Govern(ctx context.Context, headroom uint64, onlyAtLimit bool) (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" || onlyAtLimit && os.Getenv("GOGC") != "" {
		return func() {}
	}
	ctx, stop := context.WithCancel(ctx)
	limit, percent := debug.SetMemoryLimit(-1), -2
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() {
		metrics.Read(sample)
		live := uint64(0)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		debug.SetMemoryLimit(int64(live + headroom)) // live is 0 before the first collection
	}
	set()
	if onlyAtLimit {
		percent = debug.SetGCPercent(-1)
	}
	afterEachGC(ctx, set)
	return func() {
		stop()
		debug.SetMemoryLimit(limit)
		if percent != -2 {
			debug.SetGCPercent(percent)
		}
	}
}

// afterEachGC calls fn after every garbage collection until ctx ends: an
// object nothing refers to is finalized after the cycle that finds it
// unreachable, and its finalizer arms the next one.
func afterEachGC(ctx context.Context, fn func()) {
	type sentinel struct{ _ *byte } // a pointer: not a tiny allocation, which could outlive the cycle
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
			if ctx.Err() != nil {
				return
			}
			fn()
			arm()
		})
	}
	arm()
}
