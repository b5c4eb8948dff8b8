package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "re-read every session of a bucket (or a directory) and check hashes and manifests",
		ArgsUsage: "s3://BUCKET[/PREFIX] | DIR [ID...]",
		Description: `verify reads each session back (all sessions, or the ids given, which may be unique
prefixes): in a bucket every segment against its manifest's sha256s, prefix hashes and
line counts, in a directory every line of every file. A failure names the session and
the object or file:line. Checking a whole bucket also lists its objects to compare the
index with the sessions it holds: sessions missing from the index, entries without a
session, stale entries and damaged shards are reported, with the advice to run
panto-sync repair. It exits 1 if anything is wrong.

Examples:
   panto-sync verify s3://my-bucket/panto
   panto-sync verify s3://my-bucket 3f2a9c
   panto-sync verify --json --concurrency 16 s3://my-bucket
   panto-sync verify ~/.local/share/panto/sessions`,
		Flags: remoteFlags(),
		Action: func(c *cli.Context) error {
			return runEach(c, "verify", verifyWhole, func(ctx context.Context, s store.LogStore, id string, o *options) Event {
				if err := store.Verify(ctx, s, id); err != nil {
					return Event{Event: "failed", ID: id, Error: err.Error(), Text: fmt.Sprintf("failed    %s: %v", id, err)}
				}
				return Event{Event: "verified", ID: id, Text: fmt.Sprintf("verified  %s", id)}
			})
		},
	}
}

// verifyWhole is verify's check of a whole store: its index too
// (checkIndex), and every session it holds, listed or not. An unreadable
// session is not a finding of its own: its verify fails.
func verifyWhole(ctx context.Context, s store.LogStore, where string) (held []string, findings []Event, err error) {
	held, events, err := checkIndex(ctx, s, where)
	for _, e := range events {
		if e.Event != "failed" {
			findings = append(findings, e)
		}
	}
	return held, findings, err
}

// wholeCheck is what a command checks of a whole store (no ids given)
// beside its sessions: the sessions the store holds (nil: those it
// lists), the findings to report after the sessions' events, and an
// error saying what is wrong (with no findings: the check could not run).
type wholeCheck func(ctx context.Context, s store.LogStore, where string) (held []string, findings []Event, err error)

// sessionFunc is a command's work on one session, and its event.
type sessionFunc func(ctx context.Context, s store.LogStore, id string, o *options) Event

// runEach runs fn on each selected session of the store named by the
// first argument (the ids given as the other arguments, or all of them,
// with whole's check when it is set), concurrently, reporting an event
// each and a summary; it exits 1 if any failed.
func runEach(c *cli.Context, cmd string, whole wholeCheck, fn sessionFunc) (ret error) {
	start := time.Now()
	o, err := parseOptions(c)
	if err != nil {
		return err
	}
	if len(o.Args) == 0 {
		return usageError(c, "missing the store: give s3://BUCKET[/PREFIX] or a directory")
	}
	e := o.end(o.Args[0], o.Endpoint)
	e.reading = true
	s, err := e.open(c.Context, "store")
	if err != nil {
		return err
	}
	defer closeStore(c.Context, s, &ret)
	all, listErr, err := listedIDs(c.Context, s, o.Args[0])
	if err != nil {
		return err
	}
	var findings []Event
	var wholeErr error
	if whole != nil && len(o.Args) == 1 {
		var held []string
		held, findings, wholeErr = whole(c.Context, s, o.Args[0])
		if wholeErr != nil && findings == nil {
			return wholeErr
		}
		if held != nil {
			all, listErr = held, nil // the check says what is missing, with what to do
		}
	}
	sort.Strings(all)
	ids, err := pickIDs(all, o.Args[1:])
	if err != nil {
		return err
	}
	var selected []string
	for _, id := range ids {
		if o.selected(id) {
			selected = append(selected, id)
		}
	}
	rep := newReporter(o, direction{cmd: cmd})
	rep.planned(len(selected), 0)
	events := onEach(c.Context, s, o, selected, rep, fn)
	for _, e := range findings {
		rep.print(e)
	}
	return finishEach(o, rep, cmd, start, len(selected), events, listErr, wholeErr)
}

// listedIDs lists the sessions of s (where names it in errors). An
// incomplete listing is listErr, with the ids it could list.
func listedIDs(ctx context.Context, s store.LogStore, where string) (ids []string, listErr, err error) {
	logs, listErr := s.Logs(ctx)
	if listErr != nil && !errors.Is(listErr, agent.ErrIncompleteList) {
		return nil, nil, fmt.Errorf("list sessions in %s: %w", where, listErr)
	}
	ids = make([]string, 0, len(logs))
	for _, l := range logs {
		ids = append(ids, l.Info.ID)
	}
	return ids, listErr, nil
}

// onEach runs fn on each of ids, o.Concurrency at once, printing each
// event as it comes; a session not started when ctx ends failed.
func onEach(ctx context.Context, s store.LogStore, o *options, ids []string, rep *reporter, fn sessionFunc) []Event {
	events := make([]Event, len(ids))
	var g errgroup.Group
	g.SetLimit(o.Concurrency)
	for i, id := range ids {
		if ctx.Err() != nil {
			events[i] = Event{Event: "failed", ID: id, Error: "interrupted", Text: fmt.Sprintf("failed    %s: interrupted", id)}
			rep.print(events[i])
			continue
		}
		g.Go(func() error {
			events[i] = fn(ctx, s, id, o)
			rep.print(events[i])
			return nil
		})
	}
	_ = g.Wait()
	return events
}

// finishEach prints the summary of runEach over sessions sessions, with
// the errors of the listing and of the whole store's check, and returns
// the exit code.
func finishEach(o *options, rep *reporter, cmd string, start time.Time, sessions int, events []Event, listErr, wholeErr error) error {
	sum := Summary{Command: cmd, DryRun: o.DryRun, Sessions: sessions, Counts: rep.counts}
	for _, e := range events {
		if e.Event == "failed" {
			sum.Failed++
		}
	}
	for _, err := range []error{listErr, wholeErr} {
		if err != nil {
			sum.Failed++
			fmt.Fprintf(o.Stderr, "panto-sync: %s\n", oneLine(err.Error()))
		}
	}
	if sum.Failed > 0 {
		sum.ExitCode = exitError
	}
	sum.Seconds = time.Since(start).Seconds()
	var parts []string
	for _, k := range sortedKeys(sum.Counts) {
		parts = append(parts, fmt.Sprintf("%d %s", sum.Counts[k], k))
	}
	sum.Text = fmt.Sprintf("%s: %d sessions: %s in %.2fs", cmd, sessions, strings.Join(parts, ", "), sum.Seconds)
	if sum.Failed > 0 {
		sum.Text += "; see the failures above"
	}
	rep.printSummary(sum)
	if sum.ExitCode != exitOK {
		return exitCode(sum.ExitCode)
	}
	return nil
}

// pickIDs resolves the ids or unique prefixes asked for against all (all
// of them when none is asked for).
func pickIDs(all, asked []string) ([]string, error) {
	if len(asked) == 0 {
		return all, nil
	}
	var ids []string
	for _, a := range asked {
		if err := agent.ValidateSessionID(a); err != nil {
			return nil, err
		}
		var match []string
		for _, id := range all {
			if id == a {
				match = []string{id}
				break
			}
			if strings.HasPrefix(id, a) {
				match = append(match, id)
			}
		}
		switch len(match) {
		case 0:
			return nil, fmt.Errorf("%w: run `panto-sync ls` to see the store's sessions", agent.NotFoundError(a))
		case 1:
			ids = append(ids, match[0])
		default:
			return nil, agent.AmbiguousError(a, match)
		}
	}
	return ids, nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
