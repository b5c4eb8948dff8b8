package exporter

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// pi keeps a session as <agent dir>/sessions/--<cwd>--/<time>_<uuid>.jsonl
// (PiPath), and `pi --session <uuid>` continues it. The file is a header
// line (format version 3: id, start, working directory), then entries
// that form a tree by id and parentId (here a chain): messages (user,
// assistant with all the blocks of one response, one toolResult per
// call), a compaction (pi sends its summary, then what follows it), and
// session_info, which names the session. importer/pi.go reads the same
// records.

// piHeader is the first line; it holds the marker of the export.
type piHeader struct {
	Type          string `json:"type"`
	Version       int    `json:"version"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	CWD           string `json:"cwd"`
	PantoSession  string `json:"pantoSession"`
	PantoMessages int    `json:"pantoMessages"`
}

// piEntry is an entry of the tree.
type piEntry struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`
	Message   any     `json:"message,omitempty"`
	// compaction
	Summary          string  `json:"summary,omitempty"`
	FirstKeptEntryID *string `json:"firstKeptEntryId,omitempty"`
	TokensBefore     *int    `json:"tokensBefore,omitempty"`
	// session_info
	Name *string `json:"name,omitempty"`
}

type piUser struct {
	Role      string    `json:"role"`
	Content   []piBlock `json:"content"`
	Timestamp int64     `json:"timestamp"`
}

type piAssistant struct {
	Role       string    `json:"role"`
	Content    []piBlock `json:"content"`
	API        string    `json:"api"`
	Provider   string    `json:"provider"`
	Model      string    `json:"model"`
	Usage      piUsage   `json:"usage"`
	StopReason string    `json:"stopReason"`
	Timestamp  int64     `json:"timestamp"`
}

type piToolResult struct {
	Role       string    `json:"role"`
	ToolCallID string    `json:"toolCallId"`
	ToolName   string    `json:"toolName"`
	Content    []piBlock `json:"content"`
	IsError    bool      `json:"isError"`
	Timestamp  int64     `json:"timestamp"`
}

type piUsage struct {
	Input       int64  `json:"input"`
	Output      int64  `json:"output"`
	CacheRead   int64  `json:"cacheRead"`
	CacheWrite  int64  `json:"cacheWrite"`
	TotalTokens int64  `json:"totalTokens"`
	Cost        piCost `json:"cost"`
}

type piCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

type piBlock struct {
	Type              string          `json:"type"`
	Text              *string         `json:"text,omitempty"`
	Thinking          *string         `json:"thinking,omitempty"`
	ThinkingSignature string          `json:"thinkingSignature,omitempty"`
	Redacted          bool            `json:"redacted,omitempty"`
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Arguments         json.RawMessage `json:"arguments,omitempty"`
}

// Pi writes entries, a panto session's whole log, as a pi session, its
// id derived as ClaudeCode's is, and its header holding the marker.
func Pi(entries []sessionlog.Entry, opts Options) (*Result, error) {
	return counted(importer.Pi, func(messages int) (*Result, error) {
		return piLines(entries, opts, messages)
	})
}

func piLines(entries []sessionlog.Entry, opts Options, messages int) (*Result, error) {
	res := &Result{SessionID: derivedUUID("panto export pi", opts.Session, strconv.Itoa(len(entries)))}
	start := time.Unix(0, 0)
	if len(entries) > 0 {
		start = entries[0].TS
	}
	w := piWriter{res: res}
	if err := w.line(piHeader{Type: "session", Version: 3, ID: res.SessionID, Timestamp: isoMillis(start), CWD: opts.CWD, PantoSession: opts.Session, PantoMessages: messages}); err != nil {
		return nil, err
	}
	names := map[string]string{} // the open calls' tool names, by id
	for _, e := range entries {
		m, ts := e.Message, e.TS
		if title, ok := m.Title(); ok {
			if err := w.entry(piEntry{Type: "session_info", Timestamp: isoMillis(ts), Name: &title}); err != nil {
				return nil, err
			}
			continue
		}
		var err error
		switch {
		case m.Role == agent.RoleSystem:
			res.Dropped++
			continue
		case m.IsCompactionSummary():
			err = w.compaction(ts, m.Text())
		case m.Role == agent.RoleUser:
			err = w.user(ts, m, names)
		case m.Role == agent.RoleAssistant:
			if err = w.closeOpen(ts, names); err == nil {
				err = w.assistant(ts, e, names)
			}
		default:
			res.Dropped++
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Messages++
	}
	if err := w.closeOpen(time.Now(), names); err != nil {
		return nil, err
	}
	return res, nil
}

type piWriter struct {
	res  *Result
	n    int
	last string
}

func (w *piWriter) line(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("export to pi: %w", err)
	}
	w.res.Log = append(append(w.res.Log, data...), '\n')
	return nil
}

// entry writes e as the chain's next entry: pi's 8 hex digits of an id,
// here the entry's number, which no two share.
func (w *piWriter) entry(e piEntry) error {
	w.n++
	e.ID = fmt.Sprintf("%08x", w.n)
	if w.last != "" {
		parent := w.last
		e.ParentID = &parent
	}
	w.last = e.ID
	return w.line(e)
}

func (w *piWriter) user(ts time.Time, m agent.Message, names map[string]string) error {
	var texts []piBlock
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				texts = append(texts, piBlock{Type: "text", Text: ptr(b.Text)})
			}
		case agent.BlockToolResult:
			id := importer.WireToolID(b.ToolUseID)
			name, open := names[id]
			if !open {
				continue // answers no call
			}
			delete(names, id)
			if err := w.entry(piEntry{Type: "message", Timestamp: isoMillis(ts), Message: piToolResult{Role: "toolResult", ToolCallID: id, ToolName: name,
				Content: []piBlock{{Type: "text", Text: ptr(b.Text)}}, IsError: b.IsError, Timestamp: ts.UnixMilli()}}); err != nil {
				return err
			}
		}
	}
	if len(texts) == 0 {
		return nil
	}
	return w.entry(piEntry{Type: "message", Timestamp: isoMillis(ts), Message: piUser{Role: "user", Content: texts, Timestamp: ts.UnixMilli()}})
}

func (w *piWriter) assistant(ts time.Time, e sessionlog.Entry, names map[string]string) error {
	m := e.Message
	anthropic := e.Identity.APIStyle == agent.APIStyleAnthropicMessages
	var blocks []piBlock
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				blocks = append(blocks, piBlock{Type: "text", Text: ptr(b.Text)})
			}
		case agent.BlockThinking:
			if !anthropicTakes(e, b) {
				w.res.DroppedThinking++
				continue
			}
			blocks = append(blocks, piBlock{Type: "thinking", Thinking: ptr(b.Text), ThinkingSignature: b.Signature})
		case agent.BlockRedactedThinking:
			if !anthropicTakes(e, b) {
				w.res.DroppedThinking++
				continue
			}
			blocks = append(blocks, piBlock{Type: "thinking", Thinking: ptr(""), ThinkingSignature: b.Data, Redacted: true})
		case agent.BlockToolUse:
			id := importer.WireToolID(b.ToolUseID)
			args := b.Input
			if len(args) == 0 || !strings.HasPrefix(strings.TrimSpace(string(args)), "{") {
				args = json.RawMessage("{}")
			}
			blocks = append(blocks, piBlock{Type: "toolCall", ID: id, Name: b.ToolName, Arguments: args})
			names[id] = b.ToolName
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	// pi's api and provider names: a session continued with the same
	// provider restores its model; a thinking signature pi sends back only
	// to the provider that made it.
	api, provider := "openai-completions", "openai"
	if anthropic {
		api, provider = "anthropic-messages", "anthropic"
	}
	model := e.Identity.Model
	if model == "" {
		model = "unknown"
	}
	a := piAssistant{Role: "assistant", Content: blocks, API: api, Provider: provider, Model: model, StopReason: piStop(m), Timestamp: ts.UnixMilli()}
	if u := m.Usage; u != nil {
		a.Usage = piUsage{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens,
			TotalTokens: u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens}
	}
	return w.entry(piEntry{Type: "message", Timestamp: isoMillis(ts), Message: a})
}

// closeOpen answers the calls still open with an error result (none in
// a log panto wrote: a call is stored with its results).
func (w *piWriter) closeOpen(ts time.Time, names map[string]string) error {
	for id, name := range names {
		delete(names, id)
		if err := w.entry(piEntry{Type: "message", Timestamp: isoMillis(ts), Message: piToolResult{Role: "toolResult", ToolCallID: id, ToolName: name,
			Content: []piBlock{{Type: "text", Text: ptr("no result: the panto session has none for this call (it was interrupted)")}}, IsError: true, Timestamp: ts.UnixMilli()}}); err != nil {
			return err
		}
	}
	return nil
}

// compaction writes a compaction that keeps nothing from before it: its
// first kept entry is itself, which pi finds in no entry before it, so it
// sends the summary and what follows, as panto does.
func (w *piWriter) compaction(ts time.Time, summary string) error {
	self := fmt.Sprintf("%08x", w.n+1)
	zero := 0
	return w.entry(piEntry{Type: "compaction", Timestamp: isoMillis(ts), Summary: summary, FirstKeptEntryID: &self, TokensBefore: &zero})
}

// piStop is pi's provider-neutral stop reason of m: always one, as in
// every assistant message pi writes.
func piStop(m agent.Message) string {
	switch m.StopReason.Kind() {
	case agent.StopTruncated:
		return "length"
	case agent.StopToolUse:
		return "toolUse"
	}
	if len(m.ToolUses()) > 0 {
		return "toolUse"
	}
	return "stop"
}

func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// PiDir is pi's agent directory: $PI_CODING_AGENT_DIR, else ~/.pi/agent.
func PiDir(getenv func(string) string) (string, error) {
	if dir := getenv("PI_CODING_AGENT_DIR"); dir != "" {
		return dir, nil
	}
	home, err := homeDir(getenv)
	if err != nil {
		return "", fmt.Errorf("pi's directory: %w (set PI_CODING_AGENT_DIR)", err)
	}
	return filepath.Join(home, ".pi", "agent"), nil
}

// PiPath is where pi keeps session id, started at start, of directory
// cwd: sessions/--<cwd without its leading separator, every / \ and :
// as ->--/<start, its : and . as ->_<id>.jsonl, as pi 0.73 names it.
func PiPath(agentDir, cwd, id string, start time.Time) string {
	trimmed := cwd
	if strings.HasPrefix(cwd, "/") || strings.HasPrefix(cwd, "\\") {
		trimmed = cwd[1:] // one, as pi's replace(/^[/\\]/, "")
	}
	dir := "--" + strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(trimmed) + "--"
	stamp := strings.NewReplacer(":", "-", ".", "-").Replace(isoMillis(start))
	return filepath.Join(agentDir, "sessions", dir, stamp+"_"+id+".jsonl")
}
