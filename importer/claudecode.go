package importer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Claude Code writes one file per session (and one per subagent), a line
// per record: user and assistant messages (one line per content block of
// an API response, each repeating the response's usage), system notes,
// titles (summary), file-history snapshots and queue operations. The
// lines form a tree by uuid/parentUuid; the file is read in its own
// order, which is the order they were written (a rewound branch stays in
// the import where it was written).
type claudeCode struct {
	b *builder
	// seenUUIDs are the uuids read so far, titlesFor the summaries
	// waiting for the line they name (leafUuid) to be read.
	seenUUIDs map[string]bool
	titlesFor map[string]string
	// main is set by the first message line: a session's own log (as
	// opposed to a subagent's transcript, whose lines are all
	// sidechain ones).
	main, known bool
}

func newClaudeCode() *claudeCode {
	return &claudeCode{b: newBuilder(ClaudeCode), seenUUIDs: map[string]bool{}, titlesFor: map[string]string{}}
}

func (c *claudeCode) builder() *builder { return c.b }

type ccLine struct {
	Type             string     `json:"type"`
	Subtype          string     `json:"subtype"`
	UUID             string     `json:"uuid"`
	SessionID        string     `json:"sessionId"`
	AgentID          string     `json:"agentId"`
	IsSidechain      bool       `json:"isSidechain"`
	IsMeta           bool       `json:"isMeta"`
	IsCompactSummary bool       `json:"isCompactSummary"`
	Version          string     `json:"version"`
	CWD              string     `json:"cwd"`
	Timestamp        *time.Time `json:"timestamp"`
	Summary          string     `json:"summary"`
	LeafUUID         string     `json:"leafUuid"`
	CustomTitle      string     `json:"customTitle"`
	Message          *ccMessage `json:"message"`
	// PantoSession names the panto session a line was exported from
	// (package exporter); PantoMessages, on an export's first line, is
	// the number of messages an import of the export makes.
	PantoSession  string `json:"pantoSession"`
	PantoMessages int    `json:"pantoMessages"`
}

type ccMessage struct {
	ID         string          `json:"id"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      *ccUsage        `json:"usage"`
}

type ccUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

type ccBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (c *claudeCode) line(line []byte) error {
	var l ccLine
	if err := json.Unmarshal(line, &l); err != nil {
		return err
	}
	if l.Type == "user" || l.Type == "assistant" {
		if !c.known {
			c.main, c.known = !l.IsSidechain, true
		}
		if c.main && l.IsSidechain {
			// A subagent's conversation, which Claude Code before 2.0.28
			// wrote into its session's log: read as the session's, it
			// closed the Task call that ran it as interrupted and lost
			// the call's result.
			return nil
		}
	}
	if l.UUID != "" && c.seenUUIDs[l.UUID] {
		// Claude Code writes entries again into the log that holds them,
		// with their uuid and time (a VS Code window reopened, a
		// conversation continued after compaction: anthropics/claude-code
		// issues 56196 and 66947). Read twice, the conversation would
		// hold each message twice and each tool call's id twice, which
		// Anthropic refuses when the session is continued.
		return nil
	}
	b := c.b
	if l.Timestamp != nil {
		b.seen(*l.Timestamp)
	}
	if l.PantoSession != "" && !b.started && b.header.ForkedFrom == "" {
		// A log panto exported (panto export --format claude-code), which
		// Claude Code went on with: a fork of the panto session, whose
		// first messages (and their usage) are that session's.
		b.header.ForkedFrom, b.header.ForkedAt = l.PantoSession, l.PantoMessages
		b.exportOf = l.PantoSession
	}
	if l.SessionID != "" {
		id := l.SessionID
		if isUUID(b.fallbackID) && !l.IsSidechain {
			// The file is the session (<sessionId>.jsonl): its name wins
			// over lines a resume may have copied from another session.
			id = b.fallbackID
		}
		if l.IsSidechain && l.AgentID != "" {
			id = l.SessionID + "/" + l.AgentID
			if !b.started && b.header.ForkedFrom == "" {
				b.header.ForkedFrom = SessionID(ClaudeCode, l.SessionID)
				b.origin().Subagent = l.AgentID
			}
		}
		b.setID(ClaudeCode, id)
		if !b.started {
			o := b.origin()
			if o.SessionID == "" {
				o.SessionID = strings.TrimSuffix(id, "/"+l.AgentID)
			}
			if o.Version == "" {
				o.Version = l.Version
			}
			if o.CWD == "" {
				o.CWD = l.CWD
			}
		}
	}
	var err error
	switch l.Type {
	case "user":
		err = c.userLine(l)
	case "assistant":
		err = c.assistantLine(l)
	case "summary":
		if c.seenUUIDs[l.LeafUUID] {
			b.setTitle(l.Summary)
		} else if l.LeafUUID != "" {
			c.titlesFor[l.LeafUUID] = l.Summary
		}
	case "custom-title":
		b.setTitle(l.CustomTitle)
	case "system":
		if l.Subtype == "turn_duration" || l.Subtype == "stop_hook_summary" {
			// The turn is over: its last answer is whole, though its
			// lines may all say stop_reason null (as often as not in
			// 2.0 and 2.1); left open, a session's last answer would
			// wait for a line that never comes.
			b.closePending()
		}
	}
	// system lines (turn durations, hook summaries, compaction
	// boundaries: the summary is the user line after it),
	// file-history-snapshot and queue-operation have no panto equivalent.
	if err != nil {
		return err
	}
	if l.UUID != "" {
		c.seenUUIDs[l.UUID] = true
		if t, ok := c.titlesFor[l.UUID]; ok {
			delete(c.titlesFor, l.UUID)
			b.setTitle(t)
		}
	}
	return nil
}

// isUUID reports whether s is spelled as a UUID (8-4-4-4-12 hex digits).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
			return false
		}
	}
	return true
}

func (c *claudeCode) userLine(l ccLine) error {
	if l.Message == nil {
		return fmt.Errorf("user line without a message")
	}
	ts := time.Time{}
	if l.Timestamp != nil {
		ts = *l.Timestamp
	}
	if text, ok := asString(l.Message.Content); ok || string(l.Message.Content) == "null" {
		switch {
		case l.IsCompactSummary:
			c.b.user(compactionEntry(ts, text))
		case l.IsMeta || text == "":
			// harness-injected (caveats, command output): not the user's
		default:
			c.b.user(sessionlog.Entry{TS: ts, Message: agent.UserText(text)})
		}
		return nil
	}
	var blocks []ccBlock
	if err := json.Unmarshal(l.Message.Content, &blocks); err != nil {
		return fmt.Errorf("user content: %v", err)
	}
	var texts []agent.Block
	for _, bl := range blocks {
		switch bl.Type {
		case "tool_result":
			out, err := toolResultText(bl.Content)
			if err != nil {
				return fmt.Errorf("tool_result %s: %v", bl.ToolUseID, err)
			}
			c.b.toolResult(bl.ToolUseID, out, bl.IsError)
		case "text":
			if bl.Text != "" {
				texts = append(texts, agent.TextBlock(bl.Text))
			}
		case "image":
			texts = append(texts, agent.TextBlock("[image]"))
		}
	}
	if len(texts) > 0 && !l.IsMeta {
		c.b.user(sessionlog.Entry{TS: ts, Message: agent.Message{Role: agent.RoleUser, Content: texts}})
	}
	return nil
}

// toolResultText is a tool result's content: a string, or text and image
// blocks (an image becomes "[image]").
func toolResultText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := asString(raw); ok {
		return s, nil
	}
	var blocks []ccBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", err
	}
	var parts []string
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			parts = append(parts, bl.Text)
		case "image":
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, "\n"), nil
}

func (c *claudeCode) assistantLine(l ccLine) error {
	m := l.Message
	if m == nil {
		return fmt.Errorf("assistant line without a message")
	}
	var blocks []ccBlock
	if len(m.Content) > 0 && string(m.Content) != "null" {
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			var s string
			if json.Unmarshal(m.Content, &s) != nil {
				return fmt.Errorf("assistant content: %v", err)
			}
			blocks = []ccBlock{{Type: "text", Text: s}}
		}
	}
	var out []agent.Block
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			if bl.Text != "" {
				out = append(out, agent.TextBlock(bl.Text))
			}
		case "thinking":
			out = append(out, agent.Block{Type: agent.BlockThinking, Text: bl.Thinking, Signature: bl.Signature})
		case "redacted_thinking":
			out = append(out, agent.Block{Type: agent.BlockRedactedThinking, Data: bl.Data})
		case "tool_use":
			out = append(out, agent.ToolUseBlock(bl.ID, bl.Name, toolInput(bl.Input)))
		}
	}
	var usage *agent.Usage
	if u := m.Usage; u != nil {
		usage = &agent.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	}
	var ident agent.WireIdentity
	if m.Model != "" && m.Model != "<synthetic>" { // <synthetic>: an error Claude Code wrote itself
		ident = agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, Model: m.Model}
	}
	var stop agent.StopReason
	if m.StopReason != nil {
		stop = agent.StopReason(*m.StopReason)
	}
	ts := time.Time{}
	if l.Timestamp != nil {
		ts = *l.Timestamp
	}
	response := m.ID
	if response == "" {
		response = "line:" + l.UUID
	}
	c.b.assistant(response, ts, out, usage, ident, stop)
	return nil
}

// toolInput is a tool call's input as a JSON object, which every wire
// wants: an object as it is, nothing as {}, anything else as {"input": …}.
func toolInput(raw json.RawMessage) json.RawMessage {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return json.RawMessage("{}")
	}
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	var v any = trimmed
	if json.Valid([]byte(trimmed)) {
		v = json.RawMessage(trimmed)
	}
	data, _ := json.Marshal(map[string]any{"input": v})
	return data
}

// compactionEntry is a compaction summary: panto's context restarts at it.
func compactionEntry(ts time.Time, summary string) sessionlog.Entry {
	return sessionlog.Entry{TS: ts, Message: agent.Message{
		Role:     agent.RoleUser,
		Content:  []agent.Block{agent.TextBlock(summary)},
		Metadata: map[string]any{agent.MetadataCompaction: true},
	}}
}
