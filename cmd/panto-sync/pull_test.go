package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// objstore opens the bucket directly, as another machine would.
func (e *env) objstore(t *testing.T) *objstore.Store {
	t.Helper()
	s, err := objstore.Open(context.Background(), e.url, objstore.WithEndpoint(e.srv.Endpoint()), objstore.WithS3Options(e.srv.SetCredentials))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// remoteAppend appends one batch to session id in the bucket, through
// the object store, and returns the bytes appended.
func (e *env) remoteAppend(t *testing.T, id string) []byte {
	t.Helper()
	s := e.objstore(t)
	ctx := context.Background()
	at := e.remoteLogs(t)[id].Checkpoint
	b := appendBatch(t, t.TempDir(), id, at.Length == 0)
	if _, err := s.AppendLog(ctx, id, at, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// remoteBytes reads session id back from the bucket.
func (e *env) remoteBytes(t *testing.T, id string) []byte {
	t.Helper()
	r, _, err := e.objstore(t).ReadLog(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// remoteLogs lists the bucket's sessions by id, through the object store.
func (e *env) remoteLogs(t *testing.T) map[string]store.Log {
	t.Helper()
	logs, err := e.objstore(t).Logs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]store.Log{}
	for _, l := range logs {
		m[l.Info.ID] = l
	}
	return m
}

func TestPullRemoteAppends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 6)
	e.must(t, 0, "push", "--dir", dir, e.url)
	mirror := t.TempDir()
	e.must(t, 0, "pull", "--dir", mirror, e.url)

	// Another machine appends to two sessions and starts a new one.
	var want int64
	for _, id := range ids[:2] {
		want += int64(len(e.remoteAppend(t, id)))
	}
	newID := agent.NewSessionID()
	want += int64(len(e.remoteAppend(t, newID)))

	r := e.must(t, 0, "status", "--dir", mirror, "--json", e.url)
	evs, _ := events(t, r.stdout)
	actions := map[string]string{}
	for _, ev := range evs {
		actions[ev.ID] = ev.Action
	}
	if actions[ids[0]] != "pull-tail" || actions[newID] != "pull-new" || actions[ids[3]] != "same" {
		t.Errorf("status: %v", actions)
	}

	r = e.must(t, 0, "pull", "--dir", mirror, "--json", e.url)
	evs, sum := events(t, r.stdout)
	if sum.Bytes != want || byEvent(evs)["pulled"] != 3 {
		t.Errorf("pull moved %d bytes in %v, want %d in 3 sessions", sum.Bytes, byEvent(evs), want)
	}
	for _, id := range append(ids, newID) {
		got, err := os.ReadFile(filepath.Join(mirror, id+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, e.remoteBytes(t, id)) {
			t.Errorf("session %s: local copy differs from the bucket", id)
		}
	}
	// The first catalog is behind: push says so and does nothing.
	r = e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	if _, sum := events(t, r.stdout); sum.Counts["skipped"] != 3 || sum.Bytes != 0 {
		t.Errorf("push of a catalog the remote is ahead of: %+v", sum)
	}
	e.must(t, 0, "pull", "--dir", dir, e.url)
	sameCatalog(t, dir, mirror)
}

func TestDivergence(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { testDivergence(t, newEnvOn(t, srv)) })
}

func testDivergence(t *testing.T, e *env) {
	dir, ids := catalog(t, 4)
	e.must(t, 0, "push", "--dir", dir, e.url)
	id := ids[0]
	path := filepath.Join(dir, id+".jsonl")
	// Both sides append to the same session.
	appendBatch(t, dir, id, false)
	remoteBefore := e.remoteAppend(t, id)
	remoteBefore = e.remoteBytes(t, id)
	localBefore, _ := os.ReadFile(path)
	appendBatch(t, dir, ids[1], false) // and an ordinary change elsewhere

	for _, cmd := range []string{"push", "pull", "status"} {
		r := e.must(t, 3, cmd, "--dir", dir, "--json", e.url)
		evs, sum := events(t, r.stdout)
		if sum.Diverged != 1 || sum.ExitCode != 3 {
			t.Errorf("%s: %+v", cmd, sum)
		}
		for _, ev := range evs {
			if ev.ID == id && (ev.Event != "diverged" || *ev.LocalLength != int64(len(localBefore)) || *ev.RemoteLength != int64(len(remoteBefore))) {
				t.Errorf("%s: %+v, want diverged with local %d and remote %d", cmd, ev, len(localBefore), len(remoteBefore))
			}
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, localBefore) {
			t.Fatalf("%s touched the local copy", cmd)
		}
		if got := e.remoteBytes(t, id); !bytes.Equal(got, remoteBefore) {
			t.Fatalf("%s touched the remote copy", cmd)
		}
	}
	// The other session was pushed all the same (by the first push).
	if r := e.must(t, 3, "push", "--dir", dir, "--json", e.url); !strings.Contains(r.stdout, `"diverged"`) {
		t.Error("text of the divergence is missing")
	}
	r := e.must(t, 3, "push", "--dir", dir, e.url)
	if !strings.Contains(r.stdout, "keep-both") || !strings.Contains(r.stdout, id) {
		t.Errorf("the divergence report does not say what to do:\n%s", r.stdout)
	}

	// keep-both on push: the local copy becomes a new remote session.
	r = e.must(t, 0, "push", "--dir", dir, "--on-diverge=keep-both", "--json", e.url)
	evs, _ := events(t, r.stdout)
	var pushedAs string
	for _, ev := range evs {
		if ev.ID == id {
			if ev.Event != "kept-both" || ev.NewID == "" || ev.ForkedFrom != id {
				t.Fatalf("keep-both push: %+v", ev)
			}
			pushedAs = ev.NewID
		}
	}
	forked := e.remoteBytes(t, pushedAs)
	checkFork(t, forked, localBefore, pushedAs, id)
	if got := e.remoteBytes(t, id); !bytes.Equal(got, remoteBefore) {
		t.Fatal("keep-both push touched the remote original")
	}
	// Again: already kept, no second copy.
	r = e.must(t, 0, "push", "--dir", dir, "--on-diverge=keep-both", "--json", e.url)
	evs, _ = events(t, r.stdout)
	for _, ev := range evs {
		if ev.ID == id && (ev.Event != "kept-both" || ev.NewID != pushedAs) {
			t.Errorf("second keep-both push: %+v, want kept-both as %s", ev, pushedAs)
		}
	}
	if all := e.remoteLogs(t); len(all) != len(ids)+1 {
		t.Errorf("the bucket holds %d sessions after two keep-both pushes, want %d", len(all), len(ids)+1)
	}

	// keep-both on pull: the remote copy becomes a new local session.
	r = e.must(t, 0, "pull", "--dir", dir, "--on-diverge=keep-both", "--json", e.url)
	evs, _ = events(t, r.stdout)
	var pulledAs string
	for _, ev := range evs {
		if ev.ID == id {
			if ev.Event != "kept-both" || ev.NewID == "" {
				t.Fatalf("keep-both pull: %+v", ev)
			}
			pulledAs = ev.NewID
		}
	}
	local, err := os.ReadFile(filepath.Join(dir, pulledAs+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	checkFork(t, local, remoteBefore, pulledAs, id)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, localBefore) {
		t.Fatal("keep-both pull touched the local original")
	}
	// The pushed fork came down as a session of its own.
	if got, err := os.ReadFile(filepath.Join(dir, pushedAs+".jsonl")); err != nil || !bytes.Equal(got, forked) {
		t.Errorf("the pushed fork was not pulled: %v", err)
	}
}

// checkFork checks that fork is orig as session newID linked to from.
func checkFork(t *testing.T, fork, orig []byte, newID, from string) {
	t.Helper()
	fi, oi := bytes.IndexByte(fork, '\n'), bytes.IndexByte(orig, '\n')
	if fi < 0 || oi < 0 || !bytes.Equal(fork[fi:], orig[oi:]) {
		t.Fatalf("the fork's lines after the header differ from the original's")
	}
	var h struct {
		ID, ForkedFrom string `json:"-"`
	}
	var m map[string]any
	if err := json.Unmarshal(fork[:fi], &m); err != nil {
		t.Fatal(err)
	}
	h.ID, _ = m["id"].(string)
	h.ForkedFrom, _ = m["forked_from"].(string)
	if h.ID != newID || h.ForkedFrom != from {
		t.Errorf("fork header %s: want id %s forked_from %s", fork[:fi], newID, from)
	}
}
