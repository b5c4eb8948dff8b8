package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestCopy round-trips a catalog dir → bucket → another bucket's prefix →
// dir byte for byte with panto-sync copy, incremental on re-runs (only the
// appended bytes move, at every hop), and reports a divergence with exit 3
// touching neither side.
func TestCopy(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { testCopy(t, newEnvOn(t, srv)) })
}

func testCopy(t *testing.T, e *env) {
	dir, ids := catalog(t, 8)
	other := "s3://" + e.srv.NewBucket(t) + "/elsewhere/deep"
	back := filepath.Join(t.TempDir(), "back") // does not exist yet
	hops := [][2]string{{dir, e.url}, {e.url, other}, {other, back}}
	for _, h := range hops {
		r := e.must(t, 0, "copy", "--json", h[0], h[1])
		if _, sum := events(t, r.stdout); sum.Counts["copied"] != len(ids) || sum.Command != "copy" {
			t.Fatalf("copy %s %s: %+v", h[0], h[1], sum)
		}
	}
	sameCatalog(t, dir, back)

	// Appends to two sessions: every hop moves exactly those bytes.
	var appended int64
	for _, id := range ids[:2] {
		appended += int64(len(appendBatch(t, dir, id, false)))
	}
	for _, h := range hops {
		r := e.must(t, 0, "copy", "--json", h[0], h[1])
		evs, sum := events(t, r.stdout)
		if sum.Bytes != appended || byEvent(evs)["copied"] != 2 || byEvent(evs)["unchanged"] != len(ids)-2 {
			t.Fatalf("incremental copy %s %s: %d bytes in %v, want %d", h[0], h[1], sum.Bytes, byEvent(evs), appended)
		}
		for _, ev := range evs {
			if ev.SrcLength == nil || ev.DstLength == nil || ev.LocalLength != nil {
				t.Fatalf("copy --json event without src_length and dst_length: %+v", ev)
			}
		}
	}
	sameCatalog(t, dir, back)
	if r := e.must(t, 0, "copy", "--json", dir, e.url); !strings.Contains(r.stdout, `"bytes":0,`) {
		t.Errorf("no-op copy: %s", r.stdout)
	}

	// A divergence: both ends of the last hop append to one session.
	id := ids[3]
	appendBatch(t, dir, id, false)
	e.must(t, 0, "copy", dir, e.url)
	e.must(t, 0, "copy", e.url, other)
	appendBatch(t, back, id, false)
	before, _ := os.ReadFile(filepath.Join(back, id+".jsonl"))
	r := e.must(t, 3, "copy", "--json", other, back)
	evs, sum := events(t, r.stdout)
	if sum.Diverged != 1 || sum.ExitCode != 3 {
		t.Fatalf("diverged copy: %+v", sum)
	}
	for _, ev := range evs {
		if ev.ID == id && ev.Event != "diverged" {
			t.Errorf("%s: %+v, want diverged", id, ev)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(back, id+".jsonl")); !bytes.Equal(got, before) {
		t.Error("a diverged copy touched the destination")
	}
	r = e.must(t, 3, "copy", other, back)
	if !strings.Contains(r.stdout, "keep-both") || !strings.Contains(r.stdout, "source") {
		t.Errorf("the text of a divergence does not say what to do:\n%s", r.stdout)
	}

	// Usage mistakes are one line.
	for _, args := range [][]string{{"copy", dir}, {"copy", dir, dir}, {"copy", "gs://x", dir}, {"copy", filepath.Join(dir, "missing"), e.url}} {
		r := e.run(t, args...)
		if msg := strings.TrimRight(r.stderr, "\n"); r.code != 1 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto-sync: ") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
