package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// syncEvent is the part of panto-sync's --json events these tests read.
type syncEvent struct {
	Event     string     `json:"event"`
	ID        string     `json:"id"`
	Action    string     `json:"action"`
	DeletedAt *time.Time `json:"deleted_at"`
	NewID     string     `json:"new_id"`
	ExitCode  int        `json:"exit_code"`
	Error     string     `json:"error"`
}

// syncJSON runs panto-sync with --json and returns its events by id (the
// summary under "summary") and its exit code.
func syncJSON(t *testing.T, s3 *miniotest.Server, args ...string) (map[string]syncEvent, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, syncBin, append([]string{args[0], "--json"}, args[1:]...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}, minioEnv(s3)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, cmdtest.Stderr(t, "panto-sync", &errb)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("panto-sync %q: %v", args, err)
	}
	evs := map[string]syncEvent{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e syncEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("panto-sync %q: not JSON: %q (stderr %s)", args, line, errb.String())
		}
		if e.Event == "summary" {
			e.ID = "summary"
		}
		evs[e.ID] = e
	}
	return evs, cmd.ProcessState.ExitCode()
}

// TestDeletionTravels: a session removed with panto rm on machine A goes
// from the bucket on push and from machine B on pull, and back the other
// way; a copy of it kept elsewhere cannot bring it back; a session deleted
// on one machine and continued on the other is a conflict until keep-both
// keeps what was written after the deletion as a new session.
func TestDeletionTravels(t *testing.T) {
	t.Parallel()
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	s3 := miniotest.Shared(t)
	bucket := s3.NewBucket(t)
	remote := "s3://" + bucket + "/team"
	key := pc.keyVar + "=" + pc.key
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")
	pantoOn := func(dir string, args ...string) result {
		t.Helper()
		r := runPanto(t, t.TempDir(), []string{key}, "", append(append(pc.flags(srv), "--store", dir), args...)...)
		if r.code != 0 {
			t.Fatalf("panto %q on %s: exit %d: %s", args, filepath.Base(dir), r.code, r.stderr)
		}
		return r
	}
	newSessionOn := func(dir, prompt string) string {
		t.Helper()
		r := pantoOn(dir, prompt)
		m := sessionLine.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("no session id in %q", r.stderr)
		}
		return m[1]
	}
	const secret = "AKIA-not-really-a-key-0451"
	secretID := newSessionOn(a, "here is my key "+secret)
	keptID := newSessionOn(a, "a session B deletes")
	sharedID := newSessionOn(a, "a session both work on")
	runSync(t, s3, "push", "--dir", a, remote)
	runSync(t, s3, "pull", "--dir", b, remote)
	// A copy of the secret session kept elsewhere (a backup, a third
	// machine that was offline).
	c := filepath.Join(t.TempDir(), "c")
	if err := os.MkdirAll(c, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(b, secretID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c, secretID+".jsonl"), old, 0o600); err != nil {
		t.Fatal(err)
	}

	// rm on A, push from A: the bucket holds none of it.
	pantoOn(a, "rm", "--yes", secretID[:8])
	evs, code := syncJSON(t, s3, "push", "--dir", a, remote)
	if e := evs[secretID]; code != 0 || e.Event != "deleted" || e.Action != "push-delete" || e.DeletedAt == nil {
		t.Fatalf("push of the deletion: exit %d, %+v", code, evs)
	}
	if bytes.Contains(bucketBytes(s3, bucket)(t), []byte(secret)) {
		t.Error("after push, an object of the bucket holds the deleted session's text")
	}

	// B sees it coming, then pull deletes B's file.
	evs, code = syncJSON(t, s3, "status", "--dir", b, remote)
	if e := evs[secretID]; code != 0 || e.Action != "pull-delete" {
		t.Errorf("status on B: exit %d, %+v", code, e)
	}
	evs, _ = syncJSON(t, s3, "pull", "--dry-run", "--dir", b, remote)
	if e := evs[secretID]; e.Event != "would-delete" {
		t.Errorf("pull --dry-run on B: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(b, secretID+".jsonl")); err != nil {
		t.Fatalf("pull --dry-run removed B's file: %v", err)
	}
	evs, code = syncJSON(t, s3, "pull", "--dir", b, remote)
	if e := evs[secretID]; code != 0 || e.Event != "deleted" || e.Action != "pull-delete" {
		t.Errorf("pull on B: exit %d, %+v", code, e)
	}
	if _, err := os.Stat(filepath.Join(b, secretID+".jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("B's file of the deleted session: %v, want gone", err)
	}
	if bytes.Contains(dirBytes(b)(t), []byte(secret)) {
		t.Error("a file on B still holds the deleted session's text")
	}
	if r := runPanto(t, t.TempDir(), []string{key}, "", append(pc.flags(srv), "--store", b, "-r", secretID, "more")...); r.code == 0 || !strings.Contains(r.stderr, "deleted on") {
		t.Errorf("resume of the deleted session on B: exit %d, %s", r.code, r.stderr)
	}

	// The old copy on C: push leaves the bucket alone, pull deletes it.
	evs, code = syncJSON(t, s3, "push", "--dir", c, remote)
	if e := evs[secretID]; code != 0 || e.Event != "skipped" || e.Action != "pull-delete" {
		t.Errorf("push of a deleted session's old copy: exit %d, %+v", code, e)
	}
	if bytes.Contains(bucketBytes(s3, bucket)(t), []byte(secret)) {
		t.Error("the old copy's push brought the deleted session's text back")
	}
	runSync(t, s3, "pull", "--dir", c, remote)
	if _, err := os.Stat(filepath.Join(c, secretID+".jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("C's old copy after pull: %v, want gone", err)
	}

	// The reverse: rm on B, push from B, pull on A.
	pantoOn(b, "rm", "--yes", keptID)
	runSync(t, s3, "push", "--dir", b, remote)
	evs, code = syncJSON(t, s3, "pull", "--dir", a, remote)
	if e := evs[keptID]; code != 0 || e.Event != "deleted" {
		t.Errorf("pull on A of B's deletion: exit %d, %+v", code, e)
	}
	if _, err := os.Stat(filepath.Join(a, keptID+".jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("A's file of the session B deleted: %v, want gone", err)
	}

	// A deletes the shared session while B continues it: whichever
	// reaches the bucket second is a conflict, and nothing is touched.
	pantoOn(a, "rm", "--yes", sharedID)
	pantoOn(b, "-r", sharedID, "B carries on after the deletion")
	bBefore, _ := os.ReadFile(filepath.Join(b, sharedID+".jsonl"))
	runSync(t, s3, "push", "--dir", b, remote) // B's append reaches the bucket first
	for _, args := range [][]string{{"push", "--dir", a, remote}, {"pull", "--dir", a, remote}} {
		evs, code = syncJSON(t, s3, args...)
		if e := evs[sharedID]; code != 3 || e.Event != "conflict" || e.Action != "delete-conflict" || evs["summary"].ExitCode != 3 {
			t.Errorf("%s on A: exit %d, %+v", args[0], code, e)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(b, sharedID+".jsonl")); !bytes.Equal(got, bBefore) {
		t.Error("the conflict touched B's copy")
	}
	if !bytes.Contains(bucketBytes(s3, bucket)(t), []byte("B carries on after the deletion")) {
		t.Error("the conflict touched the bucket's copy")
	}
	if _, err := os.Stat(filepath.Join(a, sharedID+".jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the conflict brought A's deleted copy back")
	}

	// keep-both on A's pull: B's copy becomes a new session on A, linked
	// to the deleted one; the deleted id stays deleted.
	evs, code = syncJSON(t, s3, "pull", "--on-diverge", "keep-both", "--dir", a, remote)
	e := evs[sharedID]
	if code != 0 || e.Event != "kept-both" || e.NewID == "" {
		t.Fatalf("pull --on-diverge=keep-both: exit %d, %+v", code, evs)
	}
	survivor, err := os.ReadFile(filepath.Join(a, e.NewID+".jsonl"))
	if err != nil || !bytes.Contains(survivor, []byte("B carries on after the deletion")) || !bytes.Contains(survivor, []byte(sharedID)) {
		t.Errorf("the kept survivor on A: %v, %d bytes", err, len(survivor))
	}
	if ids := listIDs(t, backend{spec: a}); slices.Contains(ids, sharedID) || !slices.Contains(ids, e.NewID) {
		t.Errorf("sessions on A after keep-both: %v, want %s and not %s", ids, e.NewID, sharedID)
	}

	// keep-both on A's push finishes it in the bucket, and B's pull
	// follows: the survivor under its new id everywhere, the old id
	// deleted everywhere.
	evs, code = syncJSON(t, s3, "push", "--on-diverge", "keep-both", "--dir", a, remote)
	if code != 0 || evs[sharedID].Event != "kept-both" || evs[sharedID].NewID != e.NewID {
		t.Errorf("push --on-diverge=keep-both from A: exit %d, %+v", code, evs[sharedID])
	}
	evs, code = syncJSON(t, s3, "pull", "--dir", b, remote)
	if code != 0 || evs[sharedID].Event != "deleted" {
		t.Errorf("pull on B after keep-both: exit %d, %+v", code, evs)
	}
	if got, err := os.ReadFile(filepath.Join(b, e.NewID+".jsonl")); err != nil || !bytes.Equal(got, survivor) {
		t.Errorf("B's copy of the survivor: %v, %d bytes, want A's %d", err, len(got), len(survivor))
	}
	for _, dir := range []string{a, b} {
		evs, code = syncJSON(t, s3, "status", "--dir", dir, remote)
		changed := 0
		for _, e := range evs {
			if e.Event != "unchanged" && e.Event != "summary" {
				changed++
			}
		}
		if code != 0 || changed != 0 {
			t.Errorf("status of %s after it all: exit %d, %+v", filepath.Base(dir), code, evs)
		}
	}
}
