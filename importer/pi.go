package importer

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// pi writes a header line (the session's id, start and working
// directory), then one entry per line: messages (user, assistant with all
// the blocks of one response, toolResult, bashExecution, custom),
// model and thinking-level changes, compactions, branch summaries,
// labels and the session's name. Format versions 1 to 3 differ in what
// this import reads only by the header's fields. Entries form a tree by
// parentId (branches stay in the file); the file is read in its own
// order.
type pi struct {
	b       *builder
	version int
	// model is the last model_change, for messages that name none.
	model string
	// seenIDs are the ids of the entries read (format 2 on).
	seenIDs map[string]bool
}

func newPi() *pi { return &pi{b: newBuilder(Pi), seenIDs: map[string]bool{}} }

func (c *pi) builder() *builder { return c.b }

type piEntry struct {
	Type      string     `json:"type"`
	Timestamp *time.Time `json:"timestamp"`
	// header
	Version       int    `json:"version"`
	ID            string `json:"id"`
	CWD           string `json:"cwd"`
	ParentSession string `json:"parentSession"`
	BranchedFrom  string `json:"branchedFrom"`
	ModelID       string `json:"modelId"`
	// PantoSession and PantoMessages mark a session panto exported
	// (package exporter): the panto session, and the number of messages
	// an import of the export makes.
	PantoSession  string `json:"pantoSession"`
	PantoMessages int    `json:"pantoMessages"`
	// entries
	Message *piMessage `json:"message"`
	Summary string     `json:"summary"`
	Name    string     `json:"name"`
}

type piMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	API          string          `json:"api"`
	Model        string          `json:"model"`
	Usage        *piUsage        `json:"usage"`
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	ToolCallID   string          `json:"toolCallId"`
	IsError      bool            `json:"isError"`
	// bashExecution
	Command            string `json:"command"`
	Output             string `json:"output"`
	ExcludeFromContext bool   `json:"excludeFromContext"`
}

type piUsage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
}

type piBlock struct {
	Type              string          `json:"type"`
	Text              string          `json:"text"`
	Thinking          string          `json:"thinking"`
	ThinkingSignature string          `json:"thinkingSignature"`
	Redacted          bool            `json:"redacted"`
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Arguments         json.RawMessage `json:"arguments"`
}

func (c *pi) line(line []byte) error {
	var e piEntry
	if err := json.Unmarshal(line, &e); err != nil {
		return err
	}
	b := c.b
	ts := time.Time{}
	if e.Timestamp != nil {
		ts = *e.Timestamp
	}
	if e.Type == "session" {
		if e.ID != "" && e.ID == b.foreign {
			return nil // written again: see below
		}
		if b.foreign != "" || b.started {
			return fmt.Errorf("a second session header")
		}
		if e.ID == "" {
			return fmt.Errorf("session header without an id")
		}
		c.version = e.Version
		if c.version == 0 {
			c.version = 1
		}
		b.setID(Pi, e.ID)
		b.setCreated(ts)
		o := b.origin()
		o.SessionID, o.CWD, o.Version = e.ID, e.CWD, fmt.Sprintf("format %d", c.version)
		parent := e.ParentSession
		if parent == "" {
			parent = e.BranchedFrom
		}
		if id := piSessionIDOfPath(parent); id != "" {
			b.header.ForkedFrom = SessionID(Pi, id)
		}
		if e.PantoSession != "" {
			// An export of a panto session, which pi went on with: a
			// fork of it, whose first messages (and their usage) are the
			// panto session's.
			b.header.ForkedFrom, b.header.ForkedAt = e.PantoSession, e.PantoMessages
			b.exportOf = e.PantoSession
		}
		c.model = e.ModelID
		return nil
	}
	if e.ID != "" {
		// pi writes a session's header and first entries again when its
		// first answer comes after the session was reopened (pi issue
		// 3930): the copies have the ids of the entries read.
		if c.seenIDs[e.ID] {
			return nil
		}
		c.seenIDs[e.ID] = true
	}
	b.seen(ts)
	switch e.Type {
	case "message":
		if e.Message == nil {
			return fmt.Errorf("message entry without a message")
		}
		return c.message(ts, *e.Message)
	case "model_change":
		var mc struct {
			ModelID string `json:"modelId"`
		}
		if err := json.Unmarshal(line, &mc); err != nil {
			return err
		}
		c.model = mc.ModelID
	case "compaction":
		b.user(compactionEntry(ts, e.Summary))
	case "session_info":
		b.setTitle(e.Name)
	case "custom_message":
		var cm struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(line, &cm); err != nil {
			return err
		}
		return c.userContent(ts, cm.Content)
	}
	// thinking_level_change, branch_summary, label and custom (extension
	// state) are not part of the conversation a provider sees.
	return nil
}

// piSessionIDOfPath is the session id at the end of a session file's
// name (<timestamp>_<uuid>.jsonl), or "".
func piSessionIDOfPath(p string) string {
	if p == "" {
		return ""
	}
	base := strings.TrimSuffix(path.Base(strings.ReplaceAll(p, "\\", "/")), ".jsonl")
	if i := strings.LastIndexByte(base, '_'); i >= 0 {
		base = base[i+1:]
	}
	return base
}

func (c *pi) message(ts time.Time, m piMessage) error {
	b := c.b
	switch m.Role {
	case "user", "custom", "hookMessage":
		return c.userContent(ts, m.Content)
	case "assistant":
		return c.assistant(ts, m)
	case "toolResult":
		var blocks []piBlock
		text, err := piText(m.Content, &blocks)
		if err != nil {
			return fmt.Errorf("toolResult %s: %v", m.ToolCallID, err)
		}
		b.toolResult(m.ToolCallID, text, m.IsError)
	case "bashExecution":
		if !m.ExcludeFromContext {
			b.user(sessionlog.Entry{TS: ts, Message: agent.UserText(fmt.Sprintf("Ran `%s`\n```\n%s\n```", m.Command, m.Output))})
		}
	}
	return nil
}

func (c *pi) userContent(ts time.Time, raw json.RawMessage) error {
	var blocks []piBlock
	text, err := piText(raw, &blocks)
	if err != nil {
		return fmt.Errorf("user content: %v", err)
	}
	if text != "" {
		c.b.user(sessionlog.Entry{TS: ts, Message: agent.UserText(text)})
	}
	return nil
}

// piText is content that is a string or text and image blocks, as text.
func piText(raw json.RawMessage, blocks *[]piBlock) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := asString(raw); ok {
		return s, nil
	}
	if err := json.Unmarshal(raw, blocks); err != nil {
		return "", err
	}
	var parts []string
	for _, bl := range *blocks {
		switch bl.Type {
		case "text":
			parts = append(parts, bl.Text)
		case "image":
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, "\n"), nil
}

func (c *pi) assistant(ts time.Time, m piMessage) error {
	var blocks []piBlock
	if len(m.Content) > 0 && string(m.Content) != "null" {
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return fmt.Errorf("assistant content: %v", err)
		}
	}
	style := piAPIStyle(m.API)
	var out []agent.Block
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			if bl.Text != "" {
				out = append(out, agent.TextBlock(bl.Text))
			}
		case "thinking":
			// thinkingSignature is Anthropic's signature only in a
			// message of its API; of another it is what pi keeps for
			// itself (OpenAI Responses' reasoning item as JSON, the
			// name of an OpenAI-compatible server's reasoning field,
			// Gemini's thought signature), which Anthropic would refuse
			// were the session continued there.
			sig := bl.ThinkingSignature
			if style != agent.APIStyleAnthropicMessages {
				sig = ""
			}
			if bl.Redacted {
				if sig != "" {
					out = append(out, agent.Block{Type: agent.BlockRedactedThinking, Data: sig})
				}
			} else if bl.Thinking != "" || sig != "" {
				out = append(out, agent.Block{Type: agent.BlockThinking, Text: bl.Thinking, Signature: sig})
			}
		case "toolCall":
			out = append(out, agent.ToolUseBlock(bl.ID, bl.Name, toolInput(bl.Arguments)))
		}
	}
	model := m.Model
	if model == "" {
		model = c.model
	}
	ident := agent.WireIdentity{APIStyle: style, Model: model}
	if style == "" {
		ident = agent.WireIdentity{}
	}
	var usage *agent.Usage
	if u := m.Usage; u != nil {
		usage = &agent.Usage{InputTokens: u.Input, OutputTokens: u.Output, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite}
	}
	c.b.assistant("", ts, out, usage, ident, "")
	if p := c.b.pending; p != nil {
		p.entry.Message.StopReason = piStopReason(m.StopReason, style)
		if m.ErrorMessage != "" {
			p.entry.Message.Metadata = map[string]any{"pi.error": m.ErrorMessage}
		}
	}
	c.b.closePending() // one entry is one whole response
	return nil
}

// piAPIStyle is the panto wire of a pi api name, "" for none panto speaks.
func piAPIStyle(api string) agent.APIStyle {
	switch {
	case api == "anthropic-messages":
		return agent.APIStyleAnthropicMessages
	case strings.HasPrefix(api, "openai-"):
		return agent.APIStyleOpenAIChat
	}
	return ""
}

// piStopReason maps pi's provider-neutral stop reasons onto the wire's
// words; aborted and error have none (the error is kept in metadata).
func piStopReason(r string, style agent.APIStyle) agent.StopReason {
	anthropic := style == agent.APIStyleAnthropicMessages
	switch r {
	case "stop":
		if anthropic {
			return "end_turn"
		}
		return "stop"
	case "length":
		if anthropic {
			return "max_tokens"
		}
		return "length"
	case "toolUse":
		if anthropic {
			return "tool_use"
		}
		return "tool_calls"
	}
	return ""
}
