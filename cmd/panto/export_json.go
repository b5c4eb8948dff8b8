package main

import (
	"bufio"
	"time"

	"github.com/panto-dev/panto/agent"
)

// exportJSON is the JSON export: the session's summary, as panto sessions
// --json has it, and every message with its number, time and endpoint.
type exportJSON struct {
	Session  sessionJSON         `json:"session"`
	Messages []exportMessageJSON `json:"messages"`
}

type exportMessageJSON struct {
	N    int       `json:"n"`
	TS   time.Time `json:"ts"`
	Role string    `json:"role"`
	// Kind is what the message is: user, assistant, tool (results),
	// summary (of a compaction), system, title.
	Kind      string        `json:"kind"`
	Title     *string       `json:"title,omitempty"`
	Content   []agent.Block `json:"content"`
	Usage     *usageJSON    `json:"usage,omitempty"`
	APIStyle  string        `json:"api_style,omitempty"`
	BaseURL   string        `json:"base_url,omitempty"`
	Model     string        `json:"model,omitempty"`
	Reasoning string        `json:"reasoning,omitempty"`
	// StopReason is the wire's word, Stop what it means (assistant
	// messages; "unknown" when the wire said nothing).
	StopReason string         `json:"stop_reason,omitempty"`
	Stop       string         `json:"stop,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// jsonExport writes the JSON export a message at a time
// (jsonDocStream): {"session": …, "messages": […]}.
type jsonExport struct{ doc jsonDocStream }

func (x *jsonExport) head(w *bufio.Writer, h exportHead) error {
	return x.doc.head(w, exportJSON{Session: toSessionJSON(h.Info), Messages: []exportMessageJSON{}})
}

func (x *jsonExport) message(w *bufio.Writer, m exportMessage) error {
	msg := m.Message
	j := exportMessageJSON{
		N: m.N, TS: m.TS, Role: string(msg.Role), Kind: m.Label, Content: exportBlocks(msg.Content), Metadata: msg.Metadata,
		APIStyle: string(m.Identity.APIStyle), BaseURL: m.Identity.BaseURL, Model: m.Identity.Model, Reasoning: string(m.Identity.Reasoning),
	}
	if title, ok := msg.Title(); ok {
		j.Title = &title
	}
	if msg.Usage != nil {
		u := usageJSON(*msg.Usage)
		j.Usage = &u
	}
	if msg.Role == agent.RoleAssistant {
		j.StopReason, j.Stop = string(msg.StopReason), string(msg.StopReason.Kind())
	}
	return x.doc.element(w, j)
}

func (x *jsonExport) tail(w *bufio.Writer, _ exportHead) error { return x.doc.end(w) }

// exportBlocks are the blocks as stored, but for a redacted thinking
// block, whose opaque data means nothing to a reader.
func exportBlocks(blocks []agent.Block) []agent.Block {
	out := make([]agent.Block, len(blocks))
	for i, b := range blocks {
		if b.Type == agent.BlockRedactedThinking {
			b = agent.Block{Type: b.Type, Text: "[redacted thinking]"}
		}
		out[i] = b
	}
	return out
}
