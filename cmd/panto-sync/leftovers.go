package main

import (
	"context"
	"fmt"
	"os"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

// sendLeftovers sends the bucket of dst (open as to) what panto's
// local-first replica of it holds and the bucket lacks: what a panto run
// kept on this machine when it exited before the bucket took it
// (localfirst.SendLeftovers). Each session sent is reported as the copy's
// are; a failure is said in one line on stderr and leaves them for the
// next run (the command goes on: it is not what it was asked for). It
// returns how many sessions it sent, one more when some are left.
func sendLeftovers(ctx context.Context, o *options, dst end, to store.LogStore, rep *reporter) (int, error) {
	dir, err := backends.ReplicaDir(dst.spec, dst.endpoint)
	if err != nil {
		return 0, nil // no data directory: no replica either
	}
	sent, err := localfirst.SendLeftovers(ctx, to, localfirst.LeftoverOptions{
		Dir: dir, Name: dst.spec, Unreachable: objstore.IsUnreachable,
		Notify: func(msg string) { fmt.Fprintf(o.Stderr, "panto-sync: %s\n", msg) },
		Report: func(e replica.Event) {
			switch e.Kind {
			case replica.Unchanged, replica.Skipped:
				return
			}
			e.Note = joinNote(e.Note, "kept by panto on this machine ("+dir+")")
			rep.event(e)
		},
	})
	if err != nil {
		fmt.Fprintf(o.Stderr, "panto-sync: warning: %s\n", oneLine(err.Error()))
		sent++ // some are left: the bucket may be changing under this run
	}
	return sent, err
}

// sayKept says on stderr, in one line, what panto's local-first replica
// of the bucket url at endpoint holds and the bucket was not seen to
// (localfirst.Kept): what push without --dir sends first, which status
// and push --dry-run did not show. It returns what it said is kept ("2
// messages"), "" when nothing is.
func sayKept(ctx context.Context, o *options, url, endpoint string) string {
	dir, err := backends.ReplicaDir(url, endpoint)
	if err != nil {
		return "" // no data directory: no replica either
	}
	kept, err := localfirst.Kept(ctx, dir)
	switch {
	case err != nil:
		fmt.Fprintf(o.Stderr, "panto-sync: warning: %s\n", oneLine(err.Error()))
	case kept != "":
		fmt.Fprintf(o.Stderr, "panto-sync: %s kept on this machine by panto (%s), not yet sent to %s: push sends them\n", kept, dir, url)
	}
	return kept
}

// hasReplica reports whether panto keeps a local-first replica of the
// bucket store url at endpoint on this machine.
func hasReplica(url, endpoint string) bool {
	dir, err := backends.ReplicaDir(url, endpoint)
	return err == nil && exists(dir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
