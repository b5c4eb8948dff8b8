package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// lfMachine is one machine of the local-first tests: its environment
// (its own XDG_DATA_HOME, so its own replica) against the bucket.
func lfMachine(t *testing.T, s3 *miniotest.Server) []string {
	return append(minioEnv(s3), openaiKeyVar+"="+openaiKey, "XDG_DATA_HOME="+filepath.Join(t.TempDir(), "data"))
}

const openaiKeyVar = "OPENAI_API_KEY"

// bucketTexts are the texts of session id's messages in the bucket, read
// with the bucket's own store (--direct's).
func bucketTexts(t *testing.T, s3 *miniotest.Server, remote, id string) []string {
	t.Helper()
	conv, err := bucketOf(t, s3, remote).Load(context.Background(), id)
	if err != nil {
		t.Fatalf("load %s from the bucket: %v", id, err)
	}
	var out []string
	for _, m := range conv.Messages {
		out = append(out, m.Text())
	}
	return out
}

// bucketOf opens the bucket's own store (what --direct opens).
func bucketOf(t *testing.T, s3 *miniotest.Server, remote string) *objstore.Store {
	t.Helper()
	st, err := objstore.Open(t.Context(), remote, objstore.WithEndpoint(s3.Endpoint()), objstore.WithS3Options(s3.SetCredentials))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLocalFirstOutage: with the bucket killed, then frozen, panto -c
// answers every prompt from this machine's copy and says so in one line;
// once the bucket is back every message is in it exactly once, and
// another machine continues the session.
func TestLocalFirstOutage(t *testing.T) {
	t.Parallel()
	provider := fakeprovider.New(t, fakeprovider.OpenAI, openaiKey,
		fakeprovider.Reply{Text: "reply online"}, fakeprovider.Reply{Text: "reply dead"},
		fakeprovider.Reply{Text: "reply frozen"}, fakeprovider.Reply{Text: "reply b"})
	s3 := miniotest.New(t)
	remote := "s3://" + s3.NewBucket(t) + "/lf"
	a, b := lfMachine(t, s3), lfMachine(t, s3)
	flags := append(providerCases[0].flags(provider), "--store", remote)
	wd := t.TempDir()

	r := runPanto(t, wd, a, "", append(flags, "online prompt")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("online: exit %d: %s", r.code, r.stderr)
	}
	id := m[1]

	s3.Kill()
	r = runPanto(t, wd, a, "", append(flags, "-c", "prompt while dead")...)
	if r.code != 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("bucket dead: exit %d: %s", r.code, r.stderr)
	}
	for _, says := range []string{"bucket unreachable: working from this machine's copy", "2 messages not yet sent"} {
		if !strings.Contains(r.stderr, says) {
			t.Errorf("bucket dead: stderr does not say %q: %s", says, r.stderr)
		}
	}

	if err := s3.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s3.Freeze(); err != nil {
		t.Fatal(err)
	}
	r = runPanto(t, wd, a, "", append(flags, "-c", "prompt while frozen")...)
	if err := s3.Thaw(); err != nil {
		t.Fatal(err)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "bucket unreachable") {
		t.Fatalf("bucket frozen: exit %d: %s", r.code, r.stderr)
	}
	if got := len(provider.Requests()); got != 3 {
		t.Fatalf("the provider had %d requests, want 3 (one per prompt)", got)
	}

	// Back: the next run on machine A sends what was left.
	r = runPanto(t, wd, a, "", "sessions", "--store", remote)
	if r.code != 0 || strings.Contains(r.stderr, "not yet sent") {
		t.Fatalf("sessions after the outage: exit %d: %s", r.code, r.stderr)
	}
	want := []string{"online prompt", "reply online", "prompt while dead", "reply dead", "prompt while frozen", "reply frozen"}
	if got := bucketTexts(t, s3, remote, id); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the bucket holds %q, want %q", got, want)
	}

	// Machine B continues A's session from the bucket.
	r = runPanto(t, wd, b, "", append(flags, "-c", "prompt on b")...)
	if r.code != 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("machine B: exit %d: %s", r.code, r.stderr)
	}
	if body := string(provider.Requests()[3].Body); !strings.Contains(body, "prompt while frozen") {
		t.Errorf("machine B did not send A's history: %s", body)
	}
	if got := bucketTexts(t, s3, remote, id); len(got) != 8 || got[6] != "prompt on b" {
		t.Fatalf("after machine B the bucket holds %q", got)
	}
}

// TestLocalFirstDivergedKeepsBoth: machine A appends while the bucket is
// down, machine B appends to the same session once it is back: A's next
// run keeps both, as two linked sessions, and says which holds what.
func TestLocalFirstDivergedKeepsBoth(t *testing.T) {
	t.Parallel()
	provider := fakeprovider.New(t, fakeprovider.OpenAI, openaiKey,
		fakeprovider.Reply{Text: "reply 1"}, fakeprovider.Reply{Text: "reply a"}, fakeprovider.Reply{Text: "reply b"})
	s3 := miniotest.New(t)
	remote := "s3://" + s3.NewBucket(t) + "/lf"
	a, b := lfMachine(t, s3), lfMachine(t, s3)
	flags := append(providerCases[0].flags(provider), "--store", remote)
	wd := t.TempDir()

	r := runPanto(t, wd, a, "", append(flags, "shared prompt")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("online: exit %d: %s", r.code, r.stderr)
	}
	id := m[1]
	s3.Kill()
	if r = runPanto(t, wd, a, "", append(flags, "-c", "a offline")...); r.code != 0 {
		t.Fatalf("machine A offline: exit %d: %s", r.code, r.stderr)
	}
	if err := s3.Restart(); err != nil {
		t.Fatal(err)
	}
	if r = runPanto(t, wd, b, "", append(flags, "-c", "b online")...); r.code != 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("machine B: exit %d: %s", r.code, r.stderr)
	}

	r = runPanto(t, wd, a, "", "sessions", "--store", remote)
	if r.code != 0 || !strings.Contains(r.stderr, "also changed on another machine") {
		t.Fatalf("machine A back online: exit %d, not told of the conflict: %s", r.code, r.stderr)
	}
	list, err := bucketOf(t, s3, remote).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var kept agent.SessionInfo
	for _, info := range list {
		if info.Parent == id {
			kept = info
		}
	}
	if len(list) != 2 || kept.ID == "" || !strings.Contains(r.stderr, kept.ID) {
		t.Fatalf("the bucket lists %+v: want %s and a copy linked to it, named in %q", list, id, r.stderr)
	}
	if got := strings.Join(bucketTexts(t, s3, remote, id), "|"); got != "shared prompt|reply 1|b online|reply b" {
		t.Errorf("%s holds %q", id, got)
	}
	if got := strings.Join(bucketTexts(t, s3, remote, kept.ID), "|"); got != "shared prompt|reply 1|a offline|reply a" {
		t.Errorf("the kept copy %s holds %q", kept.ID, got)
	}
}

// TestLocalFirstUnreachableAtStart: a bucket that does not answer at all
// does not refuse panto (it lists this machine's copy and says so in one
// line); --direct keeps the error (TestMisconfiguredStore).
func TestLocalFirstUnreachableAtStart(t *testing.T) {
	t.Parallel()
	s3 := miniotest.Shared(t)
	r := runPanto(t, t.TempDir(), lfMachine(t, s3), "", "sessions", "--store", "s3://"+s3.NewBucket(t), "--endpoint", "http://127.0.0.1:1")
	if r.code != 0 || !strings.Contains(r.stderr, "panto: bucket unreachable: working from this machine's copy\n") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// lineWaiter is a writer that closes seen once what it was written holds
// want.
type lineWaiter struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	buf  strings.Builder
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestLocalFirstInterruptedExitWait: Ctrl-C or SIGTERM while panto waits
// at exit for a bucket that stopped answering ends the wait, not panto:
// it says in one line what it did not send and how it will be, and exits
// as the turn did; the next run sends it.
func TestLocalFirstInterruptedExitWait(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			s3 := miniotest.New(t)
			remote := "s3://" + s3.NewBucket(t) + "/lf"
			var once sync.Once
			t.Cleanup(func() { _ = s3.Thaw() })
			provider := fakeprovider.New(t, fakeprovider.OpenAI, openaiKey, fakeprovider.Reply{Text: "reply while frozen"})
			// The bucket stops answering as the provider answers: the
			// answer waits for it at exit.
			provider.SetBefore(func(*http.Request) {
				once.Do(func() {
					if err := s3.Freeze(); err != nil {
						t.Error(err)
					}
				})
			})
			env := lfMachine(t, s3)
			wd := t.TempDir()
			cmd := pantoCmd(t, wd, env, append(providerCases[0].flags(provider), "--store", remote, "a prompt")...)
			stderr := &lineWaiter{want: "(resume: panto -r ", seen: make(chan struct{})}
			var stdout strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, cmdtest.Stderr(t, "panto", stderr)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-stderr.seen:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("no session line; stderr: %s", stderr)
			}
			// The line is printed as the wait begins.
			time.Sleep(100 * time.Millisecond)
			if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(stderr.String(), "not yet sent to "+remote) {
				t.Fatalf("%s in the exit's wait: exit %d (%v), stderr %q: want exit 0 and the line saying what is left", sig, code, cmd.ProcessState, stderr)
			}
			if stdout.String() != "reply while frozen\n" {
				t.Errorf("stdout %q", stdout.String())
			}
			if err := s3.Thaw(); err != nil {
				t.Fatal(err)
			}
			m := sessionLine.FindStringSubmatch(stderr.String())
			if r := runPanto(t, wd, env, "", "sessions", "--store", remote); r.code != 0 || strings.Contains(r.stderr, "not yet sent") {
				t.Fatalf("sessions after the thaw: exit %d: %s", r.code, r.stderr)
			}
			if got := strings.Join(bucketTexts(t, s3, remote, m[1]), "|"); got != "a prompt|reply while frozen" {
				t.Errorf("the bucket holds %q", got)
			}
		})
	}
}

// TestLocalFirstContinueOffline: -c on a machine whose copy holds no
// session, while the bucket does not answer, says that the bucket may
// hold it and what to do, not that the store holds none (which sent the
// user to start a new session beside the one in the bucket).
func TestLocalFirstContinueOffline(t *testing.T) {
	t.Parallel()
	s3 := miniotest.Shared(t)
	provider := fakeprovider.New(t, fakeprovider.OpenAI, openaiKey)
	flags := append(providerCases[0].flags(provider), "--store", "s3://"+s3.NewBucket(t), "--endpoint", "http://127.0.0.1:1")
	for _, args := range [][]string{{"-c"}, {"-c", "--any"}} {
		r := runPanto(t, t.TempDir(), lfMachine(t, s3), "", append(append(flags, args...), "go on")...)
		if r.code != 1 || !strings.Contains(r.stderr, "none on this machine, and the bucket did not answer: run it again once the bucket answers") ||
			strings.Contains(r.stderr, "in this store") || strings.Count(r.stderr, "\n") != 2 {
			t.Errorf("%v offline: exit %d, stderr %q: want the unreachable notice, then one line saying the bucket did not answer", args, r.code, r.stderr)
		}
	}
	if n := len(provider.Requests()); n != 0 {
		t.Errorf("the provider had %d requests", n)
	}
}

// TestLocalFirstKeptTwiceResumeLine: a session found changed on another
// machine during a one-shot turn is kept twice; the turn goes on in the
// copy that holds this machine's turns, and the session line names that
// copy, to resume there (it named the other machine's).
func TestLocalFirstKeptTwiceResumeLine(t *testing.T) {
	t.Parallel()
	k := keptTwice(t)
	cmd := pantoCmd(t, k.wd, k.a, append(k.flags, "-r", k.id, "a next")...)
	stderr := k.stderr
	cmd.Stderr = cmdtest.Stderr(t, "panto", stderr)
	if err := cmd.Run(); err != nil {
		t.Fatalf("machine A back: %v: %s", err, stderr)
	}
	kept := regexp.MustCompile(`turns are kept in session ([0-9a-f]{32})`).FindStringSubmatch(stderr.String())
	line := sessionLine.FindStringSubmatch(stderr.String())
	if kept == nil || line == nil || line[1] != kept[1] {
		t.Fatalf("stderr %q: want the session line to name the copy that holds this machine's turns", stderr)
	}
	if got := strings.Join(bucketTexts(t, k.s3, k.remote, kept[1]), "|"); got != "shared prompt|reply 1|a offline|reply a|a next|reply a next" {
		t.Errorf("the copy %s holds %q", kept[1], got)
	}
}

// TestLocalFirstKeptTwiceFork: /fork after the session was kept twice
// during the interactive run forks the copy that holds this machine's
// turns (it forked the original, the other machine's).
func TestLocalFirstKeptTwiceFork(t *testing.T) {
	t.Parallel()
	k := keptTwice(t)
	cmd := pantoCmd(t, k.wd, k.a, append(k.flags, "-i", "-r", k.id)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout lineWaiter
	stdout.want, stdout.seen = "reply a next", make(chan struct{})
	cmd.Stdout, cmd.Stderr = &stdout, cmdtest.Stderr(t, "panto", k.stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, "a next")
	select {
	case <-stdout.seen:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no answer; stdout %q, stderr %q", stdout.String(), k.stderr)
	}
	fmt.Fprintln(in, "/fork")
	fmt.Fprintln(in, "/quit")
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, k.stderr)
	}
	fork := regexp.MustCompile(`now in session ([0-9a-f]{32})`).FindStringSubmatch(stdout.String())
	if fork == nil {
		t.Fatalf("stdout %q: no fork", stdout.String())
	}
	if got := strings.Join(bucketTexts(t, k.s3, k.remote, fork[1]), "|"); got != "shared prompt|reply 1|a offline|reply a|a next|reply a next" {
		t.Errorf("the fork holds %q, want this machine's turns", got)
	}
}

// keptTwiceRun is a session machine a wrote to offline and b online
// since: a's next run keeps it twice. Its provider answers a's next
// prompt only once a's stderr (stderr, for a's next run) said so.
type keptTwiceRun struct {
	s3         *miniotest.Server
	remote, id string
	wd         string
	a, flags   []string
	stderr     *lineWaiter
}

func keptTwice(t *testing.T) *keptTwiceRun {
	t.Helper()
	provider := fakeprovider.New(t, fakeprovider.OpenAI, openaiKey,
		fakeprovider.Reply{Text: "reply 1"}, fakeprovider.Reply{Text: "reply a"}, fakeprovider.Reply{Text: "reply b"}, fakeprovider.Reply{Text: "reply a next"})
	k := &keptTwiceRun{s3: miniotest.New(t), wd: t.TempDir()}
	k.remote = "s3://" + k.s3.NewBucket(t) + "/lf"
	var b []string
	k.a, b = lfMachine(t, k.s3), lfMachine(t, k.s3)
	k.flags = append(providerCases[0].flags(provider), "--store", k.remote)
	r := runPanto(t, k.wd, k.a, "", append(k.flags, "shared prompt")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("online: exit %d: %s", r.code, r.stderr)
	}
	k.id = m[1]
	k.s3.Kill()
	if r = runPanto(t, k.wd, k.a, "", append(k.flags, "-r", k.id, "a offline")...); r.code != 0 {
		t.Fatalf("machine A offline: exit %d: %s", r.code, r.stderr)
	}
	if err := k.s3.Restart(); err != nil {
		t.Fatal(err)
	}
	if r = runPanto(t, k.wd, b, "", append(k.flags, "-r", k.id, "b online")...); r.code != 0 {
		t.Fatalf("machine B: exit %d: %s", r.code, r.stderr)
	}
	k.stderr = &lineWaiter{want: "this machine's turns are kept in session ", seen: make(chan struct{})}
	provider.SetBefore(func(r *http.Request) {
		select {
		case <-k.stderr.seen:
		case <-r.Context().Done():
		case <-time.After(60 * time.Second):
		}
	})
	return k
}

// TestLocalFirstListingStdoutClosed: a listing piped to a reader that
// stops early (panto sessions | head -1) on a local-first store ends
// cleanly: it stops writing, closes the store, which sends what an
// earlier run left on this machine, and exits 0, saying nothing of the
// closed pipe. Killed by SIGPIPE, it left the store unclosed.
func TestLocalFirstListingStdoutClosed(t *testing.T) {
	t.Parallel()
	provider := fakeprovider.New(t, fakeprovider.OpenAI, openaiKey,
		fakeprovider.Reply{Text: "reply online"}, fakeprovider.Reply{Text: "reply dead"})
	s3 := miniotest.New(t)
	remote := "s3://" + s3.NewBucket(t) + "/lf"
	a := lfMachine(t, s3)
	flags := append(providerCases[0].flags(provider), "--store", remote)
	wd := t.TempDir()
	r := runPanto(t, wd, a, "", append(flags, "online prompt")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("online: exit %d: %s", r.code, r.stderr)
	}
	id := m[1]
	s3.Kill()
	if r := runPanto(t, wd, a, "", append(flags, "-c", "prompt while dead")...); r.code != 0 || !strings.Contains(r.stderr, "2 messages not yet sent") {
		t.Fatalf("bucket dead: exit %d: %s", r.code, r.stderr)
	}
	if err := s3.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sessions", "--all"}, {"sessions", "--json"}, {"search", "prompt"}, {"show", id}, {"show", "--json", id}, {"usage", "--json"},
	} {
		cmd := pantoCmd(t, wd, a, append(args, "--store", remote)...)
		var stderr strings.Builder
		cmd.Stderr = cmdtest.Stderr(t, "panto", &stderr)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdout.Close() // the reader is gone before panto writes
		_ = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(stderr.String(), "broken pipe") || strings.Contains(stderr.String(), "not yet sent") {
			t.Errorf("panto %s with stdout closed: exit %d (%v), stderr %q", strings.Join(args, " "), code, cmd.ProcessState, stderr.String())
		}
	}
	want := []string{"online prompt", "reply online", "prompt while dead", "reply dead"}
	if got := bucketTexts(t, s3, remote, id); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the bucket holds %q, want %q: the store was not closed", got, want)
	}
}
