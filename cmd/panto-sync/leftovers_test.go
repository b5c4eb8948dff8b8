package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
	"github.com/panto-dev/panto/store/localfirst"
)

// keptLeftovers makes what panto leaves on this machine when it exits
// before the bucket took its prompts: a local-first replica of e's bucket
// (under data, as XDG_DATA_HOME) holding a session the bucket lacks. It
// returns the session's id and the replica's directory.
func keptLeftovers(t *testing.T, e *env, data string) (string, string) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", data)
	dir, err := backends.ReplicaDir(e.url, e.srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lf, err := localfirst.Open(ctx, localfirst.Options{
		Dir: dir, Name: e.url, ReadTimeout: time.Millisecond, CloseTimeout: time.Millisecond,
		OpenBucket:  func(context.Context) (store.LogStore, error) { return nil, context.DeadlineExceeded },
		Unreachable: func(error) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := lf.Create()
	for _, text := range []string{"kept 1", "kept 2"} {
		if err := sess.Append(ctx, []agent.PersistentMessage{{Message: agent.UserText(text)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lf.Close(ctx); err == nil || !strings.Contains(err.Error(), "2 messages not yet sent") {
		t.Fatalf("Close of the offline local-first store: %v, want it to say 2 messages are left", err)
	}
	return sess.Info.ID, dir
}

// TestPushSendsLeftovers: panto-sync push without --dir also sends what
// panto's local-first replica of the bucket kept, once, even when there
// is no local catalog; with --dir it pushes that directory alone.
func TestPushSendsLeftovers(t *testing.T) {
	e := newEnvOn(t, miniotest.Shared(t))
	data := t.TempDir()
	id, dir := keptLeftovers(t, e, data)
	xdg := []string{"XDG_DATA_HOME=" + data}

	other := t.TempDir()
	if r := e.runEnv(t, xdg, "push", "--dir", other, "--endpoint", e.srv.Endpoint(), e.url); r.code != 0 {
		t.Fatalf("push --dir: exit %d: %s", r.code, r.stderr)
	}
	if _, ok := e.remoteLogs(t)[id]; ok {
		t.Fatal("push --dir sent the local-first replica's session too")
	}

	for round, want := range []string{"1 pushed", "0 pushed"} {
		r := e.runEnv(t, xdg, "push", "--endpoint", e.srv.Endpoint(), e.url)
		if r.code != 0 {
			t.Fatalf("push %d: exit %d: %s", round, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, want) {
			t.Errorf("push %d said %q, want %q", round, r.stdout, want)
		}
	}
	local, err := os.ReadFile(filepath.Join(dir, id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.remoteBytes(t, id); !bytes.Equal(got, local) {
		t.Fatalf("the bucket holds %d bytes of session %s, the replica %d", len(got), id, len(local))
	}
	if _, ok := e.remoteLogs(t)[id]; !ok {
		t.Fatal("the bucket's index does not list the session pushed from the replica")
	}
}

// TestStatusSaysLeftovers: status and push --dry-run without --dir say
// in one line what panto's local-first replica kept on this machine (what
// push sends first), even with no local catalog, and nothing once push
// sent it.
func TestStatusSaysLeftovers(t *testing.T) {
	e := newEnvOn(t, miniotest.Shared(t))
	data := t.TempDir()
	keptLeftovers(t, e, data)
	xdg := []string{"XDG_DATA_HOME=" + data}
	const says = "panto-sync: 2 messages kept on this machine by panto"
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"push", "--dry-run"}} {
		r := e.runEnv(t, xdg, append(args, "--endpoint", e.srv.Endpoint(), e.url)...)
		if r.code != 0 || !strings.Contains(r.stderr, says) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q: want exit 0 and one line saying what panto kept", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "panto", "sessions")); err == nil {
		t.Error("push --dry-run made a local catalog")
	}
	if r := e.runEnv(t, xdg, "push", "--endpoint", e.srv.Endpoint(), e.url); r.code != 0 {
		t.Fatalf("push: exit %d: %s", r.code, r.stderr)
	}
	r := e.runEnv(t, xdg, "status", "--endpoint", e.srv.Endpoint(), e.url)
	if r.code != 0 || strings.Contains(r.stderr, "kept on this machine") {
		t.Errorf("status after push: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestWatchSendsLeftovers: watch without --dir sends what panto's
// local-first replica kept, at start, and the bucket's index lists it
// while watch runs (another machine's listing reads the index).
func TestWatchSendsLeftovers(t *testing.T) {
	e := newEnvOn(t, miniotest.Shared(t))
	data := t.TempDir()
	id, dir := keptLeftovers(t, e, data)
	if err := os.MkdirAll(filepath.Join(data, "panto", "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, stop := startWatchEnv(t, e, []string{"XDG_DATA_HOME=" + data}, e.srv.Endpoint(), "--poll", "1s", e.url)
	eventually(t, "the replica's session reaches the bucket", func() bool { return bucketLength(t, e, id) == fileLength(dir, id) })
	eventually(t, "the bucket's index lists the replica's session", func() bool { return e.remoteLogs(t)[id].Length == fileLength(dir, id) })
	if code := stop(); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
}
