package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/archive"
)

func searchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "search",
		Usage:     "find text in every session",
		UsageText: "panto search [--store SPEC] [--endpoint URL] [--project PROJECT] [--since DURATION] [--json] [--limit N] [--thinking] QUERY...",
		Description: `Searches the titles and messages of every session of the store (of one project
with --project; of the last DURATION with --since), newest session first: the title, what was typed, answered, the tool
calls and their results (not system prompts, nor thinking unless --thinking). QUERY is text,
matched case-insensitively, its words apart by any white space (a phrase the text wraps
onto the next line is found); re:EXPR is a regular expression (Go syntax,
case-insensitive unless it says (?-i)). Each match prints the session, the message
number (panto show numbers messages so, panto fork --at takes it) and the text
around it; the last line, on stderr, says how many matches in how many sessions,
and how many sessions were searched, in how long. A search that runs for more than
a second on a terminal shows how many sessions it has read, in a bar on stderr.

Examples:
   panto search "connection refused"
   panto search --project . "flaky test"          this project's sessions only
   panto search --project github.com/team/proj timeout
   panto search 're:func \w+Handler\('
   panto search --thinking "why not"
   panto search --since 7d deploy                  what was said this week
   panto search timeout --json --limit 0 | jq -r .session | sort -u`,
		Flags: append(storeFlags(false),
			projectFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per match"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "stop after N matches (0: no limit)"},
			&cli.BoolFlag{Name: "thinking", Usage: "search thinking blocks too"},
			&cli.StringFlag{Name: "since", Usage: "only the messages of the last `DURATION`: days (7d), weeks (2w), hours (24h) or any Go duration (90m)"},
		),
		Action: func(c *cli.Context) error {
			defer paceReading(c.Context)()
			return search(c, e)
		},
	}
}

// search is panto search: the query, the matches as they come, then
// what was read.
func search(c *cli.Context, e *env) error {
	q, err := searchQuery(c)
	if err != nil {
		return err
	}
	st, err := openLogStore(c)
	if err != nil {
		return err
	}
	defer closeStore(c.Context, st, e.stderr)
	n, in, last := 0, 0, ""
	print := matchPrinter(c, e)
	bar := newReadProgress(e, "search", c.Bool("json"))
	opts := archiveOptions(c)
	opts.Progress = bar.progress()
	stats, err := archive.Search(c.Context, st, q, opts, func(m archive.Match) error {
		n++
		if m.Session.ID != last { // a session's matches come together
			in, last = in+1, m.Session.ID
		}
		bar.clear()
		return print(m)
	})
	bar.done()
	if errors.Is(err, archive.ErrBadQuery) {
		return fmt.Errorf("%w (a regular expression is re:EXPR, in Go syntax)", err)
	}
	if err != nil {
		return err
	}
	for _, skipped := range stats.Skipped {
		fmt.Fprintf(e.stderr, "panto: warning: not searched: %s\n", oneLine(skipped.Error()))
	}
	found := plural(n, "match")
	if n > 0 {
		found += " in " + plural(in, "session")
	}
	more := ""
	if q.Limit > 0 && n >= q.Limit {
		more = fmt.Sprintf("; stopped at --limit %d", q.Limit)
	}
	fmt.Fprintf(e.stderr, "%s (%s searched, %s read in %s%s)\n", found, plural(stats.Sessions, "session"), byteSize(stats.Bytes), stats.Elapsed.Round(time.Millisecond), more)
	return nil
}

// searchQuery reads the query, --limit, --thinking and --project.
func searchQuery(c *cli.Context) (archive.Query, error) {
	query := strings.Join(c.Args().Slice(), " ")
	if strings.TrimSpace(query) == "" {
		return archive.Query{}, errors.New(`search: give the text to find (or re:EXPR), e.g. panto search "connection refused"`)
	}
	if c.Int("limit") < 0 {
		return archive.Query{}, fmt.Errorf("search: --limit %d: give 0 (no limit) or more", c.Int("limit"))
	}
	q := archive.Query{Pattern: query, Thinking: c.Bool("thinking"), Limit: c.Int("limit")}
	if c.IsSet("since") {
		// As usage's: the last week is --since 7d.
		d, err := parseAge(c.String("since"))
		if err != nil {
			return archive.Query{}, fmt.Errorf("search: --since: %w", err)
		}
		q.Since = time.Now().Add(-d)
	}
	if c.IsSet("project") {
		p, err := projectOf(c.String("project"))
		if err != nil {
			return archive.Query{}, fmt.Errorf("search: %w", err)
		}
		q.Sessions = func(info agent.SessionInfo) bool { return sameProject(info.Project, p) }
	}
	return q, nil
}

// matchPrinter prints a match as JSON (--json) or as text.
func matchPrinter(c *cli.Context, e *env) func(archive.Match) error {
	if c.Bool("json") {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return func(m archive.Match) error { return enc.Encode(toMatchJSON(m)) }
	}
	return func(m archive.Match) error { return writeMatch(e.stdout, m, e.stdoutIsTerminal) }
}

// matchJSON is the --json shape of a match.
type matchJSON struct {
	Session string `json:"session"`
	Title   string `json:"title,omitempty"`
	// Project is the key of the session's project (agent.Project.Key).
	Project string    `json:"project,omitempty"`
	Message int       `json:"message"`
	TS      time.Time `json:"ts"`
	Role    string    `json:"role"`
	Block   string    `json:"block"`
	Tool    string    `json:"tool,omitempty"`
	// Snippet is Before + Match + After.
	Snippet string `json:"snippet"`
	Match   string `json:"match"`
	Count   int    `json:"count"`
}

func toMatchJSON(m archive.Match) matchJSON {
	return matchJSON{
		Session: m.Session.ID, Title: m.Session.Title, Project: m.Session.Project.Key(), Message: m.Message, TS: m.TS,
		Role: string(m.Role), Block: string(m.Block), Tool: m.Tool,
		Snippet: m.Before + m.Text + m.After, Match: m.Text, Count: m.Count,
	}
}

// writeMatch prints a match on two lines: where, then the snippet (the
// match in bold on a terminal).
func writeMatch(w io.Writer, m archive.Match, terminal bool) error {
	where := string(m.Block)
	if m.Tool != "" {
		where += " " + m.Tool
	}
	if m.Count > 1 {
		where += fmt.Sprintf(", %d matches", m.Count)
	}
	head := shortID(m.Session.ID)
	if m.Session.Title != "" && m.Block != archive.BlockTitle {
		head += " " + fmt.Sprintf("%q", clip(m.Session.Title, 40))
	}
	text := screenText(m.Text)
	if terminal {
		text = "\x1b[1m" + text + "\x1b[0m"
	}
	if m.Block == archive.BlockTitle {
		_, err := fmt.Fprintf(w, "%s title\n    %s%s%s\n", head, screenText(m.Before), text, screenText(m.After))
		return err
	}
	// A tool's result is a user message on the wire; show calls it
	// "tool", and so does this line.
	who := string(m.Role)
	if m.Block == agent.BlockToolResult {
		who, where = "tool", "result"+strings.TrimPrefix(where, string(m.Block))
	}
	_, err := fmt.Fprintf(w, "%s #%d %s (%s)\n    %s%s%s\n", head, m.Message, who, where, screenText(m.Before), text, screenText(m.After))
	return err
}

// byteSize says n bytes in B, kB, MB or GB.
func byteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
