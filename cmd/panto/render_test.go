package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

// A session's text on the screen keeps its lines and tabs; every other
// control character is shown as U+FFFD, not obeyed by the terminal.
func TestScreenText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\nand lines\n", "plain\ttext\nand lines\n"},
		{"windows\r\nlines\r\n", "windows\r\nlines\r\n"},
		{"title \x1b]0;pwned\x07 set", "title \uFFFD]0;pwned\uFFFD set"},
		{"\x1b[2J\x1b[Hcleared", "\uFFFD[2J\uFFFD[Hcleared"},
		{"shown\roverwritten", "shown\uFFFDoverwritten"},
		{"ends in CR\r", "ends in CR\uFFFD"},
		{"C1 \u009b31m, DEL \x7f, NUL \x00, bad \xff", "C1 \uFFFD31m, DEL \uFFFD, NUL \uFFFD, bad \uFFFD"},
		{"été, 日本語, emoji 🙂", "été, 日本語, emoji 🙂"},
	} {
		if got := screenText(c.in); got != c.want {
			t.Errorf("screenText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Streamed in chunks, the text is shown as it would be whole: a CR that
// ends a chunk waits for the next to say whether it ends a line.
func TestScreenFilterChunks(t *testing.T) {
	t.Parallel()
	chunks := []string{"a\r", "\nb\r", "c\x1b", "[8mhidden\r", "", "\n", "end\r"}
	var f screenFilter
	var got strings.Builder
	for _, c := range chunks {
		got.WriteString(f.write(c))
	}
	got.WriteString(f.flush())
	if want := screenText(strings.Join(chunks, "")); got.String() != want || want != "a\r\nb\uFFFDc\uFFFD[8mhidden\r\nend\uFFFD" {
		t.Errorf("chunked: %q; whole: %q", got.String(), want)
	}
}

// The printer shows a streamed reply and its thinking through the
// filter, a CR left at the end of the reply alone; a one-shot answer to
// a file or a pipe (rawText) is written as it came.
func TestPrinterControlCharacters(t *testing.T) {
	t.Parallel()
	var out, info bytes.Buffer
	p := newPrinter(&out, &info, true)
	p.ThinkingDelta("think \x1b]0;t\x07")
	for _, s := range []string{"one\r", "\ntwo \x1b[", "31mred\r"} {
		p.TextDelta(s)
	}
	p.MessageAdded(agent.Message{Role: agent.RoleAssistant})
	p.finish()
	if want := "one\r\ntwo \uFFFD[31mred\uFFFD\n"; out.String() != want {
		t.Errorf("out = %q, want %q", out.String(), want)
	}
	if want := "[thinking] think \uFFFD]0;t\uFFFD\n"; info.String() != want {
		t.Errorf("info = %q, want %q", info.String(), want)
	}

	out.Reset()
	p = newPrinter(&out, &info, false)
	p.rawText = true
	p.TextDelta("raw \x1b[31mred\r")
	p.finish()
	if want := "raw \x1b[31mred\r\n"; out.String() != want {
		t.Errorf("raw out = %q, want %q", out.String(), want)
	}
}

// End to end: an answer and a prompt holding escape sequences reach the
// screen as U+FFFD, interactively and in show, while the session, show
// --json, export and a one-shot answer to a pipe keep them as they were.
func TestScreenControlCharacters(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	answer := "read: \x1b]0;pwned\x07 \x1b[2Jgone\rover\r\nnext\t\u009b8m."
	shown := "read: \uFFFD]0;pwned\uFFFD \uFFFD[2Jgone\uFFFDover\r\nnext\t\uFFFD8m."
	srv := fakeprovider.New(t, pc.style, pc.key,
		fakeprovider.Reply{Thinking: "look \x1b[8m", Text: answer},
		fakeprovider.Reply{Text: answer},
	)
	work := t.TempDir()
	r := runPanto(t, work, pc.env(b), "say \x1b[31mred\n/quit\n", append(pc.flags(srv), "-i")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, shown) || strings.ContainsAny(r.stdout, "\x1b\x07\u009b") {
		t.Errorf("interactive stdout %q lacks %q, or holds a control character", r.stdout, shown)
	}
	if !strings.Contains(r.stderr, "[thinking] look \uFFFD[8m") || strings.ContainsAny(r.stderr, "\x1b") {
		t.Errorf("interactive stderr %q: want the thinking shown, no escape", r.stderr)
	}
	info, conv := loadOnly(t, b)
	if got := conv.Messages[len(conv.Messages)-1].Text(); got != answer {
		t.Errorf("stored answer %q, want %q", got, answer)
	}
	r = runPanto(t, work, pc.env(b), "", "show", info.ID)
	if !strings.Contains(r.stdout, "── #1 user\nsay \uFFFD[31mred") || !strings.Contains(r.stdout, shown) || strings.ContainsAny(r.stdout, "\x1b\x07\u009b") {
		t.Errorf("show = %q", r.stdout)
	}
	r = runPanto(t, work, pc.env(b), "", "show", "--json", info.ID)
	var out struct {
		Messages []messageJSON `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Messages) == 0 || out.Messages[len(out.Messages)-1].Content[len(out.Messages[len(out.Messages)-1].Content)-1].Text != answer {
		t.Errorf("show --json: %v: %s", err, r.stdout)
	}
	md := filepath.Join(work, "s.md")
	if r = runPanto(t, work, pc.env(b), "", "export", "-o", md, info.ID); r.code != 0 {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	if data, err := os.ReadFile(md); err != nil || !strings.Contains(string(data), answer) {
		t.Errorf("export lacks the answer as it was: %v: %q", err, data)
	}
	r = runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "--no-session", "again")...)
	if r.code != 0 || r.stdout != answer+"\n" {
		t.Errorf("one-shot to a pipe: exit %d, stdout %q, want %q", r.code, r.stdout, answer+"\n")
	}
}
