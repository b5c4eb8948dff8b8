package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/archive"
)

func forkCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "fork",
		Usage:     "start a new session from a session's first messages",
		UsageText: "panto fork [--store SPEC] [--endpoint URL] [--at N] [--json] ID",
		Description: `Starts a new session holding the first N messages of the session with this id or
unique id prefix (all of them without --at), numbered as panto show and panto search
number them. The new session's header links it to its parent and N; the parent is
not changed. Resume the fork with panto -r NEWID. In the interactive mode, /fork [N]
forks the current session and goes on in the fork.

A fork cannot end on an assistant message that calls tools, whose results are the
next message: the error says where to fork instead.

Examples:
   panto fork 3f9a
   panto fork 3f9a --at 12
   panto -r "$(panto fork 3f9a --at 12 --json | jq -r .id)"`,
		Flags: append(storeFlags(false),
			&cli.IntFlag{Name: "at", Usage: "the number of messages to keep, from the first (default: all)"},
			&cli.BoolFlag{Name: "json", Usage: `print {"id", "parent", "forked_at"}`},
		),
		Action: func(c *cli.Context) error {
			st, err := openLogStore(c)
			if err != nil {
				return err
			}
			defer closeStore(c.Context, st, e.stderr)
			if c.IsSet("at") && c.Int("at") < 1 {
				return fmt.Errorf("fork: --at %d: give a number of messages, 1 or more", c.Int("at"))
			}
			parent, err := resolveID(c, st, "fork")
			if err != nil {
				return err
			}
			fork, err := archive.Fork(c.Context, st, parent.Info.ID, c.Int("at"), time.Now())
			if err != nil {
				return err
			}
			info := fork.Info
			if c.Bool("json") {
				return writeJSON(e.stdout, map[string]any{"id": info.ID, "parent": info.Parent, "forked_at": info.ForkedAt})
			}
			fmt.Fprintf(e.stdout, "session %s: the first %s of %s (resume: panto -r %s)\n", info.ID, plural(info.ForkedAt, "message"), shortID(info.Parent), shortID(info.ID))
			return nil
		},
	}
}
