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
			return runEach(c, "verify", func(ctx context.Context, s store.LogStore, id string, o *options) Event {
				if err := store.Verify(ctx, s, id); err != nil {
					return Event{Event: "failed", ID: id, Error: err.Error(), Text: fmt.Sprintf("failed    %s: %v", id, err)}
				}
				return Event{Event: "verified", ID: id, Text: fmt.Sprintf("verified  %s", id)}
			})
		},
	}
}

// runEach runs fn on each selected session of the store named by the
// first argument (the ids given as the other arguments, or all of them),
// concurrently, reporting an event each and a summary; it exits 1 if any
// failed.
func runEach(c *cli.Context, cmd string, fn func(ctx context.Context, s store.LogStore, id string, o *options) Event) error {
	start := time.Now()
	o, err := parseOptions(c)
	if err != nil {
		return err
	}
	if len(o.Args) == 0 {
		return usageError(c, "missing the store: give s3://BUCKET[/PREFIX] or a directory")
	}
	s, err := o.end(o.Args[0], o.Endpoint).open(c.Context, "store")
	if err != nil {
		return err
	}
	logs, listErr := s.Logs(c.Context)
	if listErr != nil && !errors.Is(listErr, agent.ErrIncompleteList) {
		return fmt.Errorf("list sessions in %s: %w", o.Args[0], listErr)
	}
	all := make([]string, 0, len(logs))
	for _, l := range logs {
		all = append(all, l.Info.ID)
	}
	var indexEvents []Event
	var indexErr error
	if cmd == "verify" && len(o.Args) == 1 {
		// A whole store: check its index too, and verify every session it
		// holds, listed or not.
		var held []string
		held, indexEvents, indexErr = checkIndex(c.Context, s, o.Args[0])
		if indexErr != nil && indexEvents == nil {
			return indexErr
		}
		if held != nil {
			all, listErr = held, nil // the index check says what is missing, with what to do
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
	events := make([]Event, len(selected))
	var g errgroup.Group
	g.SetLimit(o.Concurrency)
	for i, id := range selected {
		if c.Context.Err() != nil {
			events[i] = Event{Event: "failed", ID: id, Error: "interrupted", Text: fmt.Sprintf("failed    %s: interrupted", id)}
			rep.print(events[i])
			continue
		}
		g.Go(func() error {
			events[i] = fn(c.Context, s, id, o)
			rep.print(events[i])
			return nil
		})
	}
	_ = g.Wait()
	for _, e := range indexEvents {
		if e.Event != "failed" { // unreadable sessions failed their own verify above
			rep.print(e)
		}
	}
	sum := Summary{Command: cmd, DryRun: o.DryRun, Sessions: len(selected), Counts: rep.counts}
	for _, e := range events {
		if e.Event == "failed" {
			sum.Failed++
		}
	}
	for _, err := range []error{listErr, indexErr} {
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
	sum.Text = fmt.Sprintf("%s: %d sessions: %s in %.2fs", cmd, len(selected), strings.Join(parts, ", "), sum.Seconds)
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
