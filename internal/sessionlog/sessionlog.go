// Package sessionlog is the one line format of a session log, used by
// every store and by sync, so that a session's bytes are the same wherever
// they live.
//
// A log is a header line followed by one JSON line per message:
//
//	{"type":"session","version":1,"id":"…","created":"…","more":1}
//	{"type":"message","ts":"…","role":"user","content":[…],…}
//	{"type":"message","ts":"…","role":"assistant","content":[…],"usage":{…},"stop_reason":"end_turn",…}
//
// The header of a session copied from another says so:
//
//	{"type":"session",…,"forked_from":"<parent id>","forked_at":12,"more":12}
//
// forked_from names the parent; forked_at is the number of the parent's
// messages a fork (Fork) starts with. panto-sync's keep-both writes
// forked_from alone: its copy holds the parent's whole log as it was.
//
// The header records the project the session was started in
// (agent.Project; internal/project finds it): the working directory,
// and inside a git work tree the normalised origin remote, the work
// tree's root and the path inside it:
//
//	{"type":"session",…,"project":{"remote":"github.com/team/proj","root":"/home/me/proj","path":"cmd","dir":"/home/me/proj/cmd"},"more":1}
//
// A fork and a keep-both copy keep their parent's project.
//
// A title is a message line of its own, a system message with no content
// whose metadata holds the title (agent.TitleMessage); the latest one is
// the session's title:
//
//	{"type":"message","ts":"…","role":"system","content":[],"metadata":{"panto.title":"…"}}
//
// A session imported from another agent's log (panto import) says where
// it came from in its header: "origin":{"agent","session_id",…} (Origin);
// one that replaced a diverged import of the same log also names it:
// "replaces":"<id>".
//
// All of these were added within version 1 because a panto that predates them
// reads them without a fault: the decoder ignores header fields it does
// not know (such a panto lists a fork as a session of its own, without
// its link, and any session without its project), and a system message with no content adds nothing to the
// system prompt and is never sent to a provider (such a panto counts the
// title as a message and shows it as an empty system entry). A new line
// type or role would not do: a decoder refuses those, and the session
// would be unreadable to every older panto.
//
// Every line ends in '\n'. A batch (one atomic append) is written in one
// go, and each of its lines says in "more" how many lines of the same
// batch follow it; the first batch of a log includes the header. The
// committed part of a log is therefore everything up to the last complete
// line whose "more" is 0. What follows it is a write in progress or a
// torn write: a last line without its newline, or complete lines of a
// batch whose end never made it. It is not part of the session and is cut
// off by the next append. A complete line that does not decode, inside
// the committed part, is corruption and is reported with its line number.
//
// The encoding is deterministic (struct field order, sorted map keys), so
// the same messages at the same time encode to the same bytes.
package sessionlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/panto-dev/panto/agent"
)

// Version is the format version this package writes and the newest it
// reads.
const Version = 1

// Line types.
const (
	TypeSession = "session"
	TypeMessage = "message"
)

var (
	// ErrMalformed: a complete line is not a valid line of the format.
	ErrMalformed = errors.New("malformed session log")
	// ErrNewerVersion: the log was written by a newer format version.
	ErrNewerVersion = errors.New("session log written by a newer panto")
)

// Header is the first line of a log.
type Header struct {
	Type    string    `json:"type"`
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// ForkedFrom is the session this log was copied from, ForkedAt the
	// number of its messages a fork started with (0: the whole log, as
	// keep-both copies it). See the package doc.
	ForkedFrom string `json:"forked_from,omitempty"`
	ForkedAt   int    `json:"forked_at,omitempty"`
	// Replaces is the session an import's replacement took the place of
	// (panto import --replace-diverged): the same source, converted anew.
	// Not forked_from, which an imported subagent or fork holds already
	// (its parent). See the package doc.
	Replaces string `json:"replaces,omitempty"`
	// Project is where the session was started (absent in a log that
	// predates it). See the package doc.
	Project agent.Project `json:"project,omitzero"`
	// Origin says which other agent's log an imported session was
	// converted from (panto import); nil for panto's own sessions.
	Origin *Origin `json:"origin,omitempty"`
	More   int     `json:"more,omitempty"`
}

// Origin is where an imported session came from. It holds nothing of the
// machine that imported it (no file path of its own), so that two
// machines importing the same foreign session write the same origin.
type Origin struct {
	// Agent is the agent that wrote the log: claude-code, codex or pi.
	Agent string `json:"agent"`
	// SessionID is that agent's id of the session; Subagent the id of a
	// subagent (side-chain) transcript within it.
	SessionID string `json:"session_id"`
	Subagent  string `json:"subagent,omitempty"`
	// Version is the agent's version that started the log.
	Version string `json:"version,omitempty"`
	// CWD is the working directory the agent ran in.
	CWD string `json:"cwd,omitempty"`
}

// entry is a message line. Provenance is not kept, and system entries
// carry no wire identity (it says nothing about them).
type entry struct {
	Type    string        `json:"type"`
	TS      time.Time     `json:"ts"`
	Role    agent.Role    `json:"role"`
	Content []agent.Block `json:"content"`
	Usage   *agent.Usage  `json:"usage,omitempty"`
	// StopReason is the wire's own word (absent before it was kept).
	StopReason agent.StopReason      `json:"stop_reason,omitempty"`
	Metadata   map[string]any        `json:"metadata,omitempty"`
	APIStyle   agent.APIStyle        `json:"api_style,omitempty"`
	BaseURL    string                `json:"base_url,omitempty"`
	Model      string                `json:"model,omitempty"`
	Reasoning  agent.ReasoningEffort `json:"reasoning,omitempty"`
	More       int                   `json:"more,omitempty"`
}

// EncodeBatch encodes msgs as one batch written at time at. When header is
// true the batch starts a new log for session id and begins with the
// header line.
func EncodeBatch(id string, header bool, msgs []agent.PersistentMessage, at time.Time) ([]byte, error) {
	return EncodeBatchIn(agent.Project{}, id, header, msgs, at)
}

// EncodeBatchIn is EncodeBatch whose header, when it writes one, records
// the project the session was started in.
func EncodeBatchIn(project agent.Project, id string, header bool, msgs []agent.PersistentMessage, at time.Time) ([]byte, error) {
	at = at.UTC()
	var buf bytes.Buffer
	remaining := len(msgs)
	if header {
		h := Header{Type: TypeSession, Version: Version, ID: id, Created: at, Project: project, More: remaining}
		if err := writeLine(&buf, h); err != nil {
			return nil, fmt.Errorf("encode header of session %s: %w", id, err)
		}
	}
	for i, pm := range msgs {
		remaining--
		e := entryOf(pm, at)
		e.More = remaining
		if err := writeLine(&buf, e); err != nil {
			return nil, fmt.Errorf("encode message %d of session %s: %w", i, id, err)
		}
	}
	return buf.Bytes(), nil
}

// EncodeEntries encodes entries as one batch, each line with its own
// time and endpoint. When h is not nil the batch starts a new log and
// begins with h (its type, version and "more" are set here). It is how a
// converted log (panto import) keeps the times of its source.
func EncodeEntries(h *Header, entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	remaining := len(entries)
	if h != nil {
		hh := *h
		hh.Type, hh.Version, hh.More, hh.Created = TypeSession, Version, remaining, h.Created.UTC()
		if err := writeLine(&buf, hh); err != nil {
			return nil, fmt.Errorf("encode header of session %s: %w", h.ID, err)
		}
	}
	for i, en := range entries {
		remaining--
		e := entryOf(agent.PersistentMessage{Message: en.Message, Identity: en.Identity}, en.TS.UTC())
		e.More = remaining
		if err := writeLine(&buf, e); err != nil {
			return nil, fmt.Errorf("encode message %d: %w", i, err)
		}
	}
	return buf.Bytes(), nil
}

// entryOf is the line of pm written at time at.
func entryOf(pm agent.PersistentMessage, at time.Time) entry {
	e := entry{
		Type:       TypeMessage,
		TS:         at,
		Role:       pm.Message.Role,
		Content:    pm.Message.Content,
		Usage:      pm.Usage,
		StopReason: pm.Message.StopReason,
		Metadata:   pm.Message.Metadata,
	}
	if e.Usage == nil {
		e.Usage = pm.Message.Usage
	}
	if e.Content == nil {
		e.Content = []agent.Block{}
	}
	if pm.Message.Role != agent.RoleSystem {
		e.APIStyle = pm.Identity.APIStyle
		e.BaseURL = pm.Identity.BaseURL
		e.Model = pm.Identity.Model
		e.Reasoning = pm.Identity.Reasoning
	}
	return e
}

// EncodeHeader returns header line h, ending in '\n': for a caller that
// writes a log's header apart from its messages (sync's keep-both copy
// rewrites only the header of the log it copies).
func EncodeHeader(h Header) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeLine(&buf, h); err != nil {
		return nil, fmt.Errorf("encode header of session %s: %w", h.ID, err)
	}
	return buf.Bytes(), nil
}

// writeLine appends v to buf as one line of the format: the one encoder
// of every line a log holds.
func writeLine(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(v) // Encode ends the line with '\n' and never emits one inside
}

// lineInfo is what CommittedLength needs of a line.
type lineInfo struct {
	Type string `json:"type"`
	More int    `json:"more"`
}

// readLineInfo is json.Unmarshal into a lineInfo, through SummarizeLine's
// scanner for a message line as EncodeBatch writes it (most of the cost of
// a line is in its content, which the scanner crosses several times
// faster than encoding/json).
func readLineInfo(line []byte) (lineInfo, error) {
	if s, ok := scanSummary(line); ok {
		return lineInfo{Type: s.Type, More: s.More}, nil
	}
	var li lineInfo
	err := json.Unmarshal(line, &li)
	return li, err
}

// CommittedLength returns the length of the committed prefix of data:
// through the last complete line that ends a batch. name is used in
// errors. A complete line that cannot be read as a line of the format is
// ErrMalformed, naming its line number.
func CommittedLength(name string, data []byte) (int, error) {
	end := bytes.LastIndexByte(data, '\n') + 1 // end of the complete lines
	for end > 0 {
		start := bytes.LastIndexByte(data[:end-1], '\n') + 1
		li, err := readLineInfo(data[start : end-1])
		if err != nil || (li.Type != TypeSession && li.Type != TypeMessage) || li.More < 0 {
			line := bytes.Count(data[:start], []byte{'\n'}) + 1
			return 0, fmt.Errorf("%s:%d: %w: not a session log line", name, line, ErrMalformed)
		}
		if li.More == 0 {
			return end, nil
		}
		end = start
	}
	return 0, nil
}

// Decoder decodes the lines of one log in order and folds them into a
// SessionInfo. Its fields are exported so that a caller can save the
// state and resume decoding where it stopped (after more bytes were
// appended).
type Decoder struct {
	// Name is the file or object named in errors.
	Name string `json:"-"`
	// Line is the number of lines decoded so far.
	Line int `json:"line"`
	// Header is the log's header, once decoded.
	Header *Header `json:"header,omitempty"`
	// Info summarises the lines decoded so far.
	Info agent.SessionInfo `json:"info"`
}

// DecodeLine decodes the next line (without its '\n'). It returns the
// message and true for a message line, false for the header.
func (d *Decoder) DecodeLine(line []byte) (agent.Message, bool, error) {
	e, ok, err := d.DecodeEntry(line)
	return e.Message, ok, err
}

// Entry is a message line as stored: the message, when it was written
// and the endpoint of its turn (empty for a system message).
type Entry struct {
	TS       time.Time
	Message  agent.Message
	Identity agent.WireIdentity
}

// DecodeEntry is DecodeLine that returns the whole entry.
func (d *Decoder) DecodeEntry(line []byte) (Entry, bool, error) {
	d.Line++
	fail := func(format string, args ...any) (Entry, bool, error) {
		return Entry{}, false, fmt.Errorf("%s:%d: %w: %s", d.Name, d.Line, ErrMalformed, fmt.Sprintf(format, args...))
	}
	var li lineInfo
	if err := json.Unmarshal(line, &li); err != nil {
		return fail("%v", err)
	}
	if d.Header == nil {
		if li.Type != TypeSession {
			return fail("the first line is not a session header")
		}
		var h Header
		if err := json.Unmarshal(line, &h); err != nil {
			return fail("header: %v", err)
		}
		if h.Version > Version {
			return Entry{}, false, fmt.Errorf("%s:%d: %w (format version %d, this panto reads up to %d): upgrade panto", d.Name, d.Line, ErrNewerVersion, h.Version, Version)
		}
		if h.Version < 1 {
			return fail("header has no format version")
		}
		if err := agent.ValidateSessionID(h.ID); err != nil {
			return fail("header: %v", err)
		}
		d.Header = &h
		d.Info.ID = h.ID
		d.Info.Created = h.Created
		d.Info.Modified = h.Created
		d.Info.Parent = h.ForkedFrom
		d.Info.ForkedAt = h.ForkedAt
		d.Info.Project = h.Project
		return Entry{}, false, nil
	}
	if li.Type != TypeMessage {
		return fail("unexpected line type %q", li.Type)
	}
	var e entry
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&e); err != nil {
		return fail("%v", err)
	}
	switch e.Role {
	case agent.RoleSystem, agent.RoleUser, agent.RoleAssistant:
	default:
		return fail("unknown role %q", e.Role)
	}
	m := agent.Message{Role: e.Role, Content: e.Content, Usage: e.Usage, StopReason: e.StopReason, Metadata: e.Metadata}
	ident := agent.WireIdentity{APIStyle: e.APIStyle, BaseURL: e.BaseURL, Model: e.Model, Reasoning: e.Reasoning}
	d.Info.Update(agent.PersistentMessage{Message: m, Identity: ident})
	if e.TS.After(d.Info.Modified) {
		d.Info.Modified = e.TS
	}
	return Entry{TS: e.TS, Message: m, Identity: ident}, true, nil
}

// Log is a decoded log.
type Log struct {
	Header   Header
	Messages []agent.Message
	Info     agent.SessionInfo
	// Committed is the length of the committed prefix that was decoded.
	Committed int
}

// Parse decodes the committed part of data (see CommittedLength); name is
// used in errors. A log with no committed line returns a nil Log.
func Parse(name string, data []byte) (*Log, error) {
	n, err := CommittedLength(name, data)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	d := Decoder{Name: name}
	var msgs []agent.Message
	err = Lines(data[:n], func(line []byte) error {
		m, ok, err := d.DecodeLine(line)
		if ok {
			msgs = append(msgs, m)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Log{Header: *d.Header, Messages: msgs, Info: d.Info, Committed: n}, nil
}

// Lines calls fn for each complete line of data, without its '\n'.
func Lines(data []byte, fn func(line []byte) error) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		if err := fn(data[:i]); err != nil {
			return err
		}
		data = data[i+1:]
	}
	return nil
}
