package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds panto-sync once per test binary, under the harness's
// temporary root (removed with it however the binary ends), with the race
// detector when the tests run under it (cmdtest.Build).
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "panto-sync-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "panto-sync")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		buildErr = cmdtest.Build(ctx, dir, ".")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// env is a server, a bucket on it, and the environment that reaches it.
// The binary gets the server's minimal environment (srv.Env); stores
// opened in the test reach it with explicit options, so that tests can
// run in parallel.
type env struct {
	srv    *miniotest.Server
	bucket string
	url    string
	// cache is the runs' $XDG_CACHE_HOME: one machine's, shared by the
	// runs of a test as by a user's (the index catalog cache), while
	// each run has a new empty HOME.
	cache string
	// state is the runs' $XDG_STATE_HOME, shared as cache is: where
	// sync keeps its record of agreement (agreed.go).
	state string
}

// newEnv is a fresh bucket on the shared MinIO.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, miniotest.Shared(t))
}

// newEnvOn is a fresh bucket on srv.
func newEnvOn(t *testing.T, srv *miniotest.Server) *env {
	t.Helper()
	b := srv.NewBucket(t)
	return &env{srv: srv, bucket: b, url: "s3://" + b + "/panto", cache: t.TempDir(), state: t.TempDir()}
}

// processTimeout bounds each run of the binary: past it the process is
// killed and Wait returns.
const processTimeout = 3 * time.Minute

// command is the binary with args, bounded by processTimeout, in the
// server's environment. Its stderr is watched for race reports; a caller
// that wants it too sets cmd.Stderr = cmdtest.Stderr(t, "panto-sync", w).
func (e *env) command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(e.srv.Env(), "XDG_CACHE_HOME="+e.cache, "XDG_STATE_HOME="+e.state)
	cmd.Stderr = cmdtest.Stderr(t, "panto-sync "+strings.Join(args, " "), nil)
	return cmd
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// run runs panto-sync with args against e and returns what it printed
// and its exit code.
func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return e.runEnv(t, nil, args...)
}

// runEnv is run with extra environment variables (which win over the
// server's).
func (e *env) runEnv(t *testing.T, extra []string, args ...string) result {
	t.Helper()
	cmd := e.command(t, args...)
	cmd.Env = append(cmd.Env, extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, cmdtest.Stderr(t, "panto-sync "+strings.Join(args, " "), &errb)
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run panto-sync %v: %v", args, err)
	}
	return r
}

// must runs panto-sync and fails the test unless it exits with want.
func (e *env) must(t *testing.T, want int, args ...string) result {
	t.Helper()
	r := e.run(t, args...)
	if r.code != want {
		t.Fatalf("panto-sync %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// events parses --json output: the events and the summary.
func events(t *testing.T, out string) ([]Event, Summary) {
	t.Helper()
	var evs []Event
	var sum Summary
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, line := range lines {
		var probe struct{ Event string }
		if err := json.Unmarshal([]byte(line), &probe); err != nil {
			t.Fatalf("line %d of --json output is not JSON: %q", i+1, line)
		}
		if probe.Event == "summary" {
			if i != len(lines)-1 {
				t.Fatalf("summary is not the last line of --json output:\n%s", out)
			}
			if err := json.Unmarshal([]byte(line), &sum); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if sum.Event != "summary" {
		t.Fatalf("no summary in --json output:\n%s", out)
	}
	return evs, sum
}

// byEvent counts events by kind.
func byEvent(evs []Event) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.Event]++
	}
	return m
}

var textRand = rand.New(rand.NewPCG(7, 7))
var textMu sync.Mutex

func someText(n int) string {
	textMu.Lock()
	defer textMu.Unlock()
	words := []string{"push", "pull", "segment", "func", "return err", "the", "a", "bucket", "\"quoted\"", "naïve", "<tag>", "\n", "{", "}"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[textRand.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

// newSession writes a session of nBatches batches into dir and returns
// its id.
func newSession(t *testing.T, dir string, nBatches int) string {
	t.Helper()
	id := agent.NewSessionID()
	for i := 0; i < nBatches; i++ {
		appendBatch(t, dir, id, i == 0)
	}
	return id
}

// appendBatch appends one batch (an assistant tool call and its result,
// or a user message) to session id in dir, as panto would, and returns
// the bytes appended.
func appendBatch(t testing.TB, dir, id string, header bool) []byte {
	t.Helper()
	msgs := []agent.PersistentMessage{{Message: agent.UserText(someText(200))}}
	if !header {
		msgs = []agent.PersistentMessage{
			{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock(someText(100)), agent.ToolUseBlock("t1", "bash", json.RawMessage(`{"command":"ls"}`))}},
				Identity: agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, Model: "m"}},
			{Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("t1", someText(300), false)}}},
		}
	}
	b, err := sessionlog.EncodeBatch(id, header, msgs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(dir, id+".jsonl"), b)
	return b
}

// catalog writes n sessions of 1 to 4 batches into a new directory.
func catalog(t *testing.T, n int) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, newSession(t, dir, 1+i%4))
	}
	sort.Strings(ids)
	return dir, ids
}

// readCatalog returns the session files of dir by name.
func readCatalog(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = b
	}
	return m
}

// sameCatalog fails unless dirs a and b hold the same session files,
// byte for byte.
func sameCatalog(t *testing.T, a, b string) {
	t.Helper()
	ca, cb := readCatalog(t, a), readCatalog(t, b)
	if len(ca) != len(cb) {
		t.Fatalf("%s holds %d sessions, %s holds %d", a, len(ca), b, len(cb))
	}
	for name, data := range ca {
		if !bytes.Equal(data, cb[name]) {
			t.Fatalf("%s differs: %d bytes in %s, %d in %s", name, len(data), a, len(cb[name]), b)
		}
	}
}

func appendFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
