package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fileaccess"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// segments counts the segment objects of each session in the bucket,
// read with minio-go, independently of the code under test.
func (e *env) segments(t *testing.T) map[string]int {
	t.Helper()
	m := map[string]int{}
	for obj := range e.srv.Client(t).ListObjects(context.Background(), e.bucket, minio.ListObjectsOptions{Prefix: "panto/sessions/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		parts := strings.Split(strings.TrimPrefix(obj.Key, "panto/sessions/"), "/")
		if len(parts) == 3 && parts[1] == "seg" {
			m[parts[0]]++
		}
	}
	return m
}

// TestPushPullRoundTrip runs on the 4-node MinIO cluster too
// (miniotest.ConditionalKinds), the one sync test that does.
func TestPushPullRoundTrip(t *testing.T) {
	t.Parallel()
	miniotest.Each(t, miniotest.ConditionalKinds(), func(t *testing.T, srv *miniotest.Server) {
		testPushPullRoundTrip(t, newEnvOn(t, srv))
	})
}

func testPushPullRoundTrip(t *testing.T, e *env) {
	dir, ids := catalog(t, 12)
	r := e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	evs, sum := events(t, r.stdout)
	if got := byEvent(evs)["pushed"]; got != len(ids) || sum.Sessions != len(ids) || sum.ExitCode != 0 {
		t.Fatalf("first push: %d pushed of %d, summary %+v", got, len(ids), sum)
	}
	var raw int64
	for _, b := range readCatalog(t, dir) {
		raw += int64(len(b))
	}
	if sum.Bytes != raw {
		t.Errorf("pushed %d bytes, the catalog holds %d", sum.Bytes, raw)
	}
	into := filepath.Join(t.TempDir(), "new") // does not exist yet
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)

	// ls lists them all, newest first.
	r = e.must(t, 0, "ls", "--json", e.url)
	lsEvs, lsSum := events(t, r.stdout)
	if len(lsEvs) != len(ids) || lsSum.Sessions != len(ids) {
		t.Errorf("ls: %d sessions, want %d", len(lsEvs), len(ids))
	}
}

func TestPushIncremental(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { testPushIncremental(t, newEnvOn(t, srv)) })
}

func testPushIncremental(t *testing.T, e *env) {
	dir, ids := catalog(t, 10)
	e.must(t, 0, "push", "--dir", dir, e.url)
	before := e.segments(t)

	// Appends to three sessions: only their tails move, one segment each.
	var appended int64
	changed := map[string]bool{}
	for _, id := range ids[:3] {
		appended += int64(len(appendBatch(t, dir, id, false)))
		changed[id] = true
	}
	// Which session files push opens, seen from outside (and as root,
	// who could read a file of mode 000): the grown ones only.
	reads := fileaccess.Watch(t, dir)
	reads.Take(t)
	rc := newRequestCounter(t, e.srv.Endpoint())
	r := e.must(t, 0, "push", "--dir", dir, "--endpoint", rc.URL, "--json", e.url)
	evs, sum := events(t, r.stdout)
	if sum.Bytes != appended {
		t.Errorf("incremental push moved %d bytes, %d were appended", sum.Bytes, appended)
	}
	var grown []string
	for id := range changed {
		grown = append(grown, id+".jsonl")
	}
	slices.Sort(grown)
	if got := sessionFiles(reads.Take(t)); !slices.Equal(got, grown) {
		t.Errorf("incremental push opened %v, want the grown %v alone", got, grown)
	}
	for _, ev := range evs {
		if want := map[bool]string{true: "pushed", false: "unchanged"}[changed[ev.ID]]; ev.Event != want {
			t.Errorf("session %s: %s, want %s", ev.ID, ev.Event, want)
		}
	}
	_, sent := rc.take()
	t.Logf("incremental push: %d bytes appended, %d sent", appended, sent)
	// The segments (compressed), the touched index partitions (small
	// here) and one commit of the index log (its recent sessions: all of
	// these); no manifest (a session gets one every 8 segments).
	if sent > appended+4096 {
		t.Errorf("incremental push sent %d request bytes for %d appended bytes", sent, appended)
	}
	after := e.segments(t)
	for _, id := range ids {
		want := before[id]
		if changed[id] {
			want++
		}
		if after[id] != want {
			t.Errorf("session %s: %d segments, want %d", id, after[id], want)
		}
	}

	// An unchanged catalog: nothing moves (TestNoopPushDoesNotGrow counts
	// its requests against the catalog's size).
	r = e.must(t, 0, "push", "--dir", dir, "--endpoint", rc.URL, "--json", e.url)
	if _, sum := events(t, r.stdout); sum.Bytes != 0 || sum.Counts["unchanged"] != len(ids) {
		t.Errorf("no-op push: %+v", sum)
	}
	// Open's one LIST is of the index log (format 4); the cached catalog
	// spares every partition read.
	if c, sent := rc.take(); c["PUT"] != 0 || c["LIST"] > 1 || c[sessionPrefix+"GET"] != 0 || c["GET"] > 8 || sent != 0 {
		t.Errorf("no-op push made %v requests and sent %d bytes; want no PUT, no LIST but the index log's, no session or partition read", c, sent)
	}
	if got := sessionFiles(reads.Take(t)); len(got) != 0 {
		t.Errorf("no-op push opened %v: an unchanged file is read", got)
	}

	if r := e.must(t, 0, "push", "--dir", dir, "--quiet", e.url); r.stdout != "" || r.stderr != "" {
		t.Errorf("quiet no-op push printed %q %q", r.stdout, r.stderr)
	}
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
}

// sessionFiles keeps the session files of names.
func sessionFiles(names []string) []string {
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".jsonl") })
}

// TestNoopPushDoesNotGrow: a push of an unchanged catalog makes the same
// requests for 10, 100 and 1,000 sessions: the index log's newest commit
// (its catalog cached by the push before) and nothing of any session or
// partition; it writes nothing and lists nothing but the index log.
func TestNoopPushDoesNotGrow(t *testing.T) {
	t.Parallel()
	counts := map[int]map[string]int{}
	for _, n := range []int{10, 100, 1000} {
		e := newEnv(t)
		dir := t.TempDir()
		for i := range n {
			// The first 16 ids fill every shard (an id's first hex digit).
			id := fmt.Sprintf("%x", i%manifest.Shards) + agent.NewSessionID()[1:]
			appendBatch(t, dir, id, true)
		}
		e.must(t, 0, "push", "--dir", dir, "--quiet", e.url)
		rc := newRequestCounter(t, e.srv.Endpoint())
		// The first push after a bulk one reads the partitions (the bulk
		// commit lists no changes) and caches the catalog, under the
		// endpoint it reached.
		e.must(t, 0, "push", "--dir", dir, "--endpoint", rc.URL, "--quiet", e.url)
		rc.take()
		r := e.must(t, 0, "push", "--dir", dir, "--endpoint", rc.URL, "--json", e.url)
		if _, sum := events(t, r.stdout); sum.Bytes != 0 || sum.Counts["unchanged"] != n {
			t.Fatalf("no-op push of %d sessions: %+v", n, sum)
		}
		c, sent := rc.take()
		t.Logf("no-op push of %d sessions: %v, %d bytes sent", n, c, sent)
		if c["PUT"] != 0 || c["LIST"] > 1 || c[sessionPrefix+"GET"] != 0 || c[sessionPrefix+"HEAD"] != 0 || sent != 0 {
			t.Errorf("no-op push of %d sessions made %v requests and sent %d bytes; want no PUT, no LIST but the index log's, no session read", n, c, sent)
		}
		counts[n] = c
	}
	// One check of the log's newest commit (a GET of the next, a HEAD of
	// it) comes or not with the moment the listing is made after Open.
	if total(counts[1000]) > total(counts[10])+2 || total(counts[100]) > total(counts[10])+2 || total(counts[1000]) > 12 {
		t.Errorf("no-op push requests grow with the catalog: 10 sessions %v, 100 %v, 1000 %v", counts[10], counts[100], counts[1000])
	}
}

func TestPushTornAndMalformed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 4)
	// A torn batch: its committed part is pushed, the rest is not.
	tornID := ids[0]
	path := filepath.Join(dir, tornID+".jsonl")
	committed, _ := os.ReadFile(path)
	extra := appendBatch(t, t.TempDir(), tornID, false)
	appendFile(t, path, extra[:len(extra)-7])
	// A malformed complete line in the middle of another session.
	badID := ids[1]
	badPath := filepath.Join(dir, badID+".jsonl")
	good, _ := os.ReadFile(badPath)
	lines := bytes.Count(good, []byte{'\n'})
	appendFile(t, badPath, []byte("{\"type\":\"message\",oops}\n"))
	appendBatch(t, dir, badID, false)

	r := e.must(t, 1, "push", "--dir", dir, "--json", e.url)
	evs, sum := events(t, r.stdout)
	if sum.Failed != 1 || sum.Counts["pushed"] != len(ids)-1 {
		t.Fatalf("push: %+v", sum)
	}
	for _, ev := range evs {
		if ev.ID == badID && (ev.Event != "failed" || !strings.Contains(ev.Error, badPath+":"+itoa(lines+1)+":")) {
			t.Errorf("malformed session: %+v, want failed at %s:%d", ev, badPath, lines+1)
		}
	}
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, e.url)
	got := readCatalog(t, into)
	if !bytes.Equal(got[tornID+".jsonl"], committed) {
		t.Errorf("torn session pulled back as %d bytes, want its %d committed bytes", len(got[tornID+".jsonl"]), len(committed))
	}
	if _, ok := got[badID+".jsonl"]; ok {
		t.Error("the malformed session was pushed")
	}
	// The text form names the file and line, on one line.
	r = e.must(t, 1, "push", "--dir", dir, e.url)
	if !strings.Contains(r.stdout, badPath+":"+itoa(lines+1)+":") {
		t.Errorf("text output does not name %s:%d:\n%s", badPath, lines+1, r.stdout)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestPushDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 5)
	r := e.must(t, 0, "push", "--dir", dir, "--dry-run", "--json", e.url)
	evs, sum := events(t, r.stdout)
	if byEvent(evs)["would-push"] != len(ids) || !sum.DryRun {
		t.Errorf("dry run: %+v", sum)
	}
	if n := len(e.segments(t)); n != 0 {
		t.Errorf("dry run pushed %d sessions", n)
	}
	if _, err := os.Stat(filepath.Join(dir, ".panto-sync")); !os.IsNotExist(err) {
		t.Errorf("dry run wrote the state directory: %v", err)
	}
	// And a dry-run pull writes nothing either.
	e.must(t, 0, "push", "--dir", dir, e.url)
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, "--dry-run", e.url)
	if entries, _ := os.ReadDir(into); len(entries) != 0 {
		t.Errorf("dry-run pull wrote %d entries", len(entries))
	}
}

func readCatalogIDs(t *testing.T, dir string) []string {
	var ids []string
	for name := range readCatalog(t, dir) {
		ids = append(ids, strings.TrimSuffix(name, ".jsonl"))
	}
	return ids
}

func TestPushErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, _ := catalog(t, 1)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no bucket argument", []string{"push", "--dir", dir}, "s3://BUCKET"},
		{"not a bucket", []string{"push", "--dir", dir, "/tmp/x"}, "s3://BUCKET"},
		{"no catalog", []string{"push", "--dir", filepath.Join(dir, "missing"), e.url}, "--dir"},
		{"bad flag", []string{"push", "--no-such-flag", e.url}, "--help"},
		{"bad policy", []string{"push", "--dir", dir, "--on-diverge", "merge", e.url}, "keep-both"},
		{"bad glob", []string{"push", "--dir", dir, "--include", "[", e.url}, "glob"},
		{"missing bucket", []string{"push", "--dir", dir, "s3://panto-no-such-bucket"}, "does not exist"},
		{"unreachable endpoint", []string{"push", "--dir", dir, "--endpoint", "http://127.0.0.1:1", e.url}, "endpoint"},
		{"wrong credentials", []string{"push", "--dir", dir, e.url, "AWS_SECRET_ACCESS_KEY=wrong"}, "AWS_SECRET_ACCESS_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, env := tt.args, []string(nil)
			if last := args[len(args)-1]; strings.Contains(last, "=") {
				args, env = args[:len(args)-1], []string{last}
			}
			r := e.runEnv(t, env, args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			msg := strings.TrimRight(r.stderr, "\n")
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto-sync: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("stderr = %q, want one line mentioning %q", r.stderr, tt.want)
			}
		})
	}
}

func TestHelpHasExamples(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, cmd := range []string{"push", "pull", "copy", "status", "ls", "verify", "compact"} {
		r := e.must(t, 0, cmd, "--help")
		if !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "panto-sync "+cmd) {
			t.Errorf("%s --help has no examples:\n%s", cmd, r.stdout)
		}
	}
}

func TestPushAfterBucketWiped(t *testing.T) {
	t.Parallel()
	// The state file remembers what was pushed; it must not hide a bucket
	// that lost it.
	e := newEnv(t)
	dir, ids := catalog(t, 4)
	e.must(t, 0, "push", "--dir", dir, e.url)
	ctx := context.Background()
	c := e.srv.Client(t)
	for obj := range c.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if err := c.RemoveObject(ctx, e.bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	if _, sum := events(t, r.stdout); sum.Counts["pushed"] != len(ids) {
		t.Fatalf("push to a wiped bucket: %+v", sum)
	}
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
}

func TestPushInterrupted(t *testing.T) {
	t.Parallel()
	// Ctrl-C stops new work but lets started appends finish with their
	// manifest and index updates: nothing is left for the next run to
	// repair, and a pull right after reproduces what was pushed: every
	// session the push reported pushed (or found unchanged) comes back
	// whole, and any other whole or not at all.
	e := newEnv(t)
	dir, _ := catalog(t, 60)
	k := e.killer(t, time.Second) // anywhere in the slowed transfer below
	k.onlyAfterWrite = true
	interrupted := 0
	into := t.TempDir()
	// At least 5 runs, and more (up to maxRuns) until one is interrupted
	// mid-transfer: on a loaded machine a push of a few sessions may
	// finish between two looks at the bucket.
	runs := 0
	before := map[string][]byte{} // what the bucket held before a run
	// The push goes through a proxy that holds each request for a
	// session's objects: two at a time, its 20 sessions take at least a
	// second, which outlasts the test's look at the bucket however loaded
	// the machine (in a full parallel suite, pushes straight to MinIO
	// finished between two looks, 30 times in a row).
	slow := slowProxy(t, e.srv.Endpoint(), 100*time.Millisecond)
	for i := 0; i < maxRuns && (i < 5 || interrupted == 0); i++ {
		runs++
		grow(t, dir, k.rng, 20)
		cmd := e.command(t, "push", "--dir", dir, "--concurrency", "2", "--endpoint", slow, "--json", e.url)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, cmdtest.Stderr(t, "panto-sync push", &errb)
		mid := k.signal(t, cmd, syscall.SIGINT, e.objectCount(t, "panto"))
		if out.Len() == 0 {
			// Interrupted while it listed: nothing was planned, so
			// nothing is reported but the one-line error.
			if msg := strings.TrimSuffix(errb.String(), "\n"); cmd.ProcessState.ExitCode() != 1 || msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("run %d: the push printed nothing (%v), stderr %q", i, cmd.ProcessState, errb.String())
			}
			continue
		}
		evs, sum := events(t, out.String())
		if code := cmd.ProcessState.ExitCode(); code != 0 { // interrupted: it still reports, in JSON, and exits 1
			if mid {
				interrupted++
			}
			if code != 1 || sum.ExitCode != 1 || byEvent(evs)["failed"] == 0 {
				t.Errorf("interrupted push: exit %d, %+v", code, sum)
			}
		}
		e.must(t, 0, "pull", "--dir", into, e.url)
		pulled, local := readCatalog(t, into), readCatalog(t, dir)
		for _, ev := range evs {
			name := ev.ID + ".jsonl"
			if (ev.Event == "pushed" || ev.Event == "unchanged") && !bytes.Equal(pulled[name], local[name]) {
				t.Errorf("run %d: %s was %s, and pulled back as %d bytes; the file has %d", i, ev.ID, ev.Event, len(pulled[name]), len(local[name]))
			}
		}
		// A session the push did not take (its files grew since an
		// earlier push) comes back as that earlier push left it, or
		// whole: never torn between the two.
		for name, got := range pulled {
			if !bytes.Equal(got, local[name]) && !bytes.Equal(got, before[name]) {
				t.Errorf("run %d: %s pulled back as %d bytes; the file has %d, and the bucket held %d before the push", i, name, len(got), len(local[name]), len(before[name]))
			}
		}
		before = pulled
	}
	t.Logf("%d of %d pushes were interrupted mid-transfer", interrupted, runs)
	if interrupted == 0 {
		t.Error("no push was interrupted mid-transfer: each finished, or had written nothing, at its SIGINT")
	}
	e.must(t, 0, "push", "--dir", dir, e.url)
	e.converged(t, dir, e.url)
}

// TestPushNewUncommitted: a new session whose file holds no committed
// line yet (its first append in progress) is not a session yet: neither
// pushed nor failed; once its line is complete it is pushed.
func TestPushNewUncommitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 2)
	path := filepath.Join(dir, ids[0]+".jsonl")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header := full[:bytes.IndexByte(full, '\n')+1]
	if err := os.WriteFile(path, header[:len(header)-1], 0o600); err != nil { // the header, torn
		t.Fatal(err)
	}
	r := e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	evs, sum := events(t, r.stdout)
	if got := byEvent(evs); got["pushed"] != 1 || len(evs) != 1 || sum.Failed != 0 {
		t.Fatalf("push: %+v %+v", got, sum)
	}
	if err := os.WriteFile(path, full, 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.must(t, 0, "push", "--dir", dir, "--json", e.url)
	if evs, _ := events(t, r.stdout); byEvent(evs)["pushed"] != 1 {
		t.Fatalf("second push: %+v", byEvent(evs))
	}
	into := t.TempDir()
	e.must(t, 0, "pull", "--dir", into, e.url)
	sameCatalog(t, dir, into)
}

// newestCommit is the newest commit of the bucket's index log, read with
// minio-go and decoded, independently of the store.
func (e *env) newestCommit(t *testing.T) *manifest.IndexShard {
	t.Helper()
	var newest string
	for obj := range e.srv.Client(t).ListObjects(context.Background(), e.bucket, minio.ListObjectsOptions{Prefix: "panto/index/log/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		newest = max(newest, obj.Key)
	}
	if newest == "" {
		t.Fatal("the bucket has no index log")
	}
	codec, err := manifest.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.DecodeIndexShard(strings.TrimPrefix(newest, "panto/"), e.srv.Objects(t, e.bucket)[newest])
	if err != nil {
		t.Fatalf("%s: %v", newest, err)
	}
	return c
}

// TestPushFoldsItsFew: a push of a few sessions (at most 8, which the
// index commits unfolded, as a turn's checkpoint does) folds them into a
// run as it ends, as an agent's exit folds its own: left in the newest
// commit's unfolded set, the first agent's turn after they went idle
// folds them beside its own, a head of each of their projects past the
// 32 KB a turn may send.
func TestPushFoldsItsFew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, ids := catalog(t, 3)
	e.must(t, 0, "push", "--dir", dir, e.url)
	if c := e.newestCommit(t); len(c.Unfolded) != 0 || len(c.Runs) == 0 {
		t.Fatalf("after a push of 3 sessions the newest commit holds %d unfolded and names %d runs; want none unfolded, in a run", len(c.Unfolded), len(c.Runs))
	}
	for _, id := range ids[:2] {
		appendBatch(t, dir, id, false)
	}
	e.must(t, 0, "push", "--dir", dir, e.url)
	if c := e.newestCommit(t); len(c.Unfolded) != 0 {
		t.Fatalf("after a push of 2 grown sessions the newest commit holds %d unfolded; want none", len(c.Unfolded))
	}
}
