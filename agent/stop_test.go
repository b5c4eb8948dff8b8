package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
)

func TestStopReasonKind(t *testing.T) {
	tests := []struct {
		reason   agent.StopReason
		kind     agent.StopKind
		cutShort bool
	}{
		{"stop", agent.StopComplete, false},
		{"length", agent.StopTruncated, true},
		{"tool_calls", agent.StopToolUse, false},
		{"function_call", agent.StopToolUse, false},
		{"content_filter", agent.StopFiltered, true},
		{"end_turn", agent.StopComplete, false},
		{"stop_sequence", agent.StopComplete, false},
		{"max_tokens", agent.StopTruncated, true},
		{"model_context_window_exceeded", agent.StopTruncated, true},
		{"tool_use", agent.StopToolUse, false},
		{"pause_turn", agent.StopPaused, false},
		{"refusal", agent.StopRefused, true},
		{"", agent.StopUnknown, false},
		{"MAX_TOKENS", agent.StopUnknown, false}, // the wire's words are exact
		{"something_new", agent.StopUnknown, false},
	}
	for _, tt := range tests {
		k := tt.reason.Kind()
		if k != tt.kind || k.CutShort() != tt.cutShort {
			t.Errorf("%q: kind %s (cut short %v), want %s (%v)", tt.reason, k, k.CutShort(), tt.kind, tt.cutShort)
		}
	}
}

// TestCutShortToolCallsNotRun: a tool call in an answer the provider cut
// off is not run (its input may be half of what the model meant); the
// message is stored with results that say so, so that the session stays
// replayable, and the step ends with a CutShortError. Any other stop
// reason runs the tools.
func TestCutShortToolCallsNotRun(t *testing.T) {
	tests := []struct {
		reason agent.StopReason
		run    bool
	}{
		{"tool_use", true},
		{"tool_calls", true},
		{"stop", true}, // some OpenAI-compatible servers say stop after tool calls
		{"", true},     // and some say nothing
		{"pause_turn", true},
		{"max_tokens", false},
		{"length", false},
		{"model_context_window_exceeded", false},
		{"refusal", false},
		{"content_filter", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			rec := newRecorder(t)
			calls := 0
			tools := toolbox{"write": func(context.Context, json.RawMessage) (string, error) { calls++; return "written", nil }}
			cut := toolCall("Writing it.", agent.ToolUseBlock("t1", "write", json.RawMessage(`"{\"path\":\"a.go\",\"text\":\"pack"`)))
			cut.StopReason = tt.reason
			var next agent.Request
			p := &scripted{steps: []step{reply(cut), func(_ context.Context, req agent.Request) (agent.Message, error) {
				next = req
				return agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("done")}, StopReason: "end_turn"}, nil
			}}}
			a := newAgent(t, rec, p, tools)
			if err := a.SubmitUserMessage(t.Context(), "write a.go"); err != nil {
				t.Fatal(err)
			}
			err := a.RunStep(t.Context(), nil)
			stored := load(t, a)
			if tt.run {
				if err != nil || calls != 1 || roles(stored) != "user,calls,results,assistant" {
					t.Fatalf("RunStep = %v, %d calls, stored %s; want the tool run and the step finished", err, calls, roles(stored))
				}
				if stored[1].StopReason != tt.reason || stored[3].StopReason != "end_turn" {
					t.Errorf("stored stop reasons %q, %q", stored[1].StopReason, stored[3].StopReason)
				}
				return
			}
			var cse *agent.CutShortError
			if !errors.As(err, &cse) || cse.Reason != tt.reason || fmt.Sprint(cse.Tools) != "[write]" {
				t.Fatalf("RunStep = %v, want a CutShortError for %q naming write", err, tt.reason)
			}
			if calls != 0 {
				t.Errorf("the cut-off tool call ran %d times", calls)
			}
			if got := roles(stored); got != "user,calls,results" {
				t.Fatalf("stored %s, want user,calls,results", got)
			}
			if got := roles(a.Conversation().Messages); got != "user,calls,results" {
				t.Errorf("conversation %s, want what was stored", got)
			}
			if stored[1].StopReason != tt.reason {
				t.Errorf("stored stop reason %q, want %q", stored[1].StopReason, tt.reason)
			}
			res := stored[2].Content
			if len(res) != 1 || res[0].ToolUseID != "t1" || !res[0].IsError || !strings.Contains(res[0].Text, "not run") || !strings.Contains(res[0].Text, string(tt.reason)) {
				t.Errorf("stored results %+v, want a failed result saying why the call did not run", res)
			}
			// Asked to continue, the model gets its own cut-off call and the
			// answer to it.
			if err := a.SubmitUserMessage(t.Context(), "continue"); err != nil {
				t.Fatal(err)
			}
			if err := a.RunStep(t.Context(), nil); err != nil {
				t.Fatalf("RunStep after the cut: %v", err)
			}
			if got := roles(next.Messages); got != "user,calls,results,user" {
				t.Errorf("next request holds %s", got)
			}
		})
	}
}

// TestTruncatedAnswerEndsStep: an answer without tool calls is stored
// whatever its stop reason; the caller says it was cut off.
func TestTruncatedAnswerEndsStep(t *testing.T) {
	rec := newRecorder(t)
	cut := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{
		{Type: agent.BlockRedactedThinking, Data: "opaque=="}, agent.TextBlock("The first half of"),
	}, StopReason: "max_tokens"}
	p := &scripted{steps: []step{reply(cut)}}
	a := newAgent(t, rec, p, nil)
	if err := a.SubmitUserMessage(t.Context(), "explain"); err != nil {
		t.Fatal(err)
	}
	var added []agent.Message
	if err := a.RunStep(t.Context(), addedRecorder{&added}); err != nil {
		t.Fatalf("RunStep: %v", err)
	}
	stored := load(t, a)
	if len(stored) != 2 || stored[1].StopReason != "max_tokens" || stored[1].Content[0].Data != "opaque==" {
		t.Fatalf("stored %+v", stored)
	}
	if len(added) != 1 || added[0].StopReason.Kind() != agent.StopTruncated {
		t.Errorf("receiver got %+v, want the truncated answer", added)
	}
}

type addedRecorder struct{ added *[]agent.Message }

func (addedRecorder) TextDelta(string)               {}
func (addedRecorder) ThinkingDelta(string)           {}
func (r addedRecorder) MessageAdded(m agent.Message) { *r.added = append(*r.added, m) }

// TestCompactCutShortNotStored: a summary the provider cut off would
// replace the whole context with part of a summary, so it is not stored.
func TestCompactCutShortNotStored(t *testing.T) {
	rec := newRecorder(t)
	p := &scripted{steps: []step{
		reply(agent.AssistantText("hi")),
		reply(agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("The user wants")}, StopReason: "length"}),
	}}
	a := newAgent(t, rec, p, nil)
	if err := a.SubmitUserMessage(t.Context(), "hello"); err != nil {
		t.Fatal(err)
	}
	if err := a.RunStep(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	err := a.Compact(t.Context(), "", nil)
	var cse *agent.CutShortError
	if !errors.As(err, &cse) || !cse.Summary || cse.Reason != "length" {
		t.Fatalf("Compact = %v, want a CutShortError for the summary", err)
	}
	if got := roles(load(t, a)); got != "user,assistant" {
		t.Errorf("stored %s, want no summary", got)
	}
	if a.Conversation().LatestCompaction() != -1 {
		t.Error("the cut-off summary is in the conversation")
	}
}
