package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"
)

func showCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a session's transcript",
		UsageText: "panto show ID [--store SPEC] [--endpoint URL] [--json]",
		Description: `Prints the session with this id or unique id prefix, oldest message first.

Examples:
   panto show 3f9a
   panto show 3f9a --json | jq '.messages[-1]'`,
		Flags: append(storeFlags(false),
			&cli.BoolFlag{Name: "json", Usage: "print JSON: the session's info and its messages"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("show: give one session id or id prefix (panto sessions lists them)")
			}
			st, _, err := openStore(c)
			if err != nil {
				return err
			}
			sess, err := st.Resolve(c.Context, c.Args().First())
			if err != nil {
				return fmt.Errorf("show: %w", err)
			}
			conv, err := sess.Load(c.Context)
			if err != nil {
				return fmt.Errorf("show %s: %w", sess.Info.ID, err)
			}
			if c.Bool("json") {
				out := struct {
					Session  sessionJSON   `json:"session"`
					Messages []messageJSON `json:"messages"`
				}{Session: toSessionJSON(sess.Info), Messages: []messageJSON{}}
				for _, m := range conv.Messages {
					out.Messages = append(out.Messages, toMessageJSON(m))
				}
				return writeJSON(e.stdout, out)
			}
			fmt.Fprintf(e.stdout, "session %s · %s · %s\n\n", sess.Info.ID, plural(len(conv.Messages), "message"), sess.Info.Modified.Local().Format("2006-01-02 15:04"))
			writeTranscript(e.stdout, conv.Messages)
			return nil
		},
	}
}

// plural says "1 message", "2 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
