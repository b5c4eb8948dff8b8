package openaichat_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/openaichat"
	"github.com/panto-dev/panto/agent/providererr"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

const key = "sk-test-openai-secret-0123456789"

type recorder struct {
	text, thinking []string
}

func (r *recorder) TextDelta(s string)         { r.text = append(r.text, s) }
func (r *recorder) ThinkingDelta(s string)     { r.thinking = append(r.thinking, s) }
func (r *recorder) MessageAdded(agent.Message) {}

func newProvider(t *testing.T, baseURL string, reasoning agent.ReasoningEffort) *openaichat.Provider {
	t.Helper()
	p, err := openaichat.New(openaichat.Config{BaseURL: baseURL, APIKey: key, Model: "gpt-test", Reasoning: reasoning, MaxRetries: 0})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompleteStreamsTextAndUsage(t *testing.T) {
	srv := fakeprovider.New(t, fakeprovider.OpenAI, key, fakeprovider.Reply{
		Thinking: "let me think", Text: "Hello there, world!", InputTokens: 12, OutputTokens: 7,
	})
	p := newProvider(t, srv.BaseURL(), agent.ReasoningHigh)
	var rec recorder
	msg, err := p.Complete(context.Background(), agent.Request{
		System:   "be brief",
		Messages: []agent.Message{agent.UserText("hi")},
	}, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Text(); got != "Hello there, world!" {
		t.Errorf("text = %q", got)
	}
	if len(rec.text) < 2 || strings.Join(rec.text, "") != "Hello there, world!" {
		t.Errorf("text deltas = %q, want several that add up to the text", rec.text)
	}
	if strings.Join(rec.thinking, "") != "let me think" || msg.Content[0].Type != agent.BlockThinking {
		t.Errorf("thinking deltas = %q, content = %+v", rec.thinking, msg.Content)
	}
	if msg.Usage == nil || msg.Usage.InputTokens != 12 || msg.Usage.OutputTokens != 7 {
		t.Errorf("usage = %+v", msg.Usage)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+key {
		t.Errorf("Authorization = %q", got)
	}
	body := reqs[0].JSON()
	if body["model"] != "gpt-test" || body["stream"] != true || body["reasoning_effort"] != "high" {
		t.Errorf("body = %s", reqs[0].Body)
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", body["stream_options"])
	}
	msgs := body["messages"].([]any)
	first := msgs[0].(map[string]any)
	if first["role"] != "system" || first["content"] != "be brief" {
		t.Errorf("first message = %v", first)
	}
	if id := p.Identity(); id != (agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: srv.BaseURL(), Model: "gpt-test", Reasoning: agent.ReasoningHigh}) {
		t.Errorf("identity = %+v", id)
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	srv := fakeprovider.New(t, fakeprovider.OpenAI, key,
		fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{
			{ID: "call_a", Name: "read_file", Args: `{"path":"notes.txt"}`},
			{ID: "call_b", Name: "list_dir", Args: `{"path":"."}`},
		}},
		fakeprovider.Reply{Text: "done"},
	)
	p := newProvider(t, srv.BaseURL(), "")
	tools := []agent.ToolDecl{{Name: "read_file", Description: "read", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"},
	}}}
	user := agent.UserText("read notes")
	msg, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{user}, Tools: tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uses := msg.ToolUses()
	if len(uses) != 2 || uses[0].ToolUseID != "call_a" || uses[0].ToolName != "read_file" || string(uses[0].Input) != `{"path":"notes.txt"}` || uses[1].ToolName != "list_dir" {
		t.Fatalf("tool uses = %+v", uses)
	}
	results := agent.Message{Role: agent.RoleUser, Content: []agent.Block{
		agent.ToolResultBlock("call_a", "file contents", false),
		agent.ToolResultBlock("call_b", "no such dir", true),
	}}
	if _, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{user, msg, results}, Tools: tools}, nil); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[1].JSON()
	tl := body["tools"].([]any)[0].(map[string]any)
	if tl["type"] != "function" || tl["function"].(map[string]any)["name"] != "read_file" {
		t.Errorf("tools = %v", body["tools"])
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("messages = %v", msgs)
	}
	asst := msgs[1].(map[string]any)
	calls := asst["tool_calls"].([]any)
	c0 := calls[0].(map[string]any)
	if asst["role"] != "assistant" || len(calls) != 2 || c0["id"] != "call_a" || c0["function"].(map[string]any)["arguments"] != `{"path":"notes.txt"}` {
		t.Errorf("assistant = %v", asst)
	}
	for i, want := range []struct{ id, content string }{{"call_a", "file contents"}, {"call_b", "error: no such dir"}} {
		m := msgs[2+i].(map[string]any)
		if m["role"] != "tool" || m["tool_call_id"] != want.id || m["content"] != want.content {
			t.Errorf("tool message %d = %v", i, m)
		}
	}
}

func TestErrorsAreOneLine(t *testing.T) {
	tests := []struct {
		name   string
		status int
		key    string
		want   []string
	}{
		{"unauthorized", 0, "wrong-key", []string{"401 Unauthorized", "PANTO_API_KEY / OPENAI_API_KEY"}},
		{"rate limited", http.StatusTooManyRequests, key, []string{"429 Too Many Requests", "rate limited"}},
		{"server error", http.StatusInternalServerError, key, []string{"500 Internal Server Error", "retry later"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeprovider.New(t, fakeprovider.OpenAI, key, fakeprovider.Reply{Status: tt.status})
			p, err := openaichat.New(openaichat.Config{BaseURL: srv.BaseURL(), APIKey: tt.key, Model: "m", MaxRetries: 0})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
			checkOneLine(t, err, append(tt.want, "provider "+srv.BaseURL()), tt.key)
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv := fakeprovider.New(t, fakeprovider.OpenAI, key)
		base := srv.BaseURL()
		srv.Close()
		p := newProvider(t, base, "")
		_, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
		checkOneLine(t, err, []string{"provider " + base, "cannot reach"}, key)
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

func TestCancel(t *testing.T) {
	srv := fakeprovider.New(t, fakeprovider.OpenAI, key)
	p := newProvider(t, srv.BaseURL(), "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Complete(ctx, agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestInvalidToolArgumentsAreKeptAsJSON(t *testing.T) {
	srv := fakeprovider.New(t, fakeprovider.OpenAI, key, fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{{ID: "c", Name: "read_file", Args: `{"path": nope`}}})
	p := newProvider(t, srv.BaseURL(), "")
	msg, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := msg.ToolUses()[0].Input
	var s string
	if !json.Valid(in) || json.Unmarshal(in, &s) != nil || s != `{"path": nope` {
		t.Errorf("input = %s", in)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := openaichat.New(openaichat.Config{}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
	if _, err := openaichat.New(openaichat.Config{Model: "m", BaseURL: "localhost:8080"}); err == nil {
		t.Error("base URL without scheme accepted")
	}
	p, err := openaichat.New(openaichat.Config{Model: "m"})
	if err != nil || p.Identity().BaseURL != openaichat.DefaultBaseURL {
		t.Errorf("default base URL: %v %+v", err, p)
	}
}

// TestStopReasonKept: every finish_reason comes back verbatim as the
// message's StopReason, with what was sent before it.
func TestStopReasonKept(t *testing.T) {
	for _, reason := range []string{"stop", "length", "tool_calls", "content_filter", "a_future_reason"} {
		t.Run(reason, func(t *testing.T) {
			reply := fakeprovider.Reply{Text: "partial answ", StopReason: reason}
			if reason == "tool_calls" {
				reply.ToolCalls = []fakeprovider.ToolCall{{ID: "c", Name: "read_file", Args: `{"path":"a"}`}}
			}
			srv := fakeprovider.New(t, fakeprovider.OpenAI, key, reply)
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

// TestMaxTokens: max_completion_tokens is sent only when asked for, as
// servers have their own defaults and not all of them know it.
func TestMaxTokens(t *testing.T) {
	for _, n := range []int64{0, 777} {
		srv := fakeprovider.New(t, fakeprovider.OpenAI, key)
		p, err := openaichat.New(openaichat.Config{BaseURL: srv.BaseURL(), APIKey: key, Model: "m", MaxTokens: n, MaxRetries: 0})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil); err != nil {
			t.Fatal(err)
		}
		got, sent := srv.Requests()[0].JSON()["max_completion_tokens"]
		if sent != (n > 0) || n > 0 && got != float64(n) {
			t.Errorf("MaxTokens %d: max_completion_tokens = %v (sent %v)", n, got, sent)
		}
	}
	if _, err := openaichat.New(openaichat.Config{Model: "m", MaxTokens: -1}); err == nil {
		t.Error("negative MaxTokens accepted")
	}
}

// TestRedactedThinkingNotSent: Chat Completions has no field for another
// provider's redacted thinking; the rest of the message goes.
func TestRedactedThinkingNotSent(t *testing.T) {
	msgs := openaichat.Messages("", []agent.Message{
		agent.UserText("hi"),
		{Role: agent.RoleAssistant, Content: []agent.Block{{Type: agent.BlockRedactedThinking, Data: "OPAQUE"}, agent.TextBlock("hello")}},
	})
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "OPAQUE") || !strings.Contains(string(b), `"content":"hello"`) {
		t.Errorf("messages = %s", b)
	}
}
