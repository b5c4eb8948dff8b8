package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
)

func sessionsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "sessions",
		Aliases:   []string{"ls"},
		Usage:     "list sessions, newest first",
		UsageText: "panto sessions [--store SPEC] [--endpoint URL] [--json]",
		Description: `Lists the sessions of the store, newest first: short id, last modified, number of
messages, model, and the title (panto title) or else the last prompt typed. --json
adds the full id, the parent of a fork (panto fork) and the session's token totals.

Examples:
   panto sessions
   panto sessions --json | jq '.[0].id'
   panto sessions --json | jq 'map(select(.parent != null)) | length'   forks
   panto sessions --json | jq '[.[].usage.output_tokens] | add'
   panto sessions --store s3://my-bucket/panto --endpoint http://127.0.0.1:9000`,
		Flags: append(storeFlags(false),
			&cli.BoolFlag{Name: "json", Usage: "print JSON (full ids, times in RFC 3339)"},
		),
		Action: func(c *cli.Context) error {
			st, _, err := openStore(c)
			if err != nil {
				return err
			}
			list, err := st.List(c.Context)
			if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
				return fmt.Errorf("list sessions: %w", err)
			}
			// Part of the catalog is damaged: list the rest, then say so.
			partial := err
			if err := printSessions(c, e, list); err != nil {
				return err
			}
			if partial != nil {
				return fmt.Errorf("list sessions: %w", partial)
			}
			return nil
		},
	}
}

// printSessions prints list as a table, or as JSON with --json.
func printSessions(c *cli.Context, e *env, list []agent.SessionInfo) error {
	if c.Bool("json") {
		out := make([]sessionJSON, 0, len(list))
		for _, s := range list {
			out = append(out, toSessionJSON(s))
		}
		return writeJSON(e.stdout, out)
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stderr, "no sessions yet")
		return nil
	}
	writeSessionTable(e.stdout, list, "")
	return nil
}

// sessionJSON is the --json shape of a session.
type sessionJSON struct {
	ID              string    `json:"id"`
	Created         time.Time `json:"created"`
	Modified        time.Time `json:"modified"`
	Messages        int       `json:"messages"`
	Title           string    `json:"title,omitempty"`
	LastUserMessage string    `json:"last_user_message,omitempty"`
	APIStyle        string    `json:"api_style,omitempty"`
	BaseURL         string    `json:"base_url,omitempty"`
	Model           string    `json:"model,omitempty"`
	Reasoning       string    `json:"reasoning,omitempty"`
	// Parent is the session this one was forked (or, by panto-sync's
	// keep-both, copied) from; ForkedAt how many of its messages a fork
	// took (absent for a copy of the whole).
	Parent   string    `json:"parent,omitempty"`
	ForkedAt int       `json:"forked_at,omitempty"`
	Usage    usageJSON `json:"usage"`
}

// usageJSON is a token count for scripts: every field, zeros included.
type usageJSON struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

func toSessionJSON(s agent.SessionInfo) sessionJSON {
	return sessionJSON{
		ID: s.ID, Created: s.Created, Modified: s.Modified, Messages: s.MessageCount, Title: s.Title,
		LastUserMessage: s.LastUserMessage, APIStyle: string(s.APIStyle), BaseURL: s.BaseURL,
		Model: s.Model, Reasoning: string(s.Reasoning), Parent: s.Parent, ForkedAt: s.ForkedAt,
		Usage: usageJSON(s.Usage),
	}
}

// writeSessionTable prints sessions as a table; current is marked.
func writeSessionTable(w io.Writer, list []agent.SessionInfo, current string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODIFIED\tMSGS\tMODEL\tTITLE OR LAST PROMPT")
	for _, s := range list {
		mark := ""
		if s.ID == current {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%s\t%s\n", shortID(s.ID), mark, s.Modified.Local().Format("2006-01-02 15:04"), s.MessageCount, s.Model, clip(headline(s), 60))
	}
	tw.Flush()
}

// headline is what names a session for people: its title, else the last
// prompt typed in it.
func headline(s agent.SessionInfo) string {
	if s.Title != "" {
		return s.Title
	}
	return s.LastUserMessage
}
