// Package anthropicmessages is a panto provider for the Anthropic
// Messages API, built on the official SDK,
// github.com/anthropics/anthropic-sdk-go.
//
// Mapping between panto's messages and the wire:
//
//   - Request.System is the top-level "system" parameter.
//   - Blocks map one to one: text, thinking (with its signature) and
//     redacted_thinking (with its opaque data), which the API requires
//     back verbatim on later turns, tool_use and tool_result. A thinking
//     block without a signature (from another provider) is not sent.
//   - The response's stop_reason is the message's StopReason, verbatim
//     (max_tokens is how a truncated answer is told from a whole one).
//   - Streamed text_delta and thinking_delta are reported to the Receiver
//     as they arrive; the SDK's accumulator assembles the whole message
//     (input_json_delta, signature_delta, usage from message_start and
//     message_delta).
//   - --reasoning enables extended thinking with a budget (low 2,048,
//     medium 8,192, high 24,576 tokens); max_tokens leaves room for the
//     answer (Config.MaxTokens) on top of the budget.
//
// Server tool blocks (web search and the like) are not kept: panto
// offers no server tools, so a model never sends them.
package anthropicmessages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/providererr"
)

// DefaultBaseURL is the Anthropic API, as the SDK names it.
const DefaultBaseURL = "https://api.anthropic.com"

// MaxOutputTokens is the default of Config.MaxTokens.
const MaxOutputTokens = 16384

// ThinkingBudget is the thinking budget of each reasoning level.
var ThinkingBudget = map[agent.ReasoningEffort]int64{
	agent.ReasoningLow:    2048,
	agent.ReasoningMedium: 8192,
	agent.ReasoningHigh:   24576,
}

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root without the version (default
	// DefaultBaseURL); requests go to BaseURL + "/v1/messages".
	BaseURL string
	// APIKey is sent as x-api-key; empty sends none (local servers).
	APIKey string
	// KeyVars names where the key comes from, for the hint of a 401.
	KeyVars string
	// Model is the model name sent on the wire (required).
	Model string
	// Reasoning enables extended thinking unless empty.
	Reasoning agent.ReasoningEffort
	// MaxTokens bounds the answer (0: MaxOutputTokens); it is max_tokens
	// of a request without thinking and is added to the thinking budget
	// of one with thinking.
	MaxTokens int64
	// MaxRetries bounds the SDK's retries (negative: the SDK's default).
	MaxRetries int
	// HTTPClient replaces the SDK's default client when set.
	HTTPClient *http.Client
}

// Provider talks to one Messages endpoint with one model.
type Provider struct {
	client    anthropic.Client
	identity  agent.WireIdentity
	apiKey    string
	keyVars   string
	maxTokens int64
}

var _ agent.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic-messages: no model: pass --model")
	}
	if cfg.Reasoning != agent.ReasoningDefault {
		if _, ok := ThinkingBudget[cfg.Reasoning]; !ok {
			return nil, fmt.Errorf("anthropic-messages: reasoning %q: want low, medium or high", cfg.Reasoning)
		}
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("anthropic-messages: base URL %q: want http:// or https://", cfg.BaseURL)
	}
	if cfg.KeyVars == "" {
		cfg.KeyVars = "PANTO_API_KEY / ANTHROPIC_API_KEY"
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic-messages: max tokens %d: want a positive number", cfg.MaxTokens)
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = MaxOutputTokens
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(), // panto resolves the key itself
		option.WithBaseURL(base),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.MaxRetries >= 0 {
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{
		client: anthropic.NewClient(opts...),
		identity: agent.WireIdentity{
			APIStyle:  agent.APIStyleAnthropicMessages,
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
	stream := p.client.Messages.NewStreaming(ctx, p.params(req))
	defer stream.Close()

	var msg anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return partial(msg), providererr.Stream(p.identity.BaseURL, err)
		}
		if ev.Type == "content_block_delta" {
			switch ev.Delta.Type {
			case "text_delta":
				recv.TextDelta(ev.Delta.Text)
			case "thinking_delta":
				recv.ThinkingDelta(ev.Delta.Thinking)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return partial(msg), p.describe(ctx, err)
	}
	return fromWire(msg), nil
}

// partial is the text streamed so far, for an answer the stream stopped
// in (agent.Provider): its text blocks alone.
func partial(msg anthropic.Message) agent.Message {
	m := agent.Message{Role: agent.RoleAssistant}
	for _, b := range msg.Content {
		if b.Type == "text" && b.Text != "" {
			m.Content = append(m.Content, agent.TextBlock(b.Text))
		}
	}
	return m
}

// params builds the request body.
func (p *Provider) params(req agent.Request) anthropic.MessageNewParams {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(p.identity.Model),
		MaxTokens: p.maxTokens,
		Messages:  Messages(req.Messages),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	if budget, ok := ThinkingBudget[p.identity.Reasoning]; ok {
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(budget)
		params.MaxTokens = budget + p.maxTokens
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, tool(t))
	}
	return params
}

func tool(t agent.ToolDecl) anthropic.ToolUnionParam {
	var s anthropic.ToolInputSchemaParam
	for k, v := range t.InputSchema {
		switch k {
		case "type":
		case "properties":
			s.Properties = v
		case "required":
			s.Required = stringList(v)
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	u := anthropic.ToolUnionParamOfTool(s, t.Name)
	if t.Description != "" {
		u.OfTool.Description = anthropic.String(t.Description)
	}
	return u
}

func stringList(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		var out []string
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Messages maps a context to Messages API messages. Consecutive messages
// of one role are merged, as the API wants the roles to alternate.
func Messages(msgs []agent.Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	for _, m := range msgs {
		var role anthropic.MessageParamRole
		switch m.Role {
		case agent.RoleUser:
			role = anthropic.MessageParamRoleUser
		case agent.RoleAssistant:
			role = anthropic.MessageParamRoleAssistant
		default:
			continue // system messages travel in Request.System
		}
		blocks := toWire(m)
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	return out
}

func toWire(m agent.Message) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, b := range m.Content {
		switch b.Type {
		case agent.BlockText:
			if b.Text != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case agent.BlockThinking:
			if m.Role == agent.RoleAssistant && b.Signature != "" {
				out = append(out, anthropic.NewThinkingBlock(b.Signature, b.Text))
			}
		case agent.BlockRedactedThinking:
			if m.Role == agent.RoleAssistant && b.Data != "" {
				out = append(out, anthropic.NewRedactedThinkingBlock(b.Data))
			}
		case agent.BlockToolUse:
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			out = append(out, anthropic.NewToolUseBlock(b.ToolUseID, input, b.ToolName))
		case agent.BlockToolResult:
			out = append(out, anthropic.NewToolResultBlock(b.ToolUseID, b.Text, b.IsError))
		}
	}
	return out
}

// fromWire maps an accumulated response to an assistant message.
func fromWire(msg anthropic.Message) agent.Message {
	m := agent.Message{Role: agent.RoleAssistant, StopReason: agent.StopReason(msg.StopReason)}
	for _, c := range msg.Content {
		switch c.Type {
		case "text":
			m.Content = append(m.Content, agent.TextBlock(c.Text))
		case "thinking":
			m.Content = append(m.Content, agent.Block{Type: agent.BlockThinking, Text: c.Thinking, Signature: c.Signature})
		case "redacted_thinking":
			m.Content = append(m.Content, agent.Block{Type: agent.BlockRedactedThinking, Data: c.Data})
		case "tool_use":
			input := json.RawMessage(c.Input)
			if len(input) == 0 || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			m.Content = append(m.Content, agent.ToolUseBlock(c.ID, c.Name, input))
		}
	}
	u := msg.Usage
	m.Usage = &agent.Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
	return m
}

// describe turns an SDK error into one line that says what to fix.
func (p *Provider) describe(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode < 400 { // an error event inside a 200 stream
			return providererr.Stream(p.identity.BaseURL, errors.New(p.redact(apiErr.RawJSON())))
		}
		e := providererr.HTTP(p.identity.BaseURL, apiErr.StatusCode, apiErr.RawJSON(), p.keyVars)
		e.Message = p.redact(e.Message)
		return e
	}
	return providererr.Transport(p.identity.BaseURL, err)
}

func (p *Provider) redact(s string) string {
	if p.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, p.apiKey, "[redacted]")
}
