package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/exporter"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// exportClaudeCode is panto export --format claude-code: the session as
// a Claude Code session of the current directory (package exporter),
// written where claude --resume finds it, or to -o. Its id goes to
// stdout, for a script to resume it; what was done and left out to
// stderr.
func exportClaudeCode(c *cli.Context, e *env, doc *exportDoc) error {
	id := doc.Info.ID
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("export %s: the current directory: %w", id, err)
	}
	entries := make([]sessionlog.Entry, len(doc.Messages))
	for i, m := range doc.Messages {
		entries[i] = m.Entry
	}
	res, err := exporter.ClaudeCode(entries, exporter.ClaudeCodeOptions{Session: id, CWD: cwd})
	if err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	path := c.String("output")
	if path == "" {
		config, err := exporter.ClaudeCodeDir(e.getenv)
		if err != nil {
			return fmt.Errorf("export %s: %w", id, err)
		}
		path = exporter.ClaudeCodePath(config, cwd, res.SessionID)
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
		left = append(left, plural(res.DroppedThinking, "thinking block")+" Anthropic would refuse")
	}
	done := fmt.Sprintf("session %s: %s written as Claude Code session %s to %s", shortID(id), plural(res.Messages, "message"), res.SessionID, path)
	if already {
		done = fmt.Sprintf("session %s: already exported as Claude Code session %s, at %s", shortID(id), res.SessionID, path)
		if wentOn {
			done += ", which Claude Code went on with (panto import brings that back, as a fork)"
		}
	}
	if len(left) > 0 {
		done += " (left out: " + strings.Join(left, ", ") + ")"
	}
	fmt.Fprintf(e.stderr, "%s; go on with it: claude --resume %s (in %s)\n", done, res.SessionID, cwd)
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
