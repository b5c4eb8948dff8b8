// Package openaichat is a panto provider for the OpenAI Chat Completions
// API (and every server that speaks it: vLLM, llama.cpp, Ollama, ...),
// built on the official SDK, github.com/openai/openai-go.
//
// Mapping between panto's messages and the wire:
//
//   - The system prompt (Request.System) is the first message, role
//     "system".
//   - An assistant message's text blocks are its content and its tool use
//     blocks its tool_calls; thinking and redacted thinking blocks are
//     not sent (Chat Completions has no way to send them back).
//   - A user message's tool result blocks become one role "tool" message
//     each (tool_call_id = the tool use id), sent before the user's text.
//   - Streamed text is reported to the Receiver as it arrives; streamed
//     "reasoning_content" (an extension of vLLM, DeepSeek and others) is
//     reported as thinking and kept as a thinking block.
//   - The choice's finish_reason is the message's StopReason, verbatim
//     ("length" is how a truncated answer is told from a whole one).
//   - Usage comes from the final chunk (stream_options.include_usage).
//   - --reasoning maps to reasoning_effort, Config.MaxTokens to
//     max_completion_tokens (sent only when set: servers have their own
//     defaults, and not all of them know the field).
package openaichat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/providererr"
)

// DefaultBaseURL is the OpenAI API, as the SDK names it.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root including the version (default
	// DefaultBaseURL); requests go to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// KeyVars names where the key comes from, for the hint of a 401.
	KeyVars string
	// Model is the model name sent on the wire (required).
	Model string
	// Reasoning is sent as reasoning_effort unless empty.
	Reasoning agent.ReasoningEffort
	// MaxTokens is sent as max_completion_tokens unless 0.
	MaxTokens int64
	// MaxRetries bounds the SDK's retries of failed requests (negative:
	// the SDK's default).
	MaxRetries int
	// HTTPClient replaces the SDK's default client when set.
	HTTPClient *http.Client
}

// Provider talks to one Chat Completions endpoint with one model.
type Provider struct {
	client    openai.Client
	identity  agent.WireIdentity
	apiKey    string
	keyVars   string
	maxTokens int64
}

var _ agent.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai-chat: no model: pass --model")
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("openai-chat: base URL %q: want http:// or https://", cfg.BaseURL)
	}
	if cfg.KeyVars == "" {
		cfg.KeyVars = "PANTO_API_KEY / OPENAI_API_KEY"
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("openai-chat: max tokens %d: want a positive number", cfg.MaxTokens)
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
	}
	if cfg.MaxRetries >= 0 {
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{
		client: openai.NewClient(opts...),
		identity: agent.WireIdentity{
			APIStyle:  agent.APIStyleOpenAIChat,
			BaseURL:   base,
			Model:     cfg.Model,
			Reasoning: cfg.Reasoning,
		},
		apiKey:    cfg.APIKey,
		keyVars:   cfg.KeyVars,
		maxTokens: cfg.MaxTokens,
	}, nil
}

// Identity is the endpoint the provider talks to; it holds no key.
func (p *Provider) Identity() agent.WireIdentity { return p.identity }

// Complete streams one assistant message.
func (p *Provider) Complete(ctx context.Context, req agent.Request, recv agent.Receiver) (agent.Message, error) {
	if recv == nil {
		recv = agent.NopReceiver{}
	}
	params := p.params(req)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()

	var acc accumulator
	for stream.Next() {
		acc.add(stream.Current(), recv)
	}
	if err := stream.Err(); err != nil {
		return acc.partial(), p.describe(ctx, err)
	}
	return acc.message()
}

// params builds the request body.
func (p *Provider) params(req agent.Request) openai.ChatCompletionNewParams {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(p.identity.Model),
		Messages:      Messages(req.System, req.Messages),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if p.identity.Reasoning != agent.ReasoningDefault {
		params.ReasoningEffort = shared.ReasoningEffort(p.identity.Reasoning)
	}
	if p.maxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(p.maxTokens)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{
			Name:       t.Name,
			Parameters: shared.FunctionParameters(schema(t.InputSchema)),
		}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return params
}

func schema(s map[string]any) map[string]any {
	if s == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return s
}

// Messages maps a system prompt and a context to Chat Completions
// messages.
func Messages(system string, msgs []agent.Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleAssistant:
			out = append(out, assistantMessage(m))
		case agent.RoleUser:
			var text []string
			for _, b := range m.Content {
				switch b.Type {
				case agent.BlockToolResult:
					content := b.Text
					if b.IsError {
						content = "error: " + content
					}
					out = append(out, openai.ToolMessage(content, b.ToolUseID))
				case agent.BlockText:
					text = append(text, b.Text)
				}
			}
			if len(text) > 0 {
				out = append(out, openai.UserMessage(strings.Join(text, "\n")))
			}
		case agent.RoleSystem:
			// System messages reach the provider through Request.System.
		}
	}
	return out
}

func assistantMessage(m agent.Message) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	var text []string
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			text = append(text, b.Text)
		case agent.BlockToolUse:
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: b.ToolUseID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      b.ToolName,
						Arguments: args,
					},
				},
			})
		}
	}
	if len(text) > 0 || len(a.ToolCalls) == 0 {
		a.Content.OfString = openai.String(strings.Join(text, ""))
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// accumulator folds stream chunks into one assistant message.
type accumulator struct {
	text      strings.Builder
	reasoning strings.Builder
	calls     map[int64]*toolCall
	usage     *agent.Usage
	finish    string
}

type toolCall struct {
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(chunk openai.ChatCompletionChunk, recv agent.Receiver) {
	if chunk.JSON.Usage.Valid() && chunk.Usage.JSON.PromptTokens.Valid() {
		u := chunk.Usage
		a.usage = &agent.Usage{
			InputTokens:      u.PromptTokens,
			OutputTokens:     u.CompletionTokens,
			CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
			CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
			ReasoningTokens:  u.CompletionTokensDetails.ReasoningTokens,
		}
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
		d := choice.Delta
		if r := reasoningDelta(d); r != "" {
			a.reasoning.WriteString(r)
			recv.ThinkingDelta(r)
		}
		if d.Content != "" {
			a.text.WriteString(d.Content)
			recv.TextDelta(d.Content)
		}
		for _, tc := range d.ToolCalls {
			if a.calls == nil {
				a.calls = map[int64]*toolCall{}
			}
			c := a.calls[tc.Index]
			if c == nil {
				c = &toolCall{}
				a.calls[tc.Index] = c
			}
			if tc.ID != "" {
				c.id = tc.ID
			}
			if tc.Function.Name != "" {
				c.name += tc.Function.Name
			}
			c.args.WriteString(tc.Function.Arguments)
		}
	}
}

// reasoningDelta returns the reasoning text some OpenAI-compatible
// servers stream beside the content ("reasoning_content" or "reasoning").
func reasoningDelta(d openai.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[key]
		if !ok || f.Raw() == "" || f.Raw() == "null" {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// partial is the text streamed so far, for an answer the stream stopped
// in (agent.Provider).
func (a *accumulator) partial() agent.Message {
	m := agent.Message{Role: agent.RoleAssistant}
	if a.text.Len() > 0 {
		m.Content = append(m.Content, agent.TextBlock(a.text.String()))
	}
	return m
}

func (a *accumulator) message() (agent.Message, error) {
	m := agent.Message{Role: agent.RoleAssistant, Usage: a.usage, StopReason: agent.StopReason(a.finish)}
	if a.reasoning.Len() > 0 {
		m.Content = append(m.Content, agent.Block{Type: agent.BlockThinking, Text: a.reasoning.String()})
	}
	if a.text.Len() > 0 {
		m.Content = append(m.Content, agent.TextBlock(a.text.String()))
	}
	indexes := make([]int64, 0, len(a.calls))
	for i := range a.calls {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	for _, i := range indexes {
		c := a.calls[i]
		if c.name == "" {
			return agent.Message{}, fmt.Errorf("tool call %d has no name", i)
		}
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		m.Content = append(m.Content, agent.ToolUseBlock(id, c.name, toolInput(c.args.String())))
	}
	return m, nil
}

// toolInput returns the arguments as JSON. Arguments that are not valid
// JSON (a model's mistake) are kept as a JSON string, so the tool reports
// the error to the model and the message can still be stored.
func toolInput(args string) json.RawMessage {
	args = strings.TrimSpace(args)
	if args == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	quoted, _ := json.Marshal(args)
	return quoted
}

// describe turns an SDK error into one line that says what to fix.
func (p *Provider) describe(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		e := providererr.HTTP(p.identity.BaseURL, apiErr.StatusCode, apiErr.RawJSON(), p.keyVars)
		e.Message = p.redact(e.Message)
		return e
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return providererr.Stream(p.identity.BaseURL, errors.New(p.redact(streamErr.Message)))
	}
	return providererr.Transport(p.identity.BaseURL, err)
}

func (p *Provider) redact(s string) string {
	if p.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, p.apiKey, "[redacted]")
}
