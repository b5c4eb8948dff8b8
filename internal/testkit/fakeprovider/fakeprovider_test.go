package fakeprovider_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

// The fake servers are checked against the official SDKs, streamed and
// whole: a test that trusts a fake that speaks the wire wrong proves
// nothing about the real providers.

const key = "sk-fake-0123456789"

// decoded is what an SDK made of a reply, the same for both styles.
type decoded struct {
	stop, thinking, signature, redacted, text string
	calls                                     []fakeprovider.ToolCall
}

func anthropicDecode(t *testing.T, srv *fakeprovider.Server, stream bool) decoded {
	t.Helper()
	c := anthropic.NewClient(aoption.WithBaseURL(srv.BaseURL()), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	var msg anthropic.Message
	if stream {
		s := c.Messages.NewStreaming(t.Context(), params)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		m, err := c.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		msg = *m
	}
	d := decoded{stop: string(msg.StopReason)}
	for _, b := range msg.Content {
		switch b.Type {
		case "thinking":
			d.thinking, d.signature = b.Thinking, b.Signature
		case "redacted_thinking":
			d.redacted = b.Data
		case "text":
			d.text = b.Text
		case "tool_use":
			d.calls = append(d.calls, fakeprovider.ToolCall{ID: b.ID, Name: b.Name, Args: string(b.Input)})
		}
	}
	return d
}

func openAIDecode(t *testing.T, srv *fakeprovider.Server, stream bool) decoded {
	t.Helper()
	c := openai.NewClient(ooption.WithBaseURL(srv.BaseURL()), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	var choice openai.ChatCompletionChoice
	var thinking string
	if stream {
		s := c.Chat.Completions.NewStreaming(t.Context(), params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			chunk := s.Current()
			acc.AddChunk(chunk)
			for _, ch := range chunk.Choices {
				if f, ok := ch.Delta.JSON.ExtraFields["reasoning_content"]; ok {
					var part string
					_ = json.Unmarshal([]byte(f.Raw()), &part)
					thinking += part
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		choice = acc.Choices[0]
	} else {
		cc, err := c.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		choice = cc.Choices[0]
		if f, ok := choice.Message.JSON.ExtraFields["reasoning_content"]; ok {
			_ = json.Unmarshal([]byte(f.Raw()), &thinking)
		}
	}
	d := decoded{stop: choice.FinishReason, thinking: thinking, text: choice.Message.Content}
	for _, tc := range choice.Message.ToolCalls {
		d.calls = append(d.calls, fakeprovider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
	}
	return d
}

func TestStopReasonsAndBlocksDecode(t *testing.T) {
	call := []fakeprovider.ToolCall{{ID: "call_1", Name: "read_file", Args: `{"path":"a.txt"}`}}
	tests := []struct {
		style string
		reply fakeprovider.Reply
		want  decoded
	}{
		{fakeprovider.OpenAI, fakeprovider.Reply{Text: "hi"}, decoded{stop: "stop", text: "hi"}},
		{fakeprovider.OpenAI, fakeprovider.Reply{Thinking: "hm", Text: "cut o", StopReason: "length"}, decoded{stop: "length", thinking: "hm", text: "cut o"}},
		{fakeprovider.OpenAI, fakeprovider.Reply{ToolCalls: call}, decoded{stop: "tool_calls", calls: call}},
		{fakeprovider.OpenAI, fakeprovider.Reply{Text: "no", StopReason: "content_filter"}, decoded{stop: "content_filter", text: "no"}},
		{fakeprovider.Anthropic, fakeprovider.Reply{Text: "hi"}, decoded{stop: "end_turn", text: "hi"}},
		{fakeprovider.Anthropic, fakeprovider.Reply{Thinking: "hm", Signature: "sig", RedactedThinking: "EmwK+/=", Text: "cut o", StopReason: "max_tokens"},
			decoded{stop: "max_tokens", thinking: "hm", signature: "sig", redacted: "EmwK+/=", text: "cut o"}},
		{fakeprovider.Anthropic, fakeprovider.Reply{RedactedThinking: "EmwK", ToolCalls: call}, decoded{stop: "tool_use", redacted: "EmwK", calls: call}},
		{fakeprovider.Anthropic, fakeprovider.Reply{Text: "x", StopReason: "stop_sequence"}, decoded{stop: "stop_sequence", text: "x"}},
		{fakeprovider.Anthropic, fakeprovider.Reply{Text: "wait", StopReason: "pause_turn"}, decoded{stop: "pause_turn", text: "wait"}},
		{fakeprovider.Anthropic, fakeprovider.Reply{Text: "I can", StopReason: "refusal"}, decoded{stop: "refusal", text: "I can"}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{true, false} {
			name := tt.style + "/" + tt.want.stop + "/whole"
			if stream {
				name = tt.style + "/" + tt.want.stop + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				srv := fakeprovider.New(t, tt.style, key, tt.reply)
				var got decoded
				if tt.style == fakeprovider.OpenAI {
					got = openAIDecode(t, srv, stream)
				} else {
					got = anthropicDecode(t, srv, stream)
				}
				if g, w := jsonOf(got), jsonOf(tt.want); g != w {
					t.Errorf("the SDK decoded\n %s\nwant\n %s", g, w)
				}
			})
		}
	}
}

func jsonOf(d decoded) string {
	b, _ := json.Marshal(map[string]any{"stop": d.stop, "thinking": d.thinking, "signature": d.signature, "redacted": d.redacted, "text": d.text, "calls": d.calls})
	return string(b)
}
