package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// watchRun is a panto-sync watch running in the background, its --json
// events collected.
type watchRun struct {
	mu     sync.Mutex
	events []map[string]any
	done   chan struct{}
}

func startWatch(t *testing.T, e *env, endpoint string, args ...string) (*watchRun, func() int) {
	t.Helper()
	return startWatchEnv(t, e, nil, endpoint, args...)
}

// startWatchEnv is startWatch with extra environment variables.
func startWatchEnv(t *testing.T, e *env, extra []string, endpoint string, args ...string) (*watchRun, func() int) {
	t.Helper()
	cmd := e.command(t, append([]string{"watch", "--json", "--endpoint", endpoint}, args...)...)
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchRun{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				w.mu.Lock()
				w.events = append(w.events, ev)
				w.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	stop := func() int {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
		err := cmd.Wait()
		if err != nil {
			return cmd.ProcessState.ExitCode()
		}
		return 0
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return w, stop
}

// saw reports whether watch printed an event named name.
func (w *watchRun) saw(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.events {
		if ev["event"] == name {
			return true
		}
	}
	return false
}

// eventually waits (a bounded time) for cond; the test fails if it never
// holds. Nothing is asserted of how long it took.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bucketLength is the committed length of session id in the bucket (0
// when it does not hold it, or does not answer).
func bucketLength(t *testing.T, e *env, id string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := objstore.Open(ctx, e.url, objstore.WithEndpoint(e.srv.Endpoint()), objstore.WithS3Options(e.srv.SetCredentials))
	if err != nil {
		return 0
	}
	cp, err := store.Head(ctx, b, id)
	if err != nil {
		return 0
	}
	return cp.Length
}

func fileLength(dir, id string) int64 {
	fi, err := os.Stat(filepath.Join(dir, id+fsjsonl.Ext))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// TestWatchMirrorsBothWays: watch pushes a local append and a deletion,
// pulls a session pushed from elsewhere, survives the bucket being killed
// (the append made meanwhile arrives once it is back) and stops cleanly
// on SIGTERM.
func TestWatchMirrorsBothWays(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, miniotest.New(t))
	dir := t.TempDir()
	w, stop := startWatch(t, e, e.srv.Endpoint(), "--poll", "1s", "--dir", dir, e.url)
	eventually(t, "watch starts", func() bool { return w.saw("watching") })

	local := newSession(t, dir, 2)
	eventually(t, "a local session reaches the bucket", func() bool { return bucketLength(t, e, local) == fileLength(dir, local) })

	other := t.TempDir()
	remote := newSession(t, other, 3)
	e.must(t, 0, "push", "--dir", other, e.url)
	eventually(t, "a session pushed from elsewhere reaches the catalog", func() bool { return fileLength(dir, remote) == fileLength(other, remote) })

	e.srv.Kill()
	appendBatch(t, dir, local, false)
	eventually(t, "watch says the bucket is unreachable", func() bool { return w.saw("unreachable") })
	if err := e.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the append made during the outage reaches the bucket", func() bool { return bucketLength(t, e, local) == fileLength(dir, local) })

	cat, err := fsjsonl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	at, err := store.Head(context.Background(), cat, local)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Delete(context.Background(), store.Tombstone{ID: local, Deleted: time.Now(), At: at}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion reaches the bucket", func() bool { return bucketLength(t, e, local) == 0 })

	if code := stop(); code != 0 {
		t.Fatalf("watch exited %d on SIGTERM", code)
	}
	if !w.saw("stopped") {
		t.Error("no stopped event")
	}
}

// TestWatchIdleRequests: an idle watch costs one request per poll.
func TestWatchIdleRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var requests atomic.Int64
	target, _ := url.Parse(e.srv.Endpoint())
	proxy := httputil.NewSingleHostReverseProxy(target)
	counting := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(counting.Close)
	dir, _ := catalog(t, 3)
	w, stop := startWatch(t, e, counting.URL, "--poll", "1s", "--dir", dir, e.url)
	eventually(t, "watch starts", func() bool { return w.saw("watching") })
	// The first round pushes the catalog; then it is idle.
	var before int64
	eventually(t, "the first round ends", func() bool {
		n := requests.Load()
		time.Sleep(1500 * time.Millisecond)
		before = requests.Load()
		return before == n+1 || before == n+2
	})
	const polls = 5
	time.Sleep(polls * time.Second)
	idle := requests.Load() - before
	t.Logf("idle: %d requests in %d polls", idle, polls)
	if idle > polls+1 {
		t.Errorf("idle watch made %d requests in %d polls of 1s: want at most one a poll", idle, polls)
	}
	if code := stop(); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
}

// TestWatchKeepsATurnWrittenWhileDeletedElsewhere: another machine
// continues a session this watch pushed (two batches more) and deletes
// it; then a batch is written here. The catalog's copy is shorter than
// what was deleted, yet holds a turn the bucket never had: watch keeps it
// as a new session linked to the deleted one, instead of taking it for a
// copy behind the deletion.
func TestWatchKeepsATurnWrittenWhileDeletedElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	// No poll in the test's time: only the push after the local write runs.
	w, stop := startWatch(t, e, e.srv.Endpoint(), "--poll", "1h", "--dir", dir, e.url)
	defer stop()
	eventually(t, "watch starts", func() bool { return w.saw("watching") })
	id := newSession(t, dir, 2)
	eventually(t, "the session reaches the bucket", func() bool { return bucketLength(t, e, id) == fileLength(dir, id) })

	continueAndDeleteElsewhere(t, e, id)

	turn := appendBatch(t, dir, id, false)
	var kept string
	eventually(t, "the turn written here reaches the bucket, in a session linked to the deleted one", func() bool {
		kept = keptCopyOf(t, e, id)
		return kept != ""
	})
	if fileLength(dir, id) == 0 {
		t.Error("the catalog's copy, with its turn, was deleted")
	}
	if got := bucketLength(t, e, kept); got < int64(len(turn)) {
		t.Errorf("the kept session holds %d bytes, less than the turn's %d", got, len(turn))
	}
}

// continueAndDeleteElsewhere is another machine, with a catalog of its
// own, pulling session id, writing two turns to it (more than a turn of
// the test's machine: the deletion's tombstone is longer than any copy
// there), deleting it and pushing the deletion to the bucket.
func continueAndDeleteElsewhere(t *testing.T, e *env, id string) {
	t.Helper()
	other := t.TempDir()
	e.must(t, 0, "pull", "--dir", other, e.url)
	appendBatch(t, other, id, false)
	appendBatch(t, other, id, false)
	cat, err := fsjsonl.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	at, err := store.Head(context.Background(), cat, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Delete(context.Background(), store.Tombstone{ID: id, Deleted: time.Now(), At: at}); err != nil {
		t.Fatal(err)
	}
	e.must(t, 0, "push", "--dir", other, e.url)
	if bucketLength(t, e, id) != 0 {
		t.Fatal("test setup: the session is not deleted in the bucket")
	}
}

// keptCopyOf is the id of the session of the bucket whose header links
// id (a copy kept both ways), "" when there is none.
func keptCopyOf(t *testing.T, e *env, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := objstore.Open(ctx, e.url, objstore.WithEndpoint(e.srv.Endpoint()), objstore.WithS3Options(e.srv.SetCredentials))
	if err != nil {
		return ""
	}
	list, err := b.List(ctx)
	if err != nil {
		return ""
	}
	for _, info := range list {
		if info.Parent == id {
			return info.ID
		}
	}
	return ""
}
