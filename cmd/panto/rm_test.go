package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// TestRm: a deleted session is gone from every command, its text from
// every stored byte, and deleting it again is a note, not a failure.
func TestRm(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key)
			const secret = "the-password-is-hunter2"
			for _, p := range []string{"keep this one", "paste " + secret} {
				if r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), p)...); r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
			}
			ids := listIDs(t, b) // newest first: the secret one
			doomed, kept := ids[0], ids[1]
			if !bytes.Contains(b.bytes(t), []byte(secret)) {
				t.Fatal("the secret is not in the store before rm; the scan below proves nothing")
			}

			// Off a terminal, rm refuses without --yes and touches nothing.
			r := runPanto(t, t.TempDir(), pc.env(b), "", "rm", doomed[:8])
			if r.code == 0 || !strings.Contains(r.stderr, "--yes") || len(listIDs(t, b)) != 2 {
				t.Fatalf("rm without --yes: exit %d, stderr %q", r.code, r.stderr)
			}

			r = runPanto(t, t.TempDir(), pc.env(b), "", "rm", "--yes", "--json", doomed[:8])
			var got []removal
			if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || len(got) != 1 {
				t.Fatalf("rm: exit %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
			}
			if g := got[0]; g.ID != doomed || g.Already || g.Length == 0 || len(g.SHA256) != 64 || time.Since(g.Deleted) > time.Minute {
				t.Errorf("rm --json = %+v", g)
			}

			if ids := listIDs(t, b); len(ids) != 1 || ids[0] != kept {
				t.Errorf("sessions after rm = %v, want only %s", ids, kept)
			}
			for _, args := range [][]string{{"show", doomed}, {"-r", doomed, "more"}} {
				r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), args...)...)
				if r.code == 0 || !strings.Contains(r.stderr, "deleted on") {
					t.Errorf("%q after rm: exit %d, stderr %q", args[0], r.code, r.stderr)
				}
			}
			// -c continues the newest session left.
			if r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "-c", "--any", "and again")...); r.code != 0 {
				t.Fatalf("-c: exit %d: %s", r.code, r.stderr)
			}
			if info, _ := loadOnly(t, b); info.ID != kept || info.MessageCount != 4 {
				t.Errorf("-c wrote to %s (%d messages), want %s", info.ID, info.MessageCount, kept)
			}
			if bytes.Contains(b.bytes(t), []byte(secret)) {
				t.Error("a stored byte still holds the deleted session's text")
			}

			r = runPanto(t, t.TempDir(), pc.env(b), "", "rm", "--yes", doomed)
			if r.code != 0 || !strings.Contains(r.stdout, "deleted already") {
				t.Errorf("rm again: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			r = runPanto(t, t.TempDir(), pc.env(b), "", "rm", "--yes", "nosuchsession")
			if r.code == 0 || !strings.Contains(r.stderr, "not found") {
				t.Errorf("rm of an unknown id: exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}

// TestRmAsksOnATerminal: on a terminal rm shows what goes and deletes only
// on yes.
func TestRmAsksOnATerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := writeOldSession(t, fsOpener(dir), "ask before deleting me", time.Now())
	for _, answer := range []string{"\n", "no\n", "y\n"} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(answer), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, stdinIsTerminal: true, now: time.Now}
		code := runInProcess(t.Context(), e, []string{"panto", "rm", "--store", dir, id[:6]})
		if !strings.Contains(errb.String(), "ask before deleting me") || !strings.Contains(errb.String(), "[y/N]") {
			t.Errorf("answer %q: the question does not show the session: %q", answer, errb.String())
		}
		st, _ := fsjsonl.Open(dir)
		_, err := st.Resolve(t.Context(), id)
		if answer == "y\n" {
			if code != 0 || err == nil {
				t.Errorf("answer yes: exit %d, resolve %v", code, err)
			}
		} else if code == 0 || err != nil || !strings.Contains(errb.String(), "nothing deleted") {
			t.Errorf("answer %q: exit %d, resolve %v, stderr %q", answer, code, err, errb.String())
		}
	}
}

// TestPrune: prune deletes what was last modified before the cutoff,
// on both stores, and --dry-run only lists it. The sessions are written
// by stores whose clocks are set back.
func TestPrune(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			now := time.Now()
			oldest := writeOldSession(t, b.openAt, "from two years ago", now.AddDate(-2, 0, 0))
			old := writeOldSession(t, b.openAt, "from last year", now.AddDate(-1, 0, 0))
			recent := writeOldSession(t, b.openAt, "from last week", now.AddDate(0, 0, -7))

			r := runPanto(t, t.TempDir(), b.storeEnv(), "", "prune", "--older-than", "180d", "--dry-run", "--json")
			var would []sessionJSON
			if err := json.Unmarshal([]byte(r.stdout), &would); r.code != 0 || err != nil || len(would) != 2 || would[0].ID != old || would[1].ID != oldest {
				t.Fatalf("--dry-run: exit %d, %v, %q, stderr %q", r.code, err, r.stdout, r.stderr)
			}
			if ids := listIDs(t, b); len(ids) != 3 {
				t.Fatalf("--dry-run deleted: %v left", ids)
			}
			r = runPanto(t, t.TempDir(), b.storeEnv(), "", "prune", "--older-than", "26w", "--yes")
			if r.code != 0 || strings.Count(r.stdout, "deleted ") != 2 {
				t.Fatalf("prune: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if ids := listIDs(t, b); len(ids) != 1 || ids[0] != recent {
				t.Errorf("after prune: %v, want only %s", ids, recent)
			}
			// With nothing that old, both say so, not "no sessions yet".
			for _, dry := range []string{"--yes", "--dry-run"} {
				r = runPanto(t, t.TempDir(), b.storeEnv(), "", "prune", "--older-than", "180d", dry)
				if r.code != 0 || r.stdout != "" || r.stderr != "no session was last modified more than 180d ago\n" {
					t.Errorf("prune %s with nothing to do: exit %d, stdout %q, stderr %q", dry, r.code, r.stdout, r.stderr)
				}
			}
		})
	}
}

// TestPruneShowsProjects: prune takes every project's sessions, so what
// it lists (--dry-run, and the question on a terminal) says each one's
// project, as panto sessions --all does: a table like panto sessions'
// reads as this project's alone.
func TestPruneShowsProjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := fsjsonl.Open(dir, fsjsonl.WithClock(func() time.Time { return time.Now().AddDate(-1, 0, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	s := st.Create()
	s.Info.Project = agent.Project{Remote: "github.com/team/elsewhere", Root: "/src/elsewhere", Dir: "/src/elsewhere"}
	if err := s.Append(t.Context(), []agent.PersistentMessage{{Message: agent.UserText("old work elsewhere")}, {Message: agent.AssistantText("ok")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		shown func(out, errb string) string
	}{
		{[]string{"--dry-run"}, func(out, _ string) string { return out }},
		{nil, func(_, errb string) string { return errb }}, // the question, answered no
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader("n\n"), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, stdinIsTerminal: true, now: time.Now}
		runInProcess(t.Context(), e, append([]string{"panto", "prune", "--store", dir, "--older-than", "30d"}, c.args...))
		if shown := c.shown(out.String(), errb.String()); !strings.Contains(shown, "PROJECT") || !strings.Contains(shown, "github.com/team/elsewhere") {
			t.Errorf("prune %v lists no project:\n%s", c.args, shown)
		}
	}
}

// TestPruneClock: the cutoff is panto's clock minus the age.
func TestPruneClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	made := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	id := writeOldSession(t, fsOpener(dir), "made in 2030", made)
	for _, tc := range []struct {
		now     time.Time
		deleted bool
	}{
		{made.Add(47 * time.Hour), false},
		{made.Add(49 * time.Hour), true},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, now: func() time.Time { return tc.now }}
		if code := runInProcess(t.Context(), e, []string{"panto", "prune", "--store", dir, "--older-than", "2d", "--yes", "--json"}); code != 0 {
			t.Fatalf("at %v: exit %d: %s", tc.now, code, errb.String())
		}
		var got []removal
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if deleted := len(got) == 1 && got[0].ID == id; deleted != tc.deleted || (!tc.deleted && len(got) != 0) {
			t.Errorf("at %v: deleted %+v, want deleted=%v", tc.now, got, tc.deleted)
		}
		if tc.deleted && !got[0].Deleted.Equal(tc.now.Truncate(time.Second)) {
			t.Errorf("tombstone time %v, want the clock's %v", got[0].Deleted, tc.now)
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "12h": 12 * time.Hour, "1h30m": 90 * time.Minute} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "-1h", "d", "1.5d", "NaNd", "99999999d", "3x"} {
		if got, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) = %v, want an error", in, got)
		}
	}
}

func fsOpener(dir string) func(t *testing.T, clock func() time.Time) agent.SessionStore {
	return func(t *testing.T, clock func() time.Time) agent.SessionStore {
		st, err := fsjsonl.Open(dir, fsjsonl.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// writeOldSession writes a session of two messages with the store's clock
// at at, and returns its id.
func writeOldSession(t *testing.T, open func(t *testing.T, clock func() time.Time) agent.SessionStore, prompt string, at time.Time) string {
	t.Helper()
	st := open(t, func() time.Time { return at })
	s := st.Create()
	if err := s.Append(context.Background(), []agent.PersistentMessage{{Message: agent.UserText(prompt)}, {Message: agent.AssistantText("ok")}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Flush(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return s.Info.ID
}

// TestRmKilled: panto rm killed at random moments leaves every session
// either whole or deleted, and a second rm finishes the job: nothing of
// the deleted sessions' text is left in any stored byte.
func TestRmKilled(t *testing.T) {
	t.Parallel()
	// And on the bucket itself (--direct), where the deletions that go at
	// once are each a dozen requests to the bucket when the kill comes.
	kinds := append(slices.Clone(backendKinds), struct {
		name string
		make func(t *testing.T) backend
	}{"s3-direct", func(t *testing.T) backend {
		b := s3Backend(t)
		b.env = append(b.env, "PANTO_DIRECT=1")
		return b
	}})
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			// Enough sessions that a kill after the first few lines lands
			// in the middle, also on a fast disk.
			n := 40
			if kind.name == "fs" {
				n = 300
			}
			var ids []string
			for i := 0; i < n; i++ {
				ids = append(ids, writeOldSession(t, b.openAt, fmt.Sprintf("doomed-text-%03d", i), time.Now()))
			}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
			for run := 0; run < 4; run++ {
				cmd := pantoCmd(t, t.TempDir(), b.storeEnv(), append([]string{"rm", "--yes"}, ids...)...)
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// Kill it once it has said it deleted a few (it prints
				// each as it goes).
				lines := bufio.NewScanner(out)
				for k := 1 + rng.IntN(5); k > 0 && lines.Scan(); {
					if strings.HasPrefix(lines.Text(), "deleted ") {
						k--
					}
				}
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
				// Each session is whole or deleted, never half.
				st := b.open(t)
				deleted := 0
				for _, id := range ids {
					conv, err := st.Load(t.Context(), id)
					switch {
					case errors.Is(err, agent.ErrSessionDeleted):
						deleted++
					case err != nil:
						t.Fatalf("after kill %d: load %s: %v", run, id, err)
					case len(conv.Messages) != 2:
						t.Fatalf("after kill %d: %s has %d messages", run, id, len(conv.Messages))
					}
				}
				t.Logf("kill %d: %d of %d sessions deleted", run, deleted, len(ids))
			}
			r := runPanto(t, t.TempDir(), b.storeEnv(), "", append([]string{"rm", "--yes", "--json"}, ids...)...)
			var got []removal
			if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || len(got) != len(ids) {
				t.Fatalf("rm after the kills: exit %d, %v, %d removals, stderr %s", r.code, err, len(got), r.stderr)
			}
			for i, rm := range got {
				if rm.ID != ids[i] {
					t.Fatalf("--json: removal %d is %s, want %s: in the order the ids were given", i, rm.ID, ids[i])
				}
			}
			if left := listIDs(t, b); len(left) != 0 {
				t.Errorf("sessions left after rm: %v", left)
			}
			// Run pages a kill left unnamed (between a purge's pages and
			// its commit) may hold the summary of a session deleted after
			// them, in about one run in ten here: nothing reads them, and
			// the day's first full reading or repair deletes them
			// (docs/DESIGN.md §8). Every other object is scanned.
			scan := b.bytes(t)
			if b.bytesBut != nil {
				report, err := b.open(t).(interface {
					CheckIndex(context.Context) (store.IndexReport, error)
				}).CheckIndex(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				scan = b.bytesBut(t, func(key string) bool {
					return slices.ContainsFunc(report.Unnamed, func(k string) bool { return strings.HasSuffix(key, "/"+k) })
				})
			}
			if bytes.Contains(scan, []byte("doomed-text-")) {
				t.Error("a stored byte still holds a deleted session's text")
			}
		})
	}
}

// inProcess serializes the runs of panto inside the test process:
// urfave/cli applies its package-level HelpFlag to every App it runs, so
// two Apps running at once race on it (the binary runs one).
var inProcess sync.Mutex

// runInProcess is run for tests that drive panto in process (a fake
// terminal, a fixed clock), one at a time.
func runInProcess(ctx context.Context, e *env, args []string) int {
	inProcess.Lock()
	defer inProcess.Unlock()
	return run(ctx, e, args)
}

// TestFirstOf: the deletions that ran at once fail as one line, the first
// failure in their order and how many more failed.
func TestFirstOf(t *testing.T) {
	a, b := errors.New("rm 3f9a: refused"), errors.New("rm 71c0: refused")
	for _, tc := range []struct {
		errs []error
		want string
	}{
		{[]error{nil, nil}, ""},
		{[]error{nil, a}, "rm 3f9a: refused"},
		{[]error{a, nil, b, b}, "rm 3f9a: refused (and 2 more failed: run it again)"},
	} {
		err := firstOf(tc.errs)
		if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || err != nil && got != tc.want {
			t.Errorf("firstOf(%v) = %v, want %q", tc.errs, err, tc.want)
		}
		if tc.want != "" && !errors.Is(err, a) {
			t.Errorf("firstOf(%v) does not wrap the first failure", tc.errs)
		}
	}
}
