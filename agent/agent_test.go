package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// The agent is tested against the real default store, wrapped in a
// recorder that keeps every batch it was handed (to check batching and
// the identity stamp) and can be told to fail.

const apiKey = "sk-test-SECRET-KEY-0123456789"

type recorder struct {
	*fsjsonl.Store
	mu      sync.Mutex
	batches [][]agent.PersistentMessage
	fail    error
}

func (r *recorder) AppendMessages(ctx context.Context, id string, msgs []agent.PersistentMessage) error {
	if err := ctx.Err(); err != nil {
		return err // as a bucket's store does
	}
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail
	}
	if err := r.Store.AppendMessages(ctx, id, msgs); err != nil {
		return err
	}
	r.mu.Lock()
	r.batches = append(r.batches, msgs)
	r.mu.Unlock()
	return nil
}

// Create hands out sessions that append through the recorder.
func (r *recorder) Create() *agent.Session {
	sess := r.Store.Create()
	sess.Store = r
	return sess
}

func newRecorder(t *testing.T) *recorder {
	s, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{Store: s}
}

// step is one scripted provider reply.
type step func(ctx context.Context, req agent.Request) (agent.Message, error)

// scripted is a Provider that plays steps in order. Like a real one it
// holds an API key, which must never reach a store.
type scripted struct {
	identity agent.WireIdentity
	key      string
	steps    []step
	requests []agent.Request
}

func (p *scripted) Identity() agent.WireIdentity { return p.identity }

func (p *scripted) Complete(ctx context.Context, req agent.Request, recv agent.Receiver) (agent.Message, error) {
	if p.key == "" {
		return agent.Message{}, errors.New("no api key")
	}
	p.requests = append(p.requests, req)
	if len(p.steps) == 0 {
		return agent.Message{}, errors.New("script exhausted")
	}
	s := p.steps[0]
	p.steps = p.steps[1:]
	m, err := s(ctx, req)
	if err == nil {
		recv.TextDelta(m.Text())
	}
	return m, err
}

func reply(m agent.Message) step {
	return func(context.Context, agent.Request) (agent.Message, error) { return m, nil }
}

func toolCall(text string, calls ...agent.Block) agent.Message {
	m := agent.Message{Role: agent.RoleAssistant, Usage: &agent.Usage{InputTokens: 10, OutputTokens: 5}}
	if text != "" {
		m.Content = append(m.Content, agent.TextBlock(text))
	}
	m.Content = append(m.Content, calls...)
	return m
}

// toolbox is a ToolSource whose tools are plain functions.
type toolbox map[string]func(ctx context.Context, input json.RawMessage) (string, error)

func (tb toolbox) Tools() []agent.ToolDecl {
	var out []agent.ToolDecl
	for name := range tb {
		out = append(out, agent.ToolDecl{Name: name, Description: "test tool " + name, InputSchema: map[string]any{"type": "object"}})
	}
	return out
}

func (tb toolbox) Call(ctx context.Context, name string, input json.RawMessage) (string, error) {
	fn, ok := tb[name]
	if !ok {
		return "", fmt.Errorf("no tool %q", name)
	}
	return fn(ctx, input)
}

var ident = agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://llm.test", Model: "test-model", Reasoning: agent.ReasoningMedium}

func newAgent(t *testing.T, rec *recorder, p *scripted, tools agent.ToolSource) *agent.Agent {
	t.Helper()
	if p.key == "" {
		p.key = apiKey
	}
	if p.identity == (agent.WireIdentity{}) {
		p.identity = ident
	}
	return agent.New(rec.Create(), nil, agent.Options{Provider: p, Tools: tools})
}

func load(t *testing.T, a *agent.Agent) []agent.Message {
	t.Helper()
	conv, err := a.Session().Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return conv.Messages
}

func roles(msgs []agent.Message) string {
	var out []string
	for _, m := range msgs {
		r := string(m.Role)
		switch {
		case m.IsToolResult():
			r = "results"
		case len(m.ToolUses()) > 0:
			r = "calls"
		}
		out = append(out, r)
	}
	return strings.Join(out, ",")
}

func TestUserPromptPersistedBeforeProviderCall(t *testing.T) {
	rec := newRecorder(t)
	p := &scripted{}
	a := newAgent(t, rec, p, nil)
	p.steps = []step{func(ctx context.Context, req agent.Request) (agent.Message, error) {
		// The provider checks the store: the prompt is already durable.
		conv, err := rec.Load(ctx, a.Session().Info.ID)
		if err != nil {
			return agent.Message{}, fmt.Errorf("prompt not persisted before the provider call: %w", err)
		}
		if len(conv.Messages) != 1 || conv.Messages[0].Text() != "hello" {
			return agent.Message{}, fmt.Errorf("store holds %v before the provider call", conv.Messages)
		}
		return agent.AssistantText("hi"), nil
	}, reply(agent.AssistantText("never reached"))}
	if err := a.SubmitUserMessage(t.Context(), "hello"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); err != nil {
		t.Fatalf("RunStep: %v", err)
	}
	// A provider that fails outright: the prompt stays.
	p.steps = []step{func(context.Context, agent.Request) (agent.Message, error) {
		return agent.Message{}, errors.New("503 overloaded")
	}}
	if err := a.SubmitUserMessage(t.Context(), "second"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("RunStep = %v, want the provider's error", err)
	}
	if got := roles(load(t, a)); got != "user,assistant,user" {
		t.Errorf("stored %s, want user,assistant,user", got)
	}
}

func TestToolTurnPersistedAsOneBatch(t *testing.T) {
	rec := newRecorder(t)
	p := &scripted{steps: []step{
		reply(toolCall("Let me look.",
			agent.ToolUseBlock("t1", "read", json.RawMessage(`{"path":"a.go"}`)),
			agent.ToolUseBlock("t2", "fail", json.RawMessage(`{}`)),
		)),
		func(ctx context.Context, req agent.Request) (agent.Message, error) {
			// The provider sees the calls and their results.
			if got := roles(req.Messages); got != "user,calls,results" {
				return agent.Message{}, fmt.Errorf("second request holds %s", got)
			}
			return agent.AssistantText("a.go is fine"), nil
		},
	}}
	tools := toolbox{
		"read": func(_ context.Context, in json.RawMessage) (string, error) { return "contents of " + string(in), nil },
		"fail": func(context.Context, json.RawMessage) (string, error) { return "", errors.New("permission denied") },
	}
	a := newAgent(t, rec, p, tools)
	if err := a.SubmitUserMessage(t.Context(), "check a.go"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); err != nil {
		t.Fatalf("RunStep: %v", err)
	}
	var shapes []string
	for _, b := range rec.batches {
		var ms []agent.Message
		for _, pm := range b {
			ms = append(ms, pm.Message)
		}
		shapes = append(shapes, roles(ms))
	}
	if got := strings.Join(shapes, " | "); got != "user | calls,results | assistant" {
		t.Errorf("batches %s, want user | calls,results | assistant", got)
	}
	stored := load(t, a)
	if got := roles(stored); got != "user,calls,results,assistant" {
		t.Fatalf("stored %s", got)
	}
	results := stored[2].Content
	if len(results) != 2 || results[0].ToolUseID != "t1" || results[0].IsError || results[0].Text != `contents of {"path":"a.go"}` ||
		results[1].ToolUseID != "t2" || !results[1].IsError || !strings.Contains(results[1].Text, "permission denied") {
		t.Errorf("stored tool results %+v", results)
	}
	if stored[1].Usage == nil || stored[1].Usage.OutputTokens != 5 {
		t.Errorf("assistant usage %+v not stored", stored[1].Usage)
	}
}

func TestCancelledToolCallNotPersisted(t *testing.T) {
	for _, c := range []struct {
		name string
		// cancelAt is the tool call (0-based) during which the step is cancelled.
		cancelAt int
	}{{"first-call", 0}, {"second-call", 1}} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			calls := 0
			tools := toolbox{"slow": func(ctx context.Context, _ json.RawMessage) (string, error) {
				defer func() { calls++ }()
				if calls == c.cancelAt {
					cancel() // the user pressed Ctrl-C while the tool ran
					<-ctx.Done()
					return "", ctx.Err()
				}
				return "done", nil
			}}
			p := &scripted{steps: []step{reply(toolCall("",
				agent.ToolUseBlock("t1", "slow", json.RawMessage(`{}`)),
				agent.ToolUseBlock("t2", "slow", json.RawMessage(`{}`)),
			))}}
			a := newAgent(t, rec, p, tools)
			if err := a.SubmitUserMessage(ctx, "go"); err != nil {
				t.Fatal(err)
			}
			err := a.RunStep(ctx, nil)
			var stopped *agent.ToolStoppedError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &stopped) || stopped.Tool != "slow" {
				t.Fatalf("RunStep = %v, want context.Canceled, the tool slow stopped", err)
			}
			if got := roles(load(t, a)); got != "user" {
				t.Errorf("stored %s, want only the user prompt", got)
			}
			if got := roles(a.Conversation().Messages); got != "user" {
				t.Errorf("conversation holds %s, want only the user prompt", got)
			}
			// The session goes on: the next step sends no dangling call.
			p.steps = []step{func(ctx context.Context, req agent.Request) (agent.Message, error) {
				if got := roles(req.Messages); got != "user,user" {
					return agent.Message{}, fmt.Errorf("next request holds %s", got)
				}
				return agent.AssistantText("ok"), nil
			}}
			if err := a.SubmitUserMessage(t.Context(), "again"); err != nil {
				t.Fatal(err)
			}
			if err := a.RunStep(t.Context(), nil); err != nil {
				t.Fatalf("RunStep after cancel: %v", err)
			}
		})
	}
}

// TestInterruptedAnswerKeepsItsText: Ctrl-C while an answer streams (the
// provider returns the text so far with ctx's error) stores that text, on
// the store of a cancelled ctx too, marked interrupted; its thinking and
// a tool call begun are not stored. An error before any text stores
// nothing more than the prompt.
func TestInterruptedAnswerKeepsItsText(t *testing.T) {
	rec := newRecorder(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := &scripted{steps: []step{func(ctx context.Context, req agent.Request) (agent.Message, error) {
		cancel() // the user pressed Ctrl-C as the answer streamed
		return agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{
			{Type: agent.BlockThinking, Text: "unsigned thoughts"},
			agent.TextBlock("The answer so"),
			agent.ToolUseBlock("t1", "ls", json.RawMessage(`{"dir":`)),
		}}, ctx.Err()
	}}}
	a := newAgent(t, rec, p, nil)
	if err := a.SubmitUserMessage(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	var added []agent.Message
	recv := receiverFunc(func(m agent.Message) { added = append(added, m) })
	if err := a.RunStep(ctx, recv); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunStep = %v, want context.Canceled", err)
	}
	stored := load(t, a)
	if got := roles(stored); got != "user,assistant" {
		t.Fatalf("stored %s, want user,assistant", got)
	}
	m := stored[1]
	if why, ok := m.Interrupted(); !ok || why != "cancelled" || len(m.Content) != 1 || m.Text() != "The answer so" {
		t.Errorf("stored %+v, want the text alone, interrupted (cancelled)", m)
	}
	if len(added) != 1 || added[0].Text() != "The answer so" {
		t.Errorf("receiver told of %+v", added)
	}
	// No text came: nothing but the prompt.
	p.steps = []step{func(context.Context, agent.Request) (agent.Message, error) {
		return agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{{Type: agent.BlockThinking, Text: "hmm"}}}, errors.New("connection reset")
	}}
	if err := a.SubmitUserMessage(t.Context(), "again"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); err == nil {
		t.Fatal("RunStep succeeded")
	}
	if got := roles(load(t, a)); got != "user,assistant,user" {
		t.Errorf("stored %s, want user,assistant,user", got)
	}
}

type receiverFunc func(agent.Message)

func (receiverFunc) TextDelta(string)               {}
func (receiverFunc) ThinkingDelta(string)           {}
func (f receiverFunc) MessageAdded(m agent.Message) { f(m) }

func TestCommittedBeforeErrorStaysPersisted(t *testing.T) {
	rec := newRecorder(t)
	p := &scripted{steps: []step{
		reply(toolCall("", agent.ToolUseBlock("t1", "ls", json.RawMessage(`{"dir":"."}`)))),
		func(context.Context, agent.Request) (agent.Message, error) {
			return agent.Message{}, errors.New("connection reset")
		},
	}}
	tools := toolbox{"ls": func(context.Context, json.RawMessage) (string, error) { return "a.go b.go", nil }}
	a := newAgent(t, rec, p, tools)
	if err := a.SubmitUserMessage(t.Context(), "list"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("RunStep = %v, want the provider's error", err)
	}
	if got := roles(load(t, a)); got != "user,calls,results" {
		t.Errorf("stored %s, want user,calls,results", got)
	}
	if got := roles(a.Conversation().Messages); got != "user,calls,results" {
		t.Errorf("conversation %s, want user,calls,results", got)
	}
}

func TestPersistFailureLeavesConversationUnchanged(t *testing.T) {
	rec := newRecorder(t)
	a := newAgent(t, rec, &scripted{}, nil)
	rec.fail = errors.New("disk full")
	if err := a.SubmitUserMessage(t.Context(), "lost?"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("SubmitUserMessage = %v, want the store's error", err)
	}
	if n := len(a.Conversation().Messages); n != 0 {
		t.Errorf("conversation holds %d messages the store refused", n)
	}
}

func TestCompact(t *testing.T) {
	rec := newRecorder(t)
	p := &scripted{steps: []step{
		reply(agent.AssistantText("answer one")),
		func(ctx context.Context, req agent.Request) (agent.Message, error) {
			last := req.Messages[len(req.Messages)-1]
			if !strings.Contains(last.Text(), "Summarise") || len(req.Messages) != 3 {
				return agent.Message{}, fmt.Errorf("compaction request %s", roles(req.Messages))
			}
			m := agent.AssistantText("the user asked one thing")
			m.Usage = &agent.Usage{OutputTokens: 7}
			return m, nil
		},
		func(ctx context.Context, req agent.Request) (agent.Message, error) {
			if len(req.Messages) != 2 || !req.Messages[0].IsCompactionSummary() || req.Messages[1].Text() != "question two" {
				return agent.Message{}, fmt.Errorf("request after compaction holds %s", roles(req.Messages))
			}
			if req.System != "be brief" {
				return agent.Message{}, fmt.Errorf("system prompt %q lost in compaction", req.System)
			}
			return agent.AssistantText("answer two"), nil
		},
	}}
	a := newAgent(t, rec, p, nil)
	ctx := t.Context()
	if err := a.AddSystemMessage(ctx, "be brief", agent.SystemReplace); err != nil {
		t.Fatal(err)
	}
	if err := a.SubmitUserMessage(ctx, "question one"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Compact(ctx, "", nil); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	// The summary is persisted, and a reloaded conversation's context starts at it.
	conv, err := a.Session().Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(conv.Messages); got != "system,user,assistant,user" {
		t.Fatalf("stored %s", got)
	}
	if !conv.Messages[3].IsCompactionSummary() || !strings.Contains(conv.Messages[3].Text(), "the user asked one thing") {
		t.Errorf("stored summary %+v", conv.Messages[3])
	}
	if ctxMsgs := conv.Context(); len(ctxMsgs) != 1 || !ctxMsgs[0].IsCompactionSummary() {
		t.Errorf("reloaded Context() = %s, want the summary only", roles(ctxMsgs))
	}
	if conv.SystemPrompt() != "be brief" {
		t.Errorf("reloaded SystemPrompt() = %q", conv.SystemPrompt())
	}
	// A compaction summary is not something the user typed.
	info, err := rec.Resolve(ctx, a.Session().Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Info.LastUserMessage != "question one" {
		t.Errorf("LastUserMessage %q, want question one", info.Info.LastUserMessage)
	}
	// A resumed agent continues from the summary.
	b := agent.New(info, conv, agent.Options{Provider: p})
	if err := b.SubmitUserMessage(ctx, "question two"); err != nil {
		t.Fatal(err)
	}
	if err := b.RunStep(ctx, nil); err != nil {
		t.Fatalf("RunStep after compaction: %v", err)
	}
	if got := roles(load(t, b)); got != "system,user,assistant,user,user,assistant" {
		t.Errorf("stored after resume %s", got)
	}
}

func TestIdentityStampedAndNoKeyStored(t *testing.T) {
	rec := newRecorder(t)
	p := &scripted{steps: []step{
		reply(toolCall("", agent.ToolUseBlock("t1", "env", json.RawMessage(`{}`)))),
		reply(agent.AssistantText("done")),
	}}
	tools := toolbox{"env": func(context.Context, json.RawMessage) (string, error) { return "HOME=/home/u", nil }}
	a := newAgent(t, rec, p, tools)
	ctx := t.Context()
	if err := a.AddSystemMessage(ctx, "sys", agent.SystemAppend); err != nil {
		t.Fatal(err)
	}
	if err := a.SubmitUserMessage(ctx, "what is my env"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Switch provider: later entries carry the new identity.
	other := agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://localhost:11434/v1", Model: "local"}
	a.SetProvider(&scripted{identity: other, key: apiKey, steps: []step{reply(agent.AssistantText("from local"))}})
	if err := a.SubmitUserMessage(ctx, "and now?"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, b := range rec.batches {
		want := ident
		if i >= 4 {
			want = other
		}
		for _, pm := range b {
			n++
			if pm.Identity != want {
				t.Errorf("batch %d: %s message stamped %+v, want %+v", i, pm.Message.Role, pm.Identity, want)
			}
			if len(pm.Conversation) == 0 {
				t.Errorf("batch %d: no provenance conversation", i)
			}
		}
	}
	if n != 7 {
		t.Errorf("%d messages persisted, want 7", n)
	}
	info, err := rec.Resolve(ctx, a.Session().Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Info.Model != "local" || info.Info.APIStyle != agent.APIStyleOpenAIChat || info.Info.MessageCount != 7 {
		t.Errorf("session info %+v", info.Info)
	}
	path, err := rec.Path(a.Session().Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("SECRET")) || bytes.Contains(data, []byte(apiKey[:8])) {
		t.Errorf("stored bytes hold key material:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"model":"test-model"`)) || !bytes.Contains(data, []byte(`"model":"local"`)) {
		t.Errorf("stored bytes lack the wire identity:\n%s", data)
	}
	// System entries carry no identity.
	first := bytes.SplitN(data, []byte("\n"), 3)[1]
	if !bytes.Contains(first, []byte(`"role":"system"`)) || bytes.Contains(first, []byte("model")) {
		t.Errorf("system entry %s", first)
	}
}

func TestTooManyToolRounds(t *testing.T) {
	rec := newRecorder(t)
	loop := reply(toolCall("", agent.ToolUseBlock("t", "noop", json.RawMessage(`{}`))))
	p := &scripted{key: apiKey, identity: ident, steps: []step{loop, loop, loop}}
	a := agent.New(rec.Create(), nil, agent.Options{Provider: p, MaxToolRounds: 2, Tools: toolbox{
		"noop": func(context.Context, json.RawMessage) (string, error) { return "", nil },
	}})
	if err := a.SubmitUserMessage(t.Context(), "loop"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); !errors.Is(err, agent.ErrTooManyToolRounds) {
		t.Fatalf("RunStep = %v, want ErrTooManyToolRounds", err)
	}
	if got := roles(load(t, a)); got != "user,calls,results,calls,results" {
		t.Errorf("stored %s", got)
	}
}
