// Package fileaccess tells a test which files of a directory were opened
// or read, by anyone: the test process or a command it runs. The tests
// of "an unchanged file is not read" (the local catalog's summary cache,
// a no-op push) observe it here instead of making the file unreadable,
// which proves nothing as root (CI runs as root, and root reads a file
// of mode 000).
//
// On Linux it is inotify (IN_OPEN, IN_ACCESS) on the directory, which
// needs no privilege and sees every process; elsewhere Watch skips the
// test.
package fileaccess

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Watcher records the names of the files of one directory (not of its
// subdirectories) that were opened or read.
type Watcher struct {
	dir string
	mu  sync.Mutex
	// seen: names opened or read since the last Take; barrier: names of
	// Take's own files seen, overflow: events were lost.
	seen     map[string]bool
	barriers map[string]bool
	overflow bool
	changed  chan struct{}
}

// barrierTimeout bounds Take's wait for its own file's event: a bound
// against a hang, not a measurement.
const barrierTimeout = time.Minute

var barrierSeq atomic.Int64

// Take returns the names of the files opened or read since the last Take
// (or Watch), sorted, each once, and starts afresh. It first opens a file
// of its own in the directory and waits for that event: events come in
// order, so every access before the call has been recorded.
func (w *Watcher) Take(t testing.TB) []string {
	t.Helper()
	name := fmt.Sprintf(".fileaccess-barrier-%d", barrierSeq.Add(1))
	if err := touch(w.dir, name); err != nil {
		t.Fatalf("fileaccess: %v", err)
	}
	deadline := time.After(barrierTimeout)
	for {
		w.mu.Lock()
		done, overflow := w.barriers[name], w.overflow
		w.mu.Unlock()
		if overflow {
			t.Fatalf("fileaccess: events of %s were lost (inotify queue overflow)", w.dir)
		}
		if done {
			break
		}
		select {
		case <-w.changed:
		case <-deadline:
			t.Fatalf("fileaccess: no event for %s in %s within %s", name, w.dir, barrierTimeout)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.seen))
	for n := range w.seen {
		out = append(out, n)
	}
	slices.Sort(out)
	w.seen = map[string]bool{}
	delete(w.barriers, name)
	return out
}

// record notes an access to name ("" for the directory itself).
func (w *Watcher) record(name string, overflow bool) {
	w.mu.Lock()
	switch {
	case overflow:
		w.overflow = true
	case isBarrier(name):
		w.barriers[name] = true
	case name != "":
		w.seen[name] = true
	}
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func isBarrier(name string) bool {
	const p = ".fileaccess-barrier-"
	return len(name) > len(p) && name[:len(p)] == p
}
