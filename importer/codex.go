package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Codex writes a rollout file per session: {timestamp, type, payload}
// lines. session_meta opens it; response_item lines are what the model
// saw and said (messages, reasoning, tool calls and their outputs);
// event_msg lines mirror them for the terminal and carry the typed
// prompt (user_message) and the token counts; turn_context names the
// model; compacted replaces the history with a summary.
//
// A remote compaction (OpenAI's, Codex's default with an OpenAI model)
// writes no summary text: its summary is an encrypted item of the
// replacement history, which only OpenAI's models read. The history
// also keeps the prompts, and sometimes answers, in the clear; those are
// the compaction's text (codexReplacement), so that a session continued
// in panto sends the model what Codex kept that a model can read, not a
// line saying nothing was kept.
//
// The typed prompt is taken from user_message, or from item_completed
// of a UserMessage item, which is all Codex 0.171 writes of it (the user
// response_items also hold the harness's context: AGENTS.md, the
// environment); a version that writes both writes one prompt twice, so
// within a turn a prompt one of them gave is not taken again from the
// other (prompts). The assistant's text comes from its response_items
// (agent_message and item_completed mirror it).
// A response ends at its token_count, at a tool output, at the next
// prompt or at the end of the task.
type codex struct {
	b     *builder
	ident agent.WireIdentity
	// total is the last cumulative token count, carry usage counted
	// while no response was in progress (it goes to the next one).
	total codexUsage
	carry agent.Usage
	// prompts counts the prompts of the turn by their text, as each
	// kind of event gave them: user_message, item_completed.
	prompts [2]map[string]int
	// rules are the readings of an earlier panto this conversion leaves
	// out (codexEarlier); none for the current conversion.
	rules codexRules
	// forkTotals says that the rollout is a fork whose first token
	// count goes on from its parent's totals.
	forkTotals bool
	// forkedAt, when above 0, is the number of the parent's messages
	// the fork's conversion copies in front of its own (ConvertLinked):
	// the totals then come with the parent's lines.
	forkedAt int
}

// codexRules name the readings that later pantos added to the Codex
// conversion, each of which changes the conversion of the logs it
// applies to: the earlier conversion is what a session an earlier panto
// imported grows from (Conversion.earlier).
type codexRules struct {
	// noItemCompleted: prompts from user_message alone (before Codex
	// 0.171's item_completed was read).
	noItemCompleted bool
	// noLocalImages: user_message's local_images not counted.
	noLocalImages bool
	// noReplacement: a compaction with no message is the placeholder,
	// not its replacement history's messages.
	noReplacement bool
	// noForkTotals: a fork's first answer counted with its parent's
	// token totals.
	noForkTotals bool
}

// codexEarlier are the rules of the earlier pantos whose conversions
// differ from this one's, newest first.
var codexEarlier = []codexRules{
	{noLocalImages: true, noReplacement: true, noForkTotals: true},                        // round 32
	{noItemCompleted: true, noLocalImages: true, noReplacement: true, noForkTotals: true}, // before
}

func newCodex() *codex { return &codex{b: newBuilder(Codex)} }

func (c *codex) builder() *builder { return c.b }

// heldUsage is the usage counted that no response took yet.
func (c *codex) heldUsage() agent.Usage { return c.carry }

type codexLine struct {
	Timestamp *time.Time      `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type codexPayload struct {
	Type string `json:"type"`
	// session_meta
	ID         string `json:"id"`
	Timestamp  string `json:"timestamp"`
	CWD        string `json:"cwd"`
	CLIVersion string `json:"cli_version"`
	// ForkedFromID is the session a fork copied; Source an object naming
	// the parent thread of a subagent ("cli", "exec"… otherwise).
	ForkedFromID string `json:"forked_from_id"`
	// ForkedFromOrdinal is where in its parent's lines (by their
	// ordinal) a fork of Codex 0.171's paginated history forked.
	ForkedFromOrdinal int64           `json:"forked_from_ordinal_exclusive"`
	Source            json.RawMessage `json:"source"`
	// Git is the work tree the session ran in, as git told Codex:
	// repository_url is the raw URL of its origin remote.
	Git *struct {
		RepositoryURL string `json:"repository_url"`
	} `json:"git"`
	// PantoSession and PantoMessages mark a session panto exported
	// (package exporter): the panto session, and the number of messages
	// an import of the export makes.
	PantoSession  string `json:"pantoSession"`
	PantoMessages int    `json:"pantoMessages"`
	// turn_context
	Model  string `json:"model"`
	Effort string `json:"effort"`
	// response_item
	Role      string            `json:"role"`
	Content   json.RawMessage   `json:"content"`
	Summary   json.RawMessage   `json:"summary"`
	Name      string            `json:"name"`
	Arguments json.RawMessage   `json:"arguments"`
	Input     json.RawMessage   `json:"input"`
	Action    json.RawMessage   `json:"action"`
	CallID    string            `json:"call_id"`
	Output    json.RawMessage   `json:"output"`
	Info      json.RawMessage   `json:"info"`
	Message   json.RawMessage   `json:"message"`
	Images    []json.RawMessage `json:"images"`
	// LocalImages are the paths of the images attached from disk (a
	// pasted screenshot, -i FILE), which images does not hold.
	LocalImages []json.RawMessage `json:"local_images"`
	// item_completed
	Item *codexItem `json:"item"`
	// compacted: the history that replaces everything before it, which
	// a remote compaction writes with no message.
	ReplacementHistory []codexPayload `json:"replacement_history"`
}

// codexItem is a turn's item as item_completed reports it.
type codexItem struct {
	Type    string      `json:"type"`
	Content []codexText `json:"content"`
}

type codexText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type codexTokenInfo struct {
	Total *codexUsage `json:"total_token_usage"`
	Last  *codexUsage `json:"last_token_usage"`
}

type codexUsage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

func (c *codex) line(line []byte) error {
	var l codexLine
	if err := json.Unmarshal(line, &l); err != nil {
		return err
	}
	var p codexPayload
	if len(l.Payload) > 0 && string(l.Payload) != "null" {
		if err := json.Unmarshal(l.Payload, &p); err != nil {
			return fmt.Errorf("%s payload: %v", l.Type, err)
		}
	}
	b := c.b
	ts := time.Time{}
	if l.Timestamp != nil {
		ts = *l.Timestamp
	}
	switch l.Type {
	case "session_meta":
		if !b.started && b.foreign == "" {
			b.setID(Codex, p.ID)
			if t, err := time.Parse(time.RFC3339Nano, p.Timestamp); err == nil {
				b.setCreated(t)
			}
			o := b.origin()
			o.SessionID, o.Version, o.CWD = p.ID, p.CLIVersion, p.CWD
			if parent := codexParent(p); parent != "" {
				b.header.ForkedFrom = SessionID(Codex, parent)
			}
			// A fork of Codex 0.171's paginated history holds none of
			// its parent's lines (it names where it forked, by ordinal)
			// but goes on from its parent's token totals.
			c.forkTotals = p.ForkedFromOrdinal > 0 && !c.rules.noForkTotals && c.forkedAt == 0
			if c.forkedAt > 0 {
				b.header.ForkedAt = c.forkedAt
			}
			if p.PantoSession != "" {
				// An export of a panto session, which Codex went on
				// with: a fork of it, whose first messages (and their
				// usage) are the panto session's.
				b.header.ForkedFrom, b.header.ForkedAt = p.PantoSession, p.PantoMessages
				b.exportOf = p.PantoSession
			}
			// Only the normalised remote is kept: the raw URL may
			// carry a token, and two clones spell it differently.
			if p.Git != nil {
				if remote, ok := project.NormalizeRemote(p.Git.RepositoryURL); ok {
					b.remote = remote
				}
			}
		}
		b.seen(ts)
		return nil
	case "turn_context":
		c.ident = agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: p.Model, Reasoning: reasoningEffort(p.Effort)}
	case "response_item":
		b.seen(ts)
		return c.responseItem(ts, p)
	case "event_msg":
		b.seen(ts)
		return c.event(ts, p)
	case "compacted":
		b.seen(ts)
		var text string
		if len(p.Message) > 0 {
			if err := json.Unmarshal(p.Message, &text); err != nil {
				return fmt.Errorf("compacted message: %v", err)
			}
		}
		if text == "" {
			history := p.ReplacementHistory
			if c.rules.noReplacement {
				history = nil
			}
			text = codexReplacement(history)
		}
		b.user(compactionEntry(ts, text))
	}
	return nil
}

// codexParent is the session a rollout continues: the thread that
// spawned a subagent, or the session a fork copied.
func codexParent(p codexPayload) string {
	var src struct {
		Subagent struct {
			ThreadSpawn struct {
				ParentThreadID string `json:"parent_thread_id"`
			} `json:"thread_spawn"`
		} `json:"subagent"`
	}
	if json.Unmarshal(p.Source, &src) == nil && src.Subagent.ThreadSpawn.ParentThreadID != "" {
		return src.Subagent.ThreadSpawn.ParentThreadID
	}
	return p.ForkedFromID
}

func (c *codex) responseItem(ts time.Time, p codexPayload) error {
	b := c.b
	switch p.Type {
	case "message":
		if p.Role != "assistant" {
			return nil // the prompt comes from user_message; developer and context messages are the harness's
		}
		var parts []codexText
		if err := json.Unmarshal(p.Content, &parts); err != nil {
			return fmt.Errorf("assistant message content: %v", err)
		}
		var blocks []agent.Block
		for _, t := range parts {
			if t.Text != "" {
				blocks = append(blocks, agent.TextBlock(t.Text))
			}
		}
		b.assistant("codex", ts, blocks, nil, c.ident, "")
	case "reasoning":
		var summary []codexText
		if len(p.Summary) > 0 && string(p.Summary) != "null" {
			if err := json.Unmarshal(p.Summary, &summary); err != nil {
				return fmt.Errorf("reasoning summary: %v", err)
			}
		}
		var parts []string
		for _, s := range summary {
			if s.Text != "" {
				parts = append(parts, s.Text)
			}
		}
		if len(parts) > 0 { // the encrypted content is the provider's alone
			b.assistant("codex", ts, []agent.Block{{Type: agent.BlockThinking, Text: strings.Join(parts, "\n\n")}}, nil, c.ident, "")
		}
	case "function_call":
		var args string
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			args = string(p.Arguments) // some versions write the object itself
		}
		b.assistant("codex", ts, []agent.Block{agent.ToolUseBlock(p.CallID, p.Name, toolInput(json.RawMessage(args)))}, nil, c.ident, "")
	case "custom_tool_call":
		var input string
		if err := json.Unmarshal(p.Input, &input); err != nil {
			input = string(p.Input)
		}
		data, _ := json.Marshal(map[string]string{"input": input})
		b.assistant("codex", ts, []agent.Block{agent.ToolUseBlock(p.CallID, p.Name, data)}, nil, c.ident, "")
	case "local_shell_call":
		b.assistant("codex", ts, []agent.Block{agent.ToolUseBlock(p.CallID, "local_shell", toolInput(withoutNullMembers(p.Action)))}, nil, c.ident, "")
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		out, err := codexOutput(p.Output)
		if err != nil {
			return fmt.Errorf("%s %s: %v", p.Type, p.CallID, err)
		}
		b.toolResult(p.CallID, out, false)
	}
	// ghost_snapshot (git snapshots for undo), web_search_call (run by the
	// provider, no result line) and what newer versions add: not kept.
	return nil
}

// codexOutput is a tool output: a string, an object with content, or
// content items.
func codexOutput(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := asString(raw); ok {
		return s, nil
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err == nil && len(obj.Content) > 0 {
		return codexOutput(obj.Content)
	}
	var items []codexText
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", err
	}
	var parts []string
	for _, it := range items {
		if it.Text != "" {
			parts = append(parts, it.Text)
		} else if strings.Contains(it.Type, "image") {
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, "\n"), nil
}

func (c *codex) event(ts time.Time, p codexPayload) error {
	b := c.b
	switch p.Type {
	case "user_message":
		var text string
		if len(p.Message) > 0 {
			if err := json.Unmarshal(p.Message, &text); err != nil {
				return fmt.Errorf("user_message: %v", err)
			}
		}
		images := len(p.Images)
		if !c.rules.noLocalImages {
			images += len(p.LocalImages)
		}
		c.prompt(ts, fromUserMessage, text, images)
	case "item_completed":
		if p.Item == nil || p.Item.Type != "UserMessage" || c.rules.noItemCompleted {
			return nil // the agent's messages and tool calls: response_items hold them
		}
		var texts []string
		images := 0
		for _, part := range p.Item.Content {
			switch {
			case part.Type == "text":
				if part.Text != "" {
					texts = append(texts, part.Text)
				}
			case strings.Contains(part.Type, "image"):
				images++
			}
		}
		c.prompt(ts, fromItemCompleted, strings.Join(texts, "\n"), images)
	case "task_started":
		c.prompts = [2]map[string]int{}
	case "token_count":
		var info *codexTokenInfo
		if len(p.Info) > 0 {
			if err := json.Unmarshal(p.Info, &info); err != nil {
				return fmt.Errorf("token_count: %v", err)
			}
		}
		if info == nil || info.Total == nil {
			return nil // rate limits only
		}
		if c.forkTotals && info.Last != nil {
			// The totals go on from the parent's at the fork: the
			// fork's own count starts at them, less this answer's.
			c.total, c.forkTotals = info.Total.minus(*info.Last), false
		}
		c.count(*info.Total)
		if c.carry != (agent.Usage{}) && b.addUsage(c.carry) {
			c.carry = agent.Usage{}
		}
		b.closePending()
	case "task_complete", "turn_aborted":
		b.closePending()
		c.prompts = [2]map[string]int{}
	}
	return nil
}

// The events a prompt is read from.
const (
	fromUserMessage = iota
	fromItemCompleted
)

// prompt adds a typed prompt (text, and images as "[image]") that event
// from reported, unless the other event of the turn reported it already.
func (c *codex) prompt(ts time.Time, from int, text string, images int) {
	key := fmt.Sprintf("%d\x00%s", images, text)
	if c.prompts[from] == nil {
		c.prompts[from] = map[string]int{}
	}
	c.prompts[from][key]++
	if c.prompts[from][key] <= c.prompts[1-from][key] {
		return // the same prompt, reported by the other event too
	}
	blocks := []agent.Block{}
	if text != "" {
		blocks = append(blocks, agent.TextBlock(text))
	}
	for range images {
		blocks = append(blocks, agent.TextBlock("[image]"))
	}
	if len(blocks) > 0 {
		c.b.user(sessionlog.Entry{TS: ts, Message: agent.Message{Role: agent.RoleUser, Content: blocks}})
	}
}

// count adds to carry what the cumulative total t adds to the last one
// (nothing when the same total is written again); a total that went
// down starts a new count.
// minus is u less v.
func (u codexUsage) minus(v codexUsage) codexUsage {
	return codexUsage{InputTokens: u.InputTokens - v.InputTokens, CachedInputTokens: u.CachedInputTokens - v.CachedInputTokens,
		OutputTokens: u.OutputTokens - v.OutputTokens, ReasoningOutputTokens: u.ReasoningOutputTokens - v.ReasoningOutputTokens}
}

func (c *codex) count(t codexUsage) {
	last := c.total
	if t.InputTokens < last.InputTokens || t.OutputTokens < last.OutputTokens || t.CachedInputTokens < last.CachedInputTokens || t.ReasoningOutputTokens < last.ReasoningOutputTokens {
		last = codexUsage{}
	}
	c.total = t
	c.carry.Add(agent.Usage{
		InputTokens:     t.InputTokens - last.InputTokens,
		CacheReadTokens: t.CachedInputTokens - last.CachedInputTokens,
		OutputTokens:    t.OutputTokens - last.OutputTokens,
		ReasoningTokens: t.ReasoningOutputTokens - last.ReasoningOutputTokens,
	})
}

// reasoningEffort maps an effort onto the levels panto speaks; others
// (minimal, xhigh) are left to the default.
func reasoningEffort(s string) agent.ReasoningEffort {
	switch e := agent.ReasoningEffort(s); e {
	case agent.ReasoningLow, agent.ReasoningMedium, agent.ReasoningHigh:
		return e
	}
	return agent.ReasoningDefault
}

// codexReplacement is the text of a compaction that wrote no message:
// the messages its replacement history keeps in the clear, the
// harness's context (developer messages, the environment, AGENTS.md)
// left out as it is from the prompts.
func codexReplacement(history []codexPayload) string {
	var kept []string
	for _, item := range history {
		if item.Type != "message" || (item.Role != "user" && item.Role != "assistant") {
			continue // developer messages, the encrypted summary, reasoning
		}
		var parts []codexText
		if json.Unmarshal(item.Content, &parts) != nil {
			continue
		}
		var text []string
		for _, t := range parts {
			if t.Text != "" && !(item.Role == "user" && codexContext(t.Text)) {
				text = append(text, t.Text)
			}
		}
		if len(text) > 0 {
			kept = append(kept, item.Role+": "+strings.Join(text, "\n"))
		}
	}
	if len(kept) == 0 {
		return "(Codex compacted the conversation here and kept no summary text)"
	}
	return "(Codex compacted the conversation here; its summary is encrypted for OpenAI's models, and what it kept in the clear follows)\n\n" + strings.Join(kept, "\n\n")
}

// codexContext reports whether a user message's text is the harness's
// context rather than a prompt: Codex wraps what it adds in a tag of its
// own (<environment_context>, <user_instructions>, <turn_aborted>…) or
// heads it as AGENTS.md's instructions.
func codexContext(text string) bool {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "# AGENTS.md instructions") {
		return true
	}
	if !strings.HasPrefix(t, "<") {
		return false
	}
	end := strings.IndexByte(t, '>')
	if end < 2 {
		return false
	}
	for _, c := range t[1:end] {
		if !(c >= 'a' && c <= 'z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// withoutNullMembers is a JSON object without its members whose value is
// null, the others in their order; anything else is raw as it is. Codex
// 0.171's migrate-rollouts rewrites a legacy rollout's local_shell_call
// actions with every field of its own struct, those it had no value for
// null ("timeout_ms":null…): read without them, the call is the one an
// import of the legacy rollout stored, and the session goes on instead
// of diverging.
func withoutNullMembers(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte("null")) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return raw
	}
	out := []byte{'{'}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return raw
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return raw
		}
		if string(value) == "null" {
			continue
		}
		name, _ := json.Marshal(key)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, name...), ':'), value...)
	}
	return append(out, '}')
}
