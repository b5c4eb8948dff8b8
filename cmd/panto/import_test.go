package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/foreignlogs"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
)

// agentHomes lays out each agent's own location, as the agents write
// them, with the importer's fixtures (Codex's compressed, as recent
// versions write it), and returns the environment that points panto
// import at them.
func agentHomes(t *testing.T) (env []string, piLog string) {
	t.Helper()
	root := t.TempDir()
	fixture := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	put := func(path string, data []byte) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	project := filepath.Join(root, "claude", "projects", "-home-me-app")
	put(filepath.Join(project, "5e0c1a2b-0000-4000-8000-00000000c0de.jsonl"), fixture("claude-code.jsonl"))
	put(filepath.Join(project, "5e0c1a2b-0000-4000-8000-00000000c0de", "subagents", "agent-a485154.jsonl"), fixture("claude-code-subagent.jsonl"))
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	put(filepath.Join(root, "codex", "sessions", "2026", "01", "02", "rollout-2026-01-02T17-39-45-019b0000-1111-7222-8333-444455556666.jsonl.zst"), enc.EncodeAll(fixture("codex.jsonl"), nil))
	piLog = filepath.Join(root, "pi", "sessions", "--home-me-app--", "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
	data := fixture("pi.jsonl")
	put(piLog, data[:len(data)/2]) // pi is writing it: a torn last line
	return []string{"CLAUDE_CONFIG_DIR=" + filepath.Join(root, "claude"), "CODEX_HOME=" + filepath.Join(root, "codex"), "PI_CODING_AGENT_DIR=" + filepath.Join(root, "pi")}, piLog
}

// importEvents runs panto import --json and decodes its lines.
func importEvents(t *testing.T, env []string, args ...string) []importEvent {
	t.Helper()
	r := runPanto(t, t.TempDir(), env, "", append([]string{"import", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("import %q: exit %d: %s", args, r.code, r.stderr)
	}
	return decodeLines[importEvent](t, r.stdout)
}

// decodeLines decodes each line of a --json output.
func decodeLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var vs []T
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("--json line %q: %v", sc.Text(), err)
		}
		vs = append(vs, v)
	}
	return vs
}

func actions(evs []importEvent) map[string]int {
	out := map[string]int{}
	for _, ev := range evs {
		out[ev.Agent+" "+ev.Action]++
	}
	return out
}

// TestImport imports every agent's sessions from their own locations
// into each store, again (nothing changes), after a log grew (its new
// messages are appended), and resumes each imported session with each
// wire protocol: the request the provider gets is valid.
func TestImport(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, b backend, pc providerCase) {
		homes, piLog := agentHomes(t)
		// One cache for every run, as on a user's machine: imports
		// again go by the record of imported logs.
		env := append(append(pc.env(b), homes...), "XDG_CACHE_HOME="+t.TempDir())
		first := importEvents(t, env)
		want := map[string]int{"claude-code new": 2, "codex new": 1, "pi new": 1}
		if got := actions(first); !equalCounts(got, want) {
			t.Fatalf("first import: %v, want %v (%+v)", got, want, first)
		}
		if got := actions(importEvents(t, env)); !equalCounts(got, map[string]int{"claude-code unchanged": 2, "codex unchanged": 1, "pi unchanged": 1}) {
			t.Fatalf("import again: %v", got)
		}
		data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(piLog, data, 0o644); err != nil {
			t.Fatal(err)
		}
		grown := importEvents(t, env, "--from", "pi")
		if len(grown) != 1 || grown[0].Action != "appended" || grown[0].Appended == 0 {
			t.Fatalf("import of a grown log: %+v", grown)
		}
		for _, ev := range first {
			srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "continued"})
			r := runPanto(t, t.TempDir(), env, "", append(pc.flags(srv), "-r", ev.ID[:8], "go on")...)
			if r.code != 0 || r.stdout != "continued\n" {
				t.Fatalf("resume %s (%s): exit %d, stdout %q: %s", ev.ID, ev.Source, r.code, r.stdout, r.stderr)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("resume %s: %d requests", ev.ID, len(reqs))
			}
			checkRequest(t, pc.style, reqs[0])
		}
		if got := actions(importEvents(t, env)); got["pi unchanged"] != 1 || got["codex unchanged"] != 1 {
			t.Fatalf("import after resuming in panto: %v, want unchanged", got)
		}
	})
}

// TestImportedCodexSessionFollowsItsProject: Codex records its work
// tree's remote, so its imported session is that project's in a clone at
// another path (another machine): listed there and continued by -c,
// where Claude Code's session of the same directory, which knows only
// that directory, is not.
func TestImportedCodexSessionFollowsItsProject(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			homes, _ := agentHomes(t)
			env := append(b.storeEnv(), homes...)
			var codex string
			for _, ev := range importEvents(t, env) {
				if ev.Agent == "codex" {
					codex = ev.ID
				}
			}
			clone := gitClone(t, mkdirs(t, filepath.Join(t.TempDir(), "src", "app")), "git@github.com:me/app.git")
			var list []struct {
				ID      string `json:"id"`
				Project struct {
					Key string `json:"key"`
				} `json:"project"`
			}
			r := pantoIn(t, b, clone, "sessions", "--json")
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
				t.Fatalf("sessions --json: %v: %s", err, r.stdout)
			}
			if len(list) != 1 || list[0].ID != codex || list[0].Project.Key != "github.com/me/app" {
				t.Fatalf("the clone lists %+v, want the Codex session %s alone, in project github.com/me/app", list, codex)
			}
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "continued"})
			r = runPanto(t, clone, append(pc.env(b), homes...), "", append(pc.flags(srv), "-c", "go on in the clone")...)
			if r.code != 0 || r.stdout != "continued\n" {
				t.Fatalf("-c in the clone: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
			}
			if shown := pantoIn(t, b, clone, "show", codex).stdout; !strings.Contains(shown, "go on in the clone") {
				t.Fatalf("-c in the clone did not continue the Codex session:\n%s", shown)
			}
		})
	}
}

// TestImportedSessionJoinsItsWorkTree: a session imported on the machine
// where the agent ran, whose directory is in a git work tree there,
// records what panto would have recorded there (the remote, the root,
// the path below it), so that a clone of the repository at another path
// lists it and -c continues it; a directory in a work tree of another
// repository than the one Codex recorded keeps the log's project.
func TestImportedSessionJoinsItsWorkTree(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			base := t.TempDir()
			tree := gitClone(t, mkdirs(t, filepath.Join(base, "a", "src", "app")), "git@github.com:me/app.git")
			ran := mkdirs(t, filepath.Join(tree, "services", "api")) // Claude Code was started below the root
			other := gitClone(t, mkdirs(t, filepath.Join(base, "a", "src", "fork")), "git@github.com:someone/fork.git")
			logs := t.TempDir()
			for name, dir := range map[string]string{"claude-code.jsonl": ran, "codex.jsonl": other} {
				if err := os.WriteFile(filepath.Join(logs, name), bytes.ReplaceAll(read(name), []byte("/home/me/app"), []byte(dir)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ids := map[string]string{}
			for _, ev := range importEvents(t, b.storeEnv(), logs) {
				ids[ev.Agent] = ev.ID
			}
			type row struct {
				ID      string        `json:"id"`
				Project agent.Project `json:"project"`
			}
			var list []row
			clone := gitClone(t, mkdirs(t, filepath.Join(base, "b", "work", "app")), "https://github.com/me/app")
			if err := json.Unmarshal([]byte(pantoIn(t, b, clone, "sessions", "--json").stdout), &list); err != nil {
				t.Fatal(err)
			}
			want := agent.Project{Remote: "github.com/me/app", Root: tree, Path: "services/api", Dir: ran}
			if len(list) != 2 {
				t.Fatalf("the clone lists %+v, want the Claude Code session %s and the Codex one %s", list, ids["claude-code"], ids["codex"])
			}
			for _, r := range list {
				switch r.ID {
				case ids["claude-code"]:
					if r.Project != want {
						t.Errorf("the Claude Code session's project is %+v, want %+v", r.Project, want)
					}
				case ids["codex"]:
					// Codex recorded github.com/me/app; the directory is in
					// another repository's work tree here now.
					if want := (agent.Project{Remote: "github.com/me/app", Dir: other}); r.Project != want {
						t.Errorf("the Codex session's project is %+v, want the log's %+v", r.Project, want)
					}
				default:
					t.Errorf("the clone lists %s", r.ID)
				}
			}
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "continued"})
			if r := runPanto(t, clone, pc.env(b), "", append(pc.flags(srv), "-r", ids["claude-code"][:8], "go on here")...); r.code != 0 || r.stdout != "continued\n" {
				t.Fatalf("-r in the clone: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
			}
			// The import on a machine without the work tree finds the
			// log's project, and appends under the stored header.
			if err := os.RemoveAll(filepath.Join(base, "a")); err != nil {
				t.Fatal(err)
			}
			if got := actions(importEvents(t, b.storeEnv(), logs)); !equalCounts(got, map[string]int{"claude-code unchanged": 1, "codex unchanged": 1}) {
				t.Fatalf("import with the work tree gone: %v, want unchanged", got)
			}
		})
	}
}

// TestImportThroughSSHAlias: a Codex log records the remote as git was
// given it, through an SSH host alias (git@gh-work:me/app.git); its work
// tree here is reached through that alias, so the imported session is
// the project of the host the alias names, as panto's own session there
// is, and a clone of https://github.com/me/app lists it.
func TestImportThroughSSHAlias(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	base := t.TempDir()
	home := filepath.Join(base, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host gh-work\n  HostName github.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tree := gitClone(t, mkdirs(t, filepath.Join(base, "src", "app")), "git@gh-work:me/app.git")
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "codex.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("/home/me/app"), []byte(tree))
	data = bytes.ReplaceAll(data, []byte("https://github.com/me/app.git"), []byte("git@gh-work:me/app.git"))
	logs := t.TempDir()
	if err := os.WriteFile(filepath.Join(logs, "codex.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(b.storeEnv(), "HOME="+home)
	evs := importEvents(t, env, logs)
	if len(evs) != 1 || evs[0].Agent != "codex" {
		t.Fatalf("import: %+v", evs)
	}
	clone := gitClone(t, mkdirs(t, filepath.Join(base, "elsewhere", "app")), "https://github.com/me/app")
	var list []struct {
		ID      string        `json:"id"`
		Project agent.Project `json:"project"`
	}
	if err := json.Unmarshal([]byte(pantoIn(t, b, clone, "sessions", "--json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	want := agent.Project{Remote: "github.com/me/app", Root: tree, Dir: tree}
	if len(list) != 1 || list[0].ID != evs[0].ID || list[0].Project != want {
		t.Fatalf("the https clone lists %+v, want %s in %+v", list, evs[0].ID, want)
	}
}

// TestImportRealLogs imports the real logs beside the clone, re-imports
// them (nothing changes) and resumes each with the fake provider.
func TestImportRealLogs(t *testing.T) {
	t.Parallel()
	dir := foreignlogs.Dir(t, "../..")
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			t.Parallel()
			b := fsBackend(t)
			env := pc.env(b)
			first := importEvents(t, env, dir)
			if len(first) == 0 {
				t.Fatal("nothing imported")
			}
			for _, ev := range first {
				if ev.Action != "new" || ev.Messages == 0 {
					t.Errorf("%s: %s, %d messages (%s)", ev.Source, ev.Action, ev.Messages, ev.Error)
				}
			}
			for _, ev := range importEvents(t, env, dir) {
				if ev.Action != "unchanged" {
					t.Errorf("import again %s: %s", ev.Source, ev.Action)
				}
			}
			for _, ev := range first {
				srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "continued"})
				r := runPanto(t, t.TempDir(), env, "", append(pc.flags(srv), "-r", ev.ID, "go on")...)
				if r.code != 0 || r.stdout != "continued\n" {
					t.Fatalf("resume %s (%s): exit %d, stdout %q: %s", ev.ID, ev.Source, r.code, r.stdout, r.stderr)
				}
				checkRequest(t, pc.style, srv.Requests()[0])
			}
		})
	}
}

func TestImportRefusesAndSkips(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("{\"type\":\"session\",\"version\":3,\"id\":\"p\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"cwd\":\"/\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.jsonl"), []byte("{\"hello\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runPanto(t, t.TempDir(), b.storeEnv(), "", "import", dir)
	bad := filepath.Join(dir, "bad.jsonl")
	if r.code == 0 || !strings.Contains(r.stdout, "refused "+bad+":2: malformed log: ") || strings.Count(r.stdout, bad) != 1 || !strings.Contains(r.stdout, "1 refused, 1 skipped") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || strings.Contains(r.stderr, "diverged") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	piLog, err := filepath.Abs(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r = runPanto(t, t.TempDir(), b.storeEnv(), "", "import", "--from", "codex", piLog)
	if r.code == 0 || !strings.Contains(r.stdout, "a pi log, not codex") {
		t.Fatalf("--from codex on a pi log: exit %d: %s", r.code, r.stdout)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkRequest checks that a request's conversation is valid on its wire:
// every tool call is answered in the next message (OpenAI: by the tool
// messages after it) and every result answers a call just before it.
func checkRequest(t *testing.T, style string, req fakeprovider.Request) {
	t.Helper()
	body := req.JSON()
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("request without messages: %s", req.Body)
	}
	open := map[string]bool{}
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("message %d of the request: "+format, append([]any{i}, args...)...)
	}
	for i, raw := range msgs {
		m := raw.(map[string]any)
		role, _ := m["role"].(string)
		switch style {
		case fakeprovider.OpenAI:
			if role == "tool" {
				id, _ := m["tool_call_id"].(string)
				if !open[id] {
					fail(i, "a tool result for %q, which no call before it left open", id)
				}
				delete(open, id)
				continue
			}
			if len(open) > 0 {
				fail(i, "a %s message while calls %v have no result", role, open)
			}
			calls, _ := m["tool_calls"].([]any)
			for _, c := range calls {
				id, _ := c.(map[string]any)["id"].(string)
				open[id] = true
			}
		case fakeprovider.Anthropic:
			blocks, _ := m["content"].([]any)
			answered := map[string]bool{}
			var calls []string
			for _, bl := range blocks {
				blk := bl.(map[string]any)
				switch blk["type"] {
				case "tool_result":
					id, _ := blk["tool_use_id"].(string)
					if role != "user" || !open[id] {
						fail(i, "a tool result for %q, which the message before does not call", id)
					}
					answered[id] = true
				case "tool_use":
					calls = append(calls, blk["id"].(string))
				case "thinking":
					if blk["signature"] == "" {
						fail(i, "a thinking block without its signature")
					}
				}
			}
			for id := range open {
				if !answered[id] {
					fail(i, "call %q of the message before has no result", id)
				}
			}
			open = map[string]bool{}
			for _, id := range calls {
				open[id] = true
			}
			if i > 0 && msgs[i-1].(map[string]any)["role"] == role {
				fail(i, "two %s messages in a row", role)
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("the request ends with calls without results: %v", open)
	}
}

// TestImportEncryptedBucket imports into an encrypted bucket: the
// sessions are there (sealed: the bucket holds none of their text), and a
// second import changes nothing.
func TestImportEncryptedBucket(t *testing.T) {
	t.Parallel()
	s3 := miniotest.Shared(t)
	bucket := s3.NewBucket(t)
	keyFile := filepath.Join(t.TempDir(), "bucket.key")
	if _, err := seal.WriteKeyFile(keyFile, time.Now()); err != nil {
		t.Fatal(err)
	}
	homes, _ := agentHomes(t)
	env := append(append([]string{"PANTO_STORE=s3://" + bucket + "/sealed", "PANTO_KEY_FILE=" + keyFile}, minioEnv(s3)...), homes...)
	if got := actions(importEvents(t, env)); !equalCounts(got, map[string]int{"claude-code new": 2, "codex new": 1, "pi new": 1}) {
		t.Fatalf("first import: %v", got)
	}
	if got := actions(importEvents(t, env)); !equalCounts(got, map[string]int{"claude-code unchanged": 2, "codex unchanged": 1, "pi unchanged": 1}) {
		t.Fatalf("import again: %v", got)
	}
	r := runPanto(t, t.TempDir(), env, "", "sessions", "--all")
	if r.code != 0 || !strings.Contains(r.stdout, "Parser fix") {
		t.Fatalf("sessions: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if raw := bucketBytes(s3, bucket)(t); bytes.Contains(raw, []byte("Why does the parser fail?")) || bytes.Contains(raw, []byte("List the files.")) {
		t.Fatal("the bucket holds an imported message in the clear")
	}
}

// importShapes is panto import --json as a script reads it (README.md
// names these fields); renaming one fails here.
var importShapes = cmdtest.Shapes{
	"import": {
		"source": "string", "agent": "string?", "foreign_id": "string?", "id": "id?", "action": "string",
		"messages": "integer", "appended": "integer", "held": "bool?", "dry_run": "bool?", "error": "string?",
		"replaced": "id?", "kept": "bool?",
	},
}

func TestImportJSONFieldNames(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	dir := t.TempDir()
	for _, name := range []string{"claude-code.jsonl", "codex.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "codex.jsonl" {
			aborted := bytes.Index(data, []byte("turn_aborted"))
			data = data[:bytes.LastIndexByte(data[:aborted], '\n')+1] // ends inside a response: held
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("{\"type\":\"summary\"}\n{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := cmdtest.NewShapeChecker(importShapes)
	for _, args := range [][]string{{"import", "--json", "--dry-run", dir}, {"import", "--json", dir}} {
		r := runPanto(t, t.TempDir(), b.storeEnv(), "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "1 file refused") {
			t.Fatalf("panto %q: exit %d: %s", args, r.code, r.stderr)
		}
		check.CheckJSON(t, "panto "+strings.Join(args, " "), []byte(r.stdout), "lines:import")
	}
	// A replacement's fields need a session an earlier panto converted
	// otherwise (TestImportReplaceDiverged runs one): here, the event as
	// the command writes it.
	replaced, err := json.Marshal(importEvent{Source: "pi.jsonl", ID: strings.Repeat("b", 32), Action: "replaced", Replaced: strings.Repeat("a", 32), Kept: true})
	if err != nil {
		t.Fatal(err)
	}
	check.CheckJSON(t, "a replaced event", append(replaced, '\n'), "lines:import")
	for _, f := range check.Unseen() {
		t.Errorf("no output showed %s: the check cannot see it renamed", f)
	}
}

// TestImportManyAtOnce: panto import converts and writes several sources
// at once, prints their events in the sources' order, and imports two
// sources of one session one after the other: a log and an older copy
// of it (its first lines, as an agent's archive may keep), in either
// order, leave the whole log stored and neither source diverged.
func TestImportManyAtOnce(t *testing.T) {
	t.Parallel()
	const fixtureID = "5e0c1a2b-0000-4000-8000-00000000c0de"
	fixture, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "claude-code.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(fixture, []byte("\n"))
	older := bytes.Join(lines[:len(lines)/2], nil)
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			home := t.TempDir()
			write := func(dir, id string, data []byte) {
				t.Helper()
				path := filepath.Join(home, "projects", dir, id+".jsonl")
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, bytes.ReplaceAll(data, []byte(fixtureID), []byte(id)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			const n = 24
			for i := range n {
				write("-home-me-app", fmt.Sprintf("5e0c1a2b-0000-4000-8000-%012d", i), fixture)
			}
			// The same two sessions again, one copy sorted before its
			// log and one after it.
			write("-a-archive", fmt.Sprintf("5e0c1a2b-0000-4000-8000-%012d", 3), older)
			write("-z-archive", fmt.Sprintf("5e0c1a2b-0000-4000-8000-%012d", 7), older)
			env := append(b.storeEnv(), "CLAUDE_CONFIG_DIR="+home)
			r := runPanto(t, t.TempDir(), append(env, "PANTO_TRACE=1"), "", "import", "--json", "--from", "claude-code")
			if r.code != 0 {
				t.Fatalf("import: exit %d: %s", r.code, r.stderr)
			}
			var evs []importEvent
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var ev importEvent
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("import --json line %q: %v", line, err)
				}
				evs = append(evs, ev)
			}
			// A bulk writer: the index takes the 24 sessions in a commit
			// or two at exit, not a commit each.
			if commits := strings.Count(r.stderr, "/index/log/0"); kind.name == "s3" && !(commits >= 1 && commits <= 3) {
				t.Errorf("import wrote %d requests to the index log for %d new sessions, want 1 to 3", commits, n)
			}
			if len(evs) != n+2 {
				t.Fatalf("%d events, want %d", len(evs), n+2)
			}
			if !slices.IsSortedFunc(evs, func(a, b importEvent) int { return strings.Compare(a.Source, b.Source) }) {
				t.Errorf("events not in the sources' order: %+v", evs)
			}
			got := map[string]int{}
			for _, ev := range evs {
				got[ev.Action]++
			}
			// The copy before its log is new, then the log appended to it;
			// the copy after its log is already in it.
			if want := map[string]int{"new": n, "appended": 1, "unchanged": 1}; !equalCounts(got, want) {
				t.Errorf("actions %v, want %v: %+v", got, want, evs)
			}
			again := actions(importEvents(t, env, "--from", "claude-code"))
			if !equalCounts(again, map[string]int{"claude-code unchanged": n + 2}) {
				t.Errorf("import again: %v, want all unchanged", again)
			}
		})
	}
}

// TestImportReplaceDiverged: a session an earlier panto converted
// otherwise (a pi tool call's id stored as pi wrote it, which providers
// refuse) is reported diverged at every import, its stored copy left as
// it is; --replace-diverged writes the new conversion as a new session
// naming the one it replaces and deletes that one, so panto -c
// continues the replacement, and later plain imports append to it. A
// session panto rm deleted, never replaced, stays deleted.
func TestImportReplaceDiverged(t *testing.T) {
	t.Parallel()
	orig, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const rawID = "call_Xy7|fc_0123456789abcdefghijABCDEFGHIJ+/=0123456789"
	data := bytes.ReplaceAll(orig, []byte(`"c1"`), []byte(`"`+rawID+`"`))
	firstLines := func(data []byte) []byte { // through the answer after the call
		end := 0
		for range 7 {
			end += bytes.IndexByte(data[end:], '\n') + 1
		}
		return data[:end]
	}
	older, err := importer.Convert(importer.Pi, "pi.jsonl", firstLines(orig))
	if err != nil {
		t.Fatal(err)
	}
	stored := bytes.ReplaceAll(older.Log, []byte(`"c1"`), []byte(`"`+rawID+`"`))
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			pc := providerCases[0]
			env := pc.env(b)
			ctx := context.Background()
			st, ok := store.AsLogStore(b.open(t))
			if !ok {
				t.Fatal("not a log store")
			}
			held, err := st.AppendLog(ctx, older.ID, store.Checkpoint{}, stored)
			if err != nil {
				t.Fatal(err)
			}
			logDir := t.TempDir()
			log := filepath.Join(logDir, "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
			if err := os.WriteFile(log, firstLines(data), 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(wantCode int, args ...string) ([]importEvent, result) {
				t.Helper()
				r := runPanto(t, t.TempDir(), env, "", append([]string{"import", "--json", "--from", "pi"}, args...)...)
				if r.code != wantCode {
					t.Fatalf("import %q: exit %d, want %d: %s", args, r.code, wantCode, r.stderr)
				}
				var evs []importEvent
				for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
					var ev importEvent
					if err := json.Unmarshal([]byte(line), &ev); err != nil {
						t.Fatalf("import --json line %q: %v", line, err)
					}
					evs = append(evs, ev)
				}
				if len(evs) != 1 {
					t.Fatalf("import %q: %d events", args, len(evs))
				}
				return evs, r
			}
			replID := importer.ReplacementID(older.ID, held)
			for range 2 {
				evs, r := run(1, log)
				if evs[0].Action != "diverged" || evs[0].ID != older.ID || !strings.Contains(r.stderr, "panto import --replace-diverged") || strings.Contains(r.stderr, "panto rm") {
					t.Fatalf("import of a session converted otherwise: %+v: %s", evs[0], r.stderr)
				}
			}
			r := runPanto(t, t.TempDir(), env, "", "import", "--from", "pi", "--replace-diverged", "--dry-run", log)
			if r.code != 0 || !strings.Contains(r.stdout, "would replace "+older.ID[:8]+" by "+replID[:8]) {
				t.Fatalf("import --replace-diverged --dry-run: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			evs, _ := run(0, "--replace-diverged", log)
			if ev := evs[0]; ev.Action != "replaced" || ev.ID != replID || ev.Replaced != older.ID || ev.Kept || ev.Appended != older.Messages {
				t.Fatalf("import --replace-diverged: %+v, want %s replaced by %s", ev, older.ID, replID)
			}
			got := readLog(t, st, replID)
			if bytes.Contains(got, []byte("fc_")) || !bytes.Contains(got, []byte(`"replaces":"`+older.ID+`"`)) {
				t.Fatalf("the replacement holds:\n%s", got)
			}
			if _, err := b.open(t).Resolve(ctx, older.ID); !errors.Is(err, agent.ErrSessionDeleted) {
				t.Fatalf("the replaced session: %v, want deleted", err)
			}
			if err := os.WriteFile(log, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if evs, _ := run(0, log); evs[0].Action != "appended" || evs[0].ID != replID {
				t.Fatalf("import of the grown log: %+v, want appended to %s", evs[0], replID)
			}
			if evs, _ := run(0, log); evs[0].Action != "unchanged" || evs[0].ID != replID {
				t.Fatalf("import again: %+v, want %s unchanged", evs[0], replID)
			}
			r = runPanto(t, t.TempDir(), env, "", "sessions", "--all")
			if r.code != 0 || !strings.Contains(r.stdout, replID[:8]) || strings.Contains(r.stdout, older.ID[:8]) {
				t.Fatalf("sessions: exit %d, want %s listed and not %s: %s%s", r.code, replID[:8], older.ID[:8], r.stdout, r.stderr)
			}
			srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "continued"})
			r = runPanto(t, t.TempDir(), env, "", append(pc.flags(srv), "-c", "--any", "go on")...)
			if r.code != 0 || r.stdout != "continued\n" {
				t.Fatalf("-c: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
			}
			if reqs := srv.Requests(); len(reqs) != 1 {
				t.Fatalf("-c: %d requests", len(reqs))
			} else {
				checkRequest(t, pc.style, reqs[0])
			}
			if got := readLog(t, st, replID); !bytes.Contains(got, []byte("go on")) {
				t.Fatalf("-c did not continue the replacement %s", replID)
			}

			// Imported, then deleted by panto rm: not brought back.
			other := filepath.Join(t.TempDir(), "2026-03-02T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0009.jsonl")
			if err := os.WriteFile(other, bytes.ReplaceAll(orig, []byte("eeeeffff0000"), []byte("eeeeffff0009")), 0o644); err != nil {
				t.Fatal(err)
			}
			evs, _ = run(0, other)
			if evs[0].Action != "new" {
				t.Fatalf("import of another log: %+v", evs[0])
			}
			if r := runPanto(t, t.TempDir(), env, "", "rm", "--yes", evs[0].ID); r.code != 0 {
				t.Fatalf("rm: exit %d: %s", r.code, r.stderr)
			}
			for _, args := range [][]string{{other}, {"--replace-diverged", other}} {
				if evs, _ := run(0, args...); evs[0].Action != "deleted" {
					t.Fatalf("import %q of a deleted session: %+v, want deleted", args, evs[0])
				}
			}
		})
	}
}

// readLog reads session id's whole log from st.
func readLog(t *testing.T, st store.LogStore, id string) []byte {
	t.Helper()
	r, _, err := st.ReadLog(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("read session %s: %v", id, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestShowImportedLinks: an imported subagent transcript or Codex fork
// links its parent and holds none of its messages; show and export say
// so, not that it is a copy kept when two machines wrote at once.
func TestShowImportedLinks(t *testing.T) {
	t.Parallel()
	homes, _ := agentHomes(t)
	fork, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "codex-0.171-fork.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	day := filepath.Join(strings.TrimPrefix(homes[1], "CODEX_HOME="), "sessions", "2026", "12", "06")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-12-06T19-30-08-01a24cd5-c83d-7a51-9cd7-a48a52ae19e3.jsonl"), fork, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(fsBackend(t).storeEnv(), homes...)
	want := map[string]string{
		"agent-a485154.jsonl":                        "a subagent of " + importer.SessionID(importer.ClaudeCode, "5e0c1a2b-0000-4000-8000-00000000c0de") + " (imported from Claude Code; its own messages only)",
		"01a24cd5-c83d-7a51-9cd7-a48a52ae19e3.jsonl": "forked from " + importer.SessionID(importer.Codex, "01a24cd5-c5b7-7623-a52c-ea3f73f38484") + " (imported from Codex; its own messages only)",
	}
	seen := 0
	for _, ev := range importEvents(t, env) {
		for suffix, line := range want {
			if !strings.HasSuffix(ev.Source, suffix) {
				continue
			}
			seen++
			for _, args := range [][]string{{"show", ev.ID}, {"export", ev.ID, "--format", "md"}} {
				r := runPanto(t, t.TempDir(), env, "", args...)
				if r.code != 0 || !strings.Contains(strings.ToLower(r.stdout), strings.ToLower(line)) || strings.Contains(r.stdout, "both were kept") {
					t.Errorf("panto %s of %s: exit %d, want %q:\n%s", args[0], suffix, r.code, line, r.stdout)
				}
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("imported %d of the %d linked logs", seen, len(want))
	}
}

// TestImportCodexFork: a Codex 0.171 fork imported beside its parent
// (codex exec fork against a fake server) copies the parent's messages
// before the fork point, so that panto continues it with them, and its
// usage is the parent's once and its own.
func TestImportCodexFork(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	day := filepath.Join(home, "codex", "sessions", "2026", "12", "06")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, fixture := range map[string]string{
		"rollout-2026-12-06T19-30-07-01a24cd5-c5b7-7623-a52c-ea3f73f38484.jsonl": "codex-0.171-fork-parent.jsonl",
		"rollout-2026-12-06T19-30-08-01a24cd5-c83d-7a51-9cd7-a48a52ae19e3.jsonl": "codex-0.171-fork.jsonl",
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", fixture))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(day, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(fsBackend(t).storeEnv(), "CODEX_HOME="+filepath.Join(home, "codex"))
	forkID := importer.SessionID(importer.Codex, "01a24cd5-c83d-7a51-9cd7-a48a52ae19e3")
	parentID := importer.SessionID(importer.Codex, "01a24cd5-c5b7-7623-a52c-ea3f73f38484")
	if got := actions(importEvents(t, env)); !equalCounts(got, map[string]int{"codex new": 2}) {
		t.Fatalf("import: %v", got)
	}
	show := runPanto(t, t.TempDir(), env, "", "show", forkID).stdout
	for _, want := range []string{"forked from " + parentID + " at message 4", "first prompt", "answer 2", "forked prompt", "answer 3"} {
		if !strings.Contains(show, want) {
			t.Errorf("show of the fork lacks %q:\n%s", want, show)
		}
	}
	var usage struct {
		Total struct {
			Answers     int   `json:"answers"`
			InputTokens int64 `json:"input_tokens"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(runPanto(t, t.TempDir(), env, "", "usage", "--json").stdout), &usage); err != nil {
		t.Fatal(err)
	}
	if u := usage.Total; u.Answers != 3 || u.InputTokens != 300 {
		t.Errorf("usage %+v: want 3 answers and 300 input tokens (the parent's two once, the fork's one)", u)
	}
	if got := actions(importEvents(t, env)); !equalCounts(got, map[string]int{"codex unchanged": 2}) {
		t.Errorf("import again: %v", got)
	}
}
