package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// heapHeadroom is how far past what is live the heap may grow before the
// collector works harder (debug.SetMemoryLimit): what a sync holds for
// its transfers at once (8 MiB chunks, 64 MiB in all; a bucket reader's
// read-ahead), with room to spare. Left to its default, the collector lets
// the heap double past what is live, which for a 1 GB session's transfer
// made the peak twice what it needed.
const heapHeadroom = 192 << 20

// governHeap keeps the soft memory limit at what is live plus headroom,
// set again after every collection (when what is live is measured) until
// ctx ends; an idle process is not woken for it. A fixed limit fails the
// other way: the bucket's catalog and the local index are live for the
// whole run (about 250 MB at 100,000 sessions), and once what is live
// passes a fixed limit the collector runs without pause, up to half the
// CPU (a no-op pull of 100,000 sessions took 7 s, 38% of its CPU in the
// collector).
func governHeap(ctx context.Context, headroom uint64) {
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
	afterEachGC(ctx, set)
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
