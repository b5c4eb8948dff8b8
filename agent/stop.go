package agent

import (
	"fmt"
	"strings"
)

// StopReason is why a provider ended an assistant message, exactly as its
// wire said it: OpenAI's finish_reason ("stop", "length", "tool_calls",
// "content_filter"), Anthropic's stop_reason ("end_turn", "max_tokens",
// "tool_use", "stop_sequence", "pause_turn", "refusal"). It is stored
// verbatim, so that a value panto does not know yet is kept, not lost;
// Kind says what it means.
type StopReason string

// StopKind is what a stop reason means, the same for every provider: the
// agent and the commands branch on it, never on the wire's words.
type StopKind string

const (
	// StopUnknown: no reason was given (an older entry, a server that
	// sends none) or one panto does not know.
	StopUnknown StopKind = "unknown"
	// StopComplete: the model finished its answer.
	StopComplete StopKind = "complete"
	// StopToolUse: the model stopped to have its tool calls run.
	StopToolUse StopKind = "tool_use"
	// StopTruncated: the output token limit (or the context window) cut
	// the answer off; the last block, text or tool call, may be partial.
	StopTruncated StopKind = "truncated"
	// StopRefused: the model declined to go on; what it said so far may
	// end mid-sentence.
	StopRefused StopKind = "refused"
	// StopFiltered: the provider's content filter cut the answer off.
	StopFiltered StopKind = "filtered"
	// StopPaused: the provider paused a long turn; sending the
	// conversation back lets the model resume it.
	StopPaused StopKind = "paused"
)

// stopKinds maps the reasons of every wire panto speaks. The two
// vocabularies do not overlap, so the reason alone says its kind and a
// stored message needs no provider to be understood.
var stopKinds = map[StopReason]StopKind{
	// OpenAI Chat Completions (and the servers that speak it).
	"stop":           StopComplete,
	"length":         StopTruncated,
	"tool_calls":     StopToolUse,
	"function_call":  StopToolUse, // the deprecated single-function form
	"content_filter": StopFiltered,
	// Anthropic Messages.
	"end_turn":                      StopComplete,
	"stop_sequence":                 StopComplete,
	"max_tokens":                    StopTruncated,
	"model_context_window_exceeded": StopTruncated,
	"tool_use":                      StopToolUse,
	"pause_turn":                    StopPaused,
	"refusal":                       StopRefused,
}

// Kind is what the reason means.
func (r StopReason) Kind() StopKind {
	if k, ok := stopKinds[r]; ok {
		return k
	}
	return StopUnknown
}

// CutShort reports whether a message that stopped this way may end in
// the middle of a block: its last text may be partial and, worse, so may
// the input of its last tool call.
func (k StopKind) CutShort() bool {
	return k == StopTruncated || k == StopRefused || k == StopFiltered
}

// CutShortError reports an assistant message the provider cut off where
// the agent needed it whole: its tool calls were not run (RunStep), or
// the summary was not stored (Compact). What the message holds is
// still in the conversation in the first case, so that asking the model
// to continue gives it its own partial answer.
type CutShortError struct {
	Reason StopReason
	// Tools names the tool calls that were not run (RunStep).
	Tools []string
	// Summary is true when the message was a compaction summary.
	Summary bool
}

func (e *CutShortError) Error() string {
	msg := fmt.Sprintf("the provider cut its answer off (%s, stop reason %q)", e.Reason.Kind(), e.Reason)
	switch {
	case len(e.Tools) > 0:
		msg += ": tool calls not run: " + strings.Join(e.Tools, ", ")
	case e.Summary:
		msg += ": the summary was not stored"
	}
	return msg
}
