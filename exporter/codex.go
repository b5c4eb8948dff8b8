package exporter

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Codex keeps a session as a rollout file, <CODEX_HOME>/sessions/
// YYYY/MM/DD/rollout-<start>-<uuid>.jsonl (CodexPath), and `codex resume
// <uuid>` finds it by its id wherever it is under sessions. A rollout is
// {timestamp, type, payload} lines: session_meta first; then
// response_item lines, the history Codex sends (messages, function
// calls and their outputs); event_msg lines for its own use (the typed
// prompt, user_message; the cumulative token_count, which ends an
// answer); turn_context naming the model; compacted, a summary and
// the history that replaces what came before it. importer/codex.go reads
// the same records. Codex speaks OpenAI's Responses API, so thinking
// (whose reasoning items OpenAI would want encrypted) is left out, and a
// tool result's error flag, which the API has no word for, is lost.

// codexLine is one line of a rollout.
type codexLine struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   any    `json:"payload"`
}

type codexMeta struct {
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	CWD           string `json:"cwd"`
	Originator    string `json:"originator"`
	CLIVersion    string `json:"cli_version"`
	Source        string `json:"source"`
	PantoSession  string `json:"pantoSession"`
	PantoMessages int    `json:"pantoMessages"`
}

type codexContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type codexItem struct {
	Type    string         `json:"type"`
	Role    string         `json:"role,omitempty"`
	Content []codexContent `json:"content,omitempty"`
	// function_call, function_call_output
	Name      string  `json:"name,omitempty"`
	Arguments string  `json:"arguments,omitempty"`
	CallID    string  `json:"call_id,omitempty"`
	Output    *string `json:"output,omitempty"`
}

type codexTotals struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	TotalTokens           int64 `json:"total_tokens"`
}

// Codex writes entries, a panto session's whole log, as a Codex rollout,
// its id derived as ClaudeCode's is, and its session_meta holding the
// marker.
func Codex(entries []sessionlog.Entry, opts Options) (*Result, error) {
	return counted(importer.Codex, func(messages int) (*Result, error) {
		return codexLines(entries, opts, messages)
	})
}

func codexLines(entries []sessionlog.Entry, opts Options, messages int) (*Result, error) {
	res := &Result{SessionID: derivedUUID("panto export codex", opts.Session, strconv.Itoa(len(entries)))}
	start := time.Unix(0, 0)
	if len(entries) > 0 {
		start = entries[0].TS
	}
	w := codexWriter{res: res}
	// source "cli": codex resume lists the sessions of its terminal
	// interface; cli_version is Codex's field, and no Codex wrote this.
	w.line(start, "session_meta", codexMeta{ID: res.SessionID, Timestamp: isoMillis(start), CWD: opts.CWD, Originator: "panto", CLIVersion: "0.0.0", Source: "cli", PantoSession: opts.Session, PantoMessages: messages})
	open := map[string]bool{}
	model := ""
	for _, e := range entries {
		m, ts := e.Message, e.TS
		switch {
		case m.Role == agent.RoleSystem:
			if _, ok := m.Title(); !ok {
				res.Dropped++
			}
			continue // a title has no record in a rollout
		case m.IsCompactionSummary():
			w.compacted(ts, m)
		case m.Role == agent.RoleUser:
			w.closeOpen(ts, open, m)
			w.user(ts, m, open)
		case m.Role == agent.RoleAssistant:
			w.closeOpen(ts, open, agent.Message{})
			if e.Identity.Model != "" && e.Identity.Model != model {
				model = e.Identity.Model
				w.line(ts, "turn_context", map[string]string{"model": model})
			}
			w.assistant(ts, e, open)
		default:
			res.Dropped++
			continue
		}
		res.Messages++
	}
	w.closeOpen(time.Now(), open, agent.Message{})
	return res, w.err
}

type codexWriter struct {
	res    *Result
	totals codexTotals
	err    error
}

func (w *codexWriter) line(ts time.Time, typ string, payload any) {
	if w.err != nil {
		return
	}
	data, err := json.Marshal(codexLine{Timestamp: isoMillis(ts), Type: typ, Payload: payload})
	if err != nil {
		w.err = fmt.Errorf("export to codex: %w", err)
		return
	}
	w.res.Log = append(append(w.res.Log, data...), '\n')
}

func (w *codexWriter) user(ts time.Time, m agent.Message, open map[string]bool) {
	var texts []codexContent
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				texts = append(texts, codexContent{Type: "input_text", Text: b.Text})
			}
		case agent.BlockToolResult:
			id := importer.WireToolID(b.ToolUseID)
			if !open[id] {
				continue // answers no call
			}
			delete(open, id)
			out := b.Text
			w.line(ts, "response_item", codexItem{Type: "function_call_output", CallID: id, Output: &out})
		}
	}
	if len(texts) == 0 {
		return
	}
	prompt := ""
	for i, t := range texts {
		if i > 0 {
			prompt += "\n"
		}
		prompt += t.Text
	}
	// The prompt as Codex records one typed: the event for its own
	// history, the item for the model.
	w.line(ts, "event_msg", map[string]any{"type": "user_message", "message": prompt, "images": []string{}})
	w.line(ts, "response_item", codexItem{Type: "message", Role: "user", Content: texts})
}

func (w *codexWriter) assistant(ts time.Time, e sessionlog.Entry, open map[string]bool) {
	m := e.Message
	var text []codexContent
	flush := func() {
		if len(text) > 0 {
			w.line(ts, "response_item", codexItem{Type: "message", Role: "assistant", Content: text})
			text = nil
		}
	}
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				text = append(text, codexContent{Type: "output_text", Text: b.Text})
			}
		case agent.BlockThinking, agent.BlockRedactedThinking:
			w.res.DroppedThinking++
		case agent.BlockToolUse:
			flush()
			id := importer.WireToolID(b.ToolUseID)
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			w.line(ts, "response_item", codexItem{Type: "function_call", Name: b.ToolName, Arguments: args, CallID: id})
			open[id] = true
		}
	}
	flush()
	// The answer's tokens, as OpenAI counts them (the cached among the
	// input), added to the session's: Codex writes the running total,
	// which also ends the answer for a reader.
	if u := m.Usage; u != nil {
		input, cached := u.InputTokens, u.CacheReadTokens
		if e.Identity.APIStyle == agent.APIStyleAnthropicMessages {
			input += u.CacheReadTokens + u.CacheWriteTokens
		}
		w.totals.InputTokens += input
		w.totals.CachedInputTokens += cached
		w.totals.OutputTokens += u.OutputTokens
		w.totals.ReasoningOutputTokens += u.ReasoningTokens
		w.totals.TotalTokens += input + u.OutputTokens
	}
	w.line(ts, "event_msg", map[string]any{"type": "token_count", "info": map[string]any{"total_token_usage": w.totals, "last_token_usage": w.totals}})
}

// compacted writes a compaction summary as Codex's remote compaction
// does: with the history that replaces everything before it, which is
// the summary alone, as panto sends it. Codex rebuilds a resumed history
// from that; given only the message, it would keep the prompts from
// before the compaction, as its local compaction does, and send more
// than panto did.
func (w *codexWriter) compacted(ts time.Time, m agent.Message) {
	summary := codexItem{Type: "message", Role: "user", Content: []codexContent{{Type: "input_text", Text: m.Text()}}}
	w.line(ts, "compacted", codexCompacted{Message: m.Text(), ReplacementHistory: []codexItem{summary}})
}

type codexCompacted struct {
	Message            string      `json:"message"`
	ReplacementHistory []codexItem `json:"replacement_history"`
}

// closeOpen answers the calls still open before message m with an error
// output (none in a log panto wrote: a call is stored with its results).
func (w *codexWriter) closeOpen(ts time.Time, open map[string]bool, m agent.Message) {
	for _, b := range m.Content {
		if b.Type == agent.BlockToolResult {
			return // m is the results
		}
	}
	for id := range open {
		delete(open, id)
		out := "no result: the panto session has none for this call (it was interrupted)"
		w.line(ts, "response_item", codexItem{Type: "function_call_output", CallID: id, Output: &out})
	}
}

// CodexDir is Codex's home: $CODEX_HOME, else ~/.codex.
func CodexDir(getenv func(string) string) (string, error) {
	if dir := getenv("CODEX_HOME"); dir != "" {
		return dir, nil
	}
	home, err := homeDir(getenv)
	if err != nil {
		return "", fmt.Errorf("codex's directory: %w (set CODEX_HOME)", err)
	}
	return filepath.Join(home, ".codex"), nil
}

// CodexPath is where Codex keeps session id, started at start:
// sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl, the day
// and time in UTC.
func CodexPath(codexHome, id string, start time.Time) string {
	t := start.UTC()
	return filepath.Join(codexHome, "sessions", t.Format("2006"), t.Format("01"), t.Format("02"), "rollout-"+t.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
}
