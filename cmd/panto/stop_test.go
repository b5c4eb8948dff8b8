package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

func TestStopNoticeSaysWhatToDo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reason agent.StopReason
		want   []string // all in the notice; none: no notice
	}{
		{"length", []string{"cut off at the output token limit (length)", "ask to continue", "--max-tokens"}},
		{"max_tokens", []string{"cut off at the output token limit (max_tokens)", "--max-tokens"}},
		{"model_context_window_exceeded", []string{"context window", "/compact"}},
		{"content_filter", []string{"content filter", "(content_filter)", "rephrase"}},
		{"refusal", []string{"refused", "(refusal)", "rephrase"}},
		{"pause_turn", []string{"paused", `"continue"`}},
		{"stop", nil},
		{"end_turn", nil},
		{"tool_use", nil},
		{"stop_sequence", nil},
		{"", nil},
		{"a_future_reason", nil},
	}
	for _, tt := range tests {
		got := stopNotice(tt.reason, "")
		if (got != "") != (tt.want != nil) {
			t.Errorf("%q: notice %q", tt.reason, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: notice %q does not say %q", tt.reason, got, w)
			}
		}
	}
	got := cutShortNotice(&agent.CutShortError{Reason: "max_tokens", Tools: []string{"run_shell", "read_file"}})
	if !strings.Contains(got, "no tool was run (run_shell, read_file)") || !strings.Contains(got, "--max-tokens") {
		t.Errorf("cut-off tool calls: %q", got)
	}
}

// truncation is each style's word for an answer cut off by max tokens.
func (pc providerCase) truncation() string {
	if pc.style == fakeprovider.OpenAI {
		return "length"
	}
	return "max_tokens"
}

// TestStopReasonsOneShot: every stop reason of each wire is stored as it
// was sent, and the ones that are not a whole answer are said after it,
// on stderr, so that stdout still carries the answer alone.
func TestStopReasonsOneShot(t *testing.T) {
	t.Parallel()
	reasons := map[string][]struct{ reason, notice string }{
		fakeprovider.OpenAI: {{"stop", ""}, {"length", "output token limit (length)"}, {"content_filter", "content filter cut the answer off (content_filter)"}},
		fakeprovider.Anthropic: {{"end_turn", ""}, {"stop_sequence", ""}, {"max_tokens", "output token limit (max_tokens)"},
			{"refusal", "refused to go on (refusal)"}, {"pause_turn", "paused this long turn (pause_turn)"}},
	}
	for _, pc := range providerCases {
		for _, tt := range reasons[pc.style] {
			t.Run(pc.style+"/"+tt.reason, func(t *testing.T) {
				b := fsBackend(t)
				srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "The answer so fa", StopReason: tt.reason})
				r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "tell me")...)
				if r.code != 0 || r.stdout != "The answer so fa\n" {
					t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
				}
				notices := strings.Count(r.stderr, "panto: ")
				if tt.notice == "" && notices != 0 || tt.notice != "" && (notices != 1 || !strings.Contains(r.stderr, tt.notice)) {
					t.Errorf("stderr %q, want the notice %q once", r.stderr, tt.notice)
				}
				_, conv := loadOnly(t, b)
				if got := conv.Messages[1].StopReason; got != agent.StopReason(tt.reason) {
					t.Errorf("stored stop reason %q, want %q", got, tt.reason)
				}
			})
		}
	}
}

// TestTruncatedAnswerShownAndResumed: a truncated answer (after redacted
// thinking, for Anthropic) is stored in every store, shown as truncated
// by show and show --json, and a resumed session sends it back, the
// redacted thinking verbatim.
func TestTruncatedAnswerShownAndResumed(t *testing.T) {
	t.Parallel()
	const redacted = "EmwKAhgBEgy3va+/3Q4lYz0K=="
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		srv := fakeprovider.New(t, pc.style, pc.key,
			fakeprovider.Reply{Thinking: "plan", Signature: "sig", RedactedThinking: redacted, Text: "Part one of", StopReason: pc.truncation()},
			fakeprovider.Reply{Text: " part two."},
		)
		work := t.TempDir()
		r := runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "--reasoning", "low", "write it")...)
		m := sessionLine.FindStringSubmatch(r.stderr)
		if r.code != 0 || m == nil {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "output token limit ("+pc.truncation()+")") {
			t.Errorf("stderr %q does not say the answer was cut off", r.stderr)
		}
		id := m[1]

		r = runPanto(t, work, pc.env(b), "", "show", id)
		wantShow := []string{"── #2 assistant · " + pc.truncation() + " (truncated)\n"}
		if pc.style == fakeprovider.Anthropic {
			wantShow = append(wantShow, "[redacted thinking]")
		}
		for _, w := range wantShow {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("show lacks %q:\n%s", w, r.stdout)
			}
		}
		r = runPanto(t, work, pc.env(b), "", "show", "--json", id)
		var out struct {
			Messages []map[string]json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Messages) != 2 {
			t.Fatalf("show --json: %v: %s", err, r.stdout)
		}
		asst := out.Messages[1]
		if string(asst["stop_reason"]) != `"`+pc.truncation()+`"` || string(asst["stop"]) != `"truncated"` {
			t.Errorf("show --json: stop_reason %s, stop %s", asst["stop_reason"], asst["stop"])
		}
		if _, ok := out.Messages[0]["stop_reason"]; ok {
			t.Errorf("show --json: the user message has a stop reason")
		}

		r = runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "--reasoning", "low", "-r", id[:8], "continue")...)
		if r.code != 0 || strings.Contains(r.stderr, "cut off") {
			t.Fatalf("resumed: exit %d: %s", r.code, r.stderr)
		}
		next := srv.Requests()[1]
		if !strings.Contains(string(next.Body), "Part one of") {
			t.Errorf("the resumed request lacks the truncated answer: %s", next.Body)
		}
		if pc.style == fakeprovider.Anthropic {
			msgs := next.JSON()["messages"].([]any)
			content := msgs[1].(map[string]any)["content"].([]any)
			rt := content[1].(map[string]any)
			if rt["type"] != "redacted_thinking" || rt["data"] != redacted {
				t.Errorf("the resumed request sends back %v, want the redacted thinking verbatim", content)
			}
		}
		_, conv := loadOnly(t, b)
		if got := roles(conv.Messages); got != "user,assistant,user,assistant" {
			t.Fatalf("stored %s", got)
		}
		if conv.Messages[1].StopReason != agent.StopReason(pc.truncation()) || conv.Messages[3].StopReason == "" {
			t.Errorf("stored stop reasons %q, %q", conv.Messages[1].StopReason, conv.Messages[3].StopReason)
		}
	})
}

// TestCutOffToolCallNotRun: a tool call in an answer cut off by the token
// limit is not run (its input may be half a command); panto says so and
// fails, the session keeps the call with a result that says it did not
// run, and asked to continue the model sees that result.
func TestCutOffToolCallNotRun(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			b := fsBackend(t)
			work := t.TempDir()
			srv := fakeprovider.New(t, pc.style, pc.key,
				fakeprovider.Reply{Text: "Creating it.", StopReason: pc.truncation(), ToolCalls: []fakeprovider.ToolCall{{ID: "t1", Name: "run_shell", Args: `{"command":"touch ran.txt"}`}}},
				fakeprovider.Reply{Text: "Trying again."},
			)
			r := runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "--allow-shell", "make ran.txt")...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1; stderr %s", r.code, r.stderr)
			}
			for _, w := range []string{"output token limit (" + pc.truncation() + ")", "no tool was run (run_shell)", "--max-tokens", "continue with: panto -r "} {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, r.stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(work, "ran.txt")); err == nil {
				t.Fatal("the cut-off tool call ran")
			}
			info, conv := loadOnly(t, b)
			if got := roles(conv.Messages); got != "user,assistant,tool" {
				t.Fatalf("stored %s, want the call and its not-run result", got)
			}
			res := conv.Messages[2].Content[0]
			if !res.IsError || !strings.Contains(res.Text, "not run") {
				t.Errorf("stored result %+v", res)
			}
			r = runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "-r", info.ID, "continue")...)
			if r.code != 0 {
				t.Fatalf("continue: exit %d: %s", r.code, r.stderr)
			}
			if body := string(srv.Requests()[1].Body); !strings.Contains(body, "not run: the answer was cut off") {
				t.Errorf("the next request lacks the not-run result: %s", body)
			}
		})
	}
}

// TestInteractiveStopNotices: in the interactive mode a truncated answer
// gets its notice, a cut-off tool call and a cut-off summary their
// errors, and the session goes on.
func TestInteractiveStopNotices(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			b := fsBackend(t)
			work := t.TempDir()
			srv := fakeprovider.New(t, pc.style, pc.key,
				fakeprovider.Reply{Text: "Half an ans", StopReason: pc.truncation()},
				fakeprovider.Reply{StopReason: pc.truncation(), ToolCalls: []fakeprovider.ToolCall{{ID: "t1", Name: "run_shell", Args: `{"command":"touch ran.txt"}`}}},
				fakeprovider.Reply{Text: "Fine."},
				fakeprovider.Reply{Text: "The user asked", StopReason: pc.truncation()},
			)
			r := runPanto(t, work, pc.env(b), "explain\nmake ran.txt\ncontinue\n/compact\n", append(pc.flags(srv), "--allow-shell", "-i")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "Half an ans") || !strings.Contains(r.stdout, "Fine.") {
				t.Errorf("stdout %q", r.stdout)
			}
			if !strings.Contains(r.stderr, "panto: the answer was cut off at the output token limit ("+pc.truncation()+")") {
				t.Errorf("stderr lacks the truncation notice: %s", r.stderr)
			}
			if !strings.Contains(r.stderr, "error: the answer was cut off") || !strings.Contains(r.stderr, "no tool was run (run_shell)") {
				t.Errorf("stderr lacks the not-run error: %s", r.stderr)
			}
			if _, err := os.Stat(filepath.Join(work, "ran.txt")); err == nil {
				t.Fatal("the cut-off tool call ran")
			}
			if !strings.Contains(r.stderr, "error: the answer was cut off at the output token limit ("+pc.truncation()+"); the summary was not stored") || strings.Contains(r.stdout, "compacted") {
				t.Errorf("a cut-off summary: stdout %q, stderr %q", r.stdout, r.stderr)
			}
			if _, conv := loadOnly(t, b); conv.LatestCompaction() != -1 {
				t.Error("the cut-off summary was stored")
			}
		})
	}
}

// TestMaxTokensFlag: the limit the truncation notice tells the user to
// raise is the one sent, in each wire's own field.
func TestMaxTokensFlag(t *testing.T) {
	t.Parallel()
	field := map[string]string{fakeprovider.OpenAI: "max_completion_tokens", fakeprovider.Anthropic: "max_tokens"}
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			b := fsBackend(t)
			srv := fakeprovider.New(t, pc.style, pc.key)
			r := runPanto(t, t.TempDir(), append(pc.env(b), "PANTO_MAX_TOKENS=4321"), "", append(pc.flags(srv), "hi")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			r = runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "--max-tokens", "1234", "hi")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			reqs := srv.Requests()
			if got := reqs[0].JSON()[field[pc.style]]; got != float64(4321) {
				t.Errorf("PANTO_MAX_TOKENS: %s = %v", field[pc.style], got)
			}
			if got := reqs[1].JSON()[field[pc.style]]; got != float64(1234) {
				t.Errorf("--max-tokens: %s = %v", field[pc.style], got)
			}
			r = runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "--max-tokens", "-5", "hi")...)
			if r.code == 0 || !strings.Contains(r.stderr, "--max-tokens -5") {
				t.Errorf("negative --max-tokens: exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}
