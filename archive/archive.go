// Package archive treats a store's sessions as an archive: it searches
// their messages, sums the tokens they cost per model, and forks a
// session into a new one. It speaks only the store vocabulary of package
// store (Logs, ReadLog, AppendLog), so each operation is the same on a
// directory and on a bucket, and it reads the logs' bytes, so what it
// finds is what sync copies.
//
// Reading a whole catalog is the cost of search and usage, so sessions are
// read several at once (Options.Parallel): on a directory that keeps both
// cores busy, on a bucket it keeps several sessions' segment fetches in
// flight (ReadLog itself fetches a session's segments ahead of the
// reader). Results come back in the order of the listing, newest session
// first, whatever order the reads finish in (the reads run a few times
// Parallel sessions ahead at most, and a result is let go once handed
// on), and Stats says how much was read.
package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// Options tune a read of many sessions.
type Options struct {
	// Parallel is how many sessions are read at once (default 8).
	Parallel int
	// Progress, when set, is told after each session is handed on (or
	// skipped), in order, how many of the sessions to read are: for a
	// terminal's progress bar. It is called from the caller's goroutine,
	// as the results are.
	Progress func(read, total int)
}

func (o Options) parallel() int {
	if o.Parallel <= 0 {
		return 8
	}
	return o.Parallel
}

// Stats says what a read of many sessions cost.
type Stats struct {
	// Sessions is the number of sessions read, Bytes their bytes (the raw
	// log, as ReadLog returns it: a bucket's compressed segments are
	// smaller).
	Sessions int
	Bytes    int64
	// Skipped are the sessions that could not be read (a malformed log, a
	// session removed since it was listed), each error naming its session;
	// the others were read.
	Skipped []error
	Elapsed time.Duration
}

// errStop ends a read of many sessions early, without an error.
var errStop = errors.New("stop")

// eachLog reads the logs of sessions, at most parallel at once, and hands
// each one's result to emit in the order of sessions. read gets the
// session's committed bytes; a read that fails is skipped (Stats.Skipped)
// unless ctx ended. emit returning errStop ends the read early.
func eachLog[T any](ctx context.Context, st store.LogStore, sessions []agent.SessionInfo, o Options,
	read func(ctx context.Context, info agent.SessionInfo, r io.Reader) (T, error),
	emit func(info agent.SessionInfo, v T) error) (Stats, error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	slots, gctx, handed, wait := startReads(ctx, st, sessions, o.parallel(), read)
	defer func() {
		// An early end stops the reads in flight and the launcher.
		cancel()
		wait()
	}()
	return emitInOrder(ctx, gctx, start, sessions, slots, handed, o.Progress, emit)
}

// aheadPerRead is how many sessions, per read at once, the reads may run
// ahead of the session handed on: a session slow to read (a large one,
// first in the order) does not let the others read the rest of the
// archive meanwhile and hold every result until it is done.
const aheadPerRead = 4

// logSlot is where the read of one session leaves its result.
type logSlot[T any] struct {
	v     T
	bytes int64
	err   error
	done  chan struct{} // closed when the read is done
}

// startReads starts reading sessions through read, at most parallel at
// once, each into its slot, and at most aheadPerRead×parallel sessions
// past the last one handed on (handed says one more was). The reads stop
// when ctx or the returned context ends; wait waits for the launcher and
// the reads to finish.
func startReads[T any](ctx context.Context, st store.LogStore, sessions []agent.SessionInfo, parallel int,
	read func(ctx context.Context, info agent.SessionInfo, r io.Reader) (T, error)) (slots []logSlot[T], gctx context.Context, handed, wait func()) {
	slots = make([]logSlot[T], len(sessions))
	for i := range slots {
		slots[i].done = make(chan struct{})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	ahead := make(chan struct{}, aheadPerRead*parallel)
	launched := make(chan struct{})
	go func() {
		defer close(launched)
		// In order, so that the emitter never waits for a session behind
		// one that is not started.
		for i := range sessions {
			select {
			case ahead <- struct{}{}:
			case <-gctx.Done():
				return
			}
			g.Go(func() error {
				defer close(slots[i].done)
				slots[i].v, slots[i].bytes, slots[i].err = readOne(gctx, st, sessions[i], read)
				return nil // a session's error is its slot's
			})
		}
	}()
	// The launcher must be done calling Go before Wait.
	return slots, gctx, func() { <-ahead }, func() { <-launched; _ = g.Wait() }
}

// emitInOrder hands each slot's result to emit in the order of sessions,
// as the reads finish, counting them in the Stats of a run that began at
// start, telling the launcher (handed) and progress (when set) of each.
// A read that failed is skipped unless ctx ended; emit returning errStop
// ends the run early.
func emitInOrder[T any](ctx, gctx context.Context, start time.Time, sessions []agent.SessionInfo, slots []logSlot[T],
	handed func(), progress func(read, total int), emit func(info agent.SessionInfo, v T) error) (Stats, error) {
	var stats Stats
	for i := range slots {
		if progress != nil && i > 0 {
			progress(i, len(slots))
		}
		select {
		case <-slots[i].done:
		case <-gctx.Done():
			stats.Elapsed = time.Since(start)
			return stats, ctx.Err()
		}
		handed() // the launcher took its place before it started the read
		s := &slots[i]
		stats.Bytes += s.bytes
		if s.err != nil {
			if err := ctx.Err(); err != nil {
				return stats, err
			}
			stats.Skipped = append(stats.Skipped, s.err)
			continue
		}
		stats.Sessions++
		v := s.v
		// Handed on, the result is the caller's: the slot lets it go, or
		// a search of a common word held every match (and the message
		// text each one's snippet is cut from) until the last session.
		var zero T
		s.v = zero
		if err := emit(sessions[i], v); err != nil {
			stats.Elapsed = time.Since(start)
			if errors.Is(err, errStop) {
				return stats, nil
			}
			return stats, err
		}
	}
	if progress != nil && len(slots) > 0 {
		progress(len(slots), len(slots))
	}
	stats.Elapsed = time.Since(start)
	return stats, nil
}

// readOne reads one session's log through read, counting its bytes.
func readOne[T any](ctx context.Context, st store.LogStore, info agent.SessionInfo, read func(context.Context, agent.SessionInfo, io.Reader) (T, error)) (T, int64, error) {
	var zero T
	rc, _, err := st.ReadLog(ctx, info.ID, 0)
	if err != nil {
		return zero, 0, fmt.Errorf("session %s: %w", info.ID, err)
	}
	defer rc.Close()
	cr := &countingReader{r: rc}
	v, err := read(ctx, info, cr)
	if err != nil {
		return zero, cr.n, fmt.Errorf("session %s: %w", info.ID, err)
	}
	return v, cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// listed returns the sessions of st, newest first, that pass keep, and
// as errors the listing's broken sessions and, when the listing is
// incomplete (agent.ErrIncompleteList), why.
func listed(ctx context.Context, st store.LogStore, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, []error, error) {
	logs, err := st.Logs(ctx)
	var broken []error
	switch {
	case errors.Is(err, agent.ErrIncompleteList):
		broken = append(broken, err) // the rest is read
	case err != nil:
		return nil, nil, err
	}
	var out []agent.SessionInfo
	for _, l := range logs {
		switch {
		case l.Err != nil:
			broken = append(broken, fmt.Errorf("session %s: %w", l.Info.ID, l.Err))
		case keep == nil || keep(l.Info):
			out = append(out, l.Info)
		}
	}
	// Logs promises no order (a bucket's comes from its index shards).
	slices.SortFunc(out, func(a, b agent.SessionInfo) int {
		if c := b.Modified.Compare(a.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, broken, nil
}
