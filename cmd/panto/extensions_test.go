package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

// readmeExtension is the example extension of README.md, so that what the
// README shows is what the tests load.
func readmeExtension(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```lua\n(.*?panto\\.tool.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("README.md has no ```lua block with panto.tool")
	}
	return string(m[1])
}

// extensionHome is a config directory with extensions/ holding files,
// and the environment that points panto at it.
func extensionHome(t *testing.T, files map[string]string) (dir string, env []string) {
	t.Helper()
	cfg := t.TempDir()
	dir = filepath.Join(cfg, "panto", "extensions")
	for name, src := range files {
		writeFile(t, filepath.Join(dir, name), src)
	}
	return dir, []string{"XDG_CONFIG_HOME=" + cfg}
}

const failingLua = `
panto.tool { name = "boom", description = "fails", run = function(input) error("it broke") end }
panto.tool { name = "spin", description = "never ends", run = function(input) while true do end end }
panto.tool { name = "read_file", description = "a clash", run = function(input) return "mine" end }
`

// TestExtensionTools: the model calls a Lua tool (the README's example),
// one that fails and one that never ends (stopped by --tool-timeout), on
// both wire protocols; the results are stored like any tool's. A file
// that does not load is one warning line, and panto goes on.
func TestExtensionTools(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			t.Parallel()
			b := fsBackend(t)
			dir, env := extensionHome(t, map[string]string{
				"wordcount.lua": readmeExtension(t),
				"broken.lua":    "panto.tool {\n  name = 'x'\n  oops = 1\n}\n",
			})
			extra := filepath.Join(t.TempDir(), "failing.lua")
			writeFile(t, extra, failingLua)
			srv := fakeprovider.New(t, pc.style, pc.key,
				fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{
					{ID: "c1", Name: "word_count", Args: `{"text":"the quick brown fox"}`},
					{ID: "c2", Name: "boom", Args: `{}`},
					{ID: "c3", Name: "spin", Args: `{}`},
					{ID: "c4", Name: "read_file", Args: `{"path":"notes.txt"}`},
				}},
				fakeprovider.Reply{Text: "counted"})
			work := t.TempDir()
			writeFile(t, filepath.Join(work, "notes.txt"), "built-in read\n")
			args := append(pc.flags(srv), "--extension", extra, "--tool-timeout", "300ms", "count the words")
			r := runPanto(t, work, append(pc.env(b), env...), "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
			}
			var warnings []string
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.HasPrefix(l, "panto: warning:") {
					warnings = append(warnings, l)
				}
			}
			want := []string{
				"panto: warning: extension " + filepath.Join(dir, "broken.lua") + ":3: syntax error near 'oops'",
				"panto: warning: extension " + extra + ":4: tool read_file refused: the name is taken by built-in",
			}
			if strings.Join(warnings, "\n") != strings.Join(want, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
			}
			names := offered(t, srv.Requests()[0])
			if !names["word_count"] || !names["boom"] || !names["read_file"] || names["x"] {
				t.Errorf("offered %v", names)
			}
			if body := string(srv.Requests()[0].Body); !strings.Contains(body, "Count the words of a text") || !strings.Contains(body, `"required":["text"]`) {
				t.Errorf("word_count's declaration: %s", body)
			}
			_, conv := loadOnly(t, b)
			if got := roles(conv.Messages); got != "user,assistant,tool,assistant" {
				t.Fatalf("stored roles %s", got)
			}
			results := toolResults(conv)
			for id, w := range map[string]struct {
				isErr bool
				text  string
			}{
				"c1": {false, "words=4"},
				"c2": {true, "tool boom failed: " + extra + ":2: it broke"},
				"c3": {true, "tool spin stopped after 300ms (the tool timeout, --tool-timeout) and gave no result"},
				"c4": {false, "built-in read\n"},
			} {
				if res := results[id]; res.IsError != w.isErr || res.Text != w.text {
					t.Errorf("%s: stored %+v, want error=%v %q", id, res, w.isErr, w.text)
				}
			}
			if sent := string(srv.Requests()[1].Body); !strings.Contains(sent, "words=4") || !strings.Contains(sent, "stopped after 300ms") {
				t.Errorf("results not sent back: %s", sent)
			}
		})
	}
}

// TestExtensionCommand: a Lua /command reads the session it runs in, and
// /help lists it.
func TestExtensionCommand(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[1]
	_, env := extensionHome(t, map[string]string{"wordcount.lua": readmeExtension(t)})
	srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "three words here"})
	r := runPanto(t, t.TempDir(), append(pc.env(b), env...), "hello there\n/stats\n/help\n/nope\n", append(pc.flags(srv), "-i")...)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	info, _ := loadOnly(t, b)
	if want := "session " + info.ID + " holds 2 messages, 5 words\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
	if !strings.Contains(r.stdout, "/stats") || !strings.Contains(r.stdout, "count this session's messages") {
		t.Errorf("/help does not list /stats:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "unknown command /nope") {
		t.Errorf("stderr %s", r.stderr)
	}
}

// TestExtensionInterrupt: Ctrl-C stops a Lua tool in its loop: the step
// is cancelled and the prompt stays stored. The call is shown before it
// runs.
func TestExtensionInterrupt(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	_, env := extensionHome(t, map[string]string{"spin.lua": `
panto.tool { name = "spin", description = "never ends", run = function(input) print("spinning") while true do end end }
`})
	srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{{ID: "s1", Name: "spin", Args: `{}`}}})
	cmd := pantoCmd(t, t.TempDir(), append(pc.env(b), env...), append(pc.flags(srv), "spin please")...)
	stderr := &lockedBuffer{}
	cmd.Stderr = cmdtest.Stderr(t, "panto", stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "spinning") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the tool never ran; stderr %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The call was shown as it started, not once it ended: the user sees
	// what runs while it runs.
	if call, _, ok := strings.Cut(stderr.String(), "spinning"); !ok || !strings.Contains(call, "→ spin {}\n") {
		t.Errorf("the call was not shown before it ran; stderr %q", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "panto: cancelled") {
		t.Errorf("exit %v, stderr %q", err, stderr.String())
	}
	_, conv := loadOnly(t, b)
	if roles(conv.Messages) != "user" {
		t.Errorf("stored %s", roles(conv.Messages))
	}
}

// TestExtensionsList: panto extensions lists what loaded and what
// failed, as text and as JSON, and exits 1 when something failed.
func TestExtensionsList(t *testing.T) {
	t.Parallel()
	dir, env := extensionHome(t, map[string]string{"wordcount.lua": readmeExtension(t)})
	r := runPanto(t, t.TempDir(), env, "", "extensions")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	file := filepath.Join(dir, "wordcount.lua")
	for _, re := range []string{`word_count +tool +` + regexp.QuoteMeta(file), `/stats +command +` + regexp.QuoteMeta(file)} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("stdout does not match %s:\n%s", re, r.stdout)
		}
	}
	// Checking an installed extension by name loads it once.
	if r := runPanto(t, t.TempDir(), env, "", "extensions", "--extension", file); r.code != 0 || strings.Count(r.stdout, "word_count") != 1 {
		t.Errorf("--extension of the directory's file: exit %d, stdout %s", r.code, r.stdout)
	}

	extra := filepath.Join(t.TempDir(), "failing.lua")
	writeFile(t, extra, failingLua+"panto.command { name = 'help', description = 'mine', run = function() end }\n")
	writeFile(t, filepath.Join(dir, "broken.lua"), "\n\nerror('not configured')\n")
	r = runPanto(t, t.TempDir(), env, "", "extensions", "--extension", extra, "--json")
	if r.code != 1 || !strings.Contains(r.stderr, "panto: 3 extension failures (listed above)") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	check := cmdtest.NewShapeChecker(extensionShapes)
	check.CheckJSON(t, "panto extensions --json", []byte(r.stdout), "extensions")
	for _, f := range check.Unseen() {
		t.Errorf("no output showed %s", f)
	}
	out := jsonObject(t, r.stdout)
	var failed []string
	for _, f := range out["failed"].([]any) {
		failed = append(failed, f.(map[string]any)["error"].(string))
	}
	want := []string{"not configured", "tool read_file refused: the name is taken by built-in", "command /help refused: panto has its own /help"}
	if strings.Join(failed, "|") != strings.Join(want, "|") {
		t.Errorf("failed %q", failed)
	}
	if n := len(out["loaded"].([]any)); n != 4 {
		t.Errorf("%d loaded: %s", n, r.stdout)
	}

	r = runPanto(t, t.TempDir(), []string{"XDG_CONFIG_HOME=" + t.TempDir()}, "", "extensions")
	if r.code != 0 || !strings.Contains(r.stdout, "no extensions: put *.lua files in ") {
		t.Errorf("no extensions: exit %d, stdout %q", r.code, r.stdout)
	}
}

// extensionShapes is panto extensions --json as a script reads it.
var extensionShapes = cmdtest.Shapes{
	"extensions": {"dir": "string", "loaded": "[]extension", "failed": "[]extensionFailure"},
	"extension":  {"name": "string", "kind": "string", "description": "string", "file": "string"},
	"extensionFailure": {
		"file": "string", "line": "integer?", "kind": "string?", "name": "string?", "error": "string",
	},
}
