package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
	"unicode/utf16"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Claude Code keeps a session as <config>/projects/<dir>/<uuid>.jsonl,
// <dir> the working directory it ran in, spelled as projectDirName does,
// and `claude --resume <uuid>` run in that directory continues it. Its
// lines form a chain by uuid and parentUuid; a user line carries the
// prompt or the tool results of the answer before it, an assistant line
// an API response (Claude Code writes one line per content block, and
// reads one line with all of them the same), a compact_boundary system
// line starts the context anew at the summary after it, and a
// custom-title line names the session. importer/claudecode.go reads the
// same records.

// ccLine is one record of a Claude Code log, as Claude Code 2.1 writes
// it (fields it reads; the rest it writes are its own bookkeeping).
type ccLine struct {
	ParentUUID       *string    `json:"parentUuid"`
	LogicalParent    string     `json:"logicalParentUuid,omitempty"`
	IsSidechain      bool       `json:"isSidechain"`
	UserType         string     `json:"userType"`
	CWD              string     `json:"cwd"`
	SessionID        string     `json:"sessionId"`
	Type             string     `json:"type"`
	Subtype          string     `json:"subtype,omitempty"`
	Content          string     `json:"content,omitempty"`
	CompactMetadata  any        `json:"compactMetadata,omitempty"`
	Message          *ccMessage `json:"message,omitempty"`
	IsCompactSummary bool       `json:"isCompactSummary,omitempty"`
	TranscriptOnly   bool       `json:"isVisibleInTranscriptOnly,omitempty"`
	UUID             string     `json:"uuid"`
	Timestamp        string     `json:"timestamp"`
	PantoSession     string     `json:"pantoSession"`
	PantoMessages    int        `json:"pantoMessages,omitempty"`
}

// ccTitle is a custom-title line: the session's name, as /rename sets
// it.
type ccTitle struct {
	Type          string `json:"type"`
	CustomTitle   string `json:"customTitle"`
	SessionID     string `json:"sessionId"`
	PantoSession  string `json:"pantoSession"`
	PantoMessages int    `json:"pantoMessages,omitempty"`
}

type ccMessage struct {
	ID           string   `json:"id,omitempty"`
	Type         string   `json:"type,omitempty"`
	Role         string   `json:"role"`
	Model        string   `json:"model,omitempty"`
	Content      any      `json:"content"`
	StopReason   *string  `json:"stop_reason,omitempty"`
	StopSequence *string  `json:"stop_sequence,omitempty"`
	Usage        *ccUsage `json:"usage,omitempty"`
}

type ccUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// ccBlock is a content block of the Anthropic Messages API, as Claude
// Code stores it.
type ccBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   *string         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// ClaudeCode writes entries, a panto session's whole log, as a Claude
// Code session of directory opts.CWD (which every line records, and
// ClaudeCodePath puts the log under), its id derived from the panto
// session's and the number of entries, so that exporting the same
// session again writes the same file, and exporting it once it grew
// writes another.
//
// The first line also says how many panto messages an import of the
// export makes (pantoMessages): the import of a log Claude Code went on
// with is a fork of the panto session that starts with that many
// (importer), whose usage the panto session holds already. The count is
// the importer's own, of the lines written once without it.
func ClaudeCode(entries []sessionlog.Entry, opts Options) (*Result, error) {
	return counted(importer.ClaudeCode, func(messages int) (*Result, error) {
		return claudeCodeLines(entries, opts, messages)
	})
}

func claudeCodeLines(entries []sessionlog.Entry, opts Options, messages int) (*Result, error) {
	res := &Result{SessionID: derivedUUID("panto export claude-code", opts.Session, strconv.Itoa(len(entries)))}
	w := ccWriter{opts: opts, res: res, out: &res.Log, messages: messages}
	// Calls whose results the log lacks (none in a log panto wrote: a
	// call is stored with its results) would be refused by Anthropic.
	open := map[string]bool{}
	for i, e := range entries {
		m := e.Message
		ts := e.TS
		if ts.IsZero() {
			ts = time.Unix(0, 0)
		}
		if title, ok := m.Title(); ok {
			if err := w.line(ccTitle{Type: "custom-title", CustomTitle: title, SessionID: res.SessionID, PantoSession: opts.Session}); err != nil {
				return nil, err
			}
			continue
		}
		switch {
		case m.Role == agent.RoleSystem:
			res.Dropped++
			continue
		case m.IsCompactionSummary():
			if err := w.compaction(i, ts, m.Text()); err != nil {
				return nil, err
			}
		case m.Role == agent.RoleUser:
			if err := w.closeOpen(i, ts, open, m); err != nil {
				return nil, err
			}
			if err := w.user(i, ts, m, open); err != nil {
				return nil, err
			}
		case m.Role == agent.RoleAssistant:
			if err := w.closeOpen(i, ts, open, agent.Message{}); err != nil {
				return nil, err
			}
			if err := w.assistant(i, ts, e, open); err != nil {
				return nil, err
			}
		default:
			res.Dropped++
			continue
		}
		res.Messages++
	}
	if err := w.closeOpen(len(entries), time.Now(), open, agent.Message{}); err != nil {
		return nil, err
	}
	return res, nil
}

// ccWriter writes the chain of lines.
type ccWriter struct {
	opts Options
	res  *Result
	out  *[]byte
	last string // the uuid of the last line of the chain
	// messages is what the first line says an import makes of the
	// export; wrote says that it was written.
	messages int
	wrote    bool
}

// next is the common part of the chain's next line.
func (w *ccWriter) next(n int, part string, ts time.Time, typ string) ccLine {
	l := ccLine{IsSidechain: false, UserType: "external", CWD: w.opts.CWD, SessionID: w.res.SessionID, Type: typ,
		UUID: derivedUUID(w.res.SessionID, strconv.Itoa(n), part), Timestamp: ts.UTC().Format("2006-01-02T15:04:05.000Z"), PantoSession: w.opts.Session}
	if w.last != "" {
		parent := w.last
		l.ParentUUID = &parent
	}
	return l
}

func (w *ccWriter) line(v any) error {
	if !w.wrote {
		switch l := v.(type) {
		case ccLine:
			l.PantoMessages = w.messages
			v = l
		case ccTitle:
			l.PantoMessages = w.messages
			v = l
		}
		w.wrote = true
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("export to claude code: %w", err)
	}
	*w.out = append(append(*w.out, data...), '\n')
	if l, ok := v.(ccLine); ok {
		w.last = l.UUID
	}
	return nil
}

func (w *ccWriter) user(n int, ts time.Time, m agent.Message, open map[string]bool) error {
	var blocks []ccBlock
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				blocks = append(blocks, ccBlock{Type: "text", Text: ptr(b.Text)})
			}
		case agent.BlockToolResult:
			id := importer.WireToolID(b.ToolUseID)
			if !open[id] {
				continue // answers no call: Anthropic refuses it
			}
			delete(open, id)
			text := b.Text
			if text == "" {
				text = "(no output)" // Anthropic refuses an error result without content
			}
			blocks = append(blocks, ccBlock{Type: "tool_result", ToolUseID: id, Content: ptr(text), IsError: b.IsError})
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	l := w.next(n, "user", ts, "user")
	var content any = blocks
	if len(blocks) == 1 && blocks[0].Type == "text" {
		content = *blocks[0].Text // as Claude Code writes a typed prompt
	}
	l.Message = &ccMessage{Role: "user", Content: content}
	return w.line(l)
}

func (w *ccWriter) assistant(n int, ts time.Time, e sessionlog.Entry, open map[string]bool) error {
	m := e.Message
	var blocks []ccBlock
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				blocks = append(blocks, ccBlock{Type: "text", Text: ptr(b.Text)})
			}
		case agent.BlockThinking:
			if !anthropicTakes(e, b) {
				w.res.DroppedThinking++
				continue
			}
			blocks = append(blocks, ccBlock{Type: "thinking", Thinking: ptr(b.Text), Signature: b.Signature})
		case agent.BlockRedactedThinking:
			if !anthropicTakes(e, b) {
				w.res.DroppedThinking++
				continue
			}
			blocks = append(blocks, ccBlock{Type: "redacted_thinking", Data: b.Data})
		case agent.BlockToolUse:
			id := importer.WireToolID(b.ToolUseID)
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			blocks = append(blocks, ccBlock{Type: "tool_use", ID: id, Name: b.ToolName, Input: input})
			open[id] = true
		}
	}
	if len(blocks) == 0 {
		return nil // only thinking Anthropic would refuse: an empty answer it refuses too
	}
	model := e.Identity.Model
	if model == "" {
		model = "unknown"
	}
	l := w.next(n, "assistant", ts, "assistant")
	msg := &ccMessage{ID: "msg_panto_" + derivedUUID(w.res.SessionID, strconv.Itoa(n))[:8], Type: "message", Role: "assistant", Model: model, Content: blocks}
	// Always a stop reason: a line without one is an answer still being
	// written, to the importer (which counts what an export holds) and
	// to Claude Code.
	stop := anthropicStop(m.StopReason)
	if stop == "" {
		stop = map[bool]string{true: "tool_use", false: "end_turn"}[len(m.ToolUses()) > 0]
	}
	msg.StopReason = &stop
	if u := m.Usage; u != nil {
		msg.Usage = &ccUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheCreationInputTokens: u.CacheWriteTokens, CacheReadInputTokens: u.CacheReadTokens}
	}
	l.Message = msg
	return w.line(l)
}

// closeOpen answers the calls still open before message m (which may
// answer some of them itself) with an error result, as the importer
// closes a foreign log's interrupted calls.
func (w *ccWriter) closeOpen(n int, ts time.Time, open map[string]bool, m agent.Message) error {
	for _, b := range m.Content {
		if b.Type == agent.BlockToolResult {
			return nil // m is the results; one it lacks is closed at the next message
		}
	}
	if len(open) == 0 {
		return nil
	}
	var blocks []ccBlock
	for id := range open {
		blocks = append(blocks, ccBlock{Type: "tool_result", ToolUseID: id, Content: ptr("no result: the panto session has none for this call (it was interrupted)"), IsError: true})
		delete(open, id)
	}
	l := w.next(n, "closed", ts, "user")
	l.Message = &ccMessage{Role: "user", Content: blocks}
	return w.line(l)
}

// compaction writes a compaction summary as Claude Code writes its own:
// a boundary that starts the chain anew, then the summary as a prompt
// shown in the transcript only.
func (w *ccWriter) compaction(n int, ts time.Time, summary string) error {
	boundary := w.next(n, "boundary", ts, "system")
	boundary.LogicalParent = w.last
	boundary.ParentUUID = nil
	boundary.Subtype = "compact_boundary"
	boundary.Content = "Conversation compacted"
	boundary.CompactMetadata = map[string]any{"trigger": "manual", "preTokens": 0}
	if err := w.line(boundary); err != nil {
		return err
	}
	l := w.next(n, "summary", ts, "user")
	l.Message = &ccMessage{Role: "user", Content: summary}
	l.IsCompactSummary, l.TranscriptOnly = true, true
	return w.line(l)
}

// anthropicStop is a stop reason in Anthropic's words, "" when it has
// none that means the same.
func anthropicStop(r agent.StopReason) string {
	switch r.Kind() {
	case agent.StopComplete:
		if r == "stop_sequence" {
			return string(r)
		}
		return "end_turn"
	case agent.StopToolUse:
		return "tool_use"
	case agent.StopTruncated:
		return "max_tokens"
	case agent.StopRefused:
		return "refusal"
	case agent.StopPaused:
		return "pause_turn"
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// ClaudeCodeDir is Claude Code's configuration directory:
// $CLAUDE_CONFIG_DIR, else ~/.claude.
func ClaudeCodeDir(getenv func(string) string) (string, error) {
	if dir := getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return dir, nil
	}
	home, err := homeDir(getenv)
	if err != nil {
		return "", fmt.Errorf("claude code's directory: %w (set CLAUDE_CONFIG_DIR)", err)
	}
	return filepath.Join(home, ".claude"), nil
}

// ClaudeCodePath is where Claude Code looks for session id when resumed
// in directory cwd: <config>/projects/<cwd spelled as projectDirName>/<id>.jsonl.
func ClaudeCodePath(config, cwd, id string) string {
	return filepath.Join(config, "projects", projectDirName(cwd), id+".jsonl")
}

// projectDirName spells a directory as Claude Code names its sessions'
// directory: every character but ASCII letters and digits as "-", and a
// name longer than 200 characters cut there, with "-" and a hash of the
// whole path (Java's String.hashCode over UTF-16, its absolute value in
// base 36) after it, as Claude Code 2.1 does.
func projectDirName(dir string) string {
	var b bytes.Buffer
	units := utf16.Encode([]rune(dir))
	for _, u := range units {
		if 'a' <= u && u <= 'z' || 'A' <= u && u <= 'Z' || '0' <= u && u <= '9' {
			b.WriteByte(byte(u))
		} else {
			b.WriteByte('-') // JavaScript's replace works on UTF-16 units
		}
	}
	name := b.String()
	if len(name) <= 200 {
		return name
	}
	var h int32
	for _, u := range units {
		h = 31*h + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return name[:200] + "-" + strconv.FormatInt(abs, 36)
}
