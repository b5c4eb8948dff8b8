package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/exporter"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// agentExport is how panto export writes a session for another agent
// to go on with: the format, where the agent keeps its sessions, and the
// command that continues one.
type agentExport struct {
	name   string // as the agent calls itself
	write  func([]sessionlog.Entry, exporter.Options) (*exporter.Result, error)
	path   func(getenv func(string) string, cwd string, res *exporter.Result, start time.Time) (string, error)
	resume string // the command, %s the session's id
}

var agentExports = map[string]agentExport{
	"claude-code": {
		name:  "Claude Code",
		write: exporter.ClaudeCode,
		path: func(getenv func(string) string, cwd string, res *exporter.Result, _ time.Time) (string, error) {
			config, err := exporter.ClaudeCodeDir(getenv)
			return exporter.ClaudeCodePath(config, cwd, res.SessionID), err
		},
		resume: "claude --resume %s",
	},
	"codex": {
		name:  "Codex",
		write: exporter.Codex,
		path: func(getenv func(string) string, _ string, res *exporter.Result, start time.Time) (string, error) {
			dir, err := exporter.CodexDir(getenv)
			return exporter.CodexPath(dir, res.SessionID, start), err
		},
		resume: "codex resume %s",
	},
	"pi": {
		name:  "pi",
		write: exporter.Pi,
		path: func(getenv func(string) string, cwd string, res *exporter.Result, start time.Time) (string, error) {
			dir, err := exporter.PiDir(getenv)
			return exporter.PiPath(dir, cwd, res.SessionID, start), err
		},
		resume: "pi --session %s",
	},
}

// exportToAgent is panto export --format claude-code, codex or pi: the session
// as a session of the other agent in the current directory (package
// exporter), written where that agent finds it, or to -o. Its id goes
// to stdout, for a script to resume it; what was done and left out to
// stderr.
func exportToAgent(c *cli.Context, e *env, doc *exportDoc, to agentExport) error {
	id := doc.Info.ID
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("export %s: the current directory: %w", id, err)
	}
	entries := make([]sessionlog.Entry, len(doc.Messages))
	for i, m := range doc.Messages {
		entries[i] = m.Entry
	}
	res, err := to.write(entries, exporter.Options{Session: id, CWD: cwd})
	if err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	path := c.String("output")
	if path == "" {
		start := time.Unix(0, 0)
		if len(entries) > 0 {
			start = entries[0].TS
		}
		if path, err = to.path(e.getenv, cwd, res, start); err != nil {
			return fmt.Errorf("export %s: %w", id, err)
		}
	}
	already, wentOn, err := writeExclusive(path, res.Log)
	if err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	var left []string
	if res.Dropped > 0 {
		left = append(left, plural(res.Dropped, "system prompt entry"))
	}
	if res.DroppedThinking > 0 {
		left = append(left, plural(res.DroppedThinking, "thinking block"))
	}
	done := fmt.Sprintf("session %s: %s written as %s session %s to %s", shortID(id), plural(res.Messages, "message"), to.name, res.SessionID, path)
	if already {
		done = fmt.Sprintf("session %s: already exported as %s session %s, at %s", shortID(id), to.name, res.SessionID, path)
		if wentOn {
			done += fmt.Sprintf(", which %s went on with (panto import brings that back, as a fork)", to.name)
		}
	}
	if len(left) > 0 {
		done += " (left out: " + strings.Join(left, ", ") + ")"
	}
	fmt.Fprintf(e.stderr, "%s; go on with it: %s (in %s)\n", done, fmt.Sprintf(to.resume, res.SessionID), cwd)
	_, err = fmt.Fprintln(e.stdout, res.SessionID)
	return err
}

// writeExclusive writes data to a new file at path, private like the
// session it holds. When the file is there already with data at its
// start (an export of the same session) it reports already, and wentOn
// when more follows (the other agent went on with it): an export never
// overwrites what another agent wrote.
func writeExclusive(path string, data []byte) (already, wentOn bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		have, rerr := os.ReadFile(path)
		if rerr != nil {
			return false, false, rerr
		}
		if bytes.HasPrefix(have, data) {
			return true, len(have) > len(data), nil
		}
		return false, false, fmt.Errorf("%s is there already and holds something else: move it away, or give -o another file", path)
	}
	if err != nil {
		return false, false, err
	}
	_, werr := f.Write(data)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		os.Remove(path)
		return false, false, werr
	}
	return false, false, nil
}
