// Package exporter writes a panto session as another agent's session
// log, so that the other agent continues the conversation where panto
// left it: the way out that package importer is the way in of, for the
// same agents: Claude Code (claudecode.go), Codex (codex.go) and pi
// (pi.go).
//
// An export is a copy, as a fork is: the other agent writes its turns
// into its own log, and the panto session stays as it was. The export
// names the session it came from (a "pantoSession" field, which the
// other agent leaves alone: on every line of Claude Code's, in Codex's
// session_meta and pi's header), and how many messages an import of the
// export makes ("pantoMessages", on the first line), so that importing
// the log back (importer, panto import) makes it a fork of that session,
// forked at that message, holding what the other agent added, and
// brings nothing back when it added nothing.
//
// What the other agent cannot take is left out, the export says so
// (Result.Dropped): system prompt entries (the other agent has its own
// prompt), and thinking its provider would refuse (for Anthropic a block
// without a signature, or signed by another provider; for Codex's
// Responses API any it did not encrypt itself). Titles and compaction
// summaries are written in the other agent's own records.
package exporter

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Options says what an export needs beside the session.
type Options struct {
	// Session is the panto session's id.
	Session string
	// CWD is the directory the other agent will go on in: its log
	// records it, and goes under the other agent's sessions of it.
	CWD string
}

// Result is an exported log.
type Result struct {
	// SessionID is the other agent's id of the exported session.
	SessionID string
	// Log is its lines.
	Log []byte
	// Messages is the number of panto messages written; Dropped those
	// left out (system prompt entries) and DroppedThinking the thinking
	// blocks left out.
	Messages, Dropped, DroppedThinking int
}

// derivedUUID is a UUID (version 4 in form, its bits from a hash) of
// parts: an export of the same session at the same length names the
// same foreign session, and the same lines, whenever it runs.
func derivedUUID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	b := h.Sum(nil)[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// counted runs write twice: once without the count of messages an
// import of the export makes, which the importer of agent a then counts
// on those lines, and once with it (the count changes no conversion).
func counted(a importer.Agent, write func(messages int) (*Result, error)) (*Result, error) {
	res, err := write(0)
	if err != nil {
		return nil, err
	}
	conv, err := importer.Convert(a, res.SessionID+".jsonl", res.Log)
	if err != nil {
		return nil, fmt.Errorf("export to %s: the export does not import back: %w", a, err)
	}
	return write(conv.Messages)
}

// homeDir is $HOME as getenv has it (the command's environment, which a
// test sets).
func homeDir(getenv func(string) string) (string, error) {
	if home := getenv("HOME"); home != "" {
		return home, nil
	}
	return "", errors.New("HOME is not set")
}

// anthropicTakes reports whether Anthropic takes thinking block b of
// answer e back: thinking Anthropic itself signed (an answer of its
// wire, with its signature), or redacted; another provider's, or one
// without a signature, it refuses.
func anthropicTakes(e sessionlog.Entry, b agent.Block) bool {
	if e.Identity.APIStyle != agent.APIStyleAnthropicMessages {
		return false
	}
	return b.Type == agent.BlockRedactedThinking || b.Signature != ""
}
