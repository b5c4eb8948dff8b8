package importer

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

var update = flag.Bool("update", false, "rewrite the golden conversions in testdata")

// shape is a message in one line: role, endpoint, blocks, usage, stop
// reason and metadata, for tests to compare.
func shape(e sessionlog.Entry) string {
	m := e.Message
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			parts = append(parts, fmt.Sprintf("text %q", b.Text))
		case agent.BlockThinking:
			parts = append(parts, fmt.Sprintf("thinking %q sig=%q", b.Text, b.Signature))
		case agent.BlockRedactedThinking:
			parts = append(parts, fmt.Sprintf("redacted %q", b.Data))
		case agent.BlockToolUse:
			parts = append(parts, fmt.Sprintf("call %s %s %s", b.ToolUseID, b.ToolName, b.Input))
		case agent.BlockToolResult:
			parts = append(parts, fmt.Sprintf("result %s error=%v %q", b.ToolUseID, b.IsError, b.Text))
		default:
			parts = append(parts, string(b.Type))
		}
	}
	s := fmt.Sprintf("%s %s", e.TS.Format("15:04:05.000"), m.Role)
	if e.Identity.Model != "" {
		s += fmt.Sprintf(" [%s %s %s]", e.Identity.APIStyle, e.Identity.Model, e.Identity.Reasoning)
	}
	s += ": " + strings.Join(parts, "; ")
	if m.Usage != nil {
		s += fmt.Sprintf(" usage=%+v", *m.Usage)
	}
	if m.StopReason != "" {
		s += " stop=" + string(m.StopReason)
	}
	if len(m.Metadata) > 0 {
		s += fmt.Sprintf(" meta=%v", m.Metadata)
	}
	return s
}

// entries decodes every message line of a log.
func entries(t *testing.T, log []byte) (*sessionlog.Header, []sessionlog.Entry) {
	t.Helper()
	d := sessionlog.Decoder{Name: "conv"}
	var out []sessionlog.Entry
	err := sessionlog.Lines(log, func(line []byte) error {
		e, ok, err := d.DecodeEntry(line)
		if ok {
			out = append(out, e)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d.Header, out
}

func TestConvertGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		agent Agent
		stats Stats
		usage agent.Usage
	}{
		{"claude-code.jsonl", ClaudeCode, Stats{ToolCalls: 3, ToolResults: 3, ClosedCalls: 1, DroppedResults: 1}, agent.Usage{InputTokens: 52, OutputTokens: 119, CacheReadTokens: 3300, CacheWriteTokens: 100}},
		{"claude-code-subagent.jsonl", ClaudeCode, Stats{}, agent.Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 1000, CacheWriteTokens: 100}},
		{"codex.jsonl", Codex, Stats{ToolCalls: 4, ToolResults: 4, ClosedCalls: 1, DroppedResults: 1}, agent.Usage{InputTokens: 600, OutputTokens: 70, CacheReadTokens: 150, ReasoningTokens: 10}},
		// Codex 0.171 (codex exec, then exec resume, against a fake
		// Responses API server; long strings cut): its prompts are in
		// item_completed alone.
		{"codex-0.171.jsonl", Codex, Stats{ToolCalls: 1, ToolResults: 1}, agent.Usage{InputTokens: 30, OutputTokens: 9}},
		// A fork of a session of two answers (codex exec fork, against
		// the fake server, 100 input and 5 output tokens an answer):
		// it holds none of its parent's lines, and its token totals
		// go on from the parent's 200 and 10, which are not its own.
		{"codex-0.171-fork.jsonl", Codex, Stats{}, agent.Usage{InputTokens: 100, OutputTokens: 5}},
		{"pi.jsonl", Pi, Stats{ToolCalls: 2, ToolResults: 2, ClosedCalls: 1, DroppedResults: 1}, agent.Usage{InputTokens: 30, OutputTokens: 60, CacheReadTokens: 90, CacheWriteTokens: 120}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if a, ok := Detect(data); !ok || a != tc.agent {
				t.Fatalf("Detect = %q, %v; want %q", a, ok, tc.agent)
			}
			c, err := Convert(tc.agent, path, data)
			if err != nil {
				t.Fatal(err)
			}
			checkLog(t, c)
			if c.Stats != tc.stats {
				t.Errorf("stats %+v, want %+v", c.Stats, tc.stats)
			}
			_, es := entries(t, c.Log)
			var total agent.Usage
			var lines []string
			for _, e := range es {
				if e.Message.Usage != nil {
					total.Add(*e.Message.Usage)
				}
				lines = append(lines, shape(e))
			}
			if total != tc.usage {
				t.Errorf("usage %+v, want %+v", total, tc.usage)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(tc.file, ".jsonl")+".golden")
			got := []byte(strings.Join(lines, "\n") + "\n")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the conversion of %s differs from %s:\n%s", tc.file, golden, got)
			}
			checkPrefixes(t, tc.agent, path, data, c.Log, true)
		})
	}
}

func TestHeaders(t *testing.T) {
	for _, tc := range []struct {
		file   string
		agent  Agent
		origin sessionlog.Origin
		parent string
		// remote is the work tree's remote the log records (Codex's).
		remote string
	}{
		{"claude-code.jsonl", ClaudeCode, sessionlog.Origin{Agent: "claude-code", SessionID: "5e0c1a2b-0000-4000-8000-00000000c0de", Version: "2.1.7", CWD: "/home/me/app"}, "", ""},
		{"claude-code-subagent.jsonl", ClaudeCode, sessionlog.Origin{Agent: "claude-code", SessionID: "5e0c1a2b-0000-4000-8000-00000000c0de", Subagent: "a485154", Version: "2.1.7", CWD: "/home/me/app"}, SessionID(ClaudeCode, "5e0c1a2b-0000-4000-8000-00000000c0de"), ""},
		{"codex.jsonl", Codex, sessionlog.Origin{Agent: "codex", SessionID: "019b0000-1111-7222-8333-444455556666", Version: "0.77.0", CWD: "/home/me/app"}, "", "github.com/me/app"},
		{"codex-0.171.jsonl", Codex, sessionlog.Origin{Agent: "codex", SessionID: "01a24c1f-2ff9-7312-9863-6cda747099a7", Version: "0.171.0", CWD: "/tmp/cxwork"}, "", ""},
		{"pi.jsonl", Pi, sessionlog.Origin{Agent: "pi", SessionID: "0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000", Version: "format 3", CWD: "/home/me/app"}, SessionID(Pi, "0193aaaa-0000-7000-8000-000000000001"), ""},
	} {
		path := filepath.Join("testdata", tc.file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Convert(tc.agent, path, data)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := entries(t, c.Log)
		foreign := tc.origin.SessionID
		if tc.origin.Subagent != "" {
			foreign += "/" + tc.origin.Subagent
		}
		if h.ID != SessionID(tc.agent, foreign) || c.ID != h.ID || c.ForeignID != foreign {
			t.Errorf("%s: id %s (conversion %s, foreign %s), want the id of %s", tc.file, h.ID, c.ID, c.ForeignID, foreign)
		}
		if h.Origin == nil || *h.Origin != tc.origin || h.ForkedFrom != tc.parent {
			t.Errorf("%s: origin %+v forked_from %q, want %+v %q", tc.file, h.Origin, h.ForkedFrom, tc.origin, tc.parent)
		}
		// The project is what the log says: the directory the agent ran
		// in, and the remote when the agent recorded it. Nothing of this
		// machine's disk (WithProject adds that): the bytes are a
		// function of the log alone.
		if want := (agent.Project{Remote: tc.remote, Dir: tc.origin.CWD}); h.Project != want {
			t.Errorf("%s: project %+v, want %+v", tc.file, h.Project, want)
		}
	}
}

func TestRefusesMalformedLine(t *testing.T) {
	for _, tc := range []struct {
		agent Agent
		data  string
		line  int
	}{
		{ClaudeCode, `{"type":"user","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"content":"hi"}}` + "\n" + "not json\n", 2},
		{ClaudeCode, `{"type":"assistant","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"content":7}}` + "\n", 1},
		{Codex, `{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}` + "\n\n" + `{"type":"event_msg","payload":[1]}` + "\n", 3},
		{Pi, `{"type":"session","version":3,"id":"p","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}` + "\n" + `{"type":"message","timestamp":"yesterday"}` + "\n", 2},
		{Pi, `{"type":"session","version":3,"timestamp":"2026-01-01T00:00:00Z","cwd":"/"}` + "\n", 1},
	} {
		_, err := Convert(tc.agent, "f.jsonl", []byte(tc.data))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), fmt.Sprintf("f.jsonl:%d:", tc.line)) {
			t.Errorf("%s %q: error %v, want ErrMalformed at f.jsonl:%d", tc.agent, tc.data, err, tc.line)
		}
	}
}

func TestTornLastLineWaits(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Convert(Pi, "pi.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(append([]byte{}, data...), `{"type":"message","id":"e19","parentId":"e18","timestamp":"2026-03-01T10:00:17.000Z","message":{"role":"user","content":"ha`...)
	c, err := Convert(Pi, "pi.jsonl", torn)
	if err != nil {
		t.Fatalf("a torn last line: %v", err)
	}
	if !bytes.Equal(c.Log, whole.Log) {
		t.Errorf("a torn last line changed the conversion")
	}
}

// TestDecompressTorn: a .jsonl.zst the agent is still writing decodes to
// a prefix of its content (what is torn waits), never to an error.
func TestDecompressTorn(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "codex.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for rest := data; len(rest) > 0; { // several blocks, as a stream flushed as it goes
		n := min(len(rest), 700)
		if _, err := enc.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		if err := enc.Flush(); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	packed := buf.Bytes()
	whole, err := Decompress(packed)
	if err != nil || !bytes.Equal(whole, data) {
		t.Fatalf("whole: %v", err)
	}
	longest := 0
	for cut := 0; cut < len(packed); cut += 7 {
		got, err := Decompress(packed[:cut])
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(packed), err)
		}
		if !bytes.HasPrefix(data, got) {
			t.Fatalf("cut at %d: %d bytes that are not a prefix of the log", cut, len(got))
		}
		longest = max(longest, len(got))
	}
	if longest == 0 {
		t.Error("no cut decoded anything: a log being written would wait for ever")
	}
}

// TestCodexPromptReportedTwice: a version of Codex that reports a prompt
// both as user_message and as item_completed (in either order) has it
// imported once; the same text typed again in the next turn, or twice in
// one turn, is a prompt each time.
func TestCodexPromptReportedTwice(t *testing.T) {
	ev := func(sec int, payload string) string {
		return fmt.Sprintf(`{"timestamp":"2026-10-01T00:00:%02dZ","type":"event_msg","payload":%s}`, sec, payload) + "\n"
	}
	um := func(sec int, text string) string {
		return ev(sec, `{"type":"user_message","message":"`+text+`"}`)
	}
	ic := func(sec int, text string) string {
		return ev(sec, `{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"`+text+`"}]}}`)
	}
	answer := func(sec int) string {
		return fmt.Sprintf(`{"timestamp":"2026-10-01T00:00:%02dZ","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}`, sec) + "\n" +
			ev(sec, `{"type":"task_complete"}`)
	}
	log := `{"timestamp":"2026-10-01T00:00:00Z","type":"session_meta","payload":{"id":"twice"}}` + "\n" +
		ev(1, `{"type":"task_started"}`) + um(1, "go") + ic(1, "go") + answer(2) +
		ev(3, `{"type":"task_started"}`) + ic(3, "go") + um(3, "go") + answer(4) +
		ev(5, `{"type":"task_started"}`) + um(5, "go") + answer(6) +
		ev(7, `{"type":"task_started"}`) + ic(7, "again") + ic(7, "again") + um(7, "again") + answer(8)
	c, err := Convert(Codex, "r.jsonl", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	_, es := entries(t, c.Log)
	var prompts []string
	for _, e := range es {
		if e.Message.Role == agent.RoleUser {
			prompts = append(prompts, e.Message.Text())
		}
	}
	if got := strings.Join(prompts, ","); got != "go,go,go,again,again" {
		t.Errorf("prompts %s, want go,go,go,again,again", got)
	}
}

// TestCodexImagePrompt: a prompt of images alone, attached from disk
// (user_message's local_images) or pasted (images), is a prompt, and
// reported by both events it is one prompt.
func TestCodexImagePrompt(t *testing.T) {
	ev := func(sec int, payload string) string {
		return fmt.Sprintf(`{"timestamp":"2026-10-01T00:00:%02dZ","type":"event_msg","payload":%s}`, sec, payload) + "\n"
	}
	answer := func(sec int) string {
		return fmt.Sprintf(`{"timestamp":"2026-10-01T00:00:%02dZ","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a cat"}]}}`, sec) + "\n" +
			ev(sec, `{"type":"task_complete"}`)
	}
	log := `{"timestamp":"2026-10-01T00:00:00Z","type":"session_meta","payload":{"id":"images"}}` + "\n" +
		ev(1, `{"type":"task_started"}`) + ev(1, `{"type":"user_message","message":"","images":[],"local_images":["/tmp/shot.png"]}`) + answer(2) +
		ev(3, `{"type":"task_started"}`) + ev(3, `{"type":"user_message","message":"and this?","local_images":["/tmp/b.png"]}`) +
		ev(3, `{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"and this?"},{"type":"local_image","path":"/tmp/b.png"}]}}`) + answer(4)
	c, err := Convert(Codex, "r.jsonl", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	_, es := entries(t, c.Log)
	var roles []string
	for _, e := range es {
		roles = append(roles, string(e.Message.Role)+":"+strings.ReplaceAll(e.Message.Text(), "\n", " "))
	}
	if got, want := strings.Join(roles, ","), "user:[image],assistant:a cat,user:and this? [image],assistant:a cat"; got != want {
		t.Errorf("messages %s, want %s", got, want)
	}
}

// TestCodexRemoteCompaction: a compaction of OpenAI's (no message, the
// summary encrypted in the replacement history) is imported as the
// messages the history keeps in the clear, not the harness's context or
// the encrypted item; a history with nothing readable says so.
func TestCodexRemoteCompaction(t *testing.T) {
	meta := `{"timestamp":"2026-10-01T00:00:00Z","type":"session_meta","payload":{"id":"remote"}}` + "\n" +
		`{"timestamp":"2026-10-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"fix the build"}}` + "\n"
	for _, tc := range []struct {
		history   string
		want      []string
		wantNot   []string
		wantExact string
	}{{
		history: `[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>sandboxed</permissions instructions>"}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w\n\nbe brief"}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the build"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"the linker flag was wrong"}]},` +
			`{"type":"compaction","encrypted_content":"gAAAA-secret"}]`,
		want:    []string{"encrypted", "user: fix the build", "assistant: the linker flag was wrong"},
		wantNot: []string{"sandboxed", "environment_context", "be brief", "gAAAA"},
	}, {
		history:   `[{"type":"compaction","encrypted_content":"gAAAA-secret"}]`,
		wantExact: "(Codex compacted the conversation here and kept no summary text)",
	}} {
		log := meta + `{"timestamp":"2026-10-01T00:00:02Z","type":"compacted","payload":{"message":"","replacement_history":` + tc.history + `}}` + "\n" +
			`{"timestamp":"2026-10-01T00:00:03Z","type":"event_msg","payload":{"type":"user_message","message":"and now?"}}` + "\n"
		c, err := Convert(Codex, "r.jsonl", []byte(log))
		if err != nil {
			t.Fatal(err)
		}
		_, es := entries(t, c.Log)
		var summary string
		for _, e := range es {
			if e.Message.IsCompactionSummary() {
				summary = e.Message.Text()
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(summary, w) {
				t.Errorf("compaction %q lacks %q", summary, w)
			}
		}
		for _, w := range tc.wantNot {
			if strings.Contains(summary, w) {
				t.Errorf("compaction %q holds %q", summary, w)
			}
		}
		if tc.wantExact != "" && summary != tc.wantExact {
			t.Errorf("compaction %q, want %q", summary, tc.wantExact)
		}
	}
}

// TestCodexLinks: a Codex subagent or fork links to the session it came
// from.
func TestCodexLinks(t *testing.T) {
	line := func(payload string) []byte {
		return []byte(`{"timestamp":"2026-10-01T00:00:00Z","type":"session_meta","payload":` + payload + "}\n" +
			`{"timestamp":"2026-10-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"hi"}}` + "\n")
	}
	for _, tc := range []struct {
		payload, parent string
	}{
		{`{"id":"child","forked_from_id":"old","source":{"subagent":{"thread_spawn":{"parent_thread_id":"parent","depth":1}}}}`, "parent"},
		{`{"id":"fork","forked_from_id":"old","source":"cli"}`, "old"},
		{`{"id":"plain","source":"exec"}`, ""},
	} {
		c, err := Convert(Codex, "r.jsonl", line(tc.payload))
		if err != nil {
			t.Fatal(err)
		}
		h, _ := entries(t, c.Log)
		want := ""
		if tc.parent != "" {
			want = SessionID(Codex, tc.parent)
		}
		if h.ForkedFrom != want {
			t.Errorf("%s: forked_from %q, want %q (of %q)", tc.payload, h.ForkedFrom, want, tc.parent)
		}
	}
}

// TestClaudeCodeFileNameIsTheSession: a Claude Code log named by a
// session id is that session, whatever id its lines carry (a resume may
// copy lines of the session it continues); another name leaves the id
// to the lines.
func TestClaudeCodeFileNameIsTheSession(t *testing.T) {
	data := []byte(`{"type":"user","sessionId":"11111111-1111-4111-8111-111111111111","timestamp":"2026-01-01T00:00:00Z","uuid":"u","message":{"content":"hi"}}` + "\n")
	for name, want := range map[string]string{
		"/p/22222222-2222-4222-8222-222222222222.jsonl": "22222222-2222-4222-8222-222222222222",
		"/p/copy-of-a-session.jsonl":                    "11111111-1111-4111-8111-111111111111",
	} {
		c, err := Convert(ClaudeCode, name, data)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := entries(t, c.Log)
		if c.ForeignID != want || h.Origin.SessionID != want || c.ID != SessionID(ClaudeCode, want) {
			t.Errorf("%s: foreign id %s, origin %s, want %s", name, c.ForeignID, h.Origin.SessionID, want)
		}
	}
}

// TestClaudeCodeReplayedEntries: entries Claude Code wrote again into
// their log (same uuid, same time; the cwd may differ) are read once: the
// conversion is the one of the log without them, so no message and no
// tool call's id is there twice.
func TestClaudeCodeReplayedEntries(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "claude-code.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	once, err := Convert(ClaudeCode, "s.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	replayed := append([]byte(nil), data...)
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.Contains(line, []byte(`"uuid":`)) {
			replayed = append(replayed, bytes.ReplaceAll(line, []byte(`"cwd":"/home/me/app"`), []byte(`"cwd":"/home/me/app/sub"`))...)
		}
	}
	twice, err := Convert(ClaudeCode, "s.jsonl", replayed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(twice.Log, once.Log) {
		_, a := entries(t, once.Log)
		_, b := entries(t, twice.Log)
		t.Fatalf("replayed entries changed the conversion: %d messages, want %d", len(b), len(a))
	}
}

// TestPiEntriesWrittenAgain: pi writes a reopened session's header and
// first entries again before its first answer (pi issue 3930); the
// copies are read once, and the file is not refused for its second
// header.
func TestPiEntriesWrittenAgain(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	once, err := Convert(Pi, "s.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// The header and the entries before the first answer (e1 to e3), then
	// all of them again and the rest.
	again := bytes.Join(append(append(append([][]byte{}, lines[:4]...), lines[:4]...), lines[4:]...), nil)
	twice, err := Convert(Pi, "s.jsonl", again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(twice.Log, once.Log) {
		_, a := entries(t, once.Log)
		_, b := entries(t, twice.Log)
		t.Fatalf("entries written again changed the conversion: %d messages, want %d", len(b), len(a))
	}
	// Another session's header is still refused.
	other := append(append([]byte(nil), data...), bytes.Replace(lines[0], []byte("0193aaaa"), []byte("0193bbbb"), 1)...)
	if _, err := Convert(Pi, "s.jsonl", other); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a second session's header: %v, want ErrMalformed", err)
	}
}

// TestClaudeCodeTurnEnd: the system line that ends a turn (its duration,
// the stop hooks' summary) ends the answer before it, whose lines may
// all say stop_reason null, so that a session's last answer is imported
// without waiting for a prompt that may never come.
func TestClaudeCodeTurnEnd(t *testing.T) {
	const head = `"sessionId":"5e0c1a2b-0000-4000-8000-00000000c0de","cwd":"/home/me/app","version":"2.1.4"`
	log := `{"type":"user",` + head + `,"uuid":"u1","timestamp":"2026-01-11T10:00:00Z","message":{"role":"user","content":"what else?"}}
{"type":"assistant",` + head + `,"uuid":"a1","timestamp":"2026-01-11T10:00:02Z","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"More.","signature":"s"}],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":9}}}
{"type":"assistant",` + head + `,"uuid":"a2","timestamp":"2026-01-11T10:00:03Z","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Nothing else."}],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":9}}}
`
	for _, end := range []string{"turn_duration", "stop_hook_summary"} {
		data := log + `{"type":"system","subtype":"` + end + `",` + head + `,"uuid":"s1","timestamp":"2026-01-11T10:00:04Z"}` + "\n"
		c, err := Convert(ClaudeCode, "s.jsonl", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		_, got := entries(t, c.Log)
		if c.Stats.Held || len(got) != 2 || got[1].Message.Text() != "Nothing else." || got[1].Message.Usage == nil || got[1].Message.Usage.OutputTokens != 9 {
			t.Errorf("%s: held %v, %d messages, want the prompt and the whole answer with its usage", end, c.Stats.Held, len(got))
		}
	}
}

// TestToolIDsValidOnTheWire: a tool call's id that a provider would
// refuse (pi's "call_…|fc_…" of the OpenAI Responses API: '|', '+', '/',
// '=', hundreds of characters) is replaced, in the call and its result,
// by one every wire takes; an id valid on every wire is kept.
func TestToolIDsValidOnTheWire(t *testing.T) {
	long := "call_Q3x9|fc_" + strings.Repeat("AbC+/9=", 60)
	log := `{"type":"session","version":3,"id":"0193aaaa-bbbb-7ccc-8ddd-eeeeffff0001","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/home/me/app"}
{"type":"message","id":"e1","parentId":null,"timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"user","content":"List the files."}}
{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-03-01T10:00:02.000Z","message":{"role":"assistant","api":"openai-responses","provider":"openai-codex","model":"gpt-5.1-codex","content":[{"type":"toolCall","id":"` + long + `","name":"bash","arguments":{"command":"ls"}},{"type":"toolCall","id":"call_ok-1","name":"bash","arguments":{"command":"pwd"}}],"stopReason":"toolUse"}}
{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-03-01T10:00:03.000Z","message":{"role":"toolResult","toolCallId":"` + long + `","toolName":"bash","content":[{"type":"text","text":"a b"}],"isError":false}}
{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-03-01T10:00:03.500Z","message":{"role":"toolResult","toolCallId":"call_ok-1","toolName":"bash","content":[{"type":"text","text":"/x"}],"isError":false}}
{"type":"message","id":"e5","parentId":"e4","timestamp":"2026-03-01T10:00:04.000Z","message":{"role":"assistant","api":"openai-responses","model":"gpt-5.1-codex","content":[{"type":"text","text":"Two files."}],"stopReason":"stop"}}
`
	c, err := Convert(Pi, "s.jsonl", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	_, got := entries(t, c.Log)
	if len(got) != 4 || c.Stats.ClosedCalls != 0 || c.Stats.DroppedResults != 0 {
		t.Fatalf("%d messages, %d calls closed, %d results dropped: want 4, 0, 0", len(got), c.Stats.ClosedCalls, c.Stats.DroppedResults)
	}
	calls, results := got[1].Message.ToolUses(), got[2].Message.Content
	if calls[1].ToolUseID != "call_ok-1" || results[1].ToolUseID != "call_ok-1" {
		t.Errorf("a valid id was changed: %s, %s", calls[1].ToolUseID, results[1].ToolUseID)
	}
	id := calls[0].ToolUseID
	if results[0].ToolUseID != id || results[0].Text != "a b" {
		t.Errorf("the call's id %s, its result's %s (%q)", id, results[0].ToolUseID, results[0].Text)
	}
	if len(id) > 40 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
		t.Errorf("the id %q is refused by a provider (Anthropic: [a-zA-Z0-9_-]+, OpenAI: at most 40)", id)
	}
	checkWire(t, []agent.Message{got[0].Message, got[1].Message, got[2].Message, got[3].Message})
}

// TestPiThinkingSignatures: a thinking block keeps pi's thinkingSignature
// only in a message of Anthropic's API, where it is Anthropic's
// signature; in another (OpenAI Responses' reasoning item as JSON, the
// name of a server's reasoning field, Gemini's thought signature) the
// thinking is kept without it, and a redacted block, which has nothing
// else, is left out: Anthropic refuses a signature it did not make.
func TestPiThinkingSignatures(t *testing.T) {
	answer := func(id, api, content string) string {
		return `{"type":"message","id":"` + id + `","timestamp":"2026-03-01T10:00:02.000Z","message":{"role":"assistant","api":"` + api + `","model":"m","content":[` + content + `,{"type":"text","text":"ok"}],"stopReason":"stop"}}` + "\n"
	}
	log := `{"type":"session","version":3,"id":"0193aaaa-bbbb-7ccc-8ddd-eeeeffff0002","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/home/me/app"}` + "\n" +
		`{"type":"message","id":"u1","timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"user","content":"hi"}}` + "\n" +
		answer("a1", "anthropic-messages", `{"type":"thinking","thinking":"A.","thinkingSignature":"EqQBCkYIBhgC"},{"type":"thinking","thinking":"","thinkingSignature":"opaque==","redacted":true}`) +
		answer("a2", "openai-responses", `{"type":"thinking","thinking":"B.","thinkingSignature":"{\"type\":\"reasoning\",\"id\":\"rs_1\",\"encrypted_content\":\"gAAA\"}"}`) +
		answer("a3", "openai-completions", `{"type":"thinking","thinking":"C.","thinkingSignature":"reasoning_content"},{"type":"thinking","thinking":"","thinkingSignature":"x","redacted":true}`) +
		answer("a4", "google-generative-ai", `{"type":"thinking","thinking":"D.","thinkingSignature":"CiQB0e2Kb"}`)
	c, err := Convert(Pi, "s.jsonl", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	_, got := entries(t, c.Log)
	var shapes []string
	for _, e := range got[1:] {
		var blocks []string
		for _, b := range e.Message.Content {
			blocks = append(blocks, fmt.Sprintf("%s %q %q %q", b.Type, b.Text, b.Signature, b.Data))
		}
		shapes = append(shapes, strings.Join(blocks, "; "))
	}
	want := []string{
		`thinking "A." "EqQBCkYIBhgC" ""; redacted_thinking "" "" "opaque=="; text "ok" "" ""`,
		`thinking "B." "" ""; text "ok" "" ""`,
		`thinking "C." "" ""; text "ok" "" ""`,
		`thinking "D." "" ""; text "ok" "" ""`,
	}
	if strings.Join(shapes, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers\n%s\nwant\n%s", strings.Join(shapes, "\n"), strings.Join(want, "\n"))
	}
}

// TestClaudeCodeSidechainInTheSessionLog: the subagent's lines that
// Claude Code before 2.0.28 wrote into the session's own log (isSidechain,
// between the Task call and its result) are not the session's: the Task
// call keeps its result. A subagent's own transcript is read whole.
func TestClaudeCodeSidechainInTheSessionLog(t *testing.T) {
	const head = `"sessionId":"5e0c1a2b-0000-4000-8000-00000000c0de","cwd":"/home/me/app","version":"1.0.35"`
	line := func(side bool, rest string) string {
		return fmt.Sprintf(`{"isSidechain":%v,%s,%s}`, side, head, rest) + "\n"
	}
	sidechain := line(true, `"type":"user","uuid":"s1","timestamp":"2025-06-26T11:14:55Z","message":{"role":"user","content":"Find the tests."}`) +
		line(true, `"type":"assistant","uuid":"s2","timestamp":"2025-06-26T11:14:56Z","message":{"id":"msg_s","model":"claude-3-5-haiku-20241022","content":[{"type":"text","text":"No files found."}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":3}}`)
	log := line(false, `"type":"user","uuid":"u1","timestamp":"2025-06-26T11:14:50Z","message":{"role":"user","content":"Are there tests?"}`) +
		line(false, `"type":"assistant","uuid":"a1","timestamp":"2025-06-26T11:14:54Z","message":{"id":"msg_1","model":"claude-sonnet-4-20250514","content":[{"type":"tool_use","id":"toolu_task","name":"Task","input":{"prompt":"Find the tests."}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":7}}`) +
		sidechain +
		line(false, `"type":"user","uuid":"r1","timestamp":"2025-06-26T11:14:58Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_task","content":"No tests."}]}`) +
		line(false, `"type":"assistant","uuid":"a2","timestamp":"2025-06-26T11:15:00Z","message":{"id":"msg_2","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"There are none."}],"stop_reason":"end_turn","usage":{"input_tokens":6,"output_tokens":4}}`)
	c, err := Convert(ClaudeCode, "5e0c1a2b-0000-4000-8000-00000000c0de.jsonl", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	_, got := entries(t, c.Log)
	var shapes []string
	for _, e := range got {
		shapes = append(shapes, shape(e))
	}
	if len(got) != 4 || c.Stats.ClosedCalls != 0 || c.Stats.DroppedResults != 0 || got[2].Message.Content[0].Text != "No tests." {
		t.Errorf("the session's log: %d calls closed, %d results dropped\n%s", c.Stats.ClosedCalls, c.Stats.DroppedResults, strings.Join(shapes, "\n"))
	}
	sub, err := Convert(ClaudeCode, "agent-a1.jsonl", []byte(sidechain))
	if err != nil {
		t.Fatal(err)
	}
	if _, got := entries(t, sub.Log); len(got) != 2 {
		t.Errorf("a subagent's transcript: %d messages, want 2", len(got))
	}
}

// TestCodexForkLinked: a Codex 0.171 fork converted with its parent's
// log copies the parent's messages before the fork point (forked_at
// their number, their usage the parent's), then its own; without the
// parent's log it is its own turns alone, and a store holding that form
// goes on in it.
func TestCodexForkLinked(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	fork, parent := read("codex-0.171-fork.jsonl"), read("codex-0.171-fork-parent.jsonl")
	const parentID = "01a24cd5-c5b7-7623-a52c-ea3f73f38484"
	// The parent went on after the fork: its later turns are not the fork's.
	grown := append(append([]byte{}, parent...), []byte(`{"timestamp":"2026-12-06T19:31:00.000Z","ordinal":40,"type":"event_msg","payload":{"type":"user_message","message":"after the fork"}}`+"\n")...)
	lookups := 0
	c, err := ConvertLinked(Codex, "fork.jsonl", fork, func(id string) ([]byte, bool) {
		lookups++
		return grown, id == parentID
	})
	if err != nil {
		t.Fatal(err)
	}
	checkLog(t, c)
	h, es := entries(t, c.Log)
	var texts []string
	var own agent.Usage
	for i, e := range es {
		texts = append(texts, e.Message.Text())
		if u := e.Message.Usage; u != nil && i >= 4 {
			own.Add(*u)
		}
	}
	if got := strings.Join(texts, "|"); got != "first prompt|answer 1|second prompt|answer 2|forked prompt|answer 3" || lookups != 1 {
		t.Fatalf("messages %s (%d lookups), want the parent's four, then the fork's two", got, lookups)
	}
	if h.ForkedFrom != SessionID(Codex, parentID) || h.ForkedAt != 4 || c.ID != SessionID(Codex, "01a24cd5-c83d-7a51-9cd7-a48a52ae19e3") {
		t.Errorf("header forked from %s at %d, id %s", h.ForkedFrom, h.ForkedAt, c.ID)
	}
	if own != (agent.Usage{InputTokens: 100, OutputTokens: 5}) {
		t.Errorf("the fork's own usage %+v, want its one answer's", own)
	}

	exact, err := ConvertLinked(Codex, "fork.jsonl", fork, func(string) ([]byte, bool) { return parent, true })
	if err != nil || !bytes.Equal(exact.Log, c.Log) {
		t.Errorf("with the parent's log ending at the fork point: %v\n%s", err, exact.Log)
	}
	alone, err := ConvertLinked(Codex, "fork.jsonl", fork, func(string) ([]byte, bool) { return nil, false })
	if err != nil {
		t.Fatal(err)
	}
	if alone.Messages != 2 || bytes.Equal(alone.Log, c.Log) {
		t.Fatalf("without the parent: %d messages", alone.Messages)
	}
	st := openDir(t)
	if _, err := st.AppendLog(context.Background(), alone.ID, store.Checkpoint{}, alone.Log); err != nil {
		t.Fatal(err)
	}
	at, err := store.Head(context.Background(), st, alone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Apply(context.Background(), st, c, at, false); err != nil || out.Action != ActionUnchanged || !out.Earlier {
		t.Errorf("a store holding the fork alone: %+v, %v; want unchanged, in that earlier form", out, err)
	}
	// An import that replaces earlier forms replaces it by the fork with
	// its parent's messages.
	out, err := Import(context.Background(), st, c, listStore(t, st), Options{Replace: true})
	if err != nil || out.Action != ActionReplaced || out.Replaced != alone.ID {
		t.Fatalf("the fork alone replaced: %+v, %v", out, err)
	}
	if got := listStore(t, st).Checkpoint(out.ID); got.Length == 0 {
		t.Fatalf("no replacement %s in the store", out.ID)
	}
	if out, err := Import(context.Background(), st, c, listStore(t, st), Options{}); err != nil || out.Action != ActionUnchanged || out.Earlier {
		t.Errorf("importing the fork again: %+v, %v; want unchanged, in the linked form", out, err)
	}
}

// TestClaudeCodeForkSession: a session Claude Code forked (--resume ID
// --fork-session, the real 2.1.332) begins with a copy of its parent's
// lines: it is a fork of the parent at the number of messages copied,
// nothing of its own until its own answer, and a conversion of any cut of
// it is a prefix of one of the whole's forms (before its first answer a
// log cannot tell it is a fork).
func TestClaudeCodeForkSession(t *testing.T) {
	checkForkOf(t, ClaudeCode, "claude-code-fork.jsonl", "39f475b4-f750-4ebd-b63b-94a60c4414b2.jsonl", SessionID(ClaudeCode, "fb76c0ec-a6f6-48f0-8913-90dcc1c0ca01"), `"answer two"`)
}

// TestPiForkSession: pi's --fork (the real 0.73.1) copies the parent's
// entries before its own, as Claude Code's fork does.
func TestPiForkSession(t *testing.T) {
	checkForkOf(t, Pi, "pi-fork.jsonl", "2026-12-06T19-42-19-004Z_01a24ce0-ed7b-7213-8523-7cda983bec31.jsonl", SessionID(Pi, "01a24ce0-e357-72e1-a00d-83cb9b8bbe7a"), `"answer 2"`)
}

// checkForkOf checks the conversion of fixture, a fork of parent with
// the parent's two turns copied, then one turn of its own: forked at 4,
// nothing until its own answer (once the line with lastCopied is read),
// and the conversion of any cut of it a prefix of one of the whole's
// forms (before it reads a copied answer a log cannot tell it is a
// fork).
func checkForkOf(t *testing.T, a Agent, fixture, name, parent, lastCopied string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Convert(a, name, data)
	if err != nil {
		t.Fatal(err)
	}
	checkLog(t, c)
	h, es := entries(t, c.Log)
	if h.ForkedFrom != parent || h.ForkedAt != 4 || len(es) != 6 || es[4].Message.Text() != "forked question" {
		t.Fatalf("forked from %s at %d, %d messages; want %s at 4, 6 messages", h.ForkedFrom, h.ForkedAt, len(es), parent)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	sawWaiting := false
	for n := range lines {
		cut, err := Convert(a, name, bytes.Join(lines[:n], nil))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(c.forms(), func(form []byte) bool { return bytes.HasPrefix(form, cut.Log) }) {
			t.Fatalf("the conversion of the first %d lines is not a prefix of the whole's forms:\n%s", n, cut.Log)
		}
		if bytes.Contains(bytes.Join(lines[:n], nil), []byte(lastCopied)) && len(cut.Log) == 0 {
			sawWaiting = true
		}
	}
	if !sawWaiting {
		t.Error("the copied lines alone converted to a session: want nothing until the fork's own answer")
	}
}

// TestCodexMigratedRollout: Codex 0.171's migrate-rollouts --apply
// rewrites a legacy rollout (testdata/codex-legacy.jsonl, migrated by
// the real Codex into codex-migrated.jsonl) line by line; it converts to
// the same log, so a session imported before the migration goes on
// instead of diverging.
func TestCodexMigratedRollout(t *testing.T) {
	var logs [][]byte
	for _, name := range []string{"codex-legacy.jsonl", "codex-migrated.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Convert(Codex, "rollout-2026-01-02T17-39-45-019b0000-1111-7222-8333-444455556666.jsonl", data)
		if err != nil {
			t.Fatal(err)
		}
		checkLog(t, c)
		logs = append(logs, c.Log)
	}
	if !bytes.Equal(logs[0], logs[1]) {
		t.Errorf("the migrated rollout converts otherwise:\n%s\nthe legacy one:\n%s", logs[1], logs[0])
	}
}

// TestFindLinked: an agent's directory that is a symbolic link (moved
// to another disk and linked back) is searched, and its logs are named
// under the link, as the agent names them; so is a directory linked
// below it, once however often it is linked, and a loop of links ends.
func TestFindLinked(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "data", "pi-sessions")
	log := filepath.Join(moved, "--home-me-app--", "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, filepath.Join(moved, "loop")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "sessions")
	if err := os.Symlink(moved, link); err != nil {
		t.Fatal(err)
	}
	// A project's directory kept elsewhere and linked in, and linked
	// twice: found once, under its first link's name.
	kept := filepath.Join(t.TempDir(), "kept")
	keptLog := filepath.Join(kept, "2026-03-02T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0001.jsonl")
	if err := os.MkdirAll(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keptLog, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"--home-me-kept--", "--home-me-kept-again--"} {
		if err := os.Symlink(kept, filepath.Join(moved, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a directory inside one linked later: walked once, by
	// the link walked first.
	subLog := filepath.Join(kept, "sub", "2026-03-03T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0003.jsonl")
	if err := os.MkdirAll(filepath.Dir(subLog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(subLog, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(subLog), filepath.Join(moved, "--b-kept-sub--")); err != nil {
		t.Fatal(err)
	}
	// A link to a directory of the tree itself, sorted before it: the
	// directory is found under its own name.
	if err := os.Symlink(filepath.Dir(log), filepath.Join(moved, "--a-link--")); err != nil {
		t.Fatal(err)
	}
	// A link to the log itself, and one to nothing: passed over.
	if err := os.Symlink(log, filepath.Join(moved, "linked.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(moved, "gone"), filepath.Join(moved, "dangling")); err != nil {
		t.Fatal(err)
	}
	srcs, err := Find(link, Pi, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(link, "--b-kept-sub--", filepath.Base(subLog)),
		filepath.Join(link, "--home-me-app--", filepath.Base(log)),
		filepath.Join(link, "--home-me-kept--", filepath.Base(keptLog)),
	}
	var got []string
	for _, s := range srcs {
		got = append(got, s.Path)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Find(%s) = %v, want %v", link, got, want)
	}
}
