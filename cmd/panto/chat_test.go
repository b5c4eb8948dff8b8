package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/store"
)

var sessionLine = regexp.MustCompile(`session ([0-9a-f]{32}) \(resume: panto -r ([0-9a-f]{8})\)`)

func TestOneShot(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Thinking: "hmm", Signature: "sig", Text: "Hello from the fake model.", InputTokens: 11, OutputTokens: 5})
		r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "--system", "be terse", "--reasoning", "low", "say hello")...)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
		if r.stdout != "Hello from the fake model.\n" {
			t.Errorf("stdout = %q", r.stdout)
		}
		m := sessionLine.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("stderr %q does not name the session", r.stderr)
		}
		info, conv := loadOnly(t, b)
		if info.ID != m[1] {
			t.Errorf("stored session %s, printed %s", info.ID, m[1])
		}
		if got := roles(conv.Messages); got != "system,user,assistant" {
			t.Fatalf("stored roles %s", got)
		}
		if conv.SystemPrompt() != "be terse" || conv.Messages[1].Text() != "say hello" || conv.Messages[2].Text() != "Hello from the fake model." {
			t.Errorf("stored %+v", conv.Messages)
		}
		asst := conv.Messages[2]
		if asst.Usage == nil || asst.Usage.InputTokens != 11 || asst.Usage.OutputTokens != 5 {
			t.Errorf("usage = %+v", asst.Usage)
		}
		if pc.style == fakeprovider.Anthropic && (asst.Content[0].Type != agent.BlockThinking || asst.Content[0].Signature != "sig") {
			t.Errorf("thinking not stored with its signature: %+v", asst.Content)
		}
		want := agent.SessionInfo{APIStyle: agent.APIStyle(pc.style), BaseURL: srv.BaseURL(), Model: "fake-model", Reasoning: agent.ReasoningLow}
		if info.APIStyle != want.APIStyle || info.BaseURL != want.BaseURL || info.Model != want.Model || info.Reasoning != want.Reasoning {
			t.Errorf("identity = %s %s %s %s, want %s %s %s %s", info.APIStyle, info.BaseURL, info.Model, info.Reasoning, want.APIStyle, want.BaseURL, want.Model, want.Reasoning)
		}
		reqs := srv.Requests()
		if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "be terse") {
			t.Errorf("requests: %d, first %s", len(reqs), reqs[0].Body)
		}
		body := reqs[0].JSON()
		if pc.style == fakeprovider.OpenAI && body["reasoning_effort"] != "low" {
			t.Errorf("reasoning_effort = %v", body["reasoning_effort"])
		}
		if th, _ := body["thinking"].(map[string]any); pc.style == fakeprovider.Anthropic && th["type"] != "enabled" {
			t.Errorf("thinking = %v", body["thinking"])
		}
		checkNoKey(t, b, pc.key)
	})
}

func TestPromptFromStdin(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	r := runPanto(t, t.TempDir(), pc.env(b), "line one\nline two\n", append(pc.flags(srv), "review this")...)
	if r.code != 0 || r.stdout != "reply 1\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if got := srv.Requests()[0].LastUserText(); got != "review this\n\nline one\nline two" {
		t.Errorf("prompt sent = %q", got)
	}
	r = runPanto(t, t.TempDir(), pc.env(b), "", pc.flags(srv)...)
	if r.code == 0 || !strings.Contains(r.stderr, "no prompt") {
		t.Errorf("empty prompt: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("the secret word is pumpkin\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		srv := fakeprovider.New(t, pc.style, pc.key,
			fakeprovider.Reply{Text: "Let me look.", ToolCalls: []fakeprovider.ToolCall{{ID: "call_1", Name: "read_file", Args: `{"path":"notes.txt"}`}}},
			fakeprovider.Reply{Text: "The word is pumpkin."},
		)
		r := runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "what is the secret word in notes.txt?")...)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "The word is pumpkin.") || !strings.Contains(r.stderr, "→ read_file") {
			t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests", len(reqs))
		}
		if !strings.Contains(string(reqs[0].Body), `"read_file"`) || strings.Contains(string(reqs[0].Body), `"run_shell"`) {
			t.Errorf("tools offered: %s", reqs[0].Body)
		}
		if !strings.Contains(string(reqs[1].Body), "the secret word is pumpkin") {
			t.Errorf("tool result not sent back: %s", reqs[1].Body)
		}
		_, conv := loadOnly(t, b)
		if got := roles(conv.Messages); got != "user,assistant,tool,assistant" {
			t.Fatalf("stored roles %s", got)
		}
		use := conv.Messages[1].ToolUses()
		res := conv.Messages[2].Content[0]
		if len(use) != 1 || use[0].ToolName != "read_file" || res.ToolUseID != use[0].ToolUseID || res.Text != "the secret word is pumpkin\n" {
			t.Errorf("tool use %+v, result %+v", use, res)
		}
		checkNoKey(t, b, pc.key)
	})
}

func TestResume(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		srv := fakeprovider.New(t, pc.style, pc.key)
		dir := t.TempDir()
		first := runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), "first prompt")...)
		m := sessionLine.FindStringSubmatch(first.stderr)
		if first.code != 0 || m == nil {
			t.Fatalf("first: exit %d, stderr %s", first.code, first.stderr)
		}
		id, prefix := m[1], m[2]
		// -c continues the latest session, with the endpoint it used.
		r := runPanto(t, dir, pc.env(b), "", "-c", "second prompt")
		if r.code != 0 || !strings.Contains(r.stderr, id) {
			t.Fatalf("-c: exit %d, stderr %s", r.code, r.stderr)
		}
		body := string(srv.Requests()[1].Body)
		if !strings.Contains(body, "first prompt") || !strings.Contains(body, "reply 1") || !strings.Contains(body, "second prompt") {
			t.Errorf("-c did not send the history: %s", body)
		}
		// Another session becomes the latest; -r PREFIX goes back.
		other := runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), "unrelated")...)
		if other.code != 0 || strings.Contains(other.stderr, id) {
			t.Fatalf("other: exit %d, stderr %s", other.code, other.stderr)
		}
		r = runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), "-r", prefix, "third prompt")...)
		if r.code != 0 || !strings.Contains(r.stderr, id) {
			t.Fatalf("-r: exit %d, stderr %s", r.code, r.stderr)
		}
		body = string(srv.Requests()[3].Body)
		if !strings.Contains(body, "second prompt") || strings.Contains(body, "unrelated") {
			t.Errorf("-r sent the wrong history: %s", body)
		}
		st := b.open(t)
		conv, err := st.Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := roles(conv.Messages); got != "user,assistant,user,assistant,user,assistant" {
			t.Errorf("resumed session roles %s", got)
		}
		r = runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), "-r", "ffffffffffffffff", "x")...)
		if r.code == 0 || !strings.Contains(r.stderr, "session not found") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("unknown id: exit %d, stderr %q", r.code, r.stderr)
		}
		checkNoKey(t, b, pc.key)
	})
}

func TestProviderErrors(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		tests := []struct {
			name   string
			status int
			key    string
			want   string
		}{
			{"401", 0, "sk-wrong-key-0000", "401 Unauthorized"},
			{"429", http.StatusTooManyRequests, pc.key, "429 Too Many Requests"},
			{"500", http.StatusInternalServerError, pc.key, "500 Internal Server Error"},
			{"unreachable", -1, pc.key, "cannot reach the provider"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				srv := fakeprovider.New(t, pc.style, pc.key)
				srv.SetRespond(func(fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Status: tt.status} })
				flags := pc.flags(srv)
				if tt.status == -1 {
					srv.Close()
				}
				env := append(pc.env(b), pc.keyVar+"="+tt.key)
				prompt := "prompt for " + tt.name
				r := runPanto(t, t.TempDir(), env, "", append(flags, prompt)...)
				line := strings.TrimSuffix(r.stderr, "\n")
				if r.code == 0 || strings.Contains(line, "\n") || !strings.HasPrefix(line, "panto: provider "+srv.BaseURL()) || !strings.Contains(line, tt.want) {
					t.Errorf("exit %d, stderr %q: want one line saying %q", r.code, r.stderr, tt.want)
				}
				if strings.Contains(r.stderr, tt.key) || r.stdout != "" {
					t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
				}
				if !strings.Contains(line, "retry with: panto -r ") {
					t.Errorf("stderr %q does not say how to retry", line)
				}
				found := false
				list, err := b.open(t).List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range list {
					found = found || s.LastUserMessage == prompt
				}
				if !found {
					t.Errorf("prompt %q not persisted", prompt)
				}
			})
		}
		checkNoKey(t, b, pc.key, "sk-wrong-key-0000")
	})
}

func TestMissingKey(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			r := runPanto(t, t.TempDir(), []string{"PANTO_STORE=" + b.spec}, "", "--api-style", pc.style, "hello there")
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, "PANTO_API_KEY or "+pc.keyVar) {
				t.Errorf("exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
	list, err := b.open(t).List(context.Background())
	if err != nil || len(list) != 2 || list[0].LastUserMessage != "hello there" {
		t.Errorf("prompts without a key not kept: %+v, %v", list, err)
	}
	// A custom base URL (a local server) needs no key.
	srv := fakeprovider.New(t, fakeprovider.OpenAI, "")
	r := runPanto(t, t.TempDir(), []string{"PANTO_STORE=" + b.spec}, "", "--base-url", srv.BaseURL(), "hi")
	if r.code != 0 || r.stdout != "reply 1\n" {
		t.Errorf("keyless local server: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization %q sent without a key", h)
	}
}

func TestNoSession(t *testing.T) {
	t.Parallel()
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	home := t.TempDir()
	r := runPanto(t, t.TempDir(), []string{pc.keyVar + "=" + pc.key, "XDG_DATA_HOME=" + home}, "", append(pc.flags(srv), "--no-session", "hi")...)
	if r.code != 0 || r.stdout != "reply 1\n" || strings.Contains(r.stderr, "session") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("--no-session wrote %v", entries)
	}
}

// TestOneShotInterrupt: Ctrl-C during a one-shot reply ends panto with
// one line; the prompt stays stored.
func TestOneShotInterrupt(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	srv.SetBefore(func(r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	cmd := pantoCmd(t, t.TempDir(), pc.env(b), append(pc.flags(srv), "a long question")...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, cmdtest.Stderr(t, "panto", &stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the request never arrived")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	line := strings.TrimSuffix(stderr.String(), "\n")
	if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.HasPrefix(line, "panto: cancelled") || strings.Contains(line, "\n") {
		t.Errorf("exit %v, stderr %q", err, stderr.String())
	}
	_, conv := loadOnly(t, b)
	if roles(conv.Messages) != "user" || conv.Messages[0].Text() != "a long question" {
		t.Errorf("stored %+v", conv.Messages)
	}
}

// TestBrokenStreamKeepsTheText: a reply whose stream breaks mid-answer
// (the connection dropped) fails the step in one line, and the text that
// had streamed, which the user read, is stored after the prompt, marked
// interrupted; the next turn sends it as the assistant's.
func TestBrokenStreamKeepsTheText(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			t.Parallel()
			b := fsBackend(t)
			srv := fakeprovider.New(t, pc.style, pc.key,
				fakeprovider.Reply{Text: "The first half of the answer", Break: true},
				fakeprovider.Reply{Text: "the rest"})
			dir := t.TempDir()
			r := runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), "a long question")...)
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code != 1 || !strings.HasPrefix(line, "panto: provider ") || !strings.Contains(line, "your prompt and the answer so far are saved in session ") || !strings.Contains(line, "closed in the middle of the answer") || strings.Contains(line, "\n") {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "The first half of the answer") {
				t.Errorf("stdout %q", r.stdout)
			}
			info, conv := loadOnly(t, b)
			if roles(conv.Messages) != "user,assistant" || conv.Messages[1].Text() != "The first half of the answer" {
				t.Fatalf("stored %s: %+v", roles(conv.Messages), conv.Messages)
			}
			if why, ok := conv.Messages[1].Interrupted(); !ok || why == "" || conv.Messages[1].StopReason != "" {
				t.Errorf("stored answer not marked interrupted: %+v", conv.Messages[1])
			}
			show := runPanto(t, dir, b.storeEnv(), "", "show", info.ID)
			if !strings.Contains(show.stdout, "── #2 assistant · interrupted (") {
				t.Errorf("show:\n%s", show.stdout)
			}
			r = runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), "-c", "go on")...)
			if r.code != 0 {
				t.Fatalf("-c: exit %d, %s", r.code, r.stderr)
			}
			if sent := string(srv.Requests()[1].Body); !strings.Contains(sent, "The first half of the answer") {
				t.Errorf("the next turn did not send the stored text: %s", sent)
			}
		})
	}
}

// TestProviderSilent: a provider that accepts the request and sends
// nothing fails the step after --provider-timeout (PANTO_PROVIDER_TIMEOUT)
// in one line that says so, the prompt stored; it waited for ever. A
// timeout that is not positive is a usage error.
func TestProviderSilent(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			t.Parallel()
			b := fsBackend(t)
			srv := fakeprovider.New(t, pc.style, pc.key)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the server's Close
			srv.SetBefore(func(r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			})
			env := append(pc.env(b), "PANTO_PROVIDER_TIMEOUT=1s")
			start := time.Now()
			r := runPanto(t, t.TempDir(), env, "", append(pc.flags(srv), "a question")...)
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code != 1 || !strings.Contains(line, ": no byte received for 1s: it accepted the request and went silent") || !strings.Contains(line, "your prompt is saved") || strings.Contains(line, "\n") {
				t.Fatalf("exit %d after %s, stderr %q", r.code, time.Since(start), r.stderr)
			}
			if _, conv := loadOnly(t, b); roles(conv.Messages) != "user" {
				t.Errorf("stored %s", roles(conv.Messages))
			}
		})
	}
	r := runPanto(t, t.TempDir(), []string{"PANTO_STORE=none"}, "", "--provider-timeout", "0", "hi")
	if r.code == 0 || !strings.Contains(r.stderr, "--provider-timeout 0s: want a positive duration") {
		t.Errorf("--provider-timeout 0: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestOneShotStdoutClosed: a one-shot answer piped to a reader that stops
// early (panto "..." | head -1) is stored whole: the closed pipe ends the
// printing, not panto.
func TestOneShotStdoutClosed(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key,
		fakeprovider.Reply{Text: "first line\n", ToolCalls: []fakeprovider.ToolCall{{ID: "call_1", Name: "list_dir", Args: `{"path":"."}`}}},
		fakeprovider.Reply{Text: "the rest of the answer\n"})
	closed := make(chan struct{})
	var requests atomic.Int32
	srv.SetBefore(func(r *http.Request) {
		if requests.Add(1) == 2 { // the second request: after the reader went
			select {
			case <-closed:
			case <-r.Context().Done():
			}
		}
	})
	cmd := pantoCmd(t, t.TempDir(), pc.env(b), append(pc.flags(srv), "a question")...)
	var stderr strings.Builder
	cmd.Stderr = cmdtest.Stderr(t, "panto", &stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "first line\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("stdout's first line %q (%v)", line, err)
	}
	stdout.Close()
	close(closed)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d (%v), stderr %q", code, cmd.ProcessState, stderr.String())
	}
	_, conv := loadOnly(t, b)
	if got := roles(conv.Messages); got != "user,assistant,tool,assistant" || conv.Messages[3].Text() != "the rest of the answer\n" {
		t.Errorf("stored %s: %+v", got, conv.Messages)
	}
}

// TestAllowShell: run_shell is offered and runs only with --allow-shell.
func TestAllowShell(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[1]
	call := fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{{ID: "t1", Name: "run_shell", Args: `{"command":"echo shell-ran-$((40+2))"}`}}}
	for _, allow := range []bool{false, true} {
		srv := fakeprovider.New(t, pc.style, pc.key, call, fakeprovider.Reply{Text: "ok"})
		args := pc.flags(srv)
		if allow {
			args = append(args, "--allow-shell")
		}
		r := runPanto(t, t.TempDir(), pc.env(b), "", append(args, "run it")...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		reqs := srv.Requests()
		offered := strings.Contains(string(reqs[0].Body), `"run_shell"`)
		ran := strings.Contains(string(reqs[1].Body), "shell-ran-42")
		refused := strings.Contains(string(reqs[1].Body), "--allow-shell")
		if offered != allow || ran != allow || refused == allow {
			t.Errorf("allow %v: offered %v, ran %v, refused %v", allow, offered, ran, refused)
		}
	}
}

// TestShellGetsSIGPIPE: a command run_shell runs has SIGPIPE as any
// shell's command has it (panto catches it for its own stdout, which a
// child must not inherit as ignored: `yes | head -1` would not end).
func TestShellGetsSIGPIPE(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[1]
	call := fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{{ID: "t1", Name: "run_shell", Args: `{"command":"grep SigIgn /proc/self/status"}`}}}
	srv := fakeprovider.New(t, pc.style, pc.key, call, fakeprovider.Reply{Text: "ok"})
	r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "--allow-shell", "look")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	reqs := srv.Requests()
	m := regexp.MustCompile(`SigIgn:\\t([0-9a-f]{16})`).FindStringSubmatch(string(reqs[1].Body))
	if m == nil {
		t.Fatalf("no SigIgn in the tool's result: %s", reqs[1].Body)
	}
	ignored, err := strconv.ParseUint(m[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if ignored&(1<<(uint(syscall.SIGPIPE)-1)) != 0 {
		t.Errorf("the shell's command runs with SIGPIPE ignored (SigIgn %s)", m[1])
	}
}

// TestDeletedWhileAnswering: the session is deleted (another panto's rm)
// while the provider answers. The answer cannot be stored: panto says so
// in one line, and does not send the user to resume a deleted session.
func TestDeletedWhileAnswering(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key)
			srv.SetRespond(func(fakeprovider.Request) fakeprovider.Reply {
				st := b.open(t)
				defer store.Close(context.Background(), st)
				list, err := st.List(context.Background())
				if err != nil || len(list) != 1 {
					t.Errorf("the store lists %v (%v), want the one session", list, err)
					return fakeprovider.Reply{Text: "no session to delete"}
				}
				ls := st.(store.LogStore)
				at, err := store.Head(context.Background(), ls, list[0].ID)
				if err == nil {
					err = store.Delete(context.Background(), st, store.Tombstone{ID: list[0].ID, Deleted: time.Now().UTC().Truncate(time.Second), At: at})
				}
				if err != nil {
					t.Errorf("delete: %v", err)
				}
				return fakeprovider.Reply{Text: "an answer to a deleted session"}
			})
			// The bucket itself: local-first, the answer goes to this
			// machine's copy, which is then kept as a new session.
			env := append(pc.env(b), "PANTO_DIRECT=1")
			r := runPanto(t, t.TempDir(), env, "", append(pc.flags(srv), "a prompt")...)
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, "deleted") || !strings.Contains(line, "not stored") {
				t.Errorf("exit %d, stderr %q: want one line saying the session was deleted and the answer not stored", r.code, r.stderr)
			}
			if strings.Contains(line, "retry with") {
				t.Errorf("stderr %q sends the user to resume a deleted session", line)
			}
			if kind.name != "fs" {
				return
			}
			// The interactive mode says how to go on, at each turn.
			r = runPanto(t, t.TempDir(), env, "a prompt\nanother\n", append(pc.flags(srv), "-i")...)
			if n := strings.Count(r.stderr, "/new starts a session"); n != 2 {
				t.Errorf("interactive, stderr %q: want both turns to say that /new starts a session", r.stderr)
			}
		})
	}
}
