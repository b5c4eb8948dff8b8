package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestResumeOnAnotherMachine: a session written by panto on disk, pushed
// with panto-sync, is resumed by panto from the bucket on another
// "machine" (another directory, another process), and pulled back down.
// Its first answer was truncated after redacted thinking: the stop reason
// and the thinking's opaque data travel with the lines.
func TestResumeOnAnotherMachine(t *testing.T) {
	t.Parallel()
	const redacted = "EmwKAhgBEgy3va+/3Q4l=="
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "reply 1", RedactedThinking: redacted, StopReason: pc.truncation()})
			s3 := miniotest.Shared(t)
			bucket := s3.NewBucket(t)
			remote := "s3://" + bucket + "/team"
			key := pc.keyVar + "=" + pc.key
			machineA := filepath.Join(t.TempDir(), "a-sessions")
			machineB := filepath.Join(t.TempDir(), "b-sessions")

			r := runPanto(t, t.TempDir(), []string{key}, "", append(pc.flags(srv), "--store", machineA, "started on machine A")...)
			m := sessionLine.FindStringSubmatch(r.stderr)
			if r.code != 0 || m == nil {
				t.Fatalf("machine A: exit %d: %s", r.code, r.stderr)
			}
			id, prefix := m[1], m[2]
			runSync(t, s3, "push", "--dir", machineA, remote)

			// Machine B resumes straight from the bucket.
			r = runPanto(t, t.TempDir(), append(minioEnv(s3), key), "", "--store", remote, "-r", prefix, "continued on machine B")
			if r.code != 0 || !strings.Contains(r.stderr, id) {
				t.Fatalf("machine B: exit %d: %s", r.code, r.stderr)
			}
			body := string(srv.Requests()[1].Body)
			if !strings.Contains(body, "started on machine A") || !strings.Contains(body, "reply 1") {
				t.Errorf("machine B did not send A's history: %s", body)
			}
			if pc.style == fakeprovider.Anthropic && !strings.Contains(body, `"data":"`+redacted+`"`) {
				t.Errorf("machine B did not send back A's redacted thinking: %s", body)
			}

			// Pulled to disk on machine B, the session carries on there.
			runSync(t, s3, "pull", "--dir", machineB, remote)
			r = runPanto(t, t.TempDir(), []string{key}, "", "--store", machineB, "-c", "--any", "and on B's disk")
			if r.code != 0 || !strings.Contains(r.stderr, id) {
				t.Fatalf("machine B disk: exit %d: %s", r.code, r.stderr)
			}
			body = string(srv.Requests()[2].Body)
			if !strings.Contains(body, "continued on machine B") || !strings.Contains(body, "reply 2") {
				t.Errorf("pulled session lacks B's turn: %s", body)
			}
			_, conv := loadOnly(t, backend{name: "machine B", open: func(t *testing.T) agent.SessionStore { return openStoreForTest(t, machineB, "") }})
			if got := conv.Messages[1].StopReason; got != agent.StopReason(pc.truncation()) {
				t.Errorf("pulled stop reason %q, want %q", got, pc.truncation())
			}
			checkNoKey(t, backend{name: "machine A", bytes: dirBytes(machineA)}, pc.key)
			checkNoKey(t, backend{name: "machine B", bytes: dirBytes(machineB)}, pc.key)
			checkNoKey(t, backend{name: "bucket", bytes: bucketBytes(s3, bucket)}, pc.key)
		})
	}
}

func runSync(t *testing.T, s3 *miniotest.Server, args ...string) {
	t.Helper()
	runSyncEnv(t, s3, nil, args...)
}

// runSyncEnv is runSync with extra environment variables; it returns what
// the command printed, stdout and stderr together.
func runSyncEnv(t *testing.T, s3 *miniotest.Server, extra []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, syncBin, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(append([]string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}, minioEnv(s3)...), extra...)
	var out bytes.Buffer
	w := cmdtest.Stderr(t, "panto-sync", &out) // one writer: one pipe for both
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		t.Fatalf("panto-sync %q: %v: %s", args, err, out.String())
	}
	return out.String()
}

// TestTitleAndForkTravel: a title and a fork made on machine A are seen
// on machine B after panto-sync push and pull (and straight from the
// bucket, whose index entries carry them); a title B sets later wins on
// A after the way back.
func TestTitleAndForkTravel(t *testing.T) {
	t.Parallel()
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{Text: "an answer", InputTokens: 40, OutputTokens: 9})
	s3 := miniotest.Shared(t)
	remote := "s3://" + s3.NewBucket(t) + "/team"
	key := pc.keyVar + "=" + pc.key
	machineA := backend{name: "machine A", spec: filepath.Join(t.TempDir(), "a")}
	machineB := backend{name: "machine B", spec: filepath.Join(t.TempDir(), "b")}
	bucket := backend{name: "bucket", spec: remote, env: minioEnv(s3)}

	r := runPanto(t, t.TempDir(), []string{key}, "", append(pc.flags(srv), "--store", machineA.spec, "the first question")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("machine A: exit %d: %s", r.code, r.stderr)
	}
	id := m[1]
	pantoOn(t, machineA, "title", id, "Made on A")
	forkID := jsonObject(t, pantoOn(t, machineA, "fork", "--at", "1", "--json", id).stdout)["id"].(string)
	runSync(t, s3, "push", "--dir", machineA.spec, remote)
	runSync(t, s3, "pull", "--dir", machineB.spec, remote)

	for _, where := range []backend{machineB, bucket} {
		list := sessionsJSON(t, where)
		p, f := list[id], list[forkID]
		if p["title"] != "Made on A" || p["usage"].(map[string]any)["output_tokens"] != float64(9) {
			t.Errorf("%s: the session %v", where.name, p)
		}
		if f["parent"] != id || f["forked_at"] != float64(1) || f["messages"] != float64(1) {
			t.Errorf("%s: the fork %v", where.name, f)
		}
		if show := pantoOn(t, where, "show", forkID).stdout; !strings.Contains(show, "forked from "+id+" at message 1") {
			t.Errorf("%s: show of the fork:\n%s", where.name, show)
		}
	}

	pantoOn(t, machineB, "title", id, "Renamed on B")
	runSync(t, s3, "push", "--dir", machineB.spec, remote)
	runSync(t, s3, "pull", "--dir", machineA.spec, remote)
	if got := sessionsJSON(t, machineA)[id]["title"]; got != "Renamed on B" {
		t.Errorf("machine A after the way back: title %v", got)
	}
}
