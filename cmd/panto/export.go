package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// This file is panto export: one session as Markdown (to paste), as one
// self-contained HTML file (to read, on a phone too), or as JSON (for
// scripts). The renderers are in export_md.go, export_html.go and
// export_json.go; they share the exported view of a session below, read
// from the log itself so that every entry has its time and endpoint.

func exportCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a session as Markdown, HTML or JSON, or as a Claude Code, Codex or pi session to go on with there",
		UsageText: "panto export [--store SPEC] [--endpoint URL] [--format md|html|json|claude-code|codex|pi] [-o FILE] [--project PROJECT] ID\npanto export --project PROJECT [--format md|html|json|claude-code|codex|pi] [-o FILE]",
		Description: `Writes the session with this id or unique id prefix, every message with its number,
time and model: Markdown to paste; one self-contained HTML file to read in a browser
(no network; tool calls, their results and thinking fold away); JSON for scripts.
Each answer shows its stop reason and its tokens. Without -o it goes to stdout;
the format defaults to the extension of -o, else Markdown. With --project, the id
is one of that project's sessions, and without an id it is its latest session.

--format claude-code writes the session as a Claude Code session of the current
directory (under CLAUDE_CONFIG_DIR, else ~/.claude), prints its id, and says how to
go on with it there: claude --resume ID, in this directory. --format codex does the
same for Codex (under CODEX_HOME, else ~/.codex): codex resume ID; --format pi for pi
(under PI_CODING_AGENT_DIR, else ~/.pi/agent): pi --session ID. It is a copy, as a
fork is: the panto session stays as it is. System prompt entries are left out, and so
is thinking the other agent's provider would refuse (for Codex all of it); panto
import brings what the other agent added back as a fork of the session, and nothing
when it added nothing. Exporting the same session again writes the same file.

Examples:
   panto export 3f9a > session.md
   panto export 3f9a -o session.html
   panto export --project . -o latest.html          this project's latest session
   panto export 3f9a --format json | jq '.messages[] | select(.role == "assistant") | .usage'
   claude --resume "$(panto export 3f9a --format claude-code)"   go on in Claude Code
   codex resume "$(panto export 3f9a --format codex)"            go on in Codex
   pi --session "$(panto export --project . --format pi)"         go on in pi`,
		Flags: append(storeFlags(false),
			&cli.StringFlag{Name: "format", Usage: "md, html, json, claude-code, codex or pi (default: by the extension of -o, else md)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` instead of stdout"},
			projectFlag(),
		),
		Action: func(c *cli.Context) error { return export(c, e) },
	}
}

// export is panto export: find the session, render it, write it.
func export(c *cli.Context, e *env) error {
	format, err := exportFormat(c.String("format"), c.String("output"))
	if err != nil {
		return err
	}
	st, err := openLogStore(c)
	if err != nil {
		return err
	}
	defer closeStore(c.Context, st, e.stderr)
	sess, err := exportSession(c, st)
	if err != nil {
		return err
	}
	if to, ok := agentExports[format]; ok {
		// Another agent's form is built from the whole session.
		doc, err := readExport(c.Context, st, sess.Info)
		if err != nil {
			return err
		}
		return exportToAgent(c, e, doc, to)
	}
	defer paceReading(c.Context)() // streamed: little is live
	out := c.String("output")
	if out == "" {
		_, err := streamExport(c.Context, st, sess.Info, exportRenderers[format](), e.stdout)
		if err != nil {
			return fmt.Errorf("export %s: %w", sess.Info.ID, err)
		}
		return nil
	}
	// Written beside out and renamed over it once whole; private like
	// the session it holds.
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return fmt.Errorf("export %s: %w", sess.Info.ID, err)
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	h, err := streamExport(c.Context, st, sess.Info, exportRenderers[format](), f)
	if err == nil {
		err = f.Chmod(0o600)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), out)
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", sess.Info.ID, err)
	}
	fmt.Fprintf(e.stderr, "session %s: %s, %s written to %s\n", shortID(sess.Info.ID), plural(h.Messages, "message"), byteSize(fi.Size()), out)
	return nil
}

// exportRenderer writes one format of export as the session's log is
// read: each message, then the heading and the end, which say what the
// whole log holds (its totals, as read: the listed ones may lag in a
// bucket's index).
type exportRenderer interface {
	head(w *bufio.Writer, h exportHead) error
	message(w *bufio.Writer, m exportMessage) error
	tail(w *bufio.Writer, h exportHead) error
}

// exportRenderers are the formats streamExport writes.
var exportRenderers = map[string]func() exportRenderer{
	"md":   func() exportRenderer { return markdownExport{} },
	"html": func() exportRenderer { return htmlExport{} },
	"json": func() exportRenderer { return &jsonExport{} },
}

// exportHead is what an export's heading and end say of the session.
type exportHead struct {
	Info agent.SessionInfo
	// Origin is the header's, for an imported session (parentLine).
	Origin   *sessionlog.Origin
	Messages int
}

// streamExport writes session info of st in render's format to w as its
// log is read, in the memory of one message: the messages go to a spool
// file first, since the heading before them says the totals of the whole
// log, then the heading, the spooled messages and the end go to w.
func streamExport(ctx context.Context, st store.LogStore, info agent.SessionInfo, render exportRenderer, w io.Writer) (exportHead, error) {
	r, _, err := st.ReadLog(ctx, info.ID, 0)
	if err != nil {
		return exportHead{}, err
	}
	defer r.Close()
	spool, err := os.CreateTemp("", "panto-export-*") // 0600, removed at the end
	if err != nil {
		return exportHead{}, err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	sw := bufio.NewWriterSize(spool, 64<<10)
	d := sessionlog.Decoder{Name: info.ID}
	n := 0
	err = sessionlog.ReadLines(r, func(line []byte, last bool) error {
		if last {
			return nil
		}
		e, ok, err := d.DecodeEntry(line)
		if err != nil || !ok {
			return err
		}
		n++
		return render.message(sw, exportMessage{N: n, Entry: e, Label: roleLabel(e.Message)})
	})
	if err == nil && d.Header == nil {
		err = errors.New("the log is empty")
	}
	if err == nil {
		err = sw.Flush()
	}
	if err != nil {
		return exportHead{}, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return exportHead{}, err
	}
	h := exportHead{Info: d.Info, Origin: d.Header.Origin, Messages: n}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := render.head(bw, h); err != nil {
		return exportHead{}, err
	}
	if _, err := bw.ReadFrom(spool); err != nil {
		return exportHead{}, err
	}
	if err := render.tail(bw, h); err != nil {
		return exportHead{}, err
	}
	return h, bw.Flush()
}

// exportSession is the session the arguments name: an id or prefix,
// among the sessions of --project when it is given; with --project and
// no id, that project's latest.
func exportSession(c *cli.Context, st store.LogStore) (*agent.Session, error) {
	if !c.IsSet("project") {
		return resolveID(c, st, "export")
	}
	p, err := projectOf(c.String("project"))
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if c.NArg() == 0 {
		sess, err := latestInProject(c.Context, st, p)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		return sess, nil
	}
	sess, err := resolveID(c, st, "export")
	if err != nil {
		return nil, err
	}
	if !sameProject(sess.Info.Project, p) {
		return nil, fmt.Errorf("export: session %s is of project %s, not of %s: leave out --project, or give an id of its sessions", shortID(sess.Info.ID), projectName(sess.Info.Project, ""), projectName(p.Project, ""))
	}
	return sess, nil
}

// exportFormat is the format asked for, else the one of the output
// file's extension, else Markdown.
func exportFormat(format, output string) (string, error) {
	if format == "" {
		switch strings.ToLower(filepath.Ext(output)) {
		case ".html", ".htm":
			return "html", nil
		case ".json":
			return "json", nil
		}
		return "md", nil
	}
	switch format {
	case "md", "markdown":
		return "md", nil
	case "html", "json", "claude-code", "codex", "pi":
		return format, nil
	case "claude":
		return "claude-code", nil
	}
	return "", fmt.Errorf("export: --format %q: want md, html, json, claude-code, codex or pi", format)
}

// exportDoc is a session as the exports show it.
type exportDoc struct {
	Info agent.SessionInfo
	// Origin is the header's, for an imported session (parentLine).
	Origin   *sessionlog.Origin
	Messages []exportMessage
}

// exportMessage is one entry with its number (from 1) and where it
// stands.
type exportMessage struct {
	N int
	sessionlog.Entry
	// Label is what it is: user, assistant, tool, summary, system, title.
	Label string
}

// readExport reads session info's log whole, for an export to another
// agent, whose form is built from the whole session.
func readExport(ctx context.Context, st store.LogStore, info agent.SessionInfo) (*exportDoc, error) {
	r, _, err := st.ReadLog(ctx, info.ID, 0)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", info.ID, err)
	}
	defer r.Close()
	doc := &exportDoc{}
	d := sessionlog.Decoder{Name: info.ID}
	err = sessionlog.ReadLines(r, func(line []byte, last bool) error {
		if last {
			return nil
		}
		e, ok, err := d.DecodeEntry(line)
		if ok {
			doc.Messages = append(doc.Messages, exportMessage{N: len(doc.Messages) + 1, Entry: e, Label: roleLabel(e.Message)})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", info.ID, err)
	}
	if d.Header == nil {
		return nil, fmt.Errorf("export %s: %w", info.ID, errors.New("the log is empty"))
	}
	// The summary of these very bytes (the listed one may lag in a
	// bucket's index).
	doc.Info, doc.Origin = d.Info, d.Header.Origin
	return doc, nil
}

// stopText says why an assistant message ended: the wire's word and
// what it means, or that the step was stopped in it (Ctrl-C, a broken
// stream) with the text that had streamed.
func stopText(m agent.Message) string {
	if why, ok := m.Interrupted(); ok {
		return "interrupted (" + why + "): the text that had streamed"
	}
	r := m.StopReason
	if r == "" {
		return "no stop reason recorded"
	}
	return fmt.Sprintf("stop: %s (%s)", r, r.Kind())
}

// identityText names the endpoint of an entry.
func identityText(id agent.WireIdentity) string {
	s := id.Model
	if id.Reasoning != "" {
		s += " · reasoning " + string(id.Reasoning)
	}
	return s
}

// exportTime is how the exports spell a time: UTC, to the second.
func exportTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// longestRun is the longest run of c in s (to pick a fence longer than
// any in a code block).
func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}
