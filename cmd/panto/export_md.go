package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/panto-dev/panto/agent"
)

// markdownExport writes a session as Markdown to paste: a heading per
// message, the model's text as it wrote it (Markdown already), code and
// tool output fenced, thinking in a <details> that renderers fold.
type markdownExport struct{}

func (markdownExport) head(w *bufio.Writer, h exportHead) error {
	info := h.Info
	title := info.Title
	if title == "" {
		title = "Session " + info.ID
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "- Session: `%s`\n", info.ID)
	fmt.Fprintf(w, "- Created: %s; last message: %s\n", exportTime(info.Created), exportTime(info.Modified))
	if line := parentLine(info, h.Origin); line != "" {
		fmt.Fprintf(w, "- %s%s\n", strings.ToUpper(line[:1]), line[1:])
	}
	fmt.Fprintf(w, "- %s\n", plural(h.Messages, "message"))
	_, err := fmt.Fprintf(w, "- Tokens: %s\n\n", totalsText(info.Usage))
	return err
}

func (markdownExport) message(w *bufio.Writer, m exportMessage) error {
	writeMarkdownMessage(w, m)
	return nil
}

func (markdownExport) tail(*bufio.Writer, exportHead) error { return nil }

func totalsText(u agent.Usage) string {
	if u == (agent.Usage{}) {
		return "none recorded"
	}
	return usageLine(u)
}

func writeMarkdownMessage(w *bufio.Writer, m exportMessage) {
	msg := m.Message
	head := []string{fmt.Sprint(m.N), m.Label, exportTime(m.TS)}
	if id := identityText(m.Identity); id != "" && msg.Role != agent.RoleSystem {
		head = append(head, id)
	}
	// Every block ends with a blank line.
	fmt.Fprintf(w, "## %s\n\n", strings.Join(head, " · "))
	if title, ok := msg.Title(); ok {
		if title == "" {
			fmt.Fprintf(w, "*Title cleared.*\n\n")
		} else {
			fmt.Fprintf(w, "*Title set: %s*\n\n", title)
		}
		return
	}
	if msg.Role == agent.RoleAssistant {
		meta := stopText(msg)
		if msg.Usage != nil {
			meta += " · tokens: " + usageLine(*msg.Usage)
		}
		fmt.Fprintf(w, "*%s*\n\n", meta)
	}
	for _, b := range msg.Content {
		switch b.Type {
		case agent.BlockText:
			fmt.Fprintf(w, "%s\n\n", strings.TrimRight(b.Text, "\n"))
		case agent.BlockSystem:
			fmt.Fprintf(w, "System prompt (%s):\n\n%s\n", orDefault(string(b.Mode), "append"), quoteLines(b.Text))
		case agent.BlockThinking:
			fmt.Fprintf(w, "<details><summary>Thinking</summary>\n\n%s\n</details>\n\n", quoteLines(b.Text))
		case agent.BlockRedactedThinking:
			fmt.Fprintf(w, "*[redacted thinking]*\n\n")
		case agent.BlockToolUse:
			fmt.Fprintf(w, "**Tool call `%s`** (`%s`)\n\n%s\n", b.ToolName, b.ToolUseID, fence(prettyJSON(b.Input), "json"))
		case agent.BlockToolResult:
			what := "Result"
			if b.IsError {
				what = "Error"
			}
			fmt.Fprintf(w, "**%s of `%s`**\n\n%s\n", what, b.ToolUseID, fence(b.Text, ""))
		}
	}
}

// fence puts text in a fenced code block whose fence is longer than any
// run of backticks in it.
func fence(text, lang string) string {
	f := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	return f + lang + "\n" + strings.TrimRight(text, "\n") + "\n" + f + "\n"
}

// quoteLines makes text a Markdown block quote.
func quoteLines(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// prettyJSON indents a tool's JSON input (kept as it is when it is not
// JSON).
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
