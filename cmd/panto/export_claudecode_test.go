package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

// claudeCodeVersion is the Claude Code the export is checked against
// (make claude-code fetches it).
const claudeCodeVersion = "2.1.332"

// claudeCode finds the Claude Code binary: PANTO_CLAUDE_CODE, else where
// make claude-code puts it. Its absence fails the test, saying how to
// install it (CI must have it).
func claudeCode(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PANTO_CLAUDE_CODE"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME") // where the Makefile puts it, on every system
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "panto-test", "claude-code-"+claudeCodeVersion, "claude")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Fatalf("Claude Code %s is not installed, and the Claude Code export is checked by resuming it in Claude Code: run make claude-code (it fetches the binary with npm), or set PANTO_CLAUDE_CODE to a claude binary", claudeCodeVersion)
	return ""
}

// TestExportToClaudeCode: a panto session (a tool call, thinking, two
// prompts) exported with --format claude-code is resumed by the real
// Claude Code, which sends the whole conversation to the model, tool
// call and result with their id (the thinking of past turns it leaves
// out, as Anthropic does); panto import
// then brings the turn Claude Code added back as a fork of the session,
// its usage not counted twice, and an export Claude Code added nothing
// to is not imported at all.
func TestExportToClaudeCode(t *testing.T) {
	t.Parallel()
	claude := claudeCode(t)
	srv := fakeprovider.New(t, fakeprovider.Anthropic, anthropicKey,
		fakeprovider.Reply{Thinking: "look at the file", Signature: "sig-panto-1", ToolCalls: []fakeprovider.ToolCall{{ID: "toolu_read1", Name: "read_file", Args: `{"path":"notes.txt"}`}}, InputTokens: 100, OutputTokens: 10},
		fakeprovider.Reply{Text: "The notes say to ship on Friday.", InputTokens: 120, OutputTokens: 8},
		fakeprovider.Reply{Text: "Friday it is.", InputTokens: 140, OutputTokens: 4},
	)
	srv.SetRespond(func(fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Text: "Answered in Claude Code.", InputTokens: 1000, OutputTokens: 50}
	})
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("ship on Friday\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_STATE_HOME=" + filepath.Join(home, "state"), "ANTHROPIC_API_KEY=" + anthropicKey}
	flags := []string{"--api-style", fakeprovider.Anthropic, "--base-url", srv.BaseURL(), "--model", "claude-sonnet-4-5"}
	panto := func(args ...string) result {
		t.Helper()
		r := runPanto(t, work, env, "", args...)
		if r.code != 0 {
			t.Fatalf("panto %q: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	panto(append(flags, "what do my notes say?")...)
	panto(append(append(flags, "-c"), "so, Friday?")...)

	r := panto("export", "--project", ".", "--format", "claude-code")
	ccID := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(ccID) {
		t.Fatalf("export printed %q, not a Claude Code session id; stderr %q", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "claude --resume "+ccID) || !strings.Contains(r.stderr, "6 messages written") {
		t.Errorf("export's stderr does not say what it wrote and how to go on: %q", r.stderr)
	}

	// Claude Code resumes it in the same directory.
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "--resume", ccID, "and in Claude Code?")
	cmd.Dir = work
	cmd.Env = append(env, "PATH="+os.Getenv("PATH"), "ANTHROPIC_BASE_URL="+srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("claude --resume %s: %v: %s %s", ccID, err, out, stderr)
	}
	if !strings.Contains(string(out), "Answered in Claude Code.") {
		t.Errorf("claude printed %q", out)
	}
	var sent []any
	for _, req := range srv.Requests()[3:] {
		if strings.Contains(string(req.Body), "and in Claude Code?") {
			sent, _ = req.JSON()["messages"].([]any)
		}
	}
	if sent == nil {
		t.Fatalf("Claude Code sent no request with its prompt (%d requests after panto's)", len(srv.Requests())-3)
	}
	history, _ := json.Marshal(sent)
	for _, want := range []string{
		`"what do my notes say?"`,
		`"id":"toolu_read1","input":{"path":"notes.txt"},"name":"read_file","type":"tool_use"`,
		`"tool_use_id":"toolu_read1"`, `ship on Friday`,
		`"The notes say to ship on Friday."`, `"so, Friday?"`, `"Friday it is."`,
	} {
		if !strings.Contains(string(history), want) {
			t.Errorf("Claude Code did not send %s to the model; it sent %s", want, history)
		}
	}

	// panto import brings Claude Code's turn back, as a fork.
	r = panto("import")
	if !strings.Contains(r.stdout, "1 new") {
		t.Fatalf("import: %q", r.stdout)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(panto("sessions", "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0]["parent"] != rows[1]["id"] || rows[0]["forked_at"] != float64(6) {
		t.Fatalf("sessions after the import: %v; want the fork of the panto session at message 6", rows)
	}
	show := panto("show", rows[0]["id"].(string)).stdout
	if !strings.Contains(show, "and in Claude Code?") || !strings.Contains(show, "Answered in Claude Code.") || !strings.Contains(show, "forked from "+rows[1]["id"].(string)+" at message 6") {
		t.Errorf("the fork's transcript: %s", show)
	}
	var usage struct {
		Total struct {
			Answers      int   `json:"answers"`
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(panto("usage", "--json").stdout), &usage); err != nil {
		t.Fatal(err)
	}
	if u := usage.Total; u.Answers != 4 || u.InputTokens != 1360 || u.OutputTokens != 72 {
		t.Errorf("usage: %+v; want 4 answers, 1360 input and 72 output tokens (panto's three, Claude Code's one, each once)", u)
	}
	if r := panto("import"); !strings.Contains(r.stdout, "1 unchanged") {
		t.Errorf("import again: %q", r.stdout)
	}
	// Exporting again names the same Claude Code session and leaves it.
	if r := panto("export", rows[1]["id"].(string), "--format", "claude-code"); strings.TrimSpace(r.stdout) != ccID || !strings.Contains(r.stderr, "already exported") || !strings.Contains(r.stderr, "which Claude Code went on with") {
		t.Errorf("export again: %q %q", r.stdout, r.stderr)
	}
	// An export Claude Code did not go on with imports nothing.
	panto(append(append(flags, "-r", rows[1]["id"].(string)), "one more")...)
	panto("export", rows[1]["id"].(string), "--format", "claude-code")
	if r := panto("import"); !strings.Contains(r.stdout, "1 skipped") || !strings.Contains(r.stdout, "1 unchanged") {
		t.Errorf("import of an export Claude Code added nothing to: %q", r.stdout)
	}
}
