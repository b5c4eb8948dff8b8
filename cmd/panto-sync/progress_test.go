package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/panto-dev/panto/internal/testkit/cmdtest"
)

// slowProxy forwards to endpoint, holding each request for a session's
// objects for delay, so that a push or pull lasts long enough for its
// progress display to be redrawn.
func slowProxy(t *testing.T, endpoint string, delay time.Duration) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/sessions/") {
			time.Sleep(delay)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// lockedBuffer is a bytes.Buffer for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runTerminal runs panto-sync with stdout and stderr on a pseudo-terminal,
// as a person runs it, and returns everything it drew and its exit code.
func (e *env) runTerminal(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := e.command(t, args...)
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := &lockedBuffer{}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(cmdtest.Stderr(t, "panto-sync", out), tty); close(copied) }()
	err = cmd.Wait() // bounded: the command's context kills it past processTimeout
	select {
	case <-copied: // the terminal reports EOF (EIO) once the process is gone
	case <-time.After(5 * time.Second):
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("panto-sync %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

var progressLine = regexp.MustCompile(`(\d+)/(\d+) sessions, `)

// screenLines is what a terminal shows of out at the end: each line as
// the last carriage return left it, without the erase sequences.
func screenLines(out string) []string {
	ansi := regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		l = ansi.ReplaceAllString(l, "")
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		if l = strings.TrimRight(l, " "); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestProgressDisplay drives push and pull in a pseudo-terminal: they
// draw a display of sessions and bytes done that is redrawn as sessions
// finish, print no line per session under it but the ones that need
// attention (a failure), and clear it for the summary; on a pipe, and
// with --json on a terminal, there is no display.
func TestProgressDisplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 40)
	bad := filepath.Join(dir, ids[7]+".jsonl")
	appendFile(t, bad, []byte("{\"type\":\"message\",oops}\n"))
	appendBatch(t, dir, ids[7], false)
	slow := slowProxy(t, e.srv.Endpoint(), 15*time.Millisecond)

	for _, step := range []struct {
		cmd  string
		args []string
		code int
		n    int // sessions the display counts
		sum  string
	}{
		{"push", []string{"push", "--dir", dir, "--concurrency", "2", "--endpoint", slow, e.url}, 1, 40, "push: 40 sessions, 39 pushed"},
		{"pull", []string{"pull", "--dir", filepath.Join(t.TempDir(), "pulled"), "--concurrency", "2", "--endpoint", slow, e.url}, 0, 39, "pull: 39 sessions, 39 pulled"},
	} {
		out, code := e.runTerminal(t, step.args...)
		if code != step.code {
			t.Fatalf("%s on a terminal: exit %d, want %d:\n%q", step.cmd, code, step.code, out)
		}
		// Drawn at the start, redrawn as sessions finish.
		seen := map[int]bool{}
		for _, m := range progressLine.FindAllStringSubmatch(out, -1) {
			done, _ := strconv.Atoi(m[1])
			if total, _ := strconv.Atoi(m[2]); total != step.n {
				t.Errorf("%s: the display counts %d sessions, want %d", step.cmd, total, step.n)
			}
			seen[done] = true
		}
		intermediate := 0
		for done := range seen {
			if done > 0 && done < step.n {
				intermediate++
			}
		}
		if !seen[0] || intermediate == 0 || !strings.Contains(out, "\r") {
			t.Errorf("%s: no progress display redrawn as sessions finish (counts drawn %v):\n%q", step.cmd, seen, out)
		}
		// What stays on the screen: the failure (push), then the summary;
		// no line per session, no display.
		screen := screenLines(out)
		if len(screen) == 0 || !strings.HasPrefix(screen[len(screen)-1], step.sum) {
			t.Errorf("%s: the screen ends %q, want the summary %q", step.cmd, screen, step.sum)
		}
		for _, l := range screen {
			if progressLine.MatchString(l) {
				t.Errorf("%s: the display was left on the screen: %q", step.cmd, l)
			}
			for _, id := range ids {
				if strings.Contains(l, id) && (id != ids[7] || step.cmd != "push") {
					t.Errorf("%s: a line for session %s under the display: %q", step.cmd, id, l)
				}
			}
		}
		if step.cmd == "push" && !strings.Contains(strings.Join(screen, "\n"), "failed    "+ids[7]) && !strings.Contains(strings.Join(screen, "\n"), bad+":") {
			t.Errorf("push: the failed session is not on the screen:\n%s", strings.Join(screen, "\n"))
		}
	}

	// --json on a terminal: JSON lines only, no display.
	appendBatch(t, dir, ids[0], false)
	out, _ := e.runTerminal(t, "push", "--dir", dir, "--json", e.url)
	for _, l := range strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r\n", "\n")), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("push --json on a terminal printed a line that is not JSON: %q", l)
		}
	}
	// And on a pipe, no display either.
	appendBatch(t, dir, ids[1], false)
	r := e.run(t, "push", "--dir", dir, "--endpoint", slow, e.url)
	if strings.Contains(r.stdout, "\r") || progressLine.MatchString(r.stdout) {
		t.Errorf("push on a pipe drew a progress display:\n%q", r.stdout)
	}
}
