package importer

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/panto-dev/panto/internal/sessionlog"
)

// Claude Code's --fork-session (claude --resume ID --fork-session, /fork
// in its terminal) writes a new session whose log begins with a copy of
// the parent's lines, uuids and all, its own session id on them, and the
// parent's on each copied answer as "requestSessionId" (the session that
// made the request); the fork's own answers carry none. Converted as
// any log, the fork was a session of its own holding the parent's
// messages, counted twice by usage. It is a panto fork: forked_from the
// parent, forked_at the number of copied messages, which its own answer
// after them makes known (until then it is nothing of its own: waiting).
// The log read before its first answer (an import racing Claude Code's
// write of the copies) cannot tell it is a fork: it converts as any log,
// a form the fork's conversion keeps (others), so that a session stored
// so goes on in it.

// ccFork is what a log says of being a fork: the parent's session id
// (the requestSessionId of the last copied answer) and that answer's
// time; own says an answer of its own follows.
type ccFork struct {
	parent string
	last   time.Time
	own    bool
}

// claudeCodeFork scans a log's whole lines for copied answers.
func claudeCodeFork(data []byte) ccFork {
	var f ccFork
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn: the agent is writing it
		}
		line := data[:i]
		data = data[i+1:]
		if !bytes.Contains(line, []byte(`"assistant"`)) {
			continue
		}
		var l struct {
			Type             string    `json:"type"`
			SessionID        string    `json:"sessionId"`
			RequestSessionID string    `json:"requestSessionId"`
			IsSidechain      bool      `json:"isSidechain"`
			Timestamp        time.Time `json:"timestamp"`
		}
		if json.Unmarshal(line, &l) != nil || l.Type != "assistant" || l.IsSidechain {
			continue
		}
		if l.RequestSessionID != "" && l.RequestSessionID != l.SessionID {
			f.parent, f.last, f.own = l.RequestSessionID, l.Timestamp, false
		} else if f.parent != "" {
			f.own = true
		}
	}
	return f
}

// claudeCodeForked converts a fork (c its conversion as any log's) as
// one: nothing until its own answer, then forked_from the parent at the
// number of messages copied, c itself a form an earlier import stored.
func claudeCodeForked(name string, data []byte, c *Conversion, f ccFork) (*Conversion, error) {
	if !f.own {
		return &Conversion{Agent: c.Agent, ForeignID: c.ForeignID, ID: c.ID, Stats: Stats{Held: true}, others: c.forms()}, nil
	}
	// The copies keep the parent's times, all before the fork's own.
	copied := 0
	eachMessage(c.Log, func(_ []byte, raw string) {
		var ts time.Time
		if json.Unmarshal([]byte(raw), &ts) == nil && !ts.After(f.last) {
			copied++
		}
	})
	conv := newClaudeCode()
	conv.b.header.ForkedFrom, conv.b.header.ForkedAt = SessionID(ClaudeCode, f.parent), copied
	fc, err := convert(conv, ClaudeCode, name, data)
	if err != nil || fc.Messages != c.Messages {
		return c, nil
	}
	fc.others = append(fc.others, c.forms()...)
	return fc, nil
}

// pi's --fork writes a new session whose header names the parent
// (parentSession) and whose entries begin with a copy of the parent's,
// ids and times and all, up to the fork; its own entries come after the
// header's time, the copies before it. Its conversion is a panto fork at
// the number of messages copied, made known by its first own message
// (until then it is nothing of its own: held), the conversion without
// it a form it keeps.
func piForked(name string, data []byte, c *Conversion) (*Conversion, error) {
	var h sessionlog.Header
	line, _, _ := bytes.Cut(c.Log, []byte{'\n'})
	if len(c.Log) == 0 || json.Unmarshal(line, &h) != nil || h.ForkedFrom == "" || h.ForkedAt != 0 || c.ExportOf != "" {
		return c, nil
	}
	copied, total := 0, 0
	eachMessage(c.Log, func(_ []byte, raw string) {
		var ts time.Time
		total++
		if json.Unmarshal([]byte(raw), &ts) == nil && ts.Before(h.Created) {
			copied++
		}
	})
	switch {
	case copied == 0:
		return c, nil // nothing copied (a branch an older pi wrote apart)
	case copied == total:
		return &Conversion{Agent: c.Agent, ForeignID: c.ForeignID, ID: c.ID, Stats: Stats{Held: true}, others: c.forms()}, nil
	}
	conv := newPi()
	conv.b.header.ForkedAt = copied
	fc, err := convert(conv, Pi, name, data)
	if err != nil || fc.Messages != c.Messages {
		return c, nil
	}
	fc.others = append(fc.others, c.forms()...)
	return fc, nil
}
