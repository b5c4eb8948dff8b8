package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list the sessions in a bucket, newest first",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `ls reads the bucket's index (a few requests, however many sessions it holds) and
prints each session's id, last modification, message count, size and last user
message.

Examples:
   panto-sync ls s3://my-bucket/panto
   panto-sync ls --include 'ab*' --endpoint http://127.0.0.1:9000 s3://sessions
   panto-sync ls --json s3://my-bucket | jq -r 'select(.event=="session").id'`,
		Flags:  remoteFlags(),
		Action: runLs,
	}
}

// lsEntry is one session as ls --json prints it.
type lsEntry struct {
	Event           string    `json:"event"` // "session"
	ID              string    `json:"id"`
	Created         time.Time `json:"created"`
	Modified        time.Time `json:"modified"`
	MessageCount    int       `json:"message_count"`
	Length          int64     `json:"length"`
	SHA256          string    `json:"sha256"`
	LastUserMessage string    `json:"last_user_message,omitempty"`
	Model           string    `json:"model,omitempty"`
}

func runLs(c *cli.Context) error {
	o, err := parseOptions(c, true)
	if err != nil {
		return err
	}
	if len(o.Args) > 0 {
		return usageError(c, fmt.Sprintf("unexpected argument %q (filter sessions with --include GLOB)", o.Args[0]))
	}
	remote, err := openRemote(c.Context, o)
	if err != nil {
		return err
	}
	sessions, err := remote.Sessions(c.Context)
	if err != nil {
		return fmt.Errorf("list sessions in %s: %w", o.Remote, err)
	}
	var entries []lsEntry
	var total int64
	for id, rs := range sessions {
		if !o.selected(id) {
			continue
		}
		entries = append(entries, lsEntry{Event: "session", ID: id, Created: rs.Info.Created, Modified: rs.Info.Modified,
			MessageCount: rs.Info.MessageCount, Length: rs.Length, SHA256: rs.SHA256, LastUserMessage: rs.Info.LastUserMessage, Model: rs.Info.Model})
		total += rs.Length
	}
	sort.Slice(entries, func(i, k int) bool {
		if !entries[i].Modified.Equal(entries[k].Modified) {
			return entries[i].Modified.After(entries[k].Modified)
		}
		return entries[i].ID < entries[k].ID
	})
	if o.JSON {
		for _, e := range entries {
			b, _ := json.Marshal(e)
			fmt.Fprintf(o.Stdout, "%s\n", b)
		}
		b, _ := json.Marshal(Summary{Event: "summary", Command: "ls", Sessions: len(entries), Bytes: total, Counts: map[string]int{"session": len(entries)}})
		fmt.Fprintf(o.Stdout, "%s\n", b)
		return nil
	}
	if o.Quiet {
		for _, e := range entries {
			fmt.Fprintln(o.Stdout, e.ID)
		}
		return nil
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODIFIED\tMESSAGES\tSIZE\tLAST USER MESSAGE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, e.Modified.Local().Format("2006-01-02 15:04"), e.MessageCount, humanBytes(e.Length), preview(e.LastUserMessage, 60))
	}
	tw.Flush()
	fmt.Fprintf(o.Stdout, "%d sessions, %s\n", len(entries), humanBytes(total))
	return nil
}

// preview is s on one line, cut to n runes.
func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
