package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
)

// end is one side of a push, pull or copy as the command line names it.
type end struct {
	spec     string
	endpoint string
	stall    time.Duration
	trace    *slog.Logger
	// keyFile is the bucket key's file of an s3:// side ("": none); a
	// directory ignores it.
	keyFile string
	// create: a missing directory is created (the destination of a pull
	// or copy); otherwise it is an error.
	create bool
	// leftovers: this bucket is first sent what panto's local-first
	// replica of it kept (push without --dir; leftovers.go).
	leftovers bool
	// reading: the command only reads this side (a sync's source, ls,
	// status, verify): a bucket's Open sends no conditional-write probe
	// (backends.Options.Reading).
	reading bool
}

// end is one side as the flags of o name it.
func (o *options) end(spec, endpoint string) end {
	return end{spec: spec, endpoint: endpoint, stall: o.Stall, trace: o.Trace, keyFile: o.KeyFile}
}

// open opens the store of e. Sync appends to many sessions and flushes
// once at the end (replica.Record), so a bucket is opened for bulk work:
// each index shard is written once.
func (e end) open(ctx context.Context, what string) (store.LogStore, error) {
	return e.openWith(ctx, what, true)
}

// openFresh is open for a long-running command (watch), whose listings
// must read the bucket each time: not the snapshot of Open.
func (e end) openFresh(ctx context.Context, what string) (store.LogStore, error) {
	return e.openWith(ctx, what, false)
}

func (e end) openWith(ctx context.Context, what string, snapshot bool) (store.LogStore, error) {
	spec, err := store.ParseSpec(e.spec)
	if err != nil {
		return nil, err
	}
	if spec.Kind == store.KindDir && !e.create {
		if fi, err := os.Stat(spec.Dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("no session catalog at %s: give the %s as a directory of <id>.jsonl files (--dir DIR for push)", spec.Dir, what)
		}
	}
	var key *seal.Key
	if spec.Kind == store.KindS3 && e.keyFile != "" {
		if key, err = seal.LoadKeyFile(e.keyFile); err != nil {
			return nil, fmt.Errorf("%w: give the file panto-sync keygen wrote (--key-file, PANTO_KEY_FILE)", err)
		}
	}
	s, err := backends.OpenLog(ctx, e.spec, backends.Options{Endpoint: e.endpoint, Bulk: true, StallTimeout: e.stall, Trace: e.trace, Snapshot: snapshot, Key: key, IndexCache: store.DefaultIndexCacheDir(), Reading: e.reading})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// closeStore closes s as a command that opened it ends (store.Close), so
// that what it left in the background is written. What could not be
// fails a command that had not failed, in one line. A push, pull or copy
// has flushed both stores already, in sync's record step (replica.Copy),
// which reports what it could not write; its Close folds what the
// flush committed unfolded (objstore).
func closeStore(ctx context.Context, s store.LogStore, ret *error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := store.Close(ctx, s); err != nil && *ret == nil {
		*ret = fmt.Errorf("close the store: %w", err)
	}
}

// runCopy runs a push, pull or copy from src to dst: replica.Copy, with
// the events printed as the command says them, and the exit code. When
// neither side changed since a run that found nothing to do, it says so
// without listing either (unchanged.go).
func runCopy(c *cli.Context, o *options, d direction, src, dst end) (ret error) {
	start := time.Now()
	src.reading = true
	from, err := src.open(c.Context, "source")
	if err != nil {
		return err
	}
	defer closeStore(c.Context, from, &ret)
	to, err := dst.open(c.Context, "destination")
	if err != nil {
		return err
	}
	// Closed, a bucket folds the few sessions this run committed
	// unfolded (at most 8, a small push's) into a run and their
	// projects' heads: left unfolded, the first agent's turn after
	// they are idle would fold them beside its own, a head of 11 KB for
	// each of their projects, past a turn's 32 KB (docs/DESIGN.md §P3).
	defer closeStore(c.Context, to, &ret)
	// The tokens name each side as opened, before this run writes.
	srcToken, dstToken, tokens := listingTokens(c.Context, from, to)
	record := noopRecordPath(o, d, src, dst)
	rep := newReporter(o, d)
	sent := 0
	switch {
	case dst.leftovers && !o.DryRun:
		sent, _ = sendLeftovers(c.Context, o, dst, to, rep)
	case dst.leftovers:
		sayKept(c.Context, o, dst.spec, dst.endpoint)
	}
	if tokens && record != "" && !o.DryRun && !c.Bool("full") && sent == 0 {
		if rec, ok := unchangedSince(record, srcToken, dstToken, time.Now()); ok {
			rep.unchanged(rec, time.Since(start))
			return nil
		}
	}
	// Either side's copy is judged against the other's tombstone by
	// where a sync of the two last saw them agree (agreed.go), not by
	// length alone.
	agreed := loadAgreements(agreementsPath(src, dst))
	sum, err := replica.Copy(c.Context, from, to, replica.Options{
		Concurrency: o.Concurrency,
		Select:      o.selected,
		DryRun:      o.DryRun,
		KeepBoth:    o.OnDiverge == divergeKeepBoth,
		SrcCovered:  agreed.covered,
		DstCovered:  agreed.covered,
		Planned:     rep.planned,
		Report: func(e replica.Event) {
			agreed.note(e)
			rep.event(e)
		},
	})
	agreed.save()
	if err != nil {
		return err
	}
	s := rep.summary(sum)
	switch {
	case o.DryRun || record == "":
	case tokens && sent == 0 && foundNothing(s):
		saveNoop(record, noopRecord{SrcToken: srcToken, DstToken: dstToken, Sessions: s.Sessions, Counts: s.Counts, At: start.UTC()})
	default:
		removeNoop(record)
	}
	if s.ExitCode != exitOK {
		return exitCode(s.ExitCode)
	}
	return nil
}
