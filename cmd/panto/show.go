package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/gcpace"
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
			defer paceReading(c.Context)()
			st, _, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeStore(c.Context, st, e.stderr)
			sess, err := st.Resolve(c.Context, c.Args().First())
			if err != nil {
				return fmt.Errorf("show: %w", err)
			}
			ls, ok := store.AsLogStore(st)
			if !ok {
				return errors.New("show: the store is none, which keeps no sessions: give --store DIR or s3://BUCKET[/PREFIX]")
			}
			if err := showSession(c.Context, e.stdout, ls, sess.Info, c.Bool("json"), e.getenv("HOME")); err != nil {
				return fmt.Errorf("show %s: %w", sess.Info.ID, err)
			}
			return nil
		},
	}
}

// readHeadroom is how far past what is live the heap of a command that
// reads sessions through grows before the collector runs (paceReading):
// a few of the largest messages, and the reads ahead of search and usage.
const readHeadroom = 64 << 20

// paceReading paces the collector of a command that reads sessions
// through and keeps little of them (show, search, usage, export but to
// another agent, which holds the session whole, and whose collections at
// a limit that close to what is live would each mark all of it): it runs
// at readHeadroom past what is live, not each time the heap doubles,
// which for a few megabytes live meant every few megabytes read (show of
// a 300 MB session spent 4 s of its 13 in the collector). It returns the
// func that puts the collector back.
func paceReading(ctx context.Context) func() {
	return gcpace.Govern(ctx, readHeadroom, true)
}

// showSession prints session info of ls as show does, as its log is
// read: a message at a time, so that a session of hundreds of MB (an
// import of a long Claude Code session) is shown in the memory of its
// longest message, where loading it whole took four times its size,
// and its first lines are on the screen before the last are read. The
// heading counts the messages info says (the listing's summary); the
// totals at the end are those of the bytes read. home shortens the
// project's paths (projectLine).
func showSession(ctx context.Context, w io.Writer, ls store.LogStore, info agent.SessionInfo, asJSON bool, home string) error {
	r, _, err := ls.ReadLog(ctx, info.ID, 0)
	if err != nil {
		return err
	}
	defer r.Close()
	bw := bufio.NewWriterSize(w, 64<<10)
	var out showWriter = &showText{w: bw, info: info, home: home}
	if asJSON {
		out = &showJSON{w: bw, info: info}
	}
	d := sessionlog.Decoder{Name: info.ID}
	err = sessionlog.ReadLines(r, func(line []byte, last bool) error {
		if last {
			return nil // not committed
		}
		e, ok, err := d.DecodeEntry(line)
		switch {
		case err != nil:
			return err
		case !ok:
			return out.head(d.Header.Origin)
		}
		return out.message(e.Message)
	})
	if err == nil && d.Header == nil {
		err = errors.New("the log is empty")
	}
	if err == nil {
		err = out.end(d.Info)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// showWriter prints a session as its log is read: the heading once the
// header is, each message, then the end.
type showWriter interface {
	head(origin *sessionlog.Origin) error
	message(m agent.Message) error
	end(read agent.SessionInfo) error
}

// showText is show without --json: a heading, the transcript, numbered
// from 1, and the token totals.
type showText struct {
	w    *bufio.Writer
	info agent.SessionInfo
	home string
	n    int
}

func (s *showText) head(origin *sessionlog.Origin) error {
	head := []string{"session " + s.info.ID}
	if s.info.Title != "" {
		head = append(head, fmt.Sprintf("%q", s.info.Title))
	}
	head = append(head, plural(s.info.MessageCount, "message"), s.info.Modified.Local().Format("2006-01-02 15:04"))
	fmt.Fprintln(s.w, strings.Join(head, " · "))
	if line := parentLine(s.info, origin); line != "" {
		fmt.Fprintln(s.w, line)
	}
	if s.info.Project != (agent.Project{}) {
		fmt.Fprintln(s.w, projectLine(s.info.Project, s.home))
	}
	_, err := fmt.Fprintln(s.w)
	return err
}

func (s *showText) message(m agent.Message) error {
	if s.n > 0 {
		fmt.Fprintln(s.w)
	}
	s.n++
	writeMessage(s.w, m, s.n)
	return nil
}

func (s *showText) end(read agent.SessionInfo) error {
	fmt.Fprintln(s.w)
	writeTotals(s.w, read.Usage)
	return nil
}

// showJSON is show --json: {"session": …, "messages": […]}, as one
// json.Encoder with two spaces of indent writes it, a message at a time.
type showJSON struct {
	w    *bufio.Writer
	info agent.SessionInfo
	doc  jsonDocStream
}

func (s *showJSON) head(*sessionlog.Origin) error {
	return s.doc.head(s.w, struct {
		Session  sessionJSON   `json:"session"`
		Messages []messageJSON `json:"messages"`
	}{toSessionJSON(s.info), []messageJSON{}})
}

func (s *showJSON) message(m agent.Message) error { return s.doc.element(s.w, toMessageJSON(m)) }

func (s *showJSON) end(agent.SessionInfo) error { return s.doc.end(s.w) }

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
