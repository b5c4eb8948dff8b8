package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/faultnet"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// TestImportWatch: panto import --watch imports what the agents have,
// then each turn they write as they write it (a log that grows, a torn
// line completed, a new day's directory with a new session), and another
// panto lists it while the watch runs (on a bucket too: the store is
// flushed after each import); Ctrl-C ends it with status 0.
func TestImportWatch(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			homes, piLog := agentHomes(t)
			env := append(b.storeEnv(), homes...)
			codexHome := strings.TrimPrefix(homes[1], "CODEX_HOME=")

			w := startImportWatch(t, env)
			await := func(suffix, action string) importEvent {
				t.Helper()
				return w.await(t, func(ev importEvent) bool { return strings.HasSuffix(ev.Source, suffix) && ev.Action == action }, "failed", "refused", "diverged")
			}
			await(".jsonl.zst", "new")
			await(filepath.Base(piLog), "new")

			// pi completes the line it was writing, and goes on.
			data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(piLog, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if ev := await(filepath.Base(piLog), "appended"); ev.Appended == 0 {
				t.Errorf("the grown pi log: %+v", ev)
			}
			// Codex starts a new day, in a directory made after the watch
			// began, with a session of its own.
			codex, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "codex.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			const newID = "019b0000-9999-7222-8333-444455556666"
			day := filepath.Join(codexHome, "sessions", "2026", "01", "03")
			if err := os.MkdirAll(day, 0o755); err != nil {
				t.Fatal(err)
			}
			newLog := filepath.Join(day, "rollout-2026-01-03T09-00-00-"+newID+".jsonl")
			lines := strings.SplitAfter(strings.ReplaceAll(string(codex), "019b0000-1111-7222-8333-444455556666", newID), "\n")
			if err := os.WriteFile(newLog, []byte(strings.Join(lines[:12], "")), 0o644); err != nil {
				t.Fatal(err)
			}
			created := await(filepath.Base(newLog), "new")
			// and goes on writing there.
			f, err := os.OpenFile(newLog, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(strings.Join(lines[12:], "")); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if ev := await(filepath.Base(newLog), "appended"); ev.ID != created.ID || ev.Appended == 0 {
				t.Errorf("the new log grown: %+v", ev)
			}

			// Another panto has it while the watch runs.
			r := runPanto(t, t.TempDir(), env, "", "sessions", "--json", "--all")
			if r.code != 0 || !strings.Contains(r.stdout, created.ID) {
				t.Errorf("panto sessions while the watch runs: exit %d, %s %s; want %s listed", r.code, r.stdout, r.stderr, created.ID)
			}

			if err := w.stop(); err != nil {
				t.Errorf("import --watch stopped by Ctrl-C: %v, want status 0", err)
			}
		})
	}
}

// TestImportWatchRetries: a watch started while the bucket does not
// answer waits for it, and a turn written while the bucket does not
// answer is imported once it answers again, though the agent writes
// nothing more.
func TestImportWatchRetries(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	px := faultnet.New(t, srv.Endpoint())
	homes, piLog := agentHomes(t)
	env := append(append(srv.AWSEnv(), homes...), "PANTO_STORE=s3://"+bucket+"/panto", "AWS_ENDPOINT_URL_S3="+px.URL())

	// The bucket does not answer when the watch starts (a user service
	// up before the network): it waits for it.
	down, err := px.Add(faultnet.Fault{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}})
	if err != nil {
		t.Fatal(err)
	}
	w := startImportWatch(t, env, "--from", "pi")
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(w.stderr.String(), "the bucket does not answer"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("import --watch on a bucket that does not answer: %s", w.stderr.String())
		}
	}
	if err := px.Remove(down); err != nil {
		t.Fatal(err)
	}
	next := func() importEvent {
		t.Helper()
		return w.await(t, func(importEvent) bool { return true })
	}
	if ev := next(); ev.Action != "new" {
		t.Fatalf("first import: %+v", ev)
	}
	down, err = px.Add(faultnet.Fault{Type: "reset_peer", Attributes: map[string]int64{"timeout": 0}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(piLog, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Action != "failed" {
		t.Fatalf("import while the bucket resets every connection: %+v, want failed", ev)
	}
	if err := px.Remove(down); err != nil {
		t.Fatal(err)
	}
	// Tried again: appended, or found there (the append reached the
	// bucket, its answer did not).
	var ev importEvent
	for ev = next(); ev.Action == "failed"; ev = next() {
	}
	if ev.Action != "appended" && ev.Action != "unchanged" {
		t.Fatalf("retry: %+v, want the turn appended", ev)
	}
	r := runPanto(t, t.TempDir(), append(env[:len(env):len(env)], "AWS_ENDPOINT_URL_S3="+srv.Endpoint()), "", "sessions", "--json", "--all")
	var rows []struct {
		ID       string `json:"id"`
		Messages int    `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 || rows[0].ID != ev.ID || rows[0].Messages != ev.Messages {
		t.Fatalf("the bucket lists %s (%v), want %s with %d messages", r.stdout, err, ev.ID, ev.Messages)
	}
}

// flakyFlush is a store whose first flushes fail, as a bucket's index
// write does while the bucket does not answer.
type flakyFlush struct {
	*fsjsonl.Store
	mu       sync.Mutex
	failures int
	flushes  int
}

func (f *flakyFlush) Flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
	if f.flushes <= f.failures {
		return errors.New("index not written: connection reset by peer")
	}
	return nil
}

func (f *flakyFlush) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushes
}

// TestImportWatchRetriesFlush: an import whose flush failed (the index
// not written, so no other machine lists what it imported) is flushed
// again, though nothing else is written.
func TestImportWatchRetriesFlush(t *testing.T) {
	t.Parallel()
	dir, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &flakyFlush{Store: dir, failures: 1}
	homes, piLog := agentHomes(t)
	getenv := func(k string) string {
		for _, kv := range homes {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	_, stderr, _ := inProcessWatch(t, st, getenv, 0)
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(piLog, data, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for st.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := st.count(); n < 2 || !strings.Contains(stderr.String(), "index not written") {
		t.Fatalf("%d flushes, stderr %q: want the failed flush told and tried again", n, stderr.String())
	}
}

// TestImportWatchClaudeCode: a session of the real Claude Code, begun
// while panto import --watch runs (its project directory made then), is
// imported turn by turn as Claude Code writes it.
func TestImportWatchClaudeCode(t *testing.T) {
	t.Parallel()
	claude := testTool(t, "Claude Code "+claudeCodeVersion, "PANTO_CLAUDE_CODE", filepath.Join("claude-code-"+claudeCodeVersion, "claude"), "claude-code")
	home := filepath.Join(t.TempDir(), "home")
	dir := filepath.Join(t.TempDir(), "sessions")
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_STATE_HOME=" + filepath.Join(home, "state"), "PANTO_STORE=" + dir}
	w := startImportWatch(t, env, "--from", "claude-code")
	w.watching(t)

	work := t.TempDir()
	ask := func(answer string, args ...string) {
		t.Helper()
		srv := fakeAnthropic(t, fakeprovider.Reply{Text: answer, InputTokens: 10, OutputTokens: 3})
		ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
		defer cancel()
		c := exec.CommandContext(ctx, claude, append([]string{"-p"}, args...)...)
		c.Dir = work
		c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir(), "ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=" + anthropicKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
		c.WaitDelay = 5 * time.Second
		if out, err := c.CombinedOutput(); err != nil || !strings.Contains(string(out), answer) {
			t.Fatalf("claude %q: %v: %s", args, err, out)
		}
	}
	await := func(action string) importEvent {
		t.Helper()
		return w.await(t, func(ev importEvent) bool { return ev.Action == action }, "new", "appended", "failed", "refused", "diverged")
	}
	ask("First answer.", "first question")
	created := await("new")
	ask("Second answer.", "--continue", "second question")
	if ev := await("appended"); ev.ID != created.ID || ev.Appended != 2 {
		t.Fatalf("the second turn: %+v, want 2 messages appended to %s", ev, created.ID)
	}
	r := runPanto(t, work, env, "", "show", created.ID)
	for _, want := range []string{"first question", "First answer.", "second question", "Second answer."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the imported session lacks %q:\n%s", want, r.stdout)
		}
	}
}

// watchRun is a panto import --watch --json running for a test: the
// events it prints, as it prints them, and its stderr.
type watchRun struct {
	cmd    *exec.Cmd
	events chan importEvent
	stderr lockedBuffer
	once   sync.Once
	err    error
}

// startImportWatch starts panto import --watch --json with env and
// args; it is stopped (Ctrl-C) when the test ends, if not before.
func startImportWatch(t *testing.T, env []string, args ...string) *watchRun {
	t.Helper()
	return startImportWatchIn(t, t.TempDir(), env, args...)
}

// startImportWatchIn is startImportWatch in directory dir.
func startImportWatchIn(t *testing.T, dir string, env []string, args ...string) *watchRun {
	t.Helper()
	w := &watchRun{events: make(chan importEvent, 64)}
	w.cmd = pantoCmd(t, dir, env, append([]string{"import", "--watch", "--json"}, args...)...)
	w.cmd.Stderr = cmdtest.Stderr(t, "panto", &w.stderr)
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev importEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("import --watch line %q: %v", sc.Text(), err)
				continue
			}
			w.events <- ev
		}
	}()
	t.Cleanup(func() { _ = w.stop() })
	return w
}

// await returns the first event that want takes, within 90 s; an event
// whose action is one of fatal before it fails the test.
func (w *watchRun) await(t *testing.T, want func(importEvent) bool, fatal ...string) importEvent {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("import --watch ended: %s", w.stderr.String())
			}
			if want(ev) {
				return ev
			}
			if slices.Contains(fatal, ev.Action) {
				t.Fatalf("import --watch: %+v", ev)
			}
		case <-deadline:
			t.Fatalf("no awaited event of import --watch within 90 s: %s", w.stderr.String())
		}
	}
}

// watching waits until the watch says it watches (its first import done).
func (w *watchRun) watching(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(w.stderr.String(), "watching"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("import --watch did not begin watching: %s", w.stderr.String())
		}
	}
}

// stop ends the watch as Ctrl-C does, and returns how it exited.
func (w *watchRun) stop() error {
	w.once.Do(func() {
		if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
			w.err = err
			return
		}
		for range w.events {
		}
		w.err = w.cmd.Wait()
	})
	return w.err
}

// TestImportWatchLinkedDir: an agent's directory that is a symbolic link
// (moved to another disk and linked back) is imported and watched: a
// session begun in a new project's directory under it is imported as it
// is written.
func TestImportWatchLinkedDir(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	moved := filepath.Join(t.TempDir(), "pi-sessions")
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const name = "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl"
	if err := os.MkdirAll(filepath.Join(moved, "--home-me-app--"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(moved, "--home-me-app--", name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "pi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, filepath.Join(home, "pi", "sessions")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PI_CODING_AGENT_DIR=" + filepath.Join(home, "pi"), "PANTO_STORE=" + t.TempDir()}
	w := startImportWatch(t, env, "--from", "pi")
	await := func(dir string) {
		t.Helper()
		want := filepath.Join(home, "pi", "sessions", dir, name)
		ev := w.await(t, func(importEvent) bool { return true })
		if ev.Source != want || ev.Action != "new" {
			t.Fatalf("import --watch: %+v, want %s new", ev, want)
		}
	}
	await("--home-me-app--")
	w.watching(t)
	// pi begins a session in another project, its directory made now.
	other := strings.ReplaceAll(string(data), "0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000", "0193aaaa-bbbb-7ccc-8ddd-eeeeffff0001")
	if err := os.MkdirAll(filepath.Join(moved, "--home-me-lib--"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(moved, "--home-me-lib--", name), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	await("--home-me-lib--")
	// A project's directory kept elsewhere and linked in, with a day
	// directory made in it later: followed through the link, and named
	// under it.
	elsewhere := filepath.Join(t.TempDir(), "kept")
	if err := os.MkdirAll(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(moved, "--home-me-kept--")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the watch takes the link, and watches it
	kept := strings.ReplaceAll(string(data), "0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000", "0193aaaa-bbbb-7ccc-8ddd-eeeeffff0002")
	if err := os.WriteFile(filepath.Join(elsewhere, name), []byte(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	await("--home-me-kept--")
}

// TestImportStopped: Ctrl-C during a long first import (a watch's, or a
// plain one's) stops it between sources, and what it wrote is listed by
// another panto: the index entries are flushed as at any exit. A watch
// so stopped exits 0, a plain import 1, saying to import again.
func TestImportStopped(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	fixture, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "claude-code.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"watch", []string{"import", "--watch", "--json"}, 0},
		{"plain", []string{"import", "--json"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bucket := srv.NewBucket(t)
			// A slow link, so that the import takes many round trips.
			px := faultnet.New(t, srv.Endpoint())
			if _, err := px.Add(faultnet.Fault{Type: "latency", Attributes: map[string]int64{"latency": 100}}); err != nil {
				t.Fatal(err)
			}
			claude := filepath.Join(t.TempDir(), "claude")
			const logs = 64
			for i := range logs {
				path := filepath.Join(claude, "projects", "-home-me-app", fmt.Sprintf("5e0c1a2b-0000-4000-8000-%012d.jsonl", i))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, fixture, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			store := append(srv.AWSEnv(), "PANTO_STORE=s3://"+bucket+"/panto")
			env := append(slices.Clone(store), "AWS_ENDPOINT_URL_S3="+px.URL(), "CLAUDE_CONFIG_DIR="+claude)
			cmd := pantoCmd(t, t.TempDir(), env, tc.args...)
			var stderr lockedBuffer
			cmd.Stderr = cmdtest.Stderr(t, "panto", &stderr)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			var imported []string
			for sc.Scan() {
				var ev importEvent
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action != "new" {
					t.Fatalf("import: %s (%v)", sc.Text(), err)
				}
				if len(imported) == 0 {
					if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
						t.Fatal(err)
					}
				}
				imported = append(imported, ev.ID)
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			if code := 0; err == nil && tc.code != 0 || err != nil && (!errors.As(err, &exit) || exit.ExitCode() != tc.code) {
				if exit != nil {
					code = exit.ExitCode()
				}
				t.Fatalf("import stopped by Ctrl-C: %v (exit %d), want exit %d: %s", err, code, tc.code, stderr.String())
			}
			if len(imported) == logs || !strings.Contains(stderr.String(), fmt.Sprintf("stopped after %d files of %d", len(imported), logs)) {
				t.Fatalf("%d of %d imported, stderr %q: want the import stopped, and said so", len(imported), logs, stderr.String())
			}
			r := runPanto(t, t.TempDir(), append(store, "AWS_ENDPOINT_URL_S3="+srv.Endpoint()), "", "sessions", "--json", "--all", "--limit", "0")
			var rows []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != len(imported) {
				t.Fatalf("another panto lists %d sessions (%v), want the %d imported: %s", len(rows), err, len(imported), r.stderr)
			}
		})
	}
}

// TestImportWatchRelativePath: a watch of a relative PATH names a log in
// its events as the first import did (a script keys them by source), for
// "." too.
func TestImportWatchRelativePath(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"sessions", "."} {
		t.Run(arg, func(t *testing.T) {
			t.Parallel()
			homes, piLog := agentHomes(t)
			dir := filepath.Join(strings.TrimPrefix(homes[2], "PI_CODING_AGENT_DIR="), "sessions")
			if arg == "sessions" {
				dir = filepath.Dir(dir)
			}
			want, err := filepath.Rel(dir, piLog)
			if err != nil {
				t.Fatal(err)
			}
			w := startImportWatchIn(t, dir, []string{"PANTO_STORE=" + t.TempDir()}, "--from", "pi", arg)
			await := func(action string) {
				t.Helper()
				ev := w.await(t, func(importEvent) bool { return true })
				if ev.Source != want || ev.Action != action {
					t.Fatalf("import --watch: %+v, want %s %s", ev, action, want)
				}
			}
			await("new")
			w.watching(t)
			data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(piLog, data, 0o644); err != nil {
				t.Fatal(err)
			}
			await("appended")
		})
	}
}

// TestImportWatchAgentFirstRun: an agent run for the first time on the
// machine while the watch runs (its directory, and the one above, made
// then) has its first turn imported as it writes it, not at the next
// look for the directory (here an hour away).
func TestImportWatchAgentFirstRun(t *testing.T) {
	t.Parallel()
	st, home, getenv := homeWithoutAgents(t)
	stdout, stderr, _ := inProcessWatch(t, st, getenv, time.Hour)
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(home, ".pi", "agent", "sessions", "--home-me-app--", "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stdout.String(), `"action":"new"`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pi's first session not imported within a minute: %s %s", stdout.String(), stderr.String())
		}
	}
}

// TestImportWatchAgentDirRemade: an agent's directory removed while the
// watch runs (cleared by its user) and made again by the agent's next
// run is watched again: the turn written in it is imported as it is
// written, not at a restart of the watch.
func TestImportWatchAgentDirRemade(t *testing.T) {
	t.Parallel()
	st, home, getenv := homeWithoutAgents(t)
	sessions := filepath.Join(home, ".pi", "agent", "sessions")
	if err := os.MkdirAll(filepath.Join(sessions, "--home-me-old--"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := inProcessWatch(t, st, getenv, time.Hour)
	if err := os.RemoveAll(filepath.Join(home, ".pi")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the watch takes the removal before pi's next run
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(home, ".pi", "agent", "sessions", "--home-me-app--", "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stdout.String(), `"action":"new"`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session in the directory made again not imported within a minute: %s %s", stdout.String(), stderr.String())
		}
	}
}

// inProcessWatch runs an importWatcher of pi's directory (getenv's) on
// st in this process until the test ends, with rescan its look for a
// missing directory (0: the default); it returns its stdout and stderr.
func inProcessWatch(t *testing.T, st store.LogStore, getenv func(string) string, rescan time.Duration, options ...func(*importWatcher)) (stdout, stderr *lockedBuffer, stop func()) {
	t.Helper()
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	stored, err := storedCheckpoints(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	w := &importWatcher{e: &env{stdout: stdout, stderr: stderr, getenv: getenv}, job: &importJob{st: st, stored: stored, projects: newProjectFinder(), jsonOut: true}, roots: watchRoots(nil, importer.Pi, getenv), rescan: rescan}
	for _, o := range options {
		o(w)
	}
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
			w.close()
		})
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stderr.String(), "watching"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("import --watch did not begin watching: %s", stderr.String())
		}
	}
	return stdout, stderr, stop
}

// homeWithoutAgents is a directory store and a home where no agent ran
// yet, with the environment that names it alone.
func homeWithoutAgents(t *testing.T) (st *fsjsonl.Store, home string, getenv func(string) string) {
	t.Helper()
	st, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home = t.TempDir()
	return st, home, func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
}

// TestImportWatchPaced: a log whose import is costly waits, after each
// import, as long as its pace says before it is imported again (the
// turns written meanwhile go as one batch), and what waits is imported
// when the watch is stopped.
func TestImportWatchPaced(t *testing.T) {
	t.Parallel()
	st, home, getenv := homeWithoutAgents(t)
	const wait = 4 * time.Second
	stdout, stderr, stop := inProcessWatch(t, st, getenv, time.Hour, func(w *importWatcher) {
		w.pace = func(time.Duration) time.Duration { return wait }
	})
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	log := filepath.Join(home, ".pi", "agent", "sessions", "--home-me-app--", "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(n int) {
		t.Helper()
		if err := os.WriteFile(log, bytes.Join(lines[:n], nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	await := func(n int) time.Time {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if evs := decodeLines[importEvent](t, stdout.String()); len(evs) >= n {
				return time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("import %d not made within a minute: %s %s", n, stdout.String(), stderr.String())
			}
		}
	}
	write(7)
	first := await(1)
	write(10)
	// Less a second for the polls (without the pace: the quiet second).
	if second := await(2); second.Sub(first) < wait-time.Second {
		t.Fatalf("the log was imported again %s after its import, before its pace of %s", second.Sub(first), wait)
	}
	write(len(lines))
	time.Sleep(500 * time.Millisecond) // its events reach the watch, which waits on the pace
	stop()
	evs := decodeLines[importEvent](t, stdout.String())
	if len(evs) != 3 || evs[0].Action != "new" || evs[1].Action != "appended" || evs[2].Action != "appended" {
		t.Fatalf("imports: %+v", evs)
	}
	if evs[2].Messages <= evs[1].Messages {
		t.Fatalf("the turn written before the stop was not imported: %+v", evs)
	}
}

// TestImportWatchDivergedOnce: a watch prints a session's divergence
// once, not again at each turn its agent writes while it stays the same
// (a session continued in panto, and by its agent on another machine).
func TestImportWatchDivergedOnce(t *testing.T) {
	t.Parallel()
	st, home, getenv := homeWithoutAgents(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	const name = "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl"
	// The store holds the session converted from another first prompt.
	other, err := importer.Convert(importer.Pi, name, bytes.Replace(bytes.Join(lines[:7], nil), []byte("List the files."), []byte("List the files!"), 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendLog(t.Context(), other.ID, store.Checkpoint{}, other.Log); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := inProcessWatch(t, st, getenv, time.Hour, func(w *importWatcher) {
		w.job.jsonOut, w.job.told = false, map[string]string{}
	})
	dir := filepath.Join(home, ".pi", "agent", "sessions", "--home-me-app--")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	await := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stdout.String(), what); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q within a minute: %s %s", what, stdout.String(), stderr.String())
			}
		}
	}
	write(name, bytes.Join(lines[:7], nil))
	await("diverged")
	write(name, bytes.Join(lines[:10], nil)) // the agent's next turn
	time.Sleep(2500 * time.Millisecond)      // imported, as a batch of its own
	write("2026-03-02T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0001.jsonl", bytes.ReplaceAll(data, []byte("0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000"), []byte("0193aaaa-bbbb-7ccc-8ddd-eeeeffff0001")))
	await("imported")
	if n := strings.Count(stdout.String(), "diverged"); n != 1 {
		t.Fatalf("the divergence was printed %d times: %s", n, stdout.String())
	}
}
