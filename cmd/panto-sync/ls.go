package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list the sessions of a bucket (or a directory), newest first",
		ArgsUsage: "s3://BUCKET[/PREFIX] | DIR",
		Description: `ls reads the bucket's index (a few requests, however many sessions it holds) and
prints each session's id, last modification, message count, size and last user
message. A directory is listed from its summary cache.

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
	Error           string    `json:"error,omitempty"`
}

func runLs(c *cli.Context) (ret error) {
	o, err := parseOptions(c)
	if err != nil {
		return err
	}
	if len(o.Args) != 1 {
		if len(o.Args) == 0 {
			return usageError(c, "missing the store: give s3://BUCKET[/PREFIX] or a directory")
		}
		return usageError(c, fmt.Sprintf("unexpected argument %q (filter sessions with --include GLOB)", o.Args[1]))
	}
	e := o.end(o.Args[0], o.Endpoint)
	e.reading = true
	s, err := e.open(c.Context, "store")
	if err != nil {
		return err
	}
	defer closeStore(c.Context, s, &ret)
	logs, err := s.Logs(c.Context)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return fmt.Errorf("list sessions in %s: %w", o.Args[0], err)
	}
	// A damaged index lists the rest: print them, then say what is missing.
	defer func() {
		if err != nil && ret == nil {
			ret = fmt.Errorf("%s: %w", o.Args[0], err)
		}
	}()
	entries, total := lsEntries(logs, o)
	printLs(o, entries, total)
	return nil
}

// lsEntries are the selected sessions of logs, newest first, and their
// total length.
func lsEntries(logs []store.Log, o *options) (entries []lsEntry, total int64) {
	for _, l := range logs {
		if !o.selected(l.Info.ID) {
			continue
		}
		e := lsEntry{Event: "session", ID: l.Info.ID, Created: l.Info.Created, Modified: l.Info.Modified,
			MessageCount: l.Info.MessageCount, Length: l.Length, SHA256: l.SHA256, LastUserMessage: l.Info.LastUserMessage, Model: l.Info.Model}
		if l.Err != nil {
			e.Error = l.Err.Error()
		}
		entries = append(entries, e)
		total += l.Length
	}
	sort.Slice(entries, func(i, k int) bool {
		if !entries[i].Modified.Equal(entries[k].Modified) {
			return entries[i].Modified.After(entries[k].Modified)
		}
		return entries[i].ID < entries[k].ID
	})
	return entries, total
}

// printLs prints entries: a table with a total, or with --json a line
// each and a summary, or with --quiet their ids.
func printLs(o *options, entries []lsEntry, total int64) {
	if o.JSON {
		for _, e := range entries {
			b, _ := json.Marshal(e)
			fmt.Fprintf(o.Stdout, "%s\n", b)
		}
		b, _ := json.Marshal(Summary{Event: "summary", Command: "ls", Sessions: len(entries), Bytes: total, Counts: map[string]int{"session": len(entries)}})
		fmt.Fprintf(o.Stdout, "%s\n", b)
		return
	}
	if o.Quiet {
		for _, e := range entries {
			fmt.Fprintln(o.Stdout, e.ID)
		}
		return
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODIFIED\tMESSAGES\tSIZE\tLAST USER MESSAGE")
	for _, e := range entries {
		last := preview(e.LastUserMessage, 60)
		if e.Error != "" {
			last = "(unreadable: " + preview(e.Error, 60) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, e.Modified.Local().Format("2006-01-02 15:04"), e.MessageCount, humanBytes(e.Length), last)
	}
	tw.Flush()
	fmt.Fprintf(o.Stdout, "%d sessions, %s\n", len(entries), humanBytes(total))
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
