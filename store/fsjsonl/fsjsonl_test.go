package fsjsonl_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixedClock returns a clock that ticks one second per call from t0.
func fixedClock() func() time.Time {
	n := 0
	return func() time.Time { n++; return t0.Add(time.Duration(n) * time.Second) }
}

func batch(prefix string, n int) []agent.PersistentMessage {
	out := make([]agent.PersistentMessage, n)
	id := agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://llm.test/v1", Model: "m"}
	for i := range out {
		role := agent.RoleUser
		if i%2 == 1 {
			role = agent.RoleAssistant
		}
		out[i] = agent.PersistentMessage{
			Message:      agent.Message{Role: role, Content: []agent.Block{agent.TextBlock(fmt.Sprintf("%s-%d", prefix, i))}},
			Identity:     id,
			Conversation: []agent.Message{agent.UserText("provenance sk-test-SECRET")},
		}
	}
	return out
}

func encode(t *testing.T, id string, header bool, msgs []agent.PersistentMessage, at time.Time) []byte {
	t.Helper()
	b, err := sessionlog.EncodeBatch(id, header, msgs, at)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, s *fsjsonl.Store, id string) int {
	t.Helper()
	conv, err := s.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	return len(conv.Messages)
}

func infoOf(t *testing.T, s *fsjsonl.Store, id string) (agent.SessionInfo, bool) {
	t.Helper()
	infos, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, info := range infos {
		if info.ID == id {
			return info, true
		}
	}
	return agent.SessionInfo{}, false
}

func TestBytesAreTheCodecs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "catalog")
	s := open(t, dir, fsjsonl.WithClock(func() time.Time { return t0 }))
	id := "bytes"
	b1, b2 := batch("one", 3), batch("two", 2)
	if err := s.AppendMessages(t.Context(), id, b1); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(t.Context(), id, b2); err != nil {
		t.Fatal(err)
	}
	path, err := s.Path(id)
	if err != nil {
		t.Fatal(err)
	}
	want := append(encode(t, id, true, b1, t0), encode(t, id, false, b2, t0)...)
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Errorf("file bytes\n%s\nwant\n%s", got, want)
	}
	if bytes.Contains(want, []byte("SECRET")) {
		t.Error("the codec kept provenance")
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := readCommitted(t, s, id)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("ReadCommitted = %d bytes, %v; want the file's %d", len(got), err, len(want))
	}
}

func TestTornTail(t *testing.T) {
	at := t0
	cases := []struct {
		name string
		// tail returns what a crashed append left after the committed
		// batch; next is the batch the next append writes.
		tail func(next []byte) []byte
	}{
		{"torn-last-line", func(next []byte) []byte { return next[:len(next)/2] }},
		{"line-without-newline", func(next []byte) []byte { return next[:len(next)-1] }},
		{"batch-cut-between-lines", func(next []byte) []byte {
			i := bytes.IndexByte(next, '\n')
			return next[:i+1] // one complete line of a 3-line batch
		}},
		{"batch-cut-before-last-line", func(next []byte) []byte {
			return next[:bytes.LastIndexByte(next[:len(next)-1], '\n')+1]
		}},
		{"garbage-without-newline", func([]byte) []byte { return []byte{0, 0, 0, 0} }},
		{"tail-longer-than-next-batch", func(next []byte) []byte {
			// Two lines of a batch that never ended, then a torn third.
			long := bytes.Repeat([]byte("y"), 3*len(next))
			return []byte(`{"type":"message","role":"user","content":[],"more":2}` + "\n" +
				`{"type":"message","role":"user","content":[],"more":1}` + "\n" + string(long))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, t.TempDir(), fsjsonl.WithClock(func() time.Time { return at }))
			id := "torn"
			path, _ := s.Path(id)
			b1, b2 := batch("committed", 2), batch("next", 3)
			if err := s.AppendMessages(t.Context(), id, b1); err != nil {
				t.Fatal(err)
			}
			committed := readFile(t, path)
			next := encode(t, id, false, b2, at)
			appendFile(t, path, c.tail(next))

			if n := count(t, s, id); n != 2 {
				t.Errorf("Load after a torn append: %d messages, want 2", n)
			}
			if info, _ := infoOf(t, s, id); info.MessageCount != 2 {
				t.Errorf("List after a torn append: MessageCount %d, want 2", info.MessageCount)
			}
			if got, err := readCommitted(t, s, id); err != nil || !bytes.Equal(got, committed) {
				t.Errorf("ReadCommitted = %q, %v; want the committed bytes", got, err)
			}
			// The next append repairs: the file is as if the crash never happened.
			if err := s.AppendMessages(t.Context(), id, b2); err != nil {
				t.Fatal(err)
			}
			if got, want := readFile(t, path), append(committed, next...); !bytes.Equal(got, want) {
				t.Errorf("after repair the file is\n%q\nwant\n%q", got, want)
			}
			if n := count(t, s, id); n != 5 {
				t.Errorf("Load after repair: %d messages, want 5", n)
			}
		})
	}
}

func TestFirstBatchCut(t *testing.T) {
	s := open(t, t.TempDir())
	id := "cutfirst"
	path, _ := s.Path(id)
	full := encode(t, id, true, batch("first", 3), t0)
	// Header and 2 of the 3 message lines: no committed byte.
	lines := bytes.SplitAfter(full, []byte("\n"))
	writeFile(t, path, bytes.Join(lines[:3], nil))
	if _, err := s.Load(t.Context(), id); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Errorf("Load of a cut first batch: %v, want ErrSessionNotFound", err)
	}
	if _, err := readCommitted(t, s, id); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Errorf("ReadCommitted of a cut first batch: %v, want ErrSessionNotFound", err)
	}
	if _, ok := infoOf(t, s, id); ok {
		t.Error("List shows a session whose first batch never completed")
	}
	if _, err := s.Resolve(t.Context(), "cut"); !errors.Is(err, agent.ErrSessionNotFound) {
		t.Errorf("Resolve of a cut first batch: %v, want ErrSessionNotFound", err)
	}
	// The next append starts the log afresh, with a header.
	if err := s.AppendMessages(t.Context(), id, batch("again", 1)); err != nil {
		t.Fatal(err)
	}
	log, err := sessionlog.Parse(path, readFile(t, path))
	if err != nil || log == nil || len(log.Messages) != 1 || log.Messages[0].Text() != "again-0" {
		t.Errorf("after the repair Parse = %+v, %v", log, err)
	}
}

func TestMalformedLine(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := t.Context()
	for _, id := range []string{"good", "broken", "brokenlast"} {
		if err := s.AppendMessages(ctx, id, batch(id, 2)); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendMessages(ctx, id, batch(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Break line 2 (the first message) of "broken", and the last line of
	// "brokenlast" (complete, so not a torn tail).
	for id, line := range map[string]int{"broken": 2, "brokenlast": 4} {
		path, _ := s.Path(id)
		lines := bytes.SplitAfter(readFile(t, path), []byte("\n"))
		lines[line-1] = []byte("{\"type\":\"message\",\"role\":\"user\",\"content\":[{]}\n")
		writeFile(t, path, bytes.Join(lines, nil))
	}
	for id, line := range map[string]int{"broken": 2, "brokenlast": 4} {
		_, err := s.Load(ctx, id)
		if !errors.Is(err, sessionlog.ErrMalformed) {
			t.Errorf("Load(%s): %v, want ErrMalformed", id, err)
			continue
		}
		if want := fmt.Sprintf("%s.jsonl:%d", id, line); !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s) error %q does not name %s", id, err, want)
		}
	}
	if n := count(t, s, "good"); n != 3 {
		t.Errorf("Load(good) = %d messages, want 3", n)
	}
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List with a broken session: %v", err)
	}
	if len(infos) != 3 {
		t.Errorf("List = %v, want all three sessions (broken ones stay visible)", infos)
	}
	if sess, err := s.Resolve(ctx, "goo"); err != nil || sess.Info.MessageCount != 3 {
		t.Errorf("Resolve(goo) = %v, %v", sess, err)
	}
	// An append to a file whose last complete line is corrupt refuses
	// rather than guessing.
	err = s.AppendMessages(ctx, "brokenlast", batch("more", 1))
	if !errors.Is(err, sessionlog.ErrMalformed) || !strings.Contains(err.Error(), "brokenlast.jsonl:4") {
		t.Errorf("append after a corrupt last line: %v, want ErrMalformed naming brokenlast.jsonl:4", err)
	}
}

func TestHeaderNamesAnotherSession(t *testing.T) {
	s := open(t, t.TempDir())
	if err := s.AppendMessages(t.Context(), "original", batch("x", 1)); err != nil {
		t.Fatal(err)
	}
	from, _ := s.Path("original")
	to, _ := s.Path("copied")
	writeFile(t, to, readFile(t, from))
	if _, err := s.Load(t.Context(), "copied"); !errors.Is(err, sessionlog.ErrMalformed) || !strings.Contains(err.Error(), "copied.jsonl:1") {
		t.Errorf("Load of a file whose header names another session: %v", err)
	}
}

func TestIDsAndStrayFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for _, id := range []string{"b", "a", "c-1"} {
		if err := s.AppendMessages(t.Context(), id, batch(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a.b.jsonl", "notes.txt", ".panto-tmp-123", ".panto-tmp-old", ".panto-index-9.tmp", "x.jsonl.bak"} {
		writeFile(t, filepath.Join(dir, name), []byte("junk\n"))
	}
	// Temporary files a crash left an hour ago are cleaned by List; fresh
	// ones may belong to a write in progress.
	old := time.Now().Add(-2 * time.Hour)
	for _, name := range []string{".panto-tmp-old", ".panto-index-9.tmp", "notes.txt"} {
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(t.Context()); err != nil { // writes the cache file too
		t.Fatal(err)
	}
	for name, want := range map[string]bool{".panto-tmp-old": false, ".panto-index-9.tmp": false, ".panto-tmp-123": true, "notes.txt": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("after List, %s exists: %v, want %v", name, err == nil, want)
		}
	}
	logs, err := s.Logs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range logs {
		ids = append(ids, l.Info.ID)
	}
	slices.Sort(ids)
	if got := strings.Join(ids, ","); got != "a,b,c-1" {
		t.Errorf("Logs = %s, want a,b,c-1", got)
	}
	infos, err := s.List(t.Context())
	if err != nil || len(infos) != 3 {
		t.Errorf("List = %v, %v; want 3 sessions", infos, err)
	}
	if _, err := s.Path("../etc/passwd"); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Errorf("Path(../etc/passwd) = %v", err)
	}
}

func TestAppendLog(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir())
	id := "raw"
	path, _ := s.Path(id)
	first := encode(t, id, true, batch("first", 2), t0)
	second := encode(t, id, false, batch("second", 3), t0.Add(time.Minute))
	atFirst := store.Checkpoint{Length: int64(len(first)), SHA256: sum(first)}

	// Refused data leaves nothing behind.
	bad := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no-header", second},
		{"header-of-another-session", encode(t, "other", true, batch("x", 1), t0)},
		{"cut-batch", first[:bytes.IndexByte(first, '\n')+1]},
		{"torn-line", first[:len(first)-1]},
		{"not-json", []byte("hello\n")},
	}
	for _, b := range bad {
		if _, err := s.AppendLog(ctx, id, store.Checkpoint{}, b.data); err == nil {
			t.Errorf("AppendLog(%s) succeeded", b.name)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused AppendLog left a file: %v", err)
	}
	if _, err := s.AppendLog(ctx, id, atFirst, second); !errors.Is(err, store.ErrChanged) {
		t.Errorf("AppendLog to a missing file expecting %d bytes: %v, want ErrChanged", len(first), err)
	}
	if _, err := s.AppendLog(ctx, "../x", store.Checkpoint{}, first); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Errorf("AppendLog(../x): %v", err)
	}

	// Create.
	if cp, err := s.AppendLog(ctx, id, store.Checkpoint{}, first); err != nil || cp != atFirst {
		t.Fatalf("AppendLog create: %v, %v", cp, err)
	}
	if got := readFile(t, path); !bytes.Equal(got, first) {
		t.Errorf("created file %q, want %q", got, first)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("created file mode %v, want 0600", fi.Mode().Perm())
	}
	// The same create again is refused: the file holds it already.
	var changed *store.ChangedError
	if _, err := s.AppendLog(ctx, id, store.Checkpoint{}, first); !errors.As(err, &changed) || changed.Have != atFirst {
		t.Errorf("AppendLog create again: %v; want a ChangedError saying it holds %v", err, atFirst)
	}
	other := encode(t, id, true, batch("other", 1), t0)
	if _, err := s.AppendLog(ctx, id, store.Checkpoint{}, other); !errors.As(err, &changed) || changed.Have != atFirst {
		t.Errorf("AppendLog create over an existing file: %v, want a ChangedError saying it holds %v", err, atFirst)
	}
	// Append at the checkpoint; a wrong one is refused, saying what is there.
	wrong := store.Checkpoint{Length: atFirst.Length - 1, SHA256: atFirst.SHA256}
	if _, err := s.AppendLog(ctx, id, wrong, second); !errors.As(err, &changed) || changed.Have != atFirst || changed.Want != wrong {
		t.Errorf("AppendLog at a wrong length: %v", err)
	}
	wrong = store.Checkpoint{Length: atFirst.Length, SHA256: sum([]byte("other bytes"))}
	if _, err := s.AppendLog(ctx, id, wrong, second); !errors.Is(err, store.ErrChanged) {
		t.Errorf("AppendLog at the right length, another hash: %v", err)
	}
	if _, err := s.AppendLog(ctx, id, atFirst, first); err == nil {
		t.Error("AppendLog of a second header succeeded")
	}
	// A torn tail is repaired first.
	appendFile(t, path, []byte(`{"type":"message","ro`))
	want := append(append([]byte{}, first...), second...)
	if cp, err := s.AppendLog(ctx, id, atFirst, second); err != nil || cp != (store.Checkpoint{Length: int64(len(want)), SHA256: sum(want)}) {
		t.Fatalf("AppendLog: %v, %v", cp, err)
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Errorf("file after AppendLog %q, want %q", got, want)
	}
	if n := count(t, s, id); n != 5 {
		t.Errorf("Load after AppendLog: %d messages, want 5", n)
	}
	// A file left empty by a crash counts as holding nothing.
	emptyPath, _ := s.Path("leftover")
	writeFile(t, emptyPath, nil)
	leftover := encode(t, "leftover", true, batch("l", 1), t0)
	if _, err := s.AppendLog(ctx, "leftover", store.Checkpoint{}, leftover); err != nil {
		t.Fatalf("AppendLog onto an empty leftover file: %v", err)
	}
	if got := readFile(t, emptyPath); !bytes.Equal(got, leftover) {
		t.Errorf("leftover file %q, want %q", got, leftover)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".panto-tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestAppendNewerFormat: a file whose header names a newer line format
// takes no append, by any path; the file is left as it was.
func TestAppendNewerFormat(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir())
	path, _ := s.Path("newer")
	data := encode(t, "newer", true, batch("x", 1), t0)
	data = bytes.Replace(data, []byte(`"version":1`), []byte(`"version":99`), 1)
	writeFile(t, path, data)
	if err := s.AppendMessages(ctx, "newer", batch("more", 1)); !errors.Is(err, sessionlog.ErrNewerVersion) || strings.Contains(err.Error(), "\n") {
		t.Errorf("AppendMessages to a newer-format file: %v, want one line saying ErrNewerVersion", err)
	}
	more := encode(t, "newer", false, batch("more", 1), t0)
	if _, err := s.AppendLog(ctx, "newer", store.Checkpoint{Length: int64(len(data)), SHA256: sum(data)}, more); !errors.Is(err, sessionlog.ErrNewerVersion) {
		t.Errorf("AppendLog to a newer-format file: %v, want ErrNewerVersion", err)
	}
	if got := readFile(t, path); !bytes.Equal(got, data) {
		t.Errorf("the newer-format file was changed:\n%s", got)
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// readCommitted reads session id's committed bytes back through ReadLog.
func readCommitted(t *testing.T, s *fsjsonl.Store, id string) ([]byte, error) {
	t.Helper()
	r, _, err := s.ReadLog(t.Context(), id, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// TestTwoProcesses appends to one session from two OS processes at once:
// every batch lands once, whole, not interleaved.
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	const batches = 40
	var cmds []*exec.Cmd
	// Bounded: past the deadline the helpers are killed and Wait returns.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for w := range 2 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.WaitDelay = 5 * time.Second
		cmd.Env = append(os.Environ(), "FSJSONL_HELPER=1", "FSJSONL_DIR="+dir, "FSJSONL_WRITER="+strconv.Itoa(w), "FSJSONL_BATCHES="+strconv.Itoa(batches))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	s := open(t, dir)
	conv, err := s.Load(t.Context(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(conv.Messages) != 2*batches*3 {
		t.Fatalf("%d messages, want %d", len(conv.Messages), 2*batches*3)
	}
	next := map[int]int{} // writer -> next batch expected
	for i := 0; i < len(conv.Messages); i += 3 {
		var w, b int
		if _, err := fmt.Sscanf(conv.Messages[i].Text(), "w%d-b%d-0", &w, &b); err != nil {
			t.Fatalf("message %d = %q: %v", i, conv.Messages[i].Text(), err)
		}
		if b != next[w] {
			t.Fatalf("writer %d: batch %d where %d was expected", w, b, next[w])
		}
		next[w]++
		for k := 1; k < 3; k++ {
			if want := fmt.Sprintf("w%d-b%d-%d", w, b, k); conv.Messages[i+k].Text() != want {
				t.Fatalf("message %d = %q, want %q: batches interleaved", i+k, conv.Messages[i+k].Text(), want)
			}
		}
	}
	path, _ := s.Path("shared")
	if _, err := sessionlog.CommittedLength(path, readFile(t, path)); err != nil {
		t.Fatal(err)
	}
	if h := bytes.Count(readFile(t, path), []byte(`"type":"session"`)); h != 1 {
		t.Errorf("%d header lines, want 1", h)
	}
}

// TestHelperProcess is the child of TestTwoProcesses.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("FSJSONL_HELPER") != "1" {
		t.Skip("helper process only")
	}
	s := open(t, os.Getenv("FSJSONL_DIR"))
	w, _ := strconv.Atoi(os.Getenv("FSJSONL_WRITER"))
	n, _ := strconv.Atoi(os.Getenv("FSJSONL_BATCHES"))
	for b := range n {
		msgs := make([]agent.PersistentMessage, 3)
		for k := range msgs {
			msgs[k] = agent.PersistentMessage{Message: agent.UserText(fmt.Sprintf("w%d-b%d-%d", w, b, k))}
		}
		if err := s.AppendMessages(t.Context(), "shared", msgs); err != nil {
			t.Fatal(err)
		}
	}
}
