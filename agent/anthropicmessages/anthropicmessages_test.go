package anthropicmessages_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/anthropicmessages"
	"github.com/panto-dev/panto/agent/providererr"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

const key = "sk-ant-test-secret-0123456789"

type recorder struct{ text, thinking []string }

func (r *recorder) TextDelta(s string)         { r.text = append(r.text, s) }
func (r *recorder) ThinkingDelta(s string)     { r.thinking = append(r.thinking, s) }
func (r *recorder) MessageAdded(agent.Message) {}

func newProvider(t *testing.T, baseURL string, reasoning agent.ReasoningEffort) *anthropicmessages.Provider {
	t.Helper()
	p, err := anthropicmessages.New(anthropicmessages.Config{BaseURL: baseURL, APIKey: key, Model: "claude-test", Reasoning: reasoning, MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompleteStreamsThinkingTextAndUsage(t *testing.T) {
	srv := fakeprovider.New(t, fakeprovider.Anthropic, key, fakeprovider.Reply{
		Thinking: "considering the greeting", Signature: "sig-abc==", Text: "Hello there, world!", InputTokens: 21, OutputTokens: 9,
	})
	p := newProvider(t, srv.BaseURL(), agent.ReasoningMedium)
	var rec recorder
	msg, err := p.Complete(context.Background(), agent.Request{System: "be brief", Messages: []agent.Message{agent.UserText("hi")}}, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 {
		t.Fatalf("content = %+v", msg.Content)
	}
	th := msg.Content[0]
	if th.Type != agent.BlockThinking || th.Text != "considering the greeting" || th.Signature != "sig-abc==" {
		t.Errorf("thinking block = %+v", th)
	}
	if msg.Text() != "Hello there, world!" || len(rec.text) < 2 || strings.Join(rec.text, "") != msg.Text() {
		t.Errorf("text %q, deltas %q", msg.Text(), rec.text)
	}
	if strings.Join(rec.thinking, "") != th.Text {
		t.Errorf("thinking deltas %q", rec.thinking)
	}
	if msg.Usage == nil || msg.Usage.InputTokens != 21 || msg.Usage.OutputTokens != 9 {
		t.Errorf("usage = %+v", msg.Usage)
	}
	req := srv.Requests()[0]
	if req.Header.Get("X-Api-Key") != key {
		t.Errorf("x-api-key not sent")
	}
	body := req.JSON()
	if body["model"] != "claude-test" || body["stream"] != true {
		t.Errorf("body = %s", req.Body)
	}
	sys := body["system"].([]any)[0].(map[string]any)
	if sys["text"] != "be brief" {
		t.Errorf("system = %v", body["system"])
	}
	thinking := body["thinking"].(map[string]any)
	budget := anthropicmessages.ThinkingBudget[agent.ReasoningMedium]
	if thinking["type"] != "enabled" || thinking["budget_tokens"] != float64(budget) || body["max_tokens"].(float64) <= float64(budget) {
		t.Errorf("thinking = %v, max_tokens = %v", thinking, body["max_tokens"])
	}
	if id := p.Identity(); id != (agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: srv.BaseURL(), Model: "claude-test", Reasoning: agent.ReasoningMedium}) {
		t.Errorf("identity = %+v", id)
	}
}

func TestToolCallAndSignatureRoundTrip(t *testing.T) {
	srv := fakeprovider.New(t, fakeprovider.Anthropic, key,
		fakeprovider.Reply{Thinking: "I should read it", Signature: "sig-1", ToolCalls: []fakeprovider.ToolCall{{ID: "toolu_1", Name: "read_file", Args: `{"path":"notes.txt"}`}}},
		fakeprovider.Reply{Text: "done"},
	)
	p := newProvider(t, srv.BaseURL(), agent.ReasoningLow)
	tools := []agent.ToolDecl{{Name: "read_file", Description: "read a file", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"},
		"additionalProperties": false,
	}}}
	user := agent.UserText("read notes")
	msg, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{user}, Tools: tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uses := msg.ToolUses()
	if len(uses) != 1 || uses[0].ToolUseID != "toolu_1" || uses[0].ToolName != "read_file" || string(uses[0].Input) != `{"path":"notes.txt"}` {
		t.Fatalf("tool uses = %+v", uses)
	}
	results := agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("toolu_1", "contents", true)}}
	if _, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{user, msg, results}, Tools: tools}, nil); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[1].JSON()
	tl := body["tools"].([]any)[0].(map[string]any)
	schema := tl["input_schema"].(map[string]any)
	if tl["name"] != "read_file" || tl["description"] != "read a file" || schema["type"] != "object" || schema["additionalProperties"] != false || schema["required"].([]any)[0] != "path" {
		t.Errorf("tool = %v", tl)
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages = %v", msgs)
	}
	asst := msgs[1].(map[string]any)["content"].([]any)
	th, use := asst[0].(map[string]any), asst[1].(map[string]any)
	if th["type"] != "thinking" || th["signature"] != "sig-1" || th["thinking"] != "I should read it" {
		t.Errorf("thinking sent back = %v", th)
	}
	if use["type"] != "tool_use" || use["id"] != "toolu_1" || use["input"].(map[string]any)["path"] != "notes.txt" {
		t.Errorf("tool use sent back = %v", use)
	}
	res := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	if res["type"] != "tool_result" || res["tool_use_id"] != "toolu_1" || res["is_error"] != true {
		t.Errorf("tool result = %v", res)
	}
}

func TestMessagesMergeRolesAndSkipForeignThinking(t *testing.T) {
	msgs := anthropicmessages.Messages([]agent.Message{
		agent.SystemText("sys", agent.SystemAppend),
		agent.UserText("a"),
		agent.UserText("b"),
		{Role: agent.RoleAssistant, Content: []agent.Block{{Type: agent.BlockThinking, Text: "unsigned"}, agent.TextBlock("c")}},
	})
	if len(msgs) != 2 || len(msgs[0].Content) != 2 || len(msgs[1].Content) != 1 || msgs[1].Content[0].OfText == nil {
		t.Errorf("messages = %+v", msgs)
	}
}

func TestErrorsAreOneLine(t *testing.T) {
	tests := []struct {
		name   string
		status int
		key    string
		want   []string
	}{
		{"unauthorized", 0, "wrong-key", []string{"401 Unauthorized", "PANTO_API_KEY / ANTHROPIC_API_KEY"}},
		{"rate limited", http.StatusTooManyRequests, key, []string{"429 Too Many Requests"}},
		{"server error", http.StatusInternalServerError, key, []string{"500 Internal Server Error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeprovider.New(t, fakeprovider.Anthropic, key, fakeprovider.Reply{Status: tt.status})
			p, err := anthropicmessages.New(anthropicmessages.Config{BaseURL: srv.BaseURL(), APIKey: tt.key, Model: "m", MaxRetries: 0})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
			checkOneLine(t, err, append(tt.want, "provider "+srv.BaseURL()), tt.key)
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv := fakeprovider.New(t, fakeprovider.Anthropic, key)
		base := srv.BaseURL()
		srv.Close()
		p := newProvider(t, base, "")
		_, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
		checkOneLine(t, err, []string{"provider " + base, "cannot reach"}, key)
	})
	t.Run("no key for a local server", func(t *testing.T) {
		srv := fakeprovider.New(t, fakeprovider.Anthropic, "")
		p, err := anthropicmessages.New(anthropicmessages.Config{BaseURL: srv.BaseURL(), Model: "m", MaxRetries: 0})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
		if err != nil || msg.Text() != "reply 1" {
			t.Errorf("keyless request: %q, %v", msg.Text(), err)
		}
		if h := srv.Requests()[0].Header.Get("X-Api-Key"); h != "" {
			t.Errorf("x-api-key %q sent without a key", h)
		}
	})
}

func checkOneLine(t *testing.T, err error, want []string, secret string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var pe *providererr.Error
	if !errors.As(err, &pe) {
		t.Errorf("error %T is not a *providererr.Error", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || strings.Contains(msg, secret) {
		t.Errorf("error %q spans lines or holds the key", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := anthropicmessages.New(anthropicmessages.Config{}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
	if _, err := anthropicmessages.New(anthropicmessages.Config{Model: "m", Reasoning: "extreme"}); err == nil {
		t.Error("unknown reasoning accepted")
	}
	p, err := anthropicmessages.New(anthropicmessages.Config{Model: "m"})
	if err != nil || p.Identity().BaseURL != anthropicmessages.DefaultBaseURL {
		t.Errorf("default base URL: %v", err)
	}
}

// TestStopReasonKept: every stop_reason comes back verbatim as the
// message's StopReason, with what was sent before it.
func TestStopReasonKept(t *testing.T) {
	for _, reason := range []string{"end_turn", "max_tokens", "tool_use", "stop_sequence", "pause_turn", "refusal", "a_future_reason"} {
		t.Run(reason, func(t *testing.T) {
			reply := fakeprovider.Reply{Text: "partial answ", StopReason: reason}
			if reason == "tool_use" {
				reply.ToolCalls = []fakeprovider.ToolCall{{ID: "toolu_1", Name: "read_file", Args: `{"path":"a"}`}}
			}
			srv := fakeprovider.New(t, fakeprovider.Anthropic, key, reply)
			msg, err := newProvider(t, srv.BaseURL(), "").Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if msg.StopReason != agent.StopReason(reason) || msg.Text() != "partial answ" {
				t.Errorf("stop reason %q, text %q", msg.StopReason, msg.Text())
			}
		})
	}
}

// TestRedactedThinkingSentBack: a redacted thinking block is kept with
// its opaque data and sent back verbatim, in its place between the
// thinking and the tool call, as the API requires of the turn before a
// tool result.
func TestRedactedThinkingSentBack(t *testing.T) {
	const data = "EmwKAhgBEgy3va+/3Q4l=="
	srv := fakeprovider.New(t, fakeprovider.Anthropic, key,
		fakeprovider.Reply{Thinking: "first", Signature: "sig-1", RedactedThinking: data, ToolCalls: []fakeprovider.ToolCall{{ID: "toolu_1", Name: "read_file", Args: `{"path":"a"}`}}},
		fakeprovider.Reply{Text: "done"},
	)
	p := newProvider(t, srv.BaseURL(), agent.ReasoningLow)
	user := agent.UserText("read a")
	msg, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{user}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 3 || msg.Content[1].Type != agent.BlockRedactedThinking || msg.Content[1].Data != data {
		t.Fatalf("content = %+v", msg.Content)
	}
	results := agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("toolu_1", "x", false)}}
	if _, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{user, msg, results}}, nil); err != nil {
		t.Fatal(err)
	}
	asst := srv.Requests()[1].JSON()["messages"].([]any)[1].(map[string]any)["content"].([]any)
	var types []string
	for _, b := range asst {
		types = append(types, b.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "thinking,redacted_thinking,tool_use" {
		t.Fatalf("assistant turn sent back as %v", types)
	}
	if rt := asst[1].(map[string]any); rt["data"] != data || len(rt) != 2 {
		t.Errorf("redacted thinking sent back = %v, want exactly {type, data}", rt)
	}
	// A user turn never carries one (it can only be the model's).
	if got := anthropicmessages.Messages([]agent.Message{{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockRedactedThinking, Data: data}, agent.TextBlock("x")}}}); len(got[0].Content) != 1 {
		t.Errorf("user redacted thinking sent: %+v", got)
	}
}

// TestMaxTokens: Config.MaxTokens is max_tokens, with the thinking budget
// on top when thinking is on.
func TestMaxTokens(t *testing.T) {
	tests := []struct {
		max       int64
		reasoning agent.ReasoningEffort
		want      int64
	}{
		{0, "", anthropicmessages.MaxOutputTokens},
		{1000, "", 1000},
		{1000, agent.ReasoningLow, 1000 + anthropicmessages.ThinkingBudget[agent.ReasoningLow]},
	}
	for _, tt := range tests {
		srv := fakeprovider.New(t, fakeprovider.Anthropic, key)
		p, err := anthropicmessages.New(anthropicmessages.Config{BaseURL: srv.BaseURL(), APIKey: key, Model: "m", MaxTokens: tt.max, Reasoning: tt.reasoning, MaxRetries: 0})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil); err != nil {
			t.Fatal(err)
		}
		if got := srv.Requests()[0].JSON()["max_tokens"]; got != float64(tt.want) {
			t.Errorf("MaxTokens %d, reasoning %q: max_tokens = %v, want %d", tt.max, tt.reasoning, got, tt.want)
		}
	}
	if _, err := anthropicmessages.New(anthropicmessages.Config{Model: "m", MaxTokens: -1}); err == nil {
		t.Error("negative MaxTokens accepted")
	}
}
