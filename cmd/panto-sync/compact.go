package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/store"
)

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:      "compact",
		Usage:     "merge each session's small segments into one",
		ArgsUsage: "s3://BUCKET[/PREFIX] [ID...]",
		Description: `compact rewrites the segments of each session (all sessions, or the ids given,
which may be unique prefixes) as one, so that loading it takes fewer requests. The raw
bytes do not change, so sync is unaffected. Old segments are deleted after a grace
period, never under a reader. Sessions with one segment are left alone.

Examples:
   panto-sync compact s3://my-bucket/panto
   panto-sync compact s3://my-bucket 3f2a9c 77b1
   panto-sync compact --dry-run s3://my-bucket`,
		Flags: append([]cli.Flag{dryRunFlag()}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			return runEach(c, "compact", nil, compactSession)
		},
	}
}

// compactSession compacts one session if it has more than one segment.
func compactSession(ctx context.Context, s store.LogStore, id string, o *options) Event {
	fail := func(err error) Event {
		return Event{Event: "failed", ID: id, Error: err.Error(), Text: fmt.Sprintf("failed    %s: %v", id, err), err: err}
	}
	before, err := store.Checkpoints(ctx, s, id)
	if errors.Is(err, errors.ErrUnsupported) {
		return Event{Event: "unchanged", ID: id, Note: "this store keeps one file per session: nothing to compact"}
	}
	if err != nil {
		return fail(fmt.Errorf("read checkpoints: %w", err))
	}
	if len(before) <= 1 {
		return Event{Event: "unchanged", ID: id}
	}
	if o.DryRun {
		return Event{Event: "would-compact", ID: id, Text: fmt.Sprintf("would compact %s: %d segments into 1", id, len(before))}
	}
	if _, err := store.Compact(ctx, s, id); err != nil {
		return fail(err)
	}
	after, err := store.Checkpoints(ctx, s, id)
	if err != nil {
		return fail(fmt.Errorf("read checkpoints after compacting: %w", err))
	}
	return Event{Event: "compacted", ID: id, Text: fmt.Sprintf("compacted %s: %d segments into %d", id, len(before), len(after))}
}
