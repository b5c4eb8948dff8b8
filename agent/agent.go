// Package agent is panto's core: the conversation model, the Agent that
// drives a provider and its tools, the ToolRegistry that gathers tools
// from several sources (built-in, extensions), and the SessionStore
// contract that persists a session.
//
// The Agent owns its Conversation and a Session on a pluggable
// SessionStore, and persists every message as it enters the conversation:
// an embedder gets durable sessions without calling a persist function.
//
//   - A user prompt is persisted on submission, before any provider call,
//     so nothing typed is lost when the provider fails.
//   - An assistant message that calls tools is persisted together with the
//     tool results that answer it, as one atomic batch; one whose calls
//     never got results (the step was cancelled or failed) is dropped from
//     the conversation and never persisted, so a stored session can always
//     be replayed to a provider.
//   - An assistant message the provider cut off (StopKind.CutShort: the
//     token limit, a refusal, a content filter) does not have its tool
//     calls run, since the last one's input may be partial: it is
//     persisted with results that say the calls were not run, and the
//     step ends with a CutShortError. A cut-off compaction summary is not
//     persisted at all, since it would replace the context with part of
//     a summary.
//   - Messages committed before an error in a step stay persisted, and so
//     does the text of an answer the step stopped in (Ctrl-C, a broken
//     stream): the user saw it stream, so it is persisted as an assistant
//     message marked MetadataInterrupted, without its thinking (whose
//     signature had not come) or tool calls (whose input may be partial).
//   - Every persisted message carries the wire identity of the endpoint;
//     API keys never reach the Agent, so they cannot reach a store.
//
// This package imports no store: stores import it (cmd -> store -> agent).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Request is what the Agent sends a provider for one assistant turn.
type Request struct {
	// System is the system prompt in force (Conversation.SystemPrompt).
	System string
	// Messages is the context (Conversation.Context): no system messages.
	Messages []Message
	Tools    []ToolDecl
}

// Provider produces assistant messages. Implementations speak one wire
// protocol (see APIStyle).
type Provider interface {
	// Identity is stamped on every persisted message of a turn this
	// provider served. It must not carry key material.
	Identity() WireIdentity
	// Complete streams one assistant message for req, reporting deltas to
	// recv as they arrive, and returns the whole message with its Usage.
	// On an error after text arrived (ctx cancelled, the stream broken) it
	// returns, with the error, the text streamed so far as the message's
	// text blocks.
	Complete(ctx context.Context, req Request, recv Receiver) (Message, error)
}

// Receiver observes a step as it happens (for display). Its methods are
// called from the goroutine that runs the step.
type Receiver interface {
	// TextDelta is streamed assistant text.
	TextDelta(text string)
	// ThinkingDelta is streamed reasoning text.
	ThinkingDelta(text string)
	// MessageAdded is called after a message enters the conversation.
	MessageAdded(m Message)
}

// ToolCallReceiver is a Receiver that is also told of each tool call as
// it starts to run, before its result and before the message that made it
// enters the conversation (MessageAdded comes once every call of the
// message has run): a long run_shell is seen while it runs.
type ToolCallReceiver interface {
	Receiver
	ToolCallStarted(call Block)
}

// NopReceiver ignores everything.
type NopReceiver struct{}

func (NopReceiver) TextDelta(string)     {}
func (NopReceiver) ThinkingDelta(string) {}
func (NopReceiver) MessageAdded(Message) {}

// ToolSource offers tools and runs them.
type ToolSource interface {
	Tools() []ToolDecl
	// Call runs tool name with JSON input. An error is reported to the
	// model as a failed tool result, not to the caller of RunStep.
	Call(ctx context.Context, name string, input json.RawMessage) (string, error)
}

// Options configure an Agent.
type Options struct {
	Provider Provider
	// Tools may be nil: no tools.
	Tools ToolSource
	// MaxToolRounds bounds the provider calls of one step (default 32), so
	// a model that keeps calling tools cannot run forever.
	MaxToolRounds int
}

// ToolStoppedError: the step was stopped (its ctx ended) before or while
// tool Tool ran; the message that called it is dropped, not persisted.
type ToolStoppedError struct {
	Tool string
	Err  error
}

func (e *ToolStoppedError) Error() string { return "run tool " + e.Tool + ": " + e.Err.Error() }
func (e *ToolStoppedError) Unwrap() error { return e.Err }

// ErrTooManyToolRounds: a step called tools more than MaxToolRounds times.
var ErrTooManyToolRounds = errors.New("too many tool rounds in one step")

// Agent drives one session: it owns the conversation and persists to the
// session every message added to it. An Agent is not safe for concurrent
// use.
type Agent struct {
	session *Session
	conv    *Conversation
	opts    Options
}

// New returns an Agent on session that adopts conv (nil: a fresh, empty
// conversation). The caller must not use conv afterwards.
func New(session *Session, conv *Conversation, opts Options) *Agent {
	if conv == nil {
		conv = &Conversation{}
	}
	if opts.MaxToolRounds <= 0 {
		opts.MaxToolRounds = 32
	}
	return &Agent{session: session, conv: conv, opts: opts}
}

// Session returns the session the agent persists to.
func (a *Agent) Session() *Session { return a.session }

// Conversation returns the live conversation. Callers must not modify it.
func (a *Agent) Conversation() *Conversation { return a.conv }

// SetProvider switches the provider for later turns (the new identity is
// stamped on what they persist).
func (a *Agent) SetProvider(p Provider) { a.opts.Provider = p }

// SubmitUserMessage adds a user message and persists it before returning,
// so the prompt is durable before any provider call.
func (a *Agent) SubmitUserMessage(ctx context.Context, text string) error {
	return a.add(ctx, UserText(text))
}

// AddSystemMessage adds and persists a system message.
func (a *Agent) AddSystemMessage(ctx context.Context, text string, mode SystemMode) error {
	return a.add(ctx, SystemText(text, mode))
}

// SetTitle adds and persists a title entry (TitleMessage); an empty title
// clears the session's title.
func (a *Agent) SetTitle(ctx context.Context, title string) error {
	return a.add(ctx, TitleMessage(title))
}

// add appends msgs to the conversation and persists them as one batch. On
// a persist failure the messages are taken back out, so the conversation
// never holds what the store does not.
func (a *Agent) add(ctx context.Context, msgs ...Message) error {
	n := len(a.conv.Messages)
	a.conv.Messages = append(a.conv.Messages, msgs...)
	if err := a.persist(ctx, n); err != nil {
		a.conv.Messages = a.conv.Messages[:n]
		return err
	}
	return nil
}

// persist appends conv.Messages[from:] to the session as one batch.
func (a *Agent) persist(ctx context.Context, from int) error {
	if a.session == nil || from >= len(a.conv.Messages) {
		return nil
	}
	var identity WireIdentity
	if a.opts.Provider != nil {
		identity = a.opts.Provider.Identity()
	}
	tools := a.tools()
	batch := make([]PersistentMessage, 0, len(a.conv.Messages)-from)
	for _, m := range a.conv.Messages[from:] {
		batch = append(batch, PersistentMessage{
			Message:        m,
			Usage:          m.Usage,
			Identity:       identity,
			Conversation:   a.conv.Messages,
			ToolsAvailable: tools,
		})
	}
	if err := a.session.Append(ctx, batch); err != nil {
		return fmt.Errorf("persist to session %s: %w", a.session.Info.ID, err)
	}
	return nil
}

func (a *Agent) tools() []ToolDecl {
	if a.opts.Tools == nil {
		return nil
	}
	return a.opts.Tools.Tools()
}

// RunStep asks the provider for the next assistant message and, while it
// calls tools, runs them and asks again. Each assistant message is
// persisted with the tool results that answer it; whatever was persisted
// before an error stays persisted. On error (including a cancelled ctx)
// an assistant message whose tool calls have no results is removed from
// the conversation and not persisted.
//
// A message without tool calls ends the step whatever its StopReason: a
// truncated answer is an answer, and the caller tells the user from its
// StopReason. One with tool calls that was cut short ends the step with
// a *CutShortError, its calls persisted as not run.
func (a *Agent) RunStep(ctx context.Context, recv Receiver) error {
	if a.opts.Provider == nil {
		return errors.New("run step: no provider configured")
	}
	if recv == nil {
		recv = NopReceiver{}
	}
	for round := 0; round < a.opts.MaxToolRounds; round++ {
		req := Request{System: a.conv.SystemPrompt(), Messages: a.conv.Context(), Tools: a.tools()}
		reply, err := a.opts.Provider.Complete(ctx, req, recv)
		if err != nil {
			a.keepInterrupted(ctx, reply, err, recv)
			return fmt.Errorf("provider: %w", err)
		}
		reply.Role = RoleAssistant
		uses := reply.ToolUses()
		if len(uses) == 0 {
			if err := a.add(ctx, reply); err != nil {
				return err
			}
			recv.MessageAdded(reply)
			return nil
		}
		if reason := reply.StopReason; reason.Kind().CutShort() {
			results := notRun(uses, reason)
			if err := a.add(ctx, reply, results); err != nil {
				return err
			}
			recv.MessageAdded(reply)
			recv.MessageAdded(results)
			return fmt.Errorf("run step: %w", &CutShortError{Reason: reason, Tools: toolNames(uses)})
		}
		results, err := a.runTools(ctx, uses, recv)
		if err != nil {
			// The assistant's tool calls have no results: drop them.
			return err
		}
		if err := a.add(ctx, reply, results); err != nil {
			return err
		}
		recv.MessageAdded(reply)
		recv.MessageAdded(results)
	}
	return fmt.Errorf("run step: %w (limit %d)", ErrTooManyToolRounds, a.opts.MaxToolRounds)
}

// keepInterrupted persists the text of an answer the provider stopped
// in, as the user saw it stream: its text blocks alone, marked
// MetadataInterrupted with why it stopped. The write outlives a
// cancelled ctx (Ctrl-C is what cancelled it), for at most 30 s; if it
// fails, the step's own error is what the caller reports.
func (a *Agent) keepInterrupted(ctx context.Context, partial Message, cause error, recv Receiver) {
	var text []Block
	for _, b := range partial.Content {
		if b.Type == BlockText && strings.TrimSpace(b.Text) != "" {
			text = append(text, b)
		}
	}
	if len(text) == 0 {
		return
	}
	why := cause.Error()
	if errors.Is(cause, context.Canceled) {
		why = "cancelled"
	}
	m := Message{Role: RoleAssistant, Content: text, Metadata: map[string]any{MetadataInterrupted: why}}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if a.add(wctx, m) == nil {
		recv.MessageAdded(m)
	}
}

// runTools runs each tool call in order, telling recv of each as it
// starts when it is a ToolCallReceiver, and returns the user message that
// carries their results. Only cancellation is an error; a failing tool is
// a failed result the model gets to see.
func (a *Agent) runTools(ctx context.Context, uses []Block, recv Receiver) (Message, error) {
	results := Message{Role: RoleUser}
	started, _ := recv.(ToolCallReceiver)
	for _, u := range uses {
		if err := ctx.Err(); err != nil {
			return Message{}, &ToolStoppedError{Tool: u.ToolName, Err: err}
		}
		if started != nil {
			started.ToolCallStarted(u)
		}
		var out string
		var err error
		if a.opts.Tools == nil {
			err = fmt.Errorf("no tool named %q", u.ToolName)
		} else {
			out, err = a.opts.Tools.Call(ctx, u.ToolName, u.Input)
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return Message{}, &ToolStoppedError{Tool: u.ToolName, Err: ctxErr}
			}
			results.Content = append(results.Content, ToolResultBlock(u.ToolUseID, err.Error(), true))
			continue
		}
		results.Content = append(results.Content, ToolResultBlock(u.ToolUseID, out, false))
	}
	return results, nil
}

// notRun answers tool calls of a message that was cut short: each gets a
// failed result that says why it did not run, so that the message can be
// stored and replayed, and the model, asked to continue, knows to call
// again.
func notRun(uses []Block, reason StopReason) Message {
	results := Message{Role: RoleUser}
	for _, u := range uses {
		text := fmt.Sprintf("not run: the answer was cut off (stop reason %q) before this tool call was known to be complete; call it again if it is still needed", reason)
		results.Content = append(results.Content, ToolResultBlock(u.ToolUseID, text, true))
	}
	return results
}

func toolNames(uses []Block) []string {
	names := make([]string, len(uses))
	for i, u := range uses {
		names[i] = u.ToolName
	}
	return names
}

// DefaultCompactPrompt asks the provider for a summary that can stand in
// for the conversation so far.
const DefaultCompactPrompt = "Summarise the conversation so far so that it can replace it as context: " +
	"the user's goals, decisions made, facts learned, files and commands involved, and open tasks. " +
	"Answer with the summary only."

// Compact asks the provider to summarise the context and adds the summary
// as a compaction entry, which resets the context later turns send. The
// summary is persisted like any message; earlier entries stay in the log
// (Load returns them; Context starts at the latest summary). instructions
// may be empty (DefaultCompactPrompt).
func (a *Agent) Compact(ctx context.Context, instructions string, recv Receiver) error {
	if a.opts.Provider == nil {
		return errors.New("compact: no provider configured")
	}
	if recv == nil {
		recv = NopReceiver{}
	}
	if instructions == "" {
		instructions = DefaultCompactPrompt
	}
	msgs := append(a.conv.Context(), UserText(instructions))
	reply, err := a.opts.Provider.Complete(ctx, Request{System: a.conv.SystemPrompt(), Messages: msgs}, recv)
	if err != nil {
		return fmt.Errorf("compact: provider: %w", err)
	}
	if reply.StopReason.Kind().CutShort() {
		return fmt.Errorf("compact: %w", &CutShortError{Reason: reply.StopReason, Summary: true})
	}
	summary := Message{
		Role:     RoleUser,
		Content:  []Block{TextBlock("Summary of the conversation so far:\n\n" + reply.Text())},
		Usage:    reply.Usage,
		Metadata: map[string]any{MetadataCompaction: true},
	}
	if err := a.add(ctx, summary); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	recv.MessageAdded(summary)
	return nil
}
