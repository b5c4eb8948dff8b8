package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
)

func pruneCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "delete the sessions not modified for a while",
		UsageText: "panto prune --older-than DURATION [--dry-run] [--yes] [--json]",
		Description: `Deletes, as rm does, every session, of every project, whose last message is
older than DURATION: a number of days (90d), weeks (2w), hours (12h) or any Go
duration (1h30m). --dry-run lists them, each with its project, and deletes nothing.
On a terminal prune asks once, showing the same list; elsewhere it needs --yes.

Examples:
   panto prune --older-than 90d --dry-run
   panto prune --older-than 2w --yes
   panto prune --store s3://my-bucket/panto --older-than 180d --yes --json`,
		Flags: append(storeFlags(false),
			&cli.StringFlag{Name: "older-than", Usage: "delete sessions last modified longer ago than this (90d, 2w, 12h); required"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "list what would be deleted, delete nothing"},
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "delete without asking"},
			&cli.BoolFlag{Name: "json", Usage: "print the sessions deleted (or, with --dry-run, to delete) as JSON"},
		),
		Action: func(c *cli.Context) error {
			// Checked here, not by the cli package, whose message comes
			// after the whole help on stdout.
			if !c.IsSet("older-than") {
				return usageError(c, errors.New("prune: give --older-than DURATION (90d, 2w, 12h): nothing is deleted without it"))
			}
			age, err := parseAge(c.String("older-than"))
			if err != nil {
				return fmt.Errorf("prune: --older-than: %w", err)
			}
			st, err := openDeleter(c, "prune")
			if err != nil {
				return err
			}
			defer closeStore(c.Context, st, e.stderr) // as rm does
			list, err := st.List(c.Context)
			if err != nil {
				// A partial list would prune only what it shows: fine, but
				// the user must learn the rest was not looked at.
				if !errors.Is(err, agent.ErrIncompleteList) {
					return fmt.Errorf("prune: list sessions: %w", err)
				}
				fmt.Fprintf(e.stderr, "panto: warning: %s\n", oneLine(err.Error()))
			}
			old := olderThan(list, e.now().Add(-age))
			if len(old) == 0 && !c.Bool("json") {
				// Not printSessions' "no sessions yet": the store may hold
				// many, none of them that old.
				fmt.Fprintf(e.stderr, "no session was last modified more than %s ago\n", c.String("older-than"))
				return nil
			}
			if c.Bool("dry-run") {
				if c.Bool("json") {
					return printSessions(c, e, old)
				}
				writeAllSessions(e.stdout, old, e.getenv("HOME"))
				return nil
			}
			if len(old) == 0 {
				return writeJSON(e.stdout, []removal{})
			}
			report := newRemovalReport(c, e)
			return report.finish(removeSessions(c.Context, e, c, st, old, report))
		},
	}
}

// olderThan returns the sessions of list last modified before cutoff, in
// list's order.
func olderThan(list []agent.SessionInfo, cutoff time.Time) []agent.SessionInfo {
	var out []agent.SessionInfo
	for _, s := range list {
		if s.Modified.Before(cutoff) {
			out = append(out, s)
		}
	}
	return out
}

// parseAge reads a duration in days (d), weeks (w) or Go's units.
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	unit := time.Duration(0)
	switch {
	case strings.HasSuffix(s, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(s, "w"):
		unit = 7 * 24 * time.Hour
	}
	var d time.Duration
	if unit != 0 {
		// Whole days and weeks; a century bounds it below overflow.
		n, err := strconv.ParseUint(s[:len(s)-1], 10, 32)
		if err != nil || n > 36500 {
			return 0, fmt.Errorf("%q is not a duration; write e.g. 90d, 2w or 12h", s)
		}
		d = time.Duration(n) * unit
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration; write e.g. 90d, 2w or 12h", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: the age must be more than zero", s)
	}
	return d, nil
}
