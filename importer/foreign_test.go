package importer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/foreignlogs"
)

// realLogs lists the real logs of each agent.
func realLogs(t *testing.T) []Source {
	dir := foreignlogs.Dir(t, "..")
	var out []Source
	for _, a := range Agents {
		srcs, err := Find(filepath.Join(dir, string(a)), a, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(srcs) == 0 {
			t.Fatalf("no %s logs in %s", a, dir)
		}
		out = append(out, srcs...)
	}
	return out
}

func TestRealLogs(t *testing.T) {
	for _, src := range realLogs(t) {
		t.Run(filepath.Base(src.Path), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(src.Path)
			if err != nil {
				t.Fatal(err)
			}
			if a, ok := Detect(data); !ok || a != src.Agent {
				t.Errorf("Detect = %q, %v; want %q", a, ok, src.Agent)
			}
			c, err := Convert(src.Agent, src.Path, data)
			if err != nil {
				t.Fatal(err)
			}
			log := checkLog(t, c)
			t.Logf("%d messages, %+v, title %q", c.Messages, c.Stats, log.Info.Title)
			checkPrefixes(t, src.Agent, src.Path, data, c.Log, false)
		})
	}
}

// checkLog parses c's log and checks that it is valid on the wire: every
// call answered by the next message, every result answering a call of
// the message before it.
func checkLog(t *testing.T, c *Conversion) *sessionlog.Log {
	t.Helper()
	log, err := sessionlog.Parse("conv", c.Log)
	if err != nil {
		t.Fatalf("the conversion does not parse: %v", err)
	}
	if log == nil {
		t.Fatal("no session written")
	}
	if log.Committed != len(c.Log) || len(log.Messages) != c.Messages {
		t.Fatalf("committed %d of %d bytes, %d messages (counted %d)", log.Committed, len(c.Log), len(log.Messages), c.Messages)
	}
	if log.Header.ID != c.ID || log.Header.Origin == nil || log.Header.Origin.Agent != string(c.Agent) {
		t.Fatalf("header %+v", log.Header)
	}
	checkWire(t, log.Messages)
	return log
}

func checkWire(t *testing.T, msgs []agent.Message) {
	t.Helper()
	var open map[string]bool
	for i, m := range msgs {
		if m.Role == agent.RoleSystem {
			continue
		}
		answered := map[string]bool{}
		for _, b := range m.Content {
			if b.Type == agent.BlockToolResult {
				if !open[b.ToolUseID] {
					t.Fatalf("message %d: result for %s, which the message before does not call", i+1, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
			}
		}
		for id := range open {
			if !answered[id] {
				t.Fatalf("message %d: call %s of the message before has no result", i+1, id)
			}
		}
		open = map[string]bool{}
		for _, u := range m.ToolUses() {
			open[u.ToolUseID] = true
			if id := u.ToolUseID; len(id) > 40 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
				t.Fatalf("message %d: call id %q, which a provider refuses", i+1, id)
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("the last message calls tools without results")
	}
}

// checkPrefixes converts data cut at every line (and, with torn, in the
// middle of it) and checks that each conversion is a prefix of whole,
// made of whole batches.
func checkPrefixes(t *testing.T, a Agent, name string, data, whole []byte, torn bool) {
	t.Helper()
	for cut := 0; cut <= len(data); {
		ats := []int{cut}
		if torn {
			ats = append(ats, (cut+nextLineEnd(data, cut))/2)
		}
		for _, at := range ats {
			c, err := Convert(a, name, data[:at])
			if err != nil {
				t.Fatalf("cut at byte %d: %v", at, err)
			}
			if !bytes.HasPrefix(whole, c.Log) {
				t.Fatalf("cut at byte %d: the conversion (%d bytes) is not a prefix of the whole one", at, len(c.Log))
			}
			if n, err := sessionlog.CommittedLength("cut", c.Log); err != nil || n != len(c.Log) {
				t.Fatalf("cut at byte %d: %d of %d bytes committed (%v)", at, n, len(c.Log), err)
			}
		}
		if cut == len(data) {
			break
		}
		cut = nextLineEnd(data, cut)
	}
}

// nextLineEnd is the offset after the line that starts at from.
func nextLineEnd(data []byte, from int) int {
	i := bytes.IndexByte(data[from:], '\n')
	if i < 0 {
		return len(data)
	}
	return from + i + 1
}

// TestRealLogsMatchTheirSource checks the tool calls and usage of each
// real log's conversion against what the source says, read here on its
// own: the distinct call ids, and usage once per response (Claude Code:
// the last line of each message.id; Codex: the last cumulative total;
// pi: each assistant message's). What the conversion holds back (a
// response in progress at the end) counts as held.
func TestRealLogsMatchTheirSource(t *testing.T) {
	for _, src := range realLogs(t) {
		t.Run(filepath.Base(src.Path), func(t *testing.T) {
			data, err := os.ReadFile(src.Path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Convert(src.Agent, src.Path, data)
			if err != nil {
				t.Fatal(err)
			}
			calls, usage := sourceFacts(t, src.Agent, data)
			_, es := entries(t, c.Log)
			got := c.Stats.HeldUsage
			gotCalls := c.Stats.HeldCalls
			for _, e := range es {
				if e.Message.Usage != nil {
					got.Add(*e.Message.Usage)
				}
				gotCalls += len(e.Message.ToolUses())
			}
			if gotCalls != calls {
				t.Errorf("%d tool calls (%d held), the source has %d", gotCalls, c.Stats.HeldCalls, calls)
			}
			if got != usage {
				t.Errorf("usage %+v, the source says %+v", got, usage)
			}
		})
	}
}

func sourceFacts(t *testing.T, a Agent, data []byte) (calls int, usage agent.Usage) {
	t.Helper()
	ids := map[string]bool{}
	perResponse := map[string]agent.Usage{}
	var order []string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		switch a {
		case ClaudeCode:
			m, _ := v["message"].(map[string]any)
			if v["type"] != "assistant" || m == nil {
				continue
			}
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				if bm := b.(map[string]any); bm["type"] == "tool_use" {
					ids[bm["id"].(string)] = true
				}
			}
			if u, ok := m["usage"].(map[string]any); ok {
				id := m["id"].(string)
				if _, seen := perResponse[id]; !seen {
					order = append(order, id)
				}
				perResponse[id] = agent.Usage{InputTokens: num(u["input_tokens"]), OutputTokens: num(u["output_tokens"]), CacheReadTokens: num(u["cache_read_input_tokens"]), CacheWriteTokens: num(u["cache_creation_input_tokens"])}
			}
		case Codex:
			p, _ := v["payload"].(map[string]any)
			switch {
			case p == nil:
			case p["type"] == "function_call" || p["type"] == "custom_tool_call" || p["type"] == "local_shell_call":
				ids[p["call_id"].(string)] = true
			case p["type"] == "token_count":
				info, _ := p["info"].(map[string]any)
				if info == nil {
					continue
				}
				u := info["total_token_usage"].(map[string]any)
				usage = agent.Usage{InputTokens: num(u["input_tokens"]), OutputTokens: num(u["output_tokens"]), CacheReadTokens: num(u["cached_input_tokens"]), ReasoningTokens: num(u["reasoning_output_tokens"])}
			}
		case Pi:
			m, _ := v["message"].(map[string]any)
			if v["type"] != "message" || m == nil || m["role"] != "assistant" {
				continue
			}
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				if bm := b.(map[string]any); bm["type"] == "toolCall" {
					ids[bm["id"].(string)] = true
				}
			}
			if u, ok := m["usage"].(map[string]any); ok {
				usage.Add(agent.Usage{InputTokens: num(u["input"]), OutputTokens: num(u["output"]), CacheReadTokens: num(u["cacheRead"]), CacheWriteTokens: num(u["cacheWrite"])})
			}
		}
	}
	for _, id := range order {
		usage.Add(perResponse[id])
	}
	return len(ids), usage
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// TestRealSubagentLinksToItsSession: the real subagent transcript is a
// session of its own whose header links it to the session that ran it.
func TestRealSubagentLinksToItsSession(t *testing.T) {
	dir := foreignlogs.Dir(t, "..")
	convert := func(name string) *Conversion {
		p := filepath.Join(dir, "claude-code", name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Convert(ClaudeCode, p, data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	main := convert("codemie-e9fb405b-main-turn-2.jsonl")
	sub := convert("codemie-e9fb405b-subagent-agent-a485154.lines1-35.jsonl")
	h, _ := entries(t, sub.Log)
	if sub.ID == main.ID || h.ForkedFrom != main.ID || h.Origin.Subagent != "a485154" || h.Origin.SessionID != "e9fb405b-169f-40eb-9396-7e75076f045d" {
		t.Fatalf("subagent %s: forked_from %s, origin %+v; the session is %s", sub.ID, h.ForkedFrom, h.Origin, main.ID)
	}
}
