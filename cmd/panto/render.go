package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/panto-dev/panto/agent"
)

// printer shows a step as it happens: the reply's text on out, streamed;
// thinking and tool activity on info (stderr in one-shot mode, so that
// stdout carries the answer alone). Text goes through screenFilters.
type printer struct {
	out, info io.Writer
	// thinking: show streamed thinking (interactive mode).
	thinking bool
	// rawText writes the reply's text as it is: a one-shot answer on a
	// stdout that is a file or a pipe is data, not the screen.
	rawText       bool
	text, thought screenFilter
	// atLineStart tracks whether out ended with a newline.
	atLineStart bool
	inThinking  bool
	wrote       bool
	// toolNames are the names of the tool calls seen, by id, so that a
	// result can be shown as its tool's; those shown as they started are
	// not shown again when their message is added.
	toolNames map[string]string
	shown     map[string]bool
}

var _ agent.ToolCallReceiver = (*printer)(nil)

func newPrinter(out, info io.Writer, thinking bool) *printer {
	return &printer{out: out, info: info, thinking: thinking, atLineStart: true}
}

func (p *printer) TextDelta(s string) {
	if s == "" {
		return
	}
	p.endThinking()
	if !p.rawText {
		s = p.text.write(s)
	}
	if s != "" {
		io.WriteString(p.out, s)
		p.atLineStart = strings.HasSuffix(s, "\n")
	}
	if p.text.held() {
		p.atLineStart = false
	}
	p.wrote = true
}

// endText writes the CR the reply's text ended with, alone.
func (p *printer) endText() {
	if t := p.text.flush(); t != "" {
		io.WriteString(p.out, t)
		p.atLineStart = false
	}
}

func (p *printer) ThinkingDelta(s string) {
	if !p.thinking || s == "" {
		return
	}
	if !p.inThinking {
		p.newline()
		io.WriteString(p.info, "[thinking] ")
		p.inThinking = true
	}
	io.WriteString(p.info, p.thought.write(s))
}

func (p *printer) endThinking() {
	if p.inThinking {
		io.WriteString(p.info, p.thought.flush()+"\n")
		p.inThinking = false
	}
}

func (p *printer) newline() {
	p.endText()
	if !p.atLineStart {
		io.WriteString(p.out, "\n")
		p.atLineStart = true
	}
}

func (p *printer) MessageAdded(m agent.Message) {
	p.endThinking()
	p.endText()
	// A cut-off answer with tool calls ends the step with an error that
	// says so; any other gets its notice here, right after it.
	if notice := stopNotice(m.StopReason, ""); notice != "" && len(m.ToolUses()) == 0 {
		p.newline()
		fmt.Fprintf(p.info, "panto: %s\n", notice)
	}
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockToolUse:
			if p.shown[b.ToolUseID] {
				delete(p.shown, b.ToolUseID) // an id may come again
			} else {
				p.showCall(b)
			}
		case agent.BlockToolResult:
			status := "ok"
			switch {
			case b.IsError:
				status = "error: " + clip(b.Text, 200)
			case changesFiles(p.toolNames[b.ToolUseID]):
				// The diff-like summary line: "edited a.go: -1 +2 lines at line 14".
				fmt.Fprintf(p.info, "← %s\n", clip(b.Text, 200))
				continue
			}
			fmt.Fprintf(p.info, "← %s (%d bytes)\n", status, len(b.Text))
		}
	}
}

// ToolCallStarted shows a tool call as it starts to run: the user sees
// what runs (a command of run_shell) while it runs, not after.
func (p *printer) ToolCallStarted(b agent.Block) {
	p.endThinking()
	p.endText()
	p.showCall(b)
	if p.shown == nil {
		p.shown = map[string]bool{}
	}
	p.shown[b.ToolUseID] = true
}

func (p *printer) showCall(b agent.Block) {
	p.newline()
	fmt.Fprintf(p.info, "→ %s %s\n", b.ToolName, clip(string(b.Input), 200))
	if p.toolNames == nil {
		p.toolNames = map[string]string{}
	}
	p.toolNames[b.ToolUseID] = b.ToolName
}

// changesFiles reports whether a tool's result is a summary of a change
// to a file, which the user sees whole.
func changesFiles(tool string) bool { return tool == "write_file" || tool == "edit_file" }

// stopNotice is the line that tells the user an answer did not end as a
// whole answer, and what to do about it; "" when it did (or when the
// reason says nothing). notDone says what panto did not do because of it.
func stopNotice(reason agent.StopReason, notDone string) string {
	var what, fix string
	switch reason.Kind() {
	case agent.StopTruncated:
		what, fix = "the answer was cut off at the output token limit", "ask to continue, or raise the limit with --max-tokens"
		if reason == "model_context_window_exceeded" {
			what, fix = "the answer was cut off at the end of the model's context window", "/compact, or start a new session"
		}
	case agent.StopRefused:
		what, fix = "the model refused to go on", "rephrase the request"
	case agent.StopFiltered:
		what, fix = "the provider's content filter cut the answer off", "rephrase the request"
	case agent.StopPaused:
		what, fix = "the provider paused this long turn", `send "continue" to resume it`
	default:
		return ""
	}
	if notDone != "" {
		notDone = "; " + notDone
	}
	return fmt.Sprintf("%s (%s)%s: %s", what, reason, notDone, fix)
}

// cutShortNotice is stopNotice for what the agent left undone.
func cutShortNotice(e *agent.CutShortError) string {
	notDone := ""
	switch {
	case len(e.Tools) > 0:
		notDone = "no tool was run (" + strings.Join(e.Tools, ", ") + ")"
	case e.Summary:
		notDone = "the summary was not stored"
	}
	return stopNotice(e.Reason, notDone)
}

// finish ends the reply's last line.
func (p *printer) finish() {
	p.endThinking()
	if p.wrote {
		p.newline()
	}
}

// clip shortens s to n runes on one line, its control characters shown
// as U+FFFD: s may be a file's text a tool read (or a title, a prompt),
// and an escape sequence in it would act on the terminal (set its title,
// move the cursor, rewrite what it shows) instead of being shown.
func clip(s string, n int) string {
	return agent.Truncate(strings.Map(shownRune, strings.Join(strings.Fields(s), " ")), n)
}

func shownRune(r rune) rune {
	if unicode.IsControl(r) {
		return unicode.ReplacementChar
	}
	return r
}

// screenText is a session's text (an answer, a prompt, a file's text a
// tool read and the model echoed) as the terminal may be given it: its
// lines and tabs as they are, and every other control character (C0, a
// CR not before a LF, DEL, C1) as U+FFFD, so that an escape sequence in
// it is shown instead of acting on the terminal (setting its title,
// moving the cursor, hiding what follows). Only what goes to the screen
// goes through it: the session, export and --json keep the text as it
// is.
func screenText(s string) string {
	var f screenFilter
	return f.write(s) + f.flush()
}

// screenFilter is screenText for text that arrives in chunks, as a reply
// streams. Only a CR needs to see past its chunk, whether a LF follows:
// a CR that ends a chunk is held for the next one (so a CRLF split
// between two stays a line end), and flush shows it as U+FFFD when the
// text ends there.
type screenFilter struct{ heldCR bool }

// write returns what of s the screen may show now.
func (f *screenFilter) write(s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	b.Grow(len(s) + 3)
	if f.heldCR {
		f.heldCR = false
		if s[0] == '\n' {
			b.WriteByte('\r')
		} else {
			b.WriteRune(unicode.ReplacementChar)
		}
	}
	for i, r := range s {
		switch {
		case r == '\r' && i+1 == len(s):
			f.heldCR = true
		case r == '\r' && s[i+1] == '\n', r == '\n', r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r):
			b.WriteRune(unicode.ReplacementChar)
		default:
			// Invalid UTF-8 comes as utf8.RuneError: U+FFFD too.
			b.WriteRune(r)
		}
	}
	return b.String()
}

// held reports whether a CR waits for the next chunk.
func (f *screenFilter) held() bool { return f.heldCR }

// flush ends the text: a CR held is shown alone, as U+FFFD.
func (f *screenFilter) flush() string {
	if !f.heldCR {
		return ""
	}
	f.heldCR = false
	return string(unicode.ReplacementChar)
}

// writeTranscript prints messages for people, numbered from first (the
// numbers of panto search and panto fork --at); 0 leaves them out.
func writeTranscript(w io.Writer, msgs []agent.Message, first int) {
	for i, m := range msgs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		n := 0
		if first > 0 {
			n = first + i
		}
		writeMessage(w, m, n)
	}
}

// roleLabel names what a message is: its role, or what a user or system
// message stands for.
func roleLabel(m agent.Message) string {
	switch {
	case m.IsCompactionSummary():
		return "summary"
	case m.IsToolResult():
		return "tool"
	}
	if _, ok := m.Title(); ok {
		return "title"
	}
	return string(m.Role)
}

func writeMessage(w io.Writer, m agent.Message, n int) {
	label := roleLabel(m)
	if n > 0 {
		label = fmt.Sprintf("#%d %s", n, label)
	}
	if title, ok := m.Title(); ok {
		if title == "" {
			title = "(cleared)"
		}
		fmt.Fprintf(w, "── %s\n%s\n", label, screenText(title))
		return
	}
	// The stop reason as the wire said it; a kind that needs the reader's
	// attention is spelled out.
	if m.StopReason != "" {
		label += " · " + string(m.StopReason)
		if k := m.StopReason.Kind(); k.CutShort() || k == agent.StopPaused {
			label += " (" + string(k) + ")"
		}
	}
	if why, ok := m.Interrupted(); ok {
		label += " · interrupted (" + clip(why, 120) + ")"
	}
	fmt.Fprintf(w, "── %s\n", label)
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText, agent.BlockSystem:
			fmt.Fprintln(w, screenText(strings.TrimRight(b.Text, "\n")))
		case agent.BlockThinking:
			if b.Text != "" {
				fmt.Fprintf(w, "[thinking] %s\n", clip(b.Text, 400))
			}
		case agent.BlockRedactedThinking:
			fmt.Fprintln(w, "[redacted thinking]")
		case agent.BlockToolUse:
			fmt.Fprintf(w, "→ %s %s\n", b.ToolName, clip(string(b.Input), 400))
		case agent.BlockToolResult:
			prefix := "←"
			if b.IsError {
				prefix = "← error:"
			}
			fmt.Fprintf(w, "%s %s\n", prefix, clip(b.Text, 400))
		}
	}
}

// lastExchange returns the latest prompt a person typed and what followed
// it, for showing a resumed session.
func lastExchange(msgs []agent.Message) []agent.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == agent.RoleUser && !m.IsToolResult() {
			return msgs[i:]
		}
	}
	return nil
}

// messageJSON is the --json shape of a message.
type messageJSON struct {
	Role    agent.Role    `json:"role"`
	Content []agent.Block `json:"content"`
	Usage   *agent.Usage  `json:"usage,omitempty"`
	// StopReason is the wire's word, Stop what it means (both absent
	// when the wire said nothing).
	StopReason agent.StopReason `json:"stop_reason,omitempty"`
	Stop       agent.StopKind   `json:"stop,omitempty"`
	Metadata   map[string]any   `json:"metadata,omitempty"`
}

func toMessageJSON(m agent.Message) messageJSON {
	out := messageJSON{Role: m.Role, Content: m.Content, Usage: m.Usage, StopReason: m.StopReason, Metadata: m.Metadata}
	if m.StopReason != "" {
		out.Stop = m.StopReason.Kind()
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
