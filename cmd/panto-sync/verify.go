package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "re-read every segment of the bucket's sessions and check hashes and manifests",
		ArgsUsage: "s3://BUCKET[/PREFIX] [ID...]",
		Description: `verify downloads each session's segments (all sessions, or the ids given, which
may be unique prefixes) and checks them against their manifests' sha256s and lengths.
A failure names the session and the object; it exits 1 if any session fails.

Examples:
   panto-sync verify s3://my-bucket/panto
   panto-sync verify s3://my-bucket 3f2a9c
   panto-sync verify --json --concurrency 16 s3://my-bucket`,
		Flags: remoteFlags(),
		Action: func(c *cli.Context) error {
			return runEach(c, "verify", func(ctx context.Context, r RemoteCatalog, id string, o *options) Event {
				if err := r.Verify(ctx, id); err != nil {
					return Event{Event: "failed", ID: id, Error: err.Error(), Text: fmt.Sprintf("failed    %s: %v", id, err)}
				}
				return Event{Event: "verified", ID: id, Text: fmt.Sprintf("verified  %s", id)}
			})
		},
	}
}

// runEach runs fn on each selected session of the bucket (the ids given
// as arguments, or all of them), concurrently, reporting an event each
// and a summary; it exits 1 if any failed.
func runEach(c *cli.Context, cmd string, fn func(ctx context.Context, r RemoteCatalog, id string, o *options) Event) error {
	start := time.Now()
	o, err := parseOptions(c, true)
	if err != nil {
		return err
	}
	remote, err := openRemote(c.Context, o)
	if err != nil {
		return err
	}
	sessions, err := remote.Sessions(c.Context)
	if err != nil {
		return fmt.Errorf("list sessions in %s: %w", o.Remote, err)
	}
	all := make([]string, 0, len(sessions))
	for id := range sessions {
		all = append(all, id)
	}
	sort.Strings(all)
	ids, err := pickIDs(all, o.Args)
	if err != nil {
		return err
	}
	var selected []string
	for _, id := range ids {
		if o.selected(id) {
			selected = append(selected, id)
		}
	}
	rep := newReporter(o)
	if o.Progress {
		rep.startProgress(len(selected), int64(len(selected)))
	}
	events := make([]Event, len(selected))
	parallel(c.Context, o.Concurrency, len(selected), func(i int) {
		events[i] = fn(c.Context, remote, selected[i], o)
		rep.event(events[i])
		rep.progress(1)
	})
	rep.stopProgress()
	sum := Summary{Command: cmd, DryRun: o.DryRun, Sessions: len(selected), Counts: map[string]int{}}
	for i, e := range events {
		if e.Event == "" {
			e = Event{Event: "failed", ID: selected[i], Error: "interrupted", Text: fmt.Sprintf("failed    %s: interrupted", selected[i])}
			rep.event(e)
		}
		sum.Counts[e.Event]++
		if e.Event == "failed" {
			sum.Failed++
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
	rep.summary(sum)
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
			return nil, fmt.Errorf("%w: run `panto-sync ls` to see the bucket's sessions", agent.NotFoundError(a))
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
