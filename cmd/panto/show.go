package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

func showCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a session's transcript",
		UsageText: "panto show [--store SPEC] [--endpoint URL] [--json] ID",
		Description: `Prints the session with this id or unique id prefix, oldest message first, each
message numbered (the numbers panto search prints and panto fork --at takes), then
the session's token totals. A fork says where it was forked from.

Examples:
   panto show 3f9a
   panto show 3f9a --json | jq '.messages[-1]'
   panto show 3f9a --json | jq .session.usage`,
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
			defer closeStore(c.Context, st, e.stderr)
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
			writeShow(e.stdout, sess.Info, headerOrigin(c.Context, st, sess.Info), conv.Messages, e.getenv("HOME"))
			return nil
		},
	}
}

// writeShow prints a session as show does without --json: a heading, the
// transcript and the token totals.
// home shortens the project's paths (projectLine).
func writeShow(w io.Writer, info agent.SessionInfo, origin *sessionlog.Origin, msgs []agent.Message, home string) {
	head := []string{"session " + info.ID}
	if info.Title != "" {
		head = append(head, fmt.Sprintf("%q", info.Title))
	}
	head = append(head, plural(len(msgs), "message"), info.Modified.Local().Format("2006-01-02 15:04"))
	fmt.Fprintln(w, strings.Join(head, " · "))
	if line := parentLine(info, origin); line != "" {
		fmt.Fprintln(w, line)
	}
	if info.Project != (agent.Project{}) {
		fmt.Fprintln(w, projectLine(info.Project, home))
	}
	fmt.Fprintln(w)
	writeTranscript(w, msgs, 1)
	fmt.Fprintln(w)
	writeTotals(w, info.Usage)
}

// parentLine says where a session was copied from, "" for one that was
// started afresh. origin is its header's, when it was imported: another
// agent's subagent or fork links its parent and holds none of its
// messages, as a keep-both copy (forked at 0) does not.
func parentLine(info agent.SessionInfo, origin *sessionlog.Origin) string {
	switch {
	case info.Parent == "":
		return ""
	case info.ForkedAt > 0:
		return fmt.Sprintf("forked from %s at message %d", info.Parent, info.ForkedAt)
	case origin != nil && origin.Subagent != "":
		return fmt.Sprintf("a subagent of %s (imported from %s; its own messages only)", info.Parent, agentName(origin.Agent))
	case origin != nil:
		return fmt.Sprintf("forked from %s (imported from %s; its own messages only)", info.Parent, agentName(origin.Agent))
	}
	return fmt.Sprintf("copied from %s (both were kept: it was written to, or deleted, on another machine at the same time)", info.Parent)
}

// agentName is how an agent of panto import is called.
func agentName(a string) string {
	switch importer.Agent(a) {
	case importer.ClaudeCode:
		return "Claude Code"
	case importer.Codex:
		return "Codex"
	case importer.Pi:
		return "pi"
	}
	return a
}

// headerOrigin is the origin in session id's header (nil: panto's own,
// or a store whose logs cannot be read raw), for parentLine: read only
// for a session that links a parent it holds no copy of.
func headerOrigin(ctx context.Context, st agent.SessionStore, info agent.SessionInfo) *sessionlog.Origin {
	ls, ok := store.AsLogStore(st)
	if !ok || info.Parent == "" || info.ForkedAt > 0 {
		return nil
	}
	r, _, err := ls.ReadLog(ctx, info.ID, 0)
	if err != nil {
		return nil
	}
	defer r.Close()
	line, err := bufio.NewReader(io.LimitReader(r, 1<<20)).ReadBytes('\n')
	if err != nil {
		return nil
	}
	var h sessionlog.Header
	if json.Unmarshal(line, &h) != nil {
		return nil
	}
	return h.Origin
}

// writeTotals prints a session's token totals.
func writeTotals(w io.Writer, u agent.Usage) {
	if u == (agent.Usage{}) {
		fmt.Fprintln(w, "tokens: none recorded")
		return
	}
	fmt.Fprintf(w, "tokens: %s\n", usageLine(u))
}

// usageLine spells a token count on one line, the zero counts left out
// (but for input and output).
func usageLine(u agent.Usage) string {
	parts := []string{thousands(u.InputTokens) + " input", thousands(u.OutputTokens) + " output"}
	for _, p := range []struct {
		n    int64
		what string
	}{{u.CacheReadTokens, "cache read"}, {u.CacheWriteTokens, "cache write"}, {u.ReasoningTokens, "reasoning"}} {
		if p.n != 0 {
			parts = append(parts, thousands(p.n)+" "+p.what)
		}
	}
	return strings.Join(parts, " · ")
}

// thousands writes n with thousands separators: 1,234,567.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural says "1 message", "2 messages", "2 matches".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	for _, end := range []string{"ch", "sh", "s", "x"} {
		if strings.HasSuffix(noun, end) {
			return fmt.Sprintf("%d %ses", n, noun)
		}
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
