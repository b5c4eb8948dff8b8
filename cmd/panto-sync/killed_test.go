package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// The kill -9 tests: a sync killed at any moment leaves both sides safe
// to sync again, and the next complete run converges. Converged means
// byte-identical: every session, whole, on both sides, checked through a
// fresh pull and through the bucket's own reads; a session that is
// missing or holds a prefix fails the test.
//
// Each kill lands at a random moment drawn from a seed the test logs, so
// that a failure can be replayed (PANTO_KILL_SEED pins it).

// A kill test kills runs until wantKills of them landed mid-transfer, or
// maxRuns ran: a kill that lands before the first write or after the
// last tests nothing, and how long a run takes depends on the machine.
const (
	wantKills = 4
	maxRuns   = 30
)

// killRng returns the random source of a kill test, its seed logged.
func killRng(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := envSeed(); s != 0 {
		seed = s
	}
	t.Logf("kill seed %d (PANTO_KILL_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, 1))
}

// killer kills runs of panto-sync. Most kills land at a random moment
// shortly after the run's first write shows at its destination, so that
// they fall inside the transfer however fast the machine (or the run's
// work) is; the others at a random moment of the run's start.
type killer struct {
	e     *env
	rng   *rand.Rand
	after time.Duration // the kill's moment is at most this long after the first write
	// onlyAfterWrite: every signal waits for the first write (a SIGINT
	// before the command has set up its handler kills it outright, as it
	// would any program).
	onlyAfterWrite bool
}

func (e *env) killer(t *testing.T, after time.Duration) *killer {
	return &killer{e: e, rng: killRng(t), after: after}
}

// run starts panto-sync with args and kills it (SIGKILL), or lets it
// finish if it is quicker. It reports whether the kill landed
// mid-transfer.
func (k *killer) run(t *testing.T, progress func() int, args ...string) bool {
	t.Helper()
	return k.signal(t, k.e.command(t, args...), syscall.SIGKILL, progress)
}

// signal starts cmd and sends it sig at the killer's moment, unless it
// finished first, and waits for it. It reports whether the signal landed
// mid-transfer: the process was still running, and had already written
// something (progress, a count of what the destination holds, grew).
func (k *killer) signal(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, progress func() int) bool {
	t.Helper()
	before := progress()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if k.onlyAfterWrite || k.rng.IntN(4) > 0 {
		tick := time.NewTicker(5 * time.Millisecond)
		for wrote := false; !wrote; {
			select {
			case <-done:
				tick.Stop()
				return false
			case <-tick.C:
				wrote = progress() > before
			}
		}
		tick.Stop()
	}
	select {
	case <-done:
		return false
	case <-time.After(time.Duration(k.rng.Int64N(int64(k.after)))):
	}
	mid := progress() > before
	_ = cmd.Process.Signal(sig)
	<-done // bounded: the command's context kills it past processTimeout
	return mid
}

// objectCount counts the objects under prefix/sessions/ of the env's bucket
// (read with minio-go): what a push or copy has written so far.
func (e *env) objectCount(t *testing.T, prefix string) func() int {
	return func() int {
		n := 0
		for obj := range e.srv.Client(t).ListObjects(context.Background(), e.bucket, minio.ListObjectsOptions{Prefix: prefix + "/sessions/", Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			n++
		}
		return n
	}
}

// fileBytes counts the bytes of the session files in dir: what a pull
// has written so far.
func fileBytes(t *testing.T, dir string) func() int {
	return func() int {
		n := 0
		for _, b := range readCatalog(t, dir) {
			n += len(b)
		}
		return n
	}
}

// grow appends to n sessions of dir and adds one, so that the next sync
// moves tails as well as new sessions.
func grow(t *testing.T, dir string, rng *rand.Rand, n int) {
	t.Helper()
	ids := readCatalogIDs(t, dir)
	for range n {
		appendBatch(t, dir, ids[rng.IntN(len(ids))], false)
	}
	newSession(t, dir, 3)
}

// converged fails unless the bucket at url holds exactly the sessions of
// dir, byte for byte: read through the object store and through a fresh
// pull.
func (e *env) converged(t *testing.T, dir, url string) {
	t.Helper()
	local := readCatalog(t, dir)
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, url)
	pulled := readCatalog(t, into)
	for name, want := range local {
		got, ok := pulled[name]
		switch {
		case !ok:
			t.Errorf("%s: not pulled back (the bucket does not list it)", name)
		case !bytes.Equal(got, want):
			t.Errorf("%s: pulled back %d bytes, the file holds %d", name, len(got), len(want))
		}
	}
	for name := range pulled {
		if _, ok := local[name]; !ok {
			t.Errorf("%s: pulled, but no such session was pushed", name)
		}
	}
	if url == e.url {
		for name, want := range local {
			if got := e.remoteBytes(t, strings.TrimSuffix(name, ".jsonl")); !bytes.Equal(got, want) {
				t.Errorf("%s: the bucket holds %d bytes, the file %d", name, len(got), len(want))
			}
		}
	}
}

// TestPushKilled: pushes killed at random moments, between which the
// catalog grows; one complete push converges, and the next moves nothing.
func TestPushKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, _ := catalog(t, 30)
	k := e.killer(t, 100*time.Millisecond)
	kills, runs := 0, 0
	for ; kills < wantKills && runs < maxRuns; runs++ {
		grow(t, dir, k.rng, 3)
		if k.run(t, e.objectCount(t, "panto"), "push", "--dir", dir, "--concurrency", "4", "--quiet", e.url) {
			kills++
		}
	}
	t.Logf("%d of %d pushes killed mid-transfer", kills, runs)
	if kills == 0 {
		t.Fatal("no push was killed mid-transfer: each finished, or had written nothing, at its kill")
	}
	e.must(t, 0, "push", "--dir", dir, e.url)
	r := e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	if _, sum := events(t, r.stdout); sum.Bytes != 0 {
		t.Errorf("push after convergence moved %d bytes", sum.Bytes)
	}
	e.converged(t, dir, e.url)
}

// TestPullKilled: pulls into one directory killed at random moments,
// while the bucket grows; one complete pull converges, and the next moves
// nothing.
func TestPullKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, _ := catalog(t, 30)
	// A pull's writes are local and quick: it is given more to do, one
	// session at a time, and killed sooner after its first write.
	k := e.killer(t, 20*time.Millisecond)
	into := filepath.Join(t.TempDir(), "pulled")
	kills, runs := 0, 0
	for ; kills < wantKills && runs < maxRuns; runs++ {
		grow(t, dir, k.rng, 12)
		e.must(t, 0, "push", "--dir", dir, "--quiet", e.url)
		if k.run(t, fileBytes(t, into), "pull", "--dir", into, "--concurrency", []string{"1", "4"}[runs%2], "--quiet", e.url) {
			kills++
		}
	}
	t.Logf("%d of %d pulls killed mid-transfer", kills, runs)
	if kills == 0 {
		t.Fatal("no pull was killed mid-transfer: each finished, or had written nothing, at its kill")
	}
	e.must(t, 0, "pull", "--dir", into, e.url)
	r := e.must(t, 0, "pull", "--dir", into, "--json", e.url)
	if _, sum := events(t, r.stdout); sum.Bytes != 0 {
		t.Errorf("pull after convergence moved %d bytes", sum.Bytes)
	}
	sameCatalog(t, dir, into)
}

// TestCopyKilled: copies from one bucket prefix to another killed at
// random moments, while the source grows; one complete copy converges.
func TestCopyKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, _ := catalog(t, 30)
	k := e.killer(t, 100*time.Millisecond)
	other := "s3://" + e.bucket + "/copied"
	kills, runs := 0, 0
	for ; kills < wantKills && runs < maxRuns; runs++ {
		grow(t, dir, k.rng, 3)
		e.must(t, 0, "push", "--dir", dir, "--quiet", e.url)
		if k.run(t, e.objectCount(t, "copied"), "copy", "--concurrency", "4", "--quiet", e.url, other) {
			kills++
		}
	}
	t.Logf("%d of %d copies killed mid-transfer", kills, runs)
	if kills == 0 {
		t.Fatal("no copy was killed mid-transfer: each finished, or had written nothing, at its kill")
	}
	e.must(t, 0, "copy", e.url, other)
	r := e.must(t, 0, "copy", "--json", e.url, other)
	if _, sum := events(t, r.stdout); sum.Bytes != 0 {
		t.Errorf("copy after convergence moved %d bytes", sum.Bytes)
	}
	e.converged(t, dir, other)
}

// envSeed is PANTO_KILL_SEED, 0 when unset.
func envSeed() uint64 {
	n, _ := strconv.ParseUint(os.Getenv("PANTO_KILL_SEED"), 10, 64)
	return n
}
