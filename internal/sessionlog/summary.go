package sessionlog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/panto-dev/panto/agent"
)

// SummarizeLine is DecodeLine for a caller that wants only the summary
// (Info), not the message. It accepts and refuses exactly the lines
// DecodeLine does (every line is still validated: JSON syntax, the JSON
// type of every field, the role) and folds the same Info, but it
// unescapes and copies no content string except the text of a user
// message, which is what the summary keeps. It reports whether the line
// was a message line.
//
// Two paths, the same answer:
//
//   - a hand-written scanner for lines as EncodeBatch writes them (known
//     keys spelled exactly, each once, no nulls): it validates the JSON
//     syntax as encoding/json does and takes the few fields the summary
//     needs. Anything else it does not try to interpret;
//   - every other line goes through encoding/json into summaryEntry, a
//     twin of entry whose content strings stay undecoded, so that
//     encoding/json's rules (case-insensitive keys, duplicates, nulls,
//     type errors) apply unchanged and a malformed line gets its error.
//
// On realistic transcripts (most bytes are tool results, code and prose
// inside content strings) it is several times faster than DecodeLine.
// FuzzSummarize checks that both paths agree with DecodeLine.
func (d *Decoder) SummarizeLine(line []byte) (bool, error) {
	_, ok, err := d.SummarizeTurn(line)
	return ok, err
}

// Turn is what a message line says of what its turn cost: when it was
// written, its role, the endpoint and the tokens billed (nil when none).
type Turn struct {
	TS       time.Time
	Role     agent.Role
	Identity agent.WireIdentity
	Usage    *agent.Usage
}

// SummarizeTurn is SummarizeLine that also returns the line's Turn (the
// zero Turn for the header), for a reader that sums usage without
// decoding content.
func (d *Decoder) SummarizeTurn(line []byte) (Turn, bool, error) {
	if d.Header == nil {
		_, ok, err := d.DecodeLine(line)
		return Turn{}, ok, err
	}
	d.Line++
	s, ok := scanSummary(line)
	if !ok {
		var err error
		if s, err = jsonSummary(line); err != nil {
			return Turn{}, false, fmt.Errorf("%s:%d: %w: %v", d.Name, d.Line, ErrMalformed, err)
		}
	}
	if s.Type != TypeMessage {
		return Turn{}, false, fmt.Errorf("%s:%d: %w: unexpected line type %q", d.Name, d.Line, ErrMalformed, s.Type)
	}
	switch s.Role {
	case agent.RoleSystem, agent.RoleUser, agent.RoleAssistant:
	default:
		return Turn{}, false, fmt.Errorf("%s:%d: %w: unknown role %q", d.Name, d.Line, ErrMalformed, s.Role)
	}
	// The message as far as SessionInfo.Update looks at it: block types,
	// the metadata, the usage, and the texts of a user message that is
	// not a tool result.
	m := agent.Message{Role: s.Role, Metadata: s.Metadata, Usage: s.Usage, Content: make([]agent.Block, len(s.Content))}
	for i, b := range s.Content {
		m.Content[i].Type = b.Type
	}
	if s.Role == agent.RoleUser && !m.IsToolResult() && !m.IsCompactionSummary() {
		for i, b := range s.Content {
			if b.Text != nil {
				m.Content[i].Text = unquote(b.Text)
			}
		}
	}
	ident := agent.WireIdentity{APIStyle: s.APIStyle, BaseURL: s.BaseURL, Model: s.Model, Reasoning: s.Reasoning}
	d.Info.Update(agent.PersistentMessage{Message: m, Identity: ident})
	if s.TS.After(d.Info.Modified) {
		d.Info.Modified = s.TS
	}
	return Turn{TS: s.TS, Role: s.Role, Identity: ident, Usage: s.Usage}, true, nil
}

// summaryEntry is entry as SummarizeLine reads it: the same fields with
// the same JSON types (so the same lines decode, and fail to), but
// content strings are only checked to be strings (see rawString) and a
// tool's input is not copied.
type summaryEntry struct {
	Type    string         `json:"type"`
	TS      time.Time      `json:"ts"`
	Role    agent.Role     `json:"role"`
	Content []summaryBlock `json:"content"`
	Usage   *agent.Usage   `json:"usage,omitempty"`
	// StopReason is only checked to be a string: no summary keeps it.
	StopReason rawString             `json:"stop_reason,omitempty"`
	Metadata   map[string]any        `json:"metadata,omitempty"`
	APIStyle   agent.APIStyle        `json:"api_style,omitempty"`
	BaseURL    string                `json:"base_url,omitempty"`
	Model      string                `json:"model,omitempty"`
	Reasoning  agent.ReasoningEffort `json:"reasoning,omitempty"`
	More       int                   `json:"more,omitempty"`
}

// summaryBlock is agent.Block with the same field names and JSON types.
type summaryBlock struct {
	Type      agent.BlockType `json:"type"`
	Text      rawString       `json:"text,omitempty"`
	Signature rawString       `json:"signature,omitempty"`
	ToolUseID rawString       `json:"tool_use_id,omitempty"`
	ToolName  rawString       `json:"name,omitempty"`
	Input     rawValue        `json:"input,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Mode      rawString       `json:"mode,omitempty"`
	Data      rawString       `json:"data,omitempty"`
	// input is the raw value of "input", kept by the fast path only.
	input []byte
}

func jsonSummary(line []byte) (summaryEntry, error) {
	var e summaryEntry
	err := json.Unmarshal(line, &e)
	return e, err
}

// MessageText is a message line as a reader of its text needs it: when,
// who, and each block's kind with its text, tool name and input as raw
// JSON (slices of the line; nil when absent). Unquote a string token
// with Unquote.
type MessageText struct {
	TS     time.Time
	Role   agent.Role
	Blocks []TextBlock
}

// TextBlock is one block of a MessageText.
type TextBlock struct {
	Type agent.BlockType
	// Text and Name are string tokens, quotes included; Input any value.
	Text, Name, Input []byte
}

// ScanMessageText reads a message line written the way EncodeBatch
// writes one, through SummarizeLine's fast scanner: it validates the
// line's JSON and unquotes nothing. ok is false for any other line (and
// for one of an unknown role): DecodeEntry reads it, or says why not.
func ScanMessageText(line []byte) (MessageText, bool) {
	s, ok := scanSummary(line)
	if !ok || s.Type != TypeMessage {
		return MessageText{}, false
	}
	switch s.Role {
	case agent.RoleSystem, agent.RoleUser, agent.RoleAssistant:
	default:
		return MessageText{}, false
	}
	m := MessageText{TS: s.TS, Role: s.Role, Blocks: make([]TextBlock, len(s.Content))}
	for i, b := range s.Content {
		m.Blocks[i] = TextBlock{Type: b.Type, Text: b.Text, Name: b.ToolName, Input: b.input}
	}
	return m, true
}

// Unquote decodes a string token of a MessageText ("" for nil), as
// encoding/json would.
func Unquote(tok []byte) string {
	if len(tok) < 2 {
		return ""
	}
	return unquote(tok)
}

// rawString is a JSON string kept undecoded: the token of the last string
// value given, quotes included (a slice of the line, not a copy); null
// leaves it as it was, as null leaves a Go string field. Any other value
// is a type error, as for a string field. The line has been checked to be
// valid JSON before UnmarshalJSON is called, so the token decodes.
type rawString []byte

func (s *rawString) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		*s = b
	case string(b) == "null":
	default:
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[string]()}
	}
	return nil
}

// rawValue accepts any JSON value, as json.RawMessage does, without
// copying it.
type rawValue struct{}

func (*rawValue) UnmarshalJSON([]byte) error { return nil }

func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "value"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	default:
		return "number"
	}
}
