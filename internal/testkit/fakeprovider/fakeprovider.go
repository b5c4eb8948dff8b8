// Package fakeprovider runs model provider servers for tests: an OpenAI
// Chat Completions server and an Anthropic Messages server that speak the
// real wire protocols, answer with scripted replies and record every
// request they get; and an OpenAI Responses server, streamed only, for
// the other agents that speak it (Codex, which panto's export tests run). A request with "stream": true is answered as the
// real APIs stream (server-sent events with tool-call, thinking and
// signature deltas, the stop reason and usage), any other with the whole
// response as one JSON body, so that both forms of a reply can be
// checked against the official SDKs.
//
// A server checks the API key it was given (Authorization: Bearer for
// OpenAI, x-api-key for Anthropic) and answers 401 in the provider's own
// error shape when it does not match, so tests exercise authentication
// for real.
package fakeprovider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// ToolCall is a tool call in a scripted reply.
type ToolCall struct {
	ID, Name string
	// Args is the JSON arguments.
	Args string
}

// Reply is one scripted answer.
type Reply struct {
	// Status, when not 0 or 200, answers with that HTTP error instead.
	Status int
	// Thinking and Signature make a thinking block (Anthropic) or
	// reasoning_content (OpenAI) before the text.
	Thinking, Signature string
	// RedactedThinking is the opaque data of a redacted_thinking block
	// sent after the thinking (Anthropic; OpenAI has no such block).
	RedactedThinking string
	Text             string
	ToolCalls        []ToolCall
	// StopReason is the finish_reason (OpenAI) or stop_reason (Anthropic)
	// sent; empty sends the one the reply implies: stop or end_turn, and
	// tool_calls or tool_use when it has tool calls.
	StopReason string
	// InputTokens and OutputTokens are reported as usage.
	InputTokens, OutputTokens int64
	// Break ends a streamed reply after its text as a dropped connection
	// does: no stop reason, no usage, the connection closed mid-response.
	Break bool
}

// Request is a recorded request.
type Request struct {
	Path   string
	Header http.Header
	// Body is the raw JSON body.
	Body []byte
}

// JSON decodes the body into a generic map.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Server is a fake provider.
type Server struct {
	*httptest.Server
	// Key is the API key the server accepts ("" accepts anything).
	Key string

	mu       sync.Mutex
	replies  []Reply
	requests []Request
	respond  func(req Request) Reply
	before   func(r *http.Request)
	style    string
}

// Style names of the servers.
const (
	OpenAI    = "openai-chat"
	Anthropic = "anthropic-messages"
	Responses = "openai-responses"
)

// New starts a fake server of style (OpenAI or Anthropic) that accepts
// key and answers with replies in order; it stops when the test ends.
func New(t testing.TB, style, key string, replies ...Reply) *Server {
	t.Helper()
	s := &Server{Key: key, replies: replies, style: style}
	switch style {
	case OpenAI, Anthropic, Responses:
	default:
		t.Fatalf("fakeprovider: unknown style %q", style)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// BaseURL is the URL to configure a client with, following each SDK's
// convention: with /v1 for OpenAI, without for Anthropic.
func (s *Server) BaseURL() string {
	if s.style == OpenAI || s.style == Responses {
		return s.URL + "/v1"
	}
	return s.URL
}

// Push appends scripted replies.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// SetRespond sets the function that answers requests after the scripted
// replies run out; by default the server answers "reply N".
func (s *Server) SetRespond(fn func(req Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = fn
}

// SetBefore sets a function called with each request before it is
// answered (to delay or observe it).
func (s *Server) SetBefore(fn func(r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = fn
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(r)
	}
	body, _ := io.ReadAll(r.Body)
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	var reply Reply
	switch {
	case len(s.replies) > 0:
		reply, s.replies = s.replies[0], s.replies[1:]
	case s.respond != nil:
		reply = s.respond(req)
	default:
		reply = Reply{Text: fmt.Sprintf("reply %d", n)}
	}
	s.mu.Unlock()

	wantPath := map[string]string{OpenAI: "/v1/chat/completions", Anthropic: "/v1/messages", Responses: "/v1/responses"}[s.style]
	if r.Method != http.MethodPost || r.URL.Path != wantPath {
		s.fail(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if s.Key != "" && !s.authorized(r) {
		s.fail(w, http.StatusUnauthorized, "invalid api key")
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		s.fail(w, reply.Status, http.StatusText(reply.Status)+" from the fake server")
		return
	}
	var mode struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &mode)
	if !mode.Stream && s.style == Responses {
		s.fail(w, http.StatusBadRequest, "the fake Responses server streams only")
		return
	}
	if !mode.Stream {
		w.Header().Set("Content-Type", "application/json")
		if s.style == OpenAI {
			_ = json.NewEncoder(w).Encode(openAICompletion(reply))
		} else {
			_ = json.NewEncoder(w).Encode(anthropicMessage(reply))
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w}
	switch s.style {
	case OpenAI:
		writeOpenAI(sse, reply)
	case Responses:
		writeResponses(sse, reply)
	default:
		writeAnthropic(sse, reply)
	}
}

// writeResponses streams r as the Responses API does: its output items
// (a message with the text, a function call per tool call), each added
// and done, the text in deltas, then the response completed with usage.
func writeResponses(sse *sseWriter, r Reply) {
	var items []map[string]any
	if r.Text != "" {
		items = append(items, map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}}})
	}
	for _, tc := range r.ToolCalls {
		items = append(items, map[string]any{"type": "function_call", "id": "fc_" + tc.ID, "status": "completed", "name": tc.Name, "arguments": tc.Args, "call_id": tc.ID})
	}
	response := func(status string, output []map[string]any) map[string]any {
		return map[string]any{"id": "resp_fake", "object": "response", "status": status, "output": output}
	}
	sse.event("response.created", map[string]any{"type": "response.created", "response": response("in_progress", []map[string]any{})})
	for i, item := range items {
		sse.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		if item["type"] == "message" {
			for _, c := range chunks(r.Text, 5) {
				sse.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_fake", "output_index": i, "content_index": 0, "delta": c})
			}
		}
		sse.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	done := response("completed", items)
	done["usage"] = map[string]any{"input_tokens": r.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": r.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": r.InputTokens + r.OutputTokens}
	sse.event("response.completed", map[string]any{"type": "response.completed", "response": done})
}

func (s *Server) authorized(r *http.Request) bool {
	if s.style == OpenAI || s.style == Responses {
		return r.Header.Get("Authorization") == "Bearer "+s.Key
	}
	return r.Header.Get("X-Api-Key") == s.Key
}

func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var v any
	if s.style == OpenAI || s.style == Responses {
		v = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}}
	} else {
		v = map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}
	}
	_ = json.NewEncoder(w).Encode(v)
}

type sseWriter struct{ w http.ResponseWriter }

func (s *sseWriter) event(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// chunks cuts s into pieces of at most n bytes (at rune boundaries), so
// that text arrives as several deltas.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i := n
		if i >= len(s) {
			i = len(s)
		} else {
			for i > 0 && !utf8Start(s[i]) {
				i--
			}
			if i == 0 {
				i = len(s)
			}
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// stopReason is the reason r is sent with in style.
func (r Reply) stopReason(style string) string {
	switch {
	case r.StopReason != "":
		return r.StopReason
	case style == OpenAI && len(r.ToolCalls) > 0:
		return "tool_calls"
	case style == OpenAI:
		return "stop"
	case len(r.ToolCalls) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

// toolInput is a tool call's arguments as a JSON value; arguments that
// are not JSON (cut off, as by max_tokens) have no whole form and are
// sent as an empty object.
func toolInput(args string) json.RawMessage {
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	return json.RawMessage("{}")
}

func openAIUsage(r Reply) map[string]any {
	return map[string]any{
		"prompt_tokens": r.InputTokens, "completion_tokens": r.OutputTokens,
		"total_tokens":          r.InputTokens + r.OutputTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": 0},
	}
}

// openAICompletion is r as a whole chat.completion.
func openAICompletion(r Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if r.Text != "" {
		msg["content"] = r.Text
	}
	if r.Thinking != "" {
		msg["reasoning_content"] = r.Thinking
	}
	var calls []any
	for _, tc := range r.ToolCalls {
		calls = append(calls, map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Args}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": r.stopReason(OpenAI)}},
		"usage":   openAIUsage(r),
	}
}

func writeOpenAI(sse *sseWriter, r Reply) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	sse.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, c := range chunks(r.Thinking, 7) {
		sse.event("", chunk(map[string]any{"reasoning_content": c}, nil))
	}
	for _, c := range chunks(r.Text, 5) {
		sse.event("", chunk(map[string]any{"content": c}, nil))
	}
	if r.Break {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	for i, tc := range r.ToolCalls {
		sse.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil))
		for _, c := range chunks(tc.Args, 6) {
			sse.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": c},
			}}}, nil))
		}
	}
	sse.event("", chunk(map[string]any{}, r.stopReason(OpenAI)))
	sse.event("", map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake",
		"choices": []any{},
		"usage":   openAIUsage(r),
	})
	fmt.Fprint(sse.w, "data: [DONE]\n\n")
}

// anthropicBlock is one content block of a reply in both forms: whole,
// as a message holds it, and streamed, as a start event and deltas.
type anthropicBlock struct {
	whole, start map[string]any
	deltas       []map[string]any
}

func anthropicBlocks(r Reply) []anthropicBlock {
	var blocks []anthropicBlock
	if r.Thinking != "" || r.Signature != "" {
		b := anthropicBlock{
			whole: map[string]any{"type": "thinking", "thinking": r.Thinking, "signature": r.Signature},
			start: map[string]any{"type": "thinking", "thinking": "", "signature": ""},
		}
		for _, c := range chunks(r.Thinking, 7) {
			b.deltas = append(b.deltas, map[string]any{"type": "thinking_delta", "thinking": c})
		}
		if r.Signature != "" {
			b.deltas = append(b.deltas, map[string]any{"type": "signature_delta", "signature": r.Signature})
		}
		blocks = append(blocks, b)
	}
	if r.RedactedThinking != "" {
		// No delta carries redacted thinking: the block starts whole.
		whole := map[string]any{"type": "redacted_thinking", "data": r.RedactedThinking}
		blocks = append(blocks, anthropicBlock{whole: whole, start: whole})
	}
	if r.Text != "" {
		b := anthropicBlock{
			whole: map[string]any{"type": "text", "text": r.Text},
			start: map[string]any{"type": "text", "text": ""},
		}
		for _, c := range chunks(r.Text, 5) {
			b.deltas = append(b.deltas, map[string]any{"type": "text_delta", "text": c})
		}
		blocks = append(blocks, b)
	}
	for _, tc := range r.ToolCalls {
		b := anthropicBlock{
			whole: map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": toolInput(tc.Args)},
			start: map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}},
		}
		for _, c := range chunks(tc.Args, 6) {
			b.deltas = append(b.deltas, map[string]any{"type": "input_json_delta", "partial_json": c})
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// anthropicMessage is r as a whole message.
func anthropicMessage(r Reply) map[string]any {
	content := []any{}
	for _, b := range anthropicBlocks(r) {
		content = append(content, b.whole)
	}
	return map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "content": content, "model": "fake",
		"stop_reason": r.stopReason(Anthropic), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": r.InputTokens, "output_tokens": r.OutputTokens},
	}
}

func writeAnthropic(sse *sseWriter, r Reply) {
	sse.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "content": []any{}, "model": "fake",
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": r.InputTokens, "output_tokens": 1},
	}})
	sse.event("ping", map[string]any{"type": "ping"})
	for index, b := range anthropicBlocks(r) {
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": b.start})
		for _, d := range b.deltas {
			sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		}
		if r.Break && b.start["type"] == "text" {
			panic(http.ErrAbortHandler) // net/http closes the connection
		}
		sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	sse.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": r.stopReason(Anthropic), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": r.OutputTokens},
	})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

// LastUserText returns the text of the last user message in a recorded
// request body of either style (tool results excluded), for servers that
// answer according to the prompt.
func (r Request) LastUserText() string {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return ""
	}
	for i := len(body.Messages) - 1; i >= 0; i-- {
		m := body.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			var parts []string
			for _, b := range blocks {
				if b.Type == "text" {
					parts = append(parts, b.Text)
				}
			}
			if len(parts) > 0 {
				return strings.Join(parts, "\n")
			}
		}
	}
	return ""
}
