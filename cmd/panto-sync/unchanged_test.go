package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnchangedSinceNoop: a push or pull that found nothing to do lets
// the next one with both sides as they were say so without listing
// either (unchanged_since, the same counts); and every change of either
// side, a deletion, a rewrite that keeps a file's size and mtime, a
// selection of its own, --full and a day's age bring the full comparison
// back, which finds what changed.
func TestUnchangedSinceNoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 5)
	sync := func(want int, args ...string) Summary {
		t.Helper()
		r := e.must(t, want, append(append([]string{}, args...), "--dir", dir, "--json", e.url)...)
		_, sum := events(t, r.stdout)
		return sum
	}
	spared := func(what string, s Summary, want bool) {
		t.Helper()
		if (s.UnchangedSince != nil) != want {
			t.Fatalf("%s: unchanged_since %v, want it %v: %+v", what, s.UnchangedSince, map[bool]string{true: "set", false: "unset"}[want], s)
		}
	}

	spared("the first push", sync(0, "push"), false)
	noop := sync(0, "push")
	spared("a push with nothing to do", noop, false)
	again := sync(0, "push")
	spared("the push after it", again, true)
	if again.Sessions != noop.Sessions || again.Counts["unchanged"] != 5 || again.Bytes != 0 {
		t.Fatalf("the spared push says %+v; the one before said %+v", again, noop)
	}
	r := e.must(t, 0, "push", "--dir", dir, e.url)
	if !strings.Contains(r.stdout, "5 unchanged") || !strings.Contains(r.stdout, "neither side changed since the push of") {
		t.Fatalf("a spared push in text: %q", r.stdout)
	}

	// A local append.
	appendBatch(t, dir, ids[0], false)
	if s := sync(0, "push"); s.UnchangedSince != nil || s.Counts["pushed"] != 1 {
		t.Fatalf("the push after a local append: %+v", s)
	}
	sync(0, "push")
	spared("a push after the one that found nothing", sync(0, "push"), true)

	// A change in the bucket, for the pull; a pull that brings it leaves
	// the push to find the directory changed.
	sync(0, "pull")
	spared("a pull after a push with nothing to do", sync(0, "pull"), true)
	e.remoteAppend(t, ids[1])
	if s := sync(0, "pull"); s.UnchangedSince != nil || s.Counts["pulled"] != 1 {
		t.Fatalf("the pull after a remote append: %+v", s)
	}
	spared("the push after a pull that wrote", sync(0, "push"), false)
	spared("the push after it", sync(0, "push"), true)

	// A local deletion.
	deleteLocal(t, dir, ids[2])
	if s := sync(0, "push"); s.UnchangedSince != nil || s.Counts["deleted"] != 1 {
		t.Fatalf("the push after a local deletion: %+v", s)
	}
	sync(0, "push")
	spared("the push after the deletion's", sync(0, "push"), true)

	// A rewrite that keeps the size and the mtime: the copies diverged.
	path := filepath.Join(dir, ids[3]+".jsonl")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A letter of a message's text, past the header: the line stays
	// well-formed.
	at := strings.LastIndex(string(data), "bucket")
	if at < 0 {
		t.Fatalf("no text to change in %s", data)
	}
	data[at] = 'p'
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if s := sync(3, "push"); s.UnchangedSince != nil || s.Diverged != 1 {
		t.Fatalf("the push after a same-size rewrite: %+v", s)
	}
	// A diverged run records nothing: the next is compared in full too.
	spared("the push after a diverged one", sync(3, "push"), false)
	data[at] = 'b'
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	spared("the push after the rewrite was undone", sync(0, "push"), false)
	spared("the push after it", sync(0, "push"), true)

	// --full, another selection and a day-old record each compare in full.
	spared("push --full", sync(0, "push", "--full"), false)
	spared("push --include", sync(0, "push", "--include", ids[0][:4]+"*"), false)
	records, _ := filepath.Glob(filepath.Join(e.cache, "panto", "sync", "*.json"))
	if len(records) == 0 {
		t.Fatalf("no record under %s", e.cache)
	}
	for _, rec := range records {
		var r noopRecord
		data, err := os.ReadFile(rec)
		if err != nil || json.Unmarshal(data, &r) != nil {
			t.Fatalf("record %s: %v %s", rec, err, data)
		}
		r.At = r.At.Add(-25 * time.Hour)
		data, _ = json.Marshal(r)
		if err := os.WriteFile(rec, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spared("a push a day after the record", sync(0, "push"), false)
	spared("the push after it", sync(0, "push"), true)
}
