package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

func TestZZCCFork(t *testing.T) {
	claude := testTool(t, "Claude Code "+claudeCodeVersion, "PANTO_CLAUDE_CODE", filepath.Join("claude-code-"+claudeCodeVersion, "claude"), "claude-code")
	home := "/tmp/ccfork/home"
	os.RemoveAll("/tmp/ccfork")
	work := "/tmp/ccfork/work"
	os.MkdirAll(work, 0o700)
	os.MkdirAll(home, 0o700)
	n := 0
	srv := fakeprovider.New(t, fakeprovider.Anthropic, anthropicKey)
	srv.SetRespond(func(fakeprovider.Request) fakeprovider.Reply {
		n++
		return fakeprovider.Reply{Text: []string{"", "answer one", "answer two", "answer three", "answer four", "answer five"}[min(n, 5)], InputTokens: 100, OutputTokens: 5}
	})
	run := func(args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, claude, append([]string{"-p"}, args...)...)
		c.Dir = work
		c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir(), "ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=" + anthropicKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
		out, err := c.CombinedOutput()
		t.Logf("%v: %v %s", args, err, out)
	}
	run("first question")
	run("--continue", "second question")
	m, _ := filepath.Glob(home + "/.claude/projects/*/*.jsonl")
	id := filepath.Base(m[0])
	id = id[:len(id)-len(".jsonl")]
	run("--resume", id, "--fork-session", "forked question")
}
