package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
)

func titleCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "title",
		Usage:     "name a session",
		UsageText: "panto title [--store SPEC] [--endpoint URL] [--json] ID TEXT...\npanto title --clear ID",
		Description: `Gives the session with this id or unique id prefix a title: panto sessions and
panto -r show it instead of the last prompt. The title is an entry appended to the
session, so it syncs (panto-sync) like any message; the latest one wins. In the
interactive mode, /title TEXT does the same.

Examples:
   panto title 3f9a Fix the flaky upload test
   panto title 3f9a "Release notes, 2.0" --json
   panto title --clear 3f9a`,
		Flags: append(storeFlags(false),
			&cli.BoolFlag{Name: "clear", Usage: "remove the title"},
			&cli.BoolFlag{Name: "json", Usage: `print {"id", "title"}`},
		),
		Action: func(c *cli.Context) error {
			st, _, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeStore(c.Context, st, e.stderr)
			title := cleanTitle(strings.Join(c.Args().Tail(), " "))
			switch {
			case c.NArg() < 1:
				return errors.New("title: give a session id and the title (panto title ID TEXT)")
			case title == "" && !c.Bool("clear"):
				return errors.New("title: give the title after the session id (or --clear to remove it)")
			case title != "" && c.Bool("clear"):
				return errors.New("title: --clear takes no text")
			}
			sess, err := resolveID(c, st, "title")
			if err != nil {
				return err
			}
			if err := sess.Append(c.Context, []agent.PersistentMessage{{Message: agent.TitleMessage(title)}}); err != nil {
				return fmt.Errorf("title %s: %w", sess.Info.ID, err)
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, map[string]string{"id": sess.Info.ID, "title": sess.Info.Title})
			}
			if title == "" {
				fmt.Fprintf(e.stdout, "session %s: title cleared\n", shortID(sess.Info.ID))
			} else {
				fmt.Fprintf(e.stdout, "session %s: %q\n", shortID(sess.Info.ID), sess.Info.Title)
			}
			return nil
		},
	}
}

// cleanTitle puts a title on one line, at most agent.MaxTitle runes.
func cleanTitle(s string) string {
	return agent.Truncate(strings.Join(strings.Fields(s), " "), agent.MaxTitle)
}
