package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// session is a panto session with every kind of entry: prompts, answers
// of two providers with thinking, tool calls with results (one an
// error), a title, a system prompt entry and a compaction summary.
func session() []sessionlog.Entry {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	anthropic := agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, Model: "claude-sonnet-4-5"}
	openai := agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: "gpt-5"}
	return []sessionlog.Entry{
		{TS: at(0), Message: agent.SystemText("be brief", agent.SystemAppend)},
		{TS: at(1), Message: agent.UserText("what is in main.go?")},
		{TS: at(2), Identity: anthropic, Message: agent.Message{Role: agent.RoleAssistant, StopReason: "tool_use",
			Usage: &agent.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 50},
			Content: []agent.Block{
				{Type: agent.BlockThinking, Text: "read it", Signature: "sig-1"},
				agent.TextBlock("Reading it."),
				agent.ToolUseBlock("toolu_01", "read_file", json.RawMessage(`{"path":"main.go"}`)),
				agent.ToolUseBlock("toolu_02", "read_file", json.RawMessage(`{"path":"gone.go"}`)),
			}}},
		{TS: at(3), Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{
			agent.ToolResultBlock("toolu_01", "package main", false),
			agent.ToolResultBlock("toolu_02", "no such file", true),
		}}},
		{TS: at(4), Identity: anthropic, Message: agent.Message{Role: agent.RoleAssistant, StopReason: "end_turn", Content: []agent.Block{agent.TextBlock("A main package.")}}},
		{TS: at(5), Message: agent.TitleMessage("main.go tour")},
		{TS: at(6), Message: agent.UserText("and with OpenAI?")},
		{TS: at(7), Identity: openai, Message: agent.Message{Role: agent.RoleAssistant, StopReason: "tool_calls", Content: []agent.Block{
			{Type: agent.BlockThinking, Text: "hidden"},
			agent.ToolUseBlock("call_abc", "run_shell", json.RawMessage(`{"command":"go vet"}`)),
		}}},
		{TS: at(8), Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("call_abc", "", false)}}},
		{TS: at(9), Identity: openai, Message: agent.Message{Role: agent.RoleAssistant, StopReason: "stop", Usage: &agent.Usage{InputTokens: 7, OutputTokens: 3}, Content: []agent.Block{agent.TextBlock("Clean.")}}},
		{TS: at(10), Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.TextBlock("Summary: main.go read, vet clean.")}, Metadata: map[string]any{agent.MetadataCompaction: true}}},
		{TS: at(11), Message: agent.UserText("thanks")},
		// An answer stored before panto kept stop reasons.
		{TS: at(12), Identity: openai, Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("You're welcome.")}}},
	}
}

// formats are the exports, each with the importer that reads it back
// and what that import makes of session(): its messages but the system
// prompt entry and the thinking Anthropic would refuse, and the
// differences of each format (Claude Code's lines are all Anthropic's;
// pi keeps the OpenAI wire, and an empty tool result).
var formats = []struct {
	name   string
	export func([]sessionlog.Entry, Options) (*Result, error)
	agent  importer.Agent
	// thinking is the number of thinking blocks left out.
	thinking int
	want     []string
	// more is what the other agent adds when it goes on: a prompt and
	// its answer (%[1]s is the session's id).
	more string
}{{
	name: "claude-code", export: ClaudeCode, agent: importer.ClaudeCode, thinking: 1,
	want: []string{
		`user: text "what is in main.go?"`,
		`assistant [anthropic-messages claude-sonnet-4-5]: thinking "read it" sig="sig-1"; text "Reading it."; call toolu_01 read_file {"path":"main.go"}; call toolu_02 read_file {"path":"gone.go"} usage={InputTokens:100 OutputTokens:20 CacheReadTokens:50 CacheWriteTokens:0 ReasoningTokens:0} stop=tool_use`,
		`user: result toolu_01 error=false "package main"; result toolu_02 error=true "no such file"`,
		`assistant [anthropic-messages claude-sonnet-4-5]: text "A main package." stop=end_turn`,
		`system:  meta=map[panto.title:main.go tour]`,
		`user: text "and with OpenAI?"`,
		`assistant [anthropic-messages gpt-5]: call call_abc run_shell {"command":"go vet"} stop=tool_use`,
		`user: result call_abc error=false "(no output)"`,
		`assistant [anthropic-messages gpt-5]: text "Clean." usage={InputTokens:7 OutputTokens:3 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0} stop=end_turn`,
		`user: text "Summary: main.go read, vet clean." meta=map[panto.compaction:true]`,
		`user: text "thanks"`,
		`assistant [anthropic-messages gpt-5]: text "You're welcome." stop=end_turn`,
	},
	more: `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"go on"},"uuid":"u-1","timestamp":"2026-12-06T11:00:00.000Z","sessionId":%[1]q,"cwd":"/home/me/app"}
{"parentUuid":"u-1","isSidechain":false,"type":"assistant","message":{"id":"msg_1","model":"claude-opus-4-5","role":"assistant","content":[{"type":"text","text":"Going on."}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":2}},"uuid":"a-1","timestamp":"2026-12-06T11:00:01.000Z","sessionId":%[1]q}
`,
}, {
	name: "pi", export: Pi, agent: importer.Pi, thinking: 1,
	want: []string{
		`user: text "what is in main.go?"`,
		`assistant [anthropic-messages claude-sonnet-4-5]: thinking "read it" sig="sig-1"; text "Reading it."; call toolu_01 read_file {"path":"main.go"}; call toolu_02 read_file {"path":"gone.go"} usage={InputTokens:100 OutputTokens:20 CacheReadTokens:50 CacheWriteTokens:0 ReasoningTokens:0} stop=tool_use`,
		`user: result toolu_01 error=false "package main"; result toolu_02 error=true "no such file"`,
		`assistant [anthropic-messages claude-sonnet-4-5]: text "A main package." usage={InputTokens:0 OutputTokens:0 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0} stop=end_turn`,
		`system:  meta=map[panto.title:main.go tour]`,
		`user: text "and with OpenAI?"`,
		`assistant [openai-chat gpt-5]: call call_abc run_shell {"command":"go vet"} usage={InputTokens:0 OutputTokens:0 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0} stop=tool_calls`,
		`user: result call_abc error=false ""`,
		`assistant [openai-chat gpt-5]: text "Clean." usage={InputTokens:7 OutputTokens:3 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0} stop=stop`,
		`user: text "Summary: main.go read, vet clean." meta=map[panto.compaction:true]`,
		`user: text "thanks"`,
		`assistant [openai-chat gpt-5]: text "You're welcome." usage={InputTokens:0 OutputTokens:0 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0} stop=stop`,
	},
	more: `{"type":"message","id":"a1b2c3d4","parentId":"0000000e","timestamp":"2026-12-06T11:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"go on"}],"timestamp":1796554800000}}
{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-12-06T11:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Going on."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-opus-4-5","usage":{"input":9,"output":2},"stopReason":"stop","timestamp":1796554801000}}
`,
}, {
	name: "codex", export: Codex, agent: importer.Codex, thinking: 2,
	// No thinking (OpenAI wants its reasoning encrypted), no title, no
	// error flag on a result; Anthropic's input with its cache reads.
	want: []string{
		`user: text "what is in main.go?"`,
		`assistant [openai-chat claude-sonnet-4-5]: text "Reading it."; call toolu_01 read_file {"path":"main.go"}; call toolu_02 read_file {"path":"gone.go"} usage={InputTokens:150 OutputTokens:20 CacheReadTokens:50 CacheWriteTokens:0 ReasoningTokens:0}`,
		`user: result toolu_01 error=false "package main"; result toolu_02 error=false "no such file"`,
		`assistant [openai-chat claude-sonnet-4-5]: text "A main package."`,
		`user: text "and with OpenAI?"`,
		`assistant [openai-chat gpt-5]: call call_abc run_shell {"command":"go vet"}`,
		`user: result call_abc error=false ""`,
		`assistant [openai-chat gpt-5]: text "Clean." usage={InputTokens:7 OutputTokens:3 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0}`,
		`user: text "Summary: main.go read, vet clean." meta=map[panto.compaction:true]`,
		`user: text "thanks"`,
		`assistant [openai-chat gpt-5]: text "You're welcome."`,
	},
	more: `{"timestamp":"2026-12-06T11:00:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"go on","images":[]}}
{"timestamp":"2026-12-06T11:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]}}
{"timestamp":"2026-12-06T11:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Going on."}]}}
{"timestamp":"2026-12-06T11:00:01.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":9999,"output_tokens":999}}}}
`,
}}

// TestImportsBack: an export read back by panto's importer of its format
// holds the session's messages, as a fork of the panto session that
// holds them all (forked_at), and is nothing to import until the other
// agent adds a message; what it adds is the fork's.
func TestImportsBack(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			res, err := f.export(session(), Options{Session: "467c6df451e59fe7c4dcd7c0b860c4ee", CWD: "/home/me/app"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != 11 || res.Dropped != 1 || res.DroppedThinking != f.thinking {
				t.Errorf("messages %d, dropped %d, thinking dropped %d; want 11, 1, %d", res.Messages, res.Dropped, res.DroppedThinking, f.thinking)
			}
			conv, err := importer.Convert(f.agent, res.SessionID+".jsonl", res.Log)
			if err != nil {
				t.Fatalf("the export does not import: %v\n%s", err, res.Log)
			}
			if conv.ExportOf != "467c6df451e59fe7c4dcd7c0b860c4ee" {
				t.Errorf("ExportOf %q: an export the other agent added nothing to is not marked as one", conv.ExportOf)
			}
			h, got := decode(t, conv.Log)
			if strings.Join(got, "\n") != strings.Join(f.want, "\n") {
				t.Errorf("imported back:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(f.want, "\n"))
			}
			if h.ForkedFrom != "467c6df451e59fe7c4dcd7c0b860c4ee" || h.ForkedAt != len(f.want) {
				t.Errorf("header forked from %q at %d; want the panto session at %d", h.ForkedFrom, h.ForkedAt, len(f.want))
			}

			went, err := importer.Convert(f.agent, res.SessionID+".jsonl", append(bytes.Clone(res.Log), fmt.Sprintf(f.more, res.SessionID)...))
			if err != nil {
				t.Fatal(err)
			}
			if went.ExportOf != "" {
				t.Errorf("ExportOf %q once the other agent went on: nothing would be imported", went.ExportOf)
			}
			if !bytes.HasPrefix(went.Log, conv.Log) || went.Messages != len(f.want)+2 {
				t.Errorf("what the other agent added is not appended to the export's conversion: %d messages", went.Messages)
			}
		})
	}
}

// TestSameExport: exporting the same session twice writes the same
// bytes under the same id; once it grew, another id.
func TestSameExport(t *testing.T) {
	opts := Options{Session: "467c6df451e59fe7c4dcd7c0b860c4ee", CWD: "/home/me/app"}
	for _, f := range formats {
		a, err := f.export(session(), opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.export(session(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if a.SessionID != b.SessionID || !bytes.Equal(a.Log, b.Log) {
			t.Errorf("%s: two exports of one session differ: %s and %s", f.name, a.SessionID, b.SessionID)
		}
		grown := append(session(), sessionlog.Entry{TS: time.Now(), Message: agent.UserText("one more")})
		c, err := f.export(grown, opts)
		if err != nil {
			t.Fatal(err)
		}
		if c.SessionID == a.SessionID {
			t.Errorf("%s: the grown session exports under the id of the shorter one (%s): the file there would be refused", f.name, a.SessionID)
		}
	}
}

// TestClaudeCodeChain: every line Claude Code reads as the conversation
// names the one before it (parentUuid), the chain starting anew at the
// compaction boundary, which names the line before it as its logical
// parent; uuids are unique.
func TestClaudeCodeChain(t *testing.T) {
	res, err := ClaudeCode(session(), Options{Session: "s", CWD: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	var prev string
	seen := map[string]bool{}
	for i, line := range bytes.Split(bytes.TrimSuffix(res.Log, []byte("\n")), []byte("\n")) {
		var l struct {
			Type, UUID, SessionID, CWD, Subtype string
			ParentUUID                          *string
			LogicalParentUUID                   string
			PantoSession                        string
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if l.PantoSession != "s" {
			t.Errorf("line %d does not name the panto session", i+1)
		}
		if l.Type == "custom-title" {
			continue
		}
		if l.SessionID != res.SessionID || l.CWD != "/w" || seen[l.UUID] {
			t.Errorf("line %d: session %q cwd %q uuid %q (seen: %v)", i+1, l.SessionID, l.CWD, l.UUID, seen[l.UUID])
		}
		seen[l.UUID] = true
		switch {
		case l.Subtype == "compact_boundary":
			if l.ParentUUID != nil || l.LogicalParentUUID != prev {
				t.Errorf("line %d: the boundary's parent %v, logical parent %q; want none and %q", i+1, l.ParentUUID, l.LogicalParentUUID, prev)
			}
		case prev == "" && l.ParentUUID != nil, prev != "" && (l.ParentUUID == nil || *l.ParentUUID != prev):
			t.Errorf("line %d: parent %v, want %q", i+1, l.ParentUUID, prev)
		}
		prev = l.UUID
	}
}

// TestProjectDirName: Claude Code's spelling of a directory, the long
// one as Claude Code 2.1.332 named it here.
func TestProjectDirName(t *testing.T) {
	long := "/tmp/" + strings.Repeat("longdirectoryname", 14)
	for dir, want := range map[string]string{
		"/tmp":            "-tmp",
		"/tmp/a_b.c d/x":  "-tmp-a-b-c-d-x",
		"/home/me/café":   "-home-me-caf-",
		"/home/me/😀/x":    "-home-me----x", // two UTF-16 units
		long:              "-tmp-" + strings.Repeat("longdirectoryname", 14)[:195] + "-54j2u1",
		"C:\\Users\\me\\": "C--Users-me-",
	} {
		if got := projectDirName(dir); got != want {
			t.Errorf("projectDirName(%q) = %q, want %q", dir, got, want)
		}
	}
}

// decode returns a log's header and its entries in the shape the tests
// compare (time left out).
func decode(t *testing.T, log []byte) (*sessionlog.Header, []string) {
	t.Helper()
	d := sessionlog.Decoder{Name: "export"}
	var out []string
	err := sessionlog.ReadLines(bytes.NewReader(log), func(line []byte, last bool) error {
		e, ok, err := d.DecodeEntry(line)
		if ok {
			out = append(out, shape(e))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d.Header, out
}

func shape(e sessionlog.Entry) string {
	m := e.Message
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			parts = append(parts, fmt.Sprintf("text %q", b.Text))
		case agent.BlockThinking:
			parts = append(parts, fmt.Sprintf("thinking %q sig=%q", b.Text, b.Signature))
		case agent.BlockToolUse:
			parts = append(parts, fmt.Sprintf("call %s %s %s", b.ToolUseID, b.ToolName, b.Input))
		case agent.BlockToolResult:
			parts = append(parts, fmt.Sprintf("result %s error=%v %q", b.ToolUseID, b.IsError, b.Text))
		default:
			parts = append(parts, string(b.Type))
		}
	}
	s := string(m.Role)
	if e.Identity.Model != "" {
		s += fmt.Sprintf(" [%s %s]", e.Identity.APIStyle, e.Identity.Model)
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

// TestCodexPath: where Codex keeps a session, as 0.171 named one here.
func TestCodexPath(t *testing.T) {
	start := time.Date(2026, 12, 6, 16, 10, 7, 709_000_000, time.UTC)
	got := CodexPath("/h/.codex", "01a24c1e-a9d9-7900-b7d8-bcbff952f9e0", start)
	if want := "/h/.codex/sessions/2026/12/06/rollout-2026-12-06T16-10-07-01a24c1e-a9d9-7900-b7d8-bcbff952f9e0.jsonl"; got != want {
		t.Errorf("CodexPath = %q, want %q", got, want)
	}
}

// TestPiPath: where pi 0.73 keeps a session, as it named one here.
func TestPiPath(t *testing.T) {
	start := time.Date(2026, 12, 6, 16, 4, 49, 977_000_000, time.UTC)
	got := PiPath("/h/.pi/agent", "/tmp/piwork/my.proj", "01a24c19-d0b8-7601-8217-2ba830a39116", start)
	if want := "/h/.pi/agent/sessions/--tmp-piwork-my.proj--/2026-12-06T16-04-49-977Z_01a24c19-d0b8-7601-8217-2ba830a39116.jsonl"; got != want {
		t.Errorf("PiPath = %q, want %q", got, want)
	}
	if got := PiPath("/a", `C:\Users\me`, "x", start); !strings.Contains(got, "--C--Users-me--") {
		t.Errorf("a Windows directory: %q", got)
	}
}
