package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

// The agents an export is checked against, as make claude-code and make
// pi install them.
const (
	claudeCodeVersion = "2.1.332"
	codexVersion      = "0.171.0"
	piVersion         = "0.73.1"
)

// testTool finds an agent the tests run: the variable env names, else
// rel under panto-test in the user's cache, where the Makefile puts it.
// Its absence fails the test, saying how to install it (CI must have it).
func testTool(t *testing.T, what, env, rel, target string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME") // as the Makefile has it, on every system
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "panto-test", rel)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Fatalf("%s is not installed, and the export for it is checked by going on with it there: run make %s (it installs it with npm), or set %s to its binary", what, target, env)
	return ""
}

// agentCase is an agent that goes on with an exported session: how to
// run it, one prompt, on session id, against a fake server of its API
// that answers with answer.
type agentCase struct {
	format string
	// command is the command line and the environment beside HOME and
	// PATH, given the home the test runs in, and the server it asks.
	command func(t *testing.T, answer fakeprovider.Reply, home, id, prompt string) (argv, env []string, srv *fakeprovider.Server)
	// sent is what the agent sent of the conversation, as JSON; want
	// what it must hold of panto's session.
	sent func(body map[string]any) any
	want []string
}

// anthropicSent is the conversation of a Messages request, and
// anthropicWant what it holds of the session TestExportToAgents exports.
var (
	anthropicSent = func(body map[string]any) any { return body["messages"] }
	anthropicWant = []string{
		`"what do my notes say?"`,
		`"id":"toolu_read1","input":{"path":"notes.txt"},"name":"read_file","type":"tool_use"`,
		`"tool_use_id":"toolu_read1"`, `ship on Friday`,
		`"The notes say to ship on Friday."`, `"so, Friday?"`, `"Friday it is."`,
	}
)

// fakeAnthropic is a fake Anthropic server that answers every request
// with answer.
func fakeAnthropic(t *testing.T, answer fakeprovider.Reply) *fakeprovider.Server {
	srv := fakeprovider.New(t, fakeprovider.Anthropic, anthropicKey)
	srv.SetRespond(func(fakeprovider.Request) fakeprovider.Reply { return answer })
	return srv
}

var agentCases = []agentCase{{
	format: "claude-code",
	command: func(t *testing.T, answer fakeprovider.Reply, home, id, prompt string) (argv, env []string, srv *fakeprovider.Server) {
		claude := testTool(t, "Claude Code "+claudeCodeVersion, "PANTO_CLAUDE_CODE", filepath.Join("claude-code-"+claudeCodeVersion, "claude"), "claude-code")
		srv = fakeAnthropic(t, answer)
		return []string{claude, "-p", "--resume", id, prompt},
			[]string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=" + anthropicKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}, srv
	},
	sent: anthropicSent, want: anthropicWant,
}, {
	format: "codex",
	command: func(t *testing.T, answer fakeprovider.Reply, home, id, prompt string) (argv, env []string, srv *fakeprovider.Server) {
		codex := testTool(t, "Codex "+codexVersion, "PANTO_CODEX", filepath.Join("codex-"+codexVersion, "codex"), "codex")
		srv = fakeprovider.New(t, fakeprovider.Responses, openaiKey)
		srv.SetRespond(func(fakeprovider.Request) fakeprovider.Reply { return answer })
		// A provider of Codex's own config.toml, on the fake server.
		dir := filepath.Join(home, ".codex")
		config := fmt.Sprintf("model = \"gpt-5\"\nmodel_provider = \"fake\"\n[model_providers.fake]\nname = \"fake\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"FAKE_OPENAI_KEY\"\n", srv.BaseURL())
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{codex, "exec", "--skip-git-repo-check", "resume", id, prompt}, []string{"CODEX_HOME=" + dir, "FAKE_OPENAI_KEY=" + openaiKey}, srv
	},
	sent: func(body map[string]any) any { return body["input"] },
	want: []string{
		`"what do my notes say?"`,
		`"arguments":"{\"path\":\"notes.txt\"}","call_id":"toolu_read1","name":"read_file","type":"function_call"`,
		`"call_id":"toolu_read1","output":"ship on Friday\n","type":"function_call_output"`,
		`"The notes say to ship on Friday."`, `"so, Friday?"`, `"Friday it is."`,
	},
}, {
	format: "pi",
	command: func(t *testing.T, answer fakeprovider.Reply, home, id, prompt string) (argv, env []string, srv *fakeprovider.Server) {
		pi := testTool(t, "pi "+piVersion, "PANTO_PI", filepath.Join("pi-"+piVersion, "node_modules", ".bin", "pi"), "pi")
		srv = fakeAnthropic(t, answer)
		// A provider of pi's own models.json, on the fake server.
		dir := filepath.Join(home, ".pi", "agent")
		models := fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":"anthropic-messages","apiKey":%q,"models":[{"id":"claude-sonnet-4-5"}]}}}`, srv.URL, anthropicKey)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(models), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{pi, "-p", "--provider", "fake", "--model", "claude-sonnet-4-5", "--session", id, prompt}, nil, srv
	},
	sent: anthropicSent, want: anthropicWant,
}}

// TestExportToAgents: a panto session (a tool call, thinking, two
// prompts) exported with --format claude-code or pi is taken up by the
// real agent, which sends the whole conversation to the model, tool call
// and result with their id (the thinking of past turns they leave out,
// as Anthropic does); panto import then brings the turn the agent added
// back as a fork of the session, its usage not counted twice, and an
// export the agent added nothing to is not imported at all.
func TestExportToAgents(t *testing.T) {
	t.Parallel()
	for _, ac := range agentCases {
		t.Run(ac.format, func(t *testing.T) {
			t.Parallel()
			goOnInAgent(t, ac)
		})
	}
}

func goOnInAgent(t *testing.T, ac agentCase) {
	srv := fakeprovider.New(t, fakeprovider.Anthropic, anthropicKey,
		fakeprovider.Reply{Thinking: "look at the file", Signature: "sig-panto-1", ToolCalls: []fakeprovider.ToolCall{{ID: "toolu_read1", Name: "read_file", Args: `{"path":"notes.txt"}`}}, InputTokens: 100, OutputTokens: 10},
		fakeprovider.Reply{Text: "The notes say to ship on Friday.", InputTokens: 120, OutputTokens: 8},
		fakeprovider.Reply{Text: "Friday it is.", InputTokens: 140, OutputTokens: 4},
	)
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

	r := panto("export", "--project", ".", "--format", ac.format)
	id := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("export printed %q, not a session id; stderr %q", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, " "+id+" (in "+work+")") || !strings.Contains(r.stderr, "6 messages written") {
		t.Errorf("export's stderr does not say what it wrote and how to go on: %q", r.stderr)
	}

	// The agent goes on with it in the same directory.
	history := goOn(t, ac, work, home, id)
	for _, want := range ac.want {
		if !strings.Contains(string(history), want) {
			t.Errorf("the agent did not send %s to the model; it sent %s", want, history)
		}
	}

	// panto import brings the agent's turn back, as a fork.
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
	if !strings.Contains(show, "and in the other agent?") || !strings.Contains(show, "Answered by the other agent.") || !strings.Contains(show, "forked from "+rows[1]["id"].(string)+" at message 6") {
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
		t.Errorf("usage: %+v; want 4 answers, 1360 input and 72 output tokens (panto's three, the agent's one, each once)", u)
	}
	if r := panto("import"); !strings.Contains(r.stdout, "1 unchanged") {
		t.Errorf("import again: %q", r.stdout)
	}
	// Exporting again names the same session and leaves it.
	if r := panto("export", rows[1]["id"].(string), "--format", ac.format); strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "already exported") || !strings.Contains(r.stderr, "went on with (panto import brings that back") {
		t.Errorf("export again: %q %q", r.stdout, r.stderr)
	}
	// An export the agent did not go on with imports nothing.
	panto(append(append(flags, "-r", rows[1]["id"].(string)), "one more")...)
	panto("export", rows[1]["id"].(string), "--format", ac.format)
	if r := panto("import"); !strings.Contains(r.stdout, "1 skipped") || !strings.Contains(r.stdout, "1 unchanged") {
		t.Errorf("import of an export the agent added nothing to: %q", r.stdout)
	}
}

// goOn runs the agent of ac in work, on exported session id, with one
// prompt, and returns the conversation it sent the model with it, as
// JSON.
func goOn(t *testing.T, ac agentCase, work, home, id string) string {
	t.Helper()
	argv, agentEnv, agentSrv := ac.command(t, fakeprovider.Reply{Text: "Answered by the other agent.", InputTokens: 1000, OutputTokens: 50}, home, id, "and in the other agent?")
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = work
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}, agentEnv...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s: %v: %s %s", cmd.Args, err, out, stderr)
	}
	if !strings.Contains(string(out), "Answered by the other agent.") {
		t.Errorf("the agent printed %q", out)
	}
	var sent any
	for _, req := range agentSrv.Requests() {
		if strings.Contains(string(req.Body), "and in the other agent?") {
			sent = ac.sent(req.JSON())
		}
	}
	if sent == nil {
		t.Fatalf("the agent sent no request with its prompt (%d requests)", len(agentSrv.Requests()))
	}
	history, _ := json.Marshal(sent)
	return string(history)
}

// TestExportCompactedToAgents: a session compacted in panto (/compact)
// goes on in the other agent as it would in panto: the model is sent the
// summary and what followed it, not the turns the summary replaced.
func TestExportCompactedToAgents(t *testing.T) {
	t.Parallel()
	for _, ac := range agentCases {
		t.Run(ac.format, func(t *testing.T) {
			t.Parallel()
			srv := fakeprovider.New(t, fakeprovider.Anthropic, anthropicKey,
				fakeprovider.Reply{Text: "Paris is the capital."},
				fakeprovider.Reply{Text: "User asked about the capital of France: Paris."},
				fakeprovider.Reply{Text: "About 2 million people."},
			)
			work := t.TempDir()
			home := filepath.Join(t.TempDir(), "home")
			env := []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_STATE_HOME=" + filepath.Join(home, "state"), "ANTHROPIC_API_KEY=" + anthropicKey}
			flags := []string{"--api-style", fakeprovider.Anthropic, "--base-url", srv.BaseURL(), "--model", "claude-sonnet-4-5", "-i"}
			if r := runPanto(t, work, env, "what is the capital of France?\n/compact\nhow many live there?\n/quit\n", flags...); r.code != 0 {
				t.Fatalf("panto: exit %d: %s", r.code, r.stderr)
			}
			r := runPanto(t, work, env, "", "export", "--project", ".", "--format", ac.format)
			if r.code != 0 {
				t.Fatalf("export: exit %d: %s", r.code, r.stderr)
			}
			history := goOn(t, ac, work, home, strings.TrimSpace(r.stdout))
			for _, want := range []string{"User asked about the capital of France: Paris.", "how many live there?", "About 2 million people."} {
				if !strings.Contains(history, want) {
					t.Errorf("the agent did not send %q to the model; it sent %s", want, history)
				}
			}
			for _, gone := range []string{"what is the capital of France?", "Paris is the capital."} {
				if strings.Contains(history, gone) {
					t.Errorf("the agent sent %q, which the compaction summary replaced; it sent %s", gone, history)
				}
			}
		})
	}
}
