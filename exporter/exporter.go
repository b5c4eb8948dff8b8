// Package exporter writes a panto session as another agent's session
// log, so that the other agent continues the conversation where panto
// left it: the way out that package importer is the way in of. Only
// Claude Code's format is written so far (claudecode.go).
//
// An export is a copy, as a fork is: the other agent writes its turns
// into its own log, and the panto session stays as it was. Each exported
// line names the session it came from (the "pantoSession" field, which
// the other agent leaves alone), and the first how many messages an
// import of the export makes ("pantoMessages"), so that importing the
// log back (importer, panto import) makes it a fork of that session,
// forked at that message, holding what the other agent added, and
// brings nothing back when it added nothing.
//
// What the other agent cannot take is left out, the export says so
// (Result.Dropped): system prompt entries (the other agent has its own
// prompt), and thinking that Anthropic would refuse (a block without a
// signature, or signed by another provider). Titles and compaction
// summaries are written in the other agent's own records.
package exporter

import (
	"crypto/sha256"
	"fmt"
)

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
