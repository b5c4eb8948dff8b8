package fsjsonl

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/fileaccess"
	"github.com/panto-dev/panto/store"
)

func msgs(text string, n int) []agent.PersistentMessage {
	out := make([]agent.PersistentMessage, n)
	for i := range out {
		out[i] = agent.PersistentMessage{Message: agent.UserText(fmt.Sprintf("%s-%d", text, i))}
	}
	return out
}

func mustOpen(t *testing.T, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAppend(t *testing.T, s *Store, id string, m []agent.PersistentMessage) {
	t.Helper()
	if err := s.AppendMessages(t.Context(), id, m); err != nil {
		t.Fatal(err)
	}
}

// listed returns id -> info of a List, and the files decoded and resumed
// by it.
func listed(t *testing.T, s *Store) (map[string]agent.SessionInfo, int, int) {
	t.Helper()
	s.mu.Lock()
	idx := s.loadIndex()
	d0, r0 := idx.decoded, idx.resumed
	s.mu.Unlock()
	infos, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]agent.SessionInfo{}
	for _, info := range infos {
		out[info.ID] = info
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return out, s.index.decoded - d0, s.index.resumed - r0
}

func TestListCache(t *testing.T) {
	dir := t.TempDir()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	w := mustOpen(t, dir, WithClock(tick))
	for _, id := range []string{"a", "b", "c"} {
		mustAppend(t, w, id, msgs(id, 2))
	}
	got, decoded, _ := listed(t, w)
	if len(got) != 3 || decoded != 3 {
		t.Fatalf("cold List: %d sessions, %d decoded; want 3, 3", len(got), decoded)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatalf("no cache file after List: %v", err)
	}

	// A fresh handle (another process) lists from the cache file: stats only.
	r := mustOpen(t, dir)
	got2, decoded, _ := listed(t, r)
	if decoded != 0 {
		t.Errorf("warm List on a fresh handle decoded %d files, want 0", decoded)
	}
	for id, info := range got {
		if got2[id] != info {
			t.Errorf("warm info of %s = %+v, want %+v", id, got2[id], info)
		}
	}

	// Appended behind the cache's back (no lock, another writer): decoded
	// from the cached offset only.
	pathA := filepath.Join(dir, "a.jsonl")
	extra, err := sessionlog.EncodeBatch("a", false, msgs("behind", 3), tick())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(pathA, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(extra)
	f.Close()
	got2, decoded, resumed := listed(t, r)
	if info := got2["a"]; info.MessageCount != 5 || info.LastUserMessage != "behind-2" || !info.Modified.Equal(clock) {
		t.Errorf("after an append behind its back: %+v", info)
	}
	if decoded != 1 || resumed != 1 {
		t.Errorf("decoded %d (resumed %d) files, want 1 (1)", decoded, resumed)
	}

	// Replaced by rename with the same size and mtime: another inode, so
	// read again.
	pathB := filepath.Join(dir, "b.jsonl")
	old := readAll(t, pathB)
	fi, _ := os.Stat(pathB)
	replaced := bytes.ReplaceAll(old, []byte("b-1"), []byte("B-1"))
	tmp := filepath.Join(dir, "b.tmp")
	if err := os.WriteFile(tmp, replaced, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, pathB); err != nil {
		t.Fatal(err)
	}
	got2, _, _ = listed(t, r)
	if info := got2["b"]; info.LastUserMessage != "B-1" {
		t.Errorf("after a same-size replace by rename: LastUserMessage %q, want B-1", info.LastUserMessage)
	}

	// Deleted: gone from the list and from the cache.
	if err := os.Remove(filepath.Join(dir, "c.jsonl")); err != nil {
		t.Fatal(err)
	}
	got2, _, _ = listed(t, r)
	if _, ok := got2["c"]; ok || len(got2) != 2 {
		t.Errorf("after delete: %v", got2)
	}
	r.mu.Lock()
	_, cached := r.index.Sessions["c"]
	r.mu.Unlock()
	if cached {
		t.Error("deleted session still in the cache")
	}
	// And the first handle, whose in-memory cache predates all this,
	// sees the same.
	got1, _, _ := listed(t, w)
	for id, info := range got2 {
		if got1[id] != info {
			t.Errorf("first handle: %s = %+v, want %+v", id, got1[id], info)
		}
	}
	if len(got1) != 2 {
		t.Errorf("first handle lists %d sessions, want 2", len(got1))
	}
}

// TestListCacheTornTail: a summary of a file with a torn tail is never
// trusted on its stat alone, since the repair rewrites bytes in place and
// can leave the size (and, within a clock tick, the mtime) as it was.
func TestListCacheTornTail(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := mustOpen(t, dir, WithClock(func() time.Time { return at }))
	mustAppend(t, s, "torn", msgs("first", 1))
	path := filepath.Join(dir, "torn.jsonl")
	next, err := sessionlog.EncodeBatch("torn", false, msgs("next", 2), at)
	if err != nil {
		t.Fatal(err)
	}
	// A torn tail exactly as long as the batch that will replace it.
	torn := bytes.Clone(next)
	torn[len(torn)-1] = ' '
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(torn)
	f.Close()
	before, _ := os.Stat(path)
	got, _, _ := listed(t, s)
	if got["torn"].MessageCount != 1 {
		t.Fatalf("MessageCount %d, want 1", got["torn"].MessageCount)
	}
	mustAppend(t, s, "torn", msgs("next", 2))
	// The ctime tells this repair from the torn version; make the cached
	// entry claim the repaired file's exact stat, as a clock of coarse
	// granularity could: its torn tail alone must keep it untrusted.
	after, _ := os.Stat(path)
	if after.Size() != before.Size() {
		t.Fatalf("test setup: the repaired file's size changed (%d -> %d)", before.Size(), after.Size())
	}
	s.mu.Lock()
	s.index.Sessions["torn"].File = filekey.Of(after)
	s.mu.Unlock()
	got, _, _ = listed(t, s)
	if got["torn"].MessageCount != 3 {
		t.Errorf("after repair with an unchanged stat: MessageCount %d, want 3", got["torn"].MessageCount)
	}
}

func TestListCacheUnusable(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustAppend(t, s, "x", msgs("x", 2))
	for name, content := range map[string]string{
		"garbage":       "{not json",
		"other-version": `{"version":999,"log_version":1,"sessions":{"x":{"file":{"ino":1,"size":1,"mtime_ns":1},"committed":1,"decoder":{"info":{"ID":"x","MessageCount":99}}}}}`,
		"empty":         "",
	} {
		if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, _, _ := listed(t, mustOpen(t, dir))
		if len(got) != 1 || got["x"].MessageCount != 2 {
			t.Errorf("%s cache: List = %+v", name, got)
		}
	}
}

// TestListCacheUnwritable: a summary cache that cannot be written costs
// speed only: List of a catalog whose cache write fails still lists every
// session, leaves no temporary file behind, and changes no session. The
// write is blocked two ways: a read-only directory (which root ignores:
// skipped as root, as CI runs), and a directory where the cache file goes,
// which fails the write's rename for root too.
func TestListCacheUnwritable(t *testing.T) {
	for _, tt := range []struct {
		name  string
		block func(t *testing.T, dir string) (unblock func())
	}{
		{"read-only directory", func(t *testing.T, dir string) func() {
			if os.Geteuid() == 0 {
				t.Skip("root ignores directory permissions; the next case runs as root")
			}
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			return func() { os.Chmod(dir, 0o700) }
		}},
		{"a directory in the cache's place", func(t *testing.T, dir string) func() {
			// Not empty, so that no rename can replace it.
			if err := os.MkdirAll(filepath.Join(dir, IndexFile, "in-the-way"), 0o700); err != nil {
				t.Fatal(err)
			}
			return func() { os.RemoveAll(filepath.Join(dir, IndexFile)) }
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir)
			mustAppend(t, s, "ro", msgs("ro", 1))
			mustAppend(t, s, "rw", msgs("rw", 2))
			before := readAll(t, filepath.Join(dir, "ro.jsonl"))
			os.Remove(filepath.Join(dir, IndexFile)) // no cache: List must write one
			unblock := tt.block(t, dir)
			fresh := mustOpen(t, dir)
			got, decoded, _ := listed(t, fresh)
			unblock()
			if len(got) != 2 || got["ro"].MessageCount != 1 || got["rw"].MessageCount != 2 || decoded != 2 {
				t.Errorf("List with an unwritable cache: %v (%d decoded)", got, decoded)
			}
			fresh.mu.Lock()
			dirty := fresh.index.dirty
			fresh.mu.Unlock()
			if !dirty {
				t.Error("the cache counts as written: the write was never tried, or did not fail")
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".panto-index-*"))
			if len(left) != 0 {
				t.Errorf("the failed cache write left %v", left)
			}
			if !bytes.Equal(readAll(t, filepath.Join(dir, "ro.jsonl")), before) {
				t.Error("List changed a session file")
			}
			// Unblocked, the next List writes it.
			listed(t, fresh)
			if _, err := os.Stat(filepath.Join(dir, IndexFile)); err != nil {
				t.Errorf("no cache once writable: %v", err)
			}
		})
	}
}

// TestListReadsNoUnchangedFile: a List through a fresh handle (another
// process) of a catalog its cache covers opens no session file: a
// directory read and a stat per file, as the package doc says. Seen from
// outside (inotify, fileaccess), not by the cache's own counters, and
// true as root, who can read any file. A file appended behind the
// cache's back is the one read.
func TestListReadsNoUnchangedFile(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	for _, id := range []string{"a", "b", "c"} {
		mustAppend(t, s, id, msgs(id, 2))
	}
	listed(t, s) // writes the cache
	w := fileaccess.Watch(t, dir)
	w.Take(t)
	if got, _, _ := listed(t, mustOpen(t, dir)); len(got) != 3 {
		t.Fatalf("List: %v", got)
	}
	if got := sessionFiles(w.Take(t)); len(got) != 0 {
		t.Errorf("List of an unchanged catalog opened %v", got)
	}
	extra, err := sessionlog.EncodeBatch("b", false, msgs("behind", 1), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "b.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(extra)
	f.Close()
	w.Take(t)
	if got, _, _ := listed(t, mustOpen(t, dir)); got["b"].MessageCount != 3 {
		t.Fatalf("List after an append behind its back: %v", got["b"])
	}
	if got := sessionFiles(w.Take(t)); !slices.Equal(got, []string{"b.jsonl"}) {
		t.Errorf("List after one file grew opened %v, want b.jsonl alone", got)
	}
}

// sessionFiles keeps the session files of names.
func sessionFiles(names []string) []string {
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, Ext) })
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLogsSeeEdits: an edit below the committed length is never hidden by
// the cache, whatever the file's size and mtime say: the same size with
// the mtime put back (the ctime still moves), and an edit followed by an
// append (the file grew, as by an append alone) both give the hash of the
// bytes now in the file, and the summary of all of them.
func TestLogsSeeEdits(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustAppend(t, s, "e", msgs("original", 3))
	path := filepath.Join(dir, "e.jsonl")
	logsOf := func(s *Store) store.Log {
		t.Helper()
		logs, err := s.Logs(t.Context())
		if err != nil || len(logs) != 1 {
			t.Fatalf("Logs: %v, %v", logs, err)
		}
		return logs[0]
	}
	check := func(what string, s *Store) store.Log {
		t.Helper()
		data := readAll(t, path)
		got := logsOf(s)
		if got.Length != int64(len(data)) || got.SHA256 != sum(data) {
			t.Errorf("%s: Logs says %v, the file holds %d bytes with sha256 %.12s", what, got.Checkpoint, len(data), sum(data))
		}
		return got
	}
	check("fresh", s)

	// One character of a middle line, same size, the mtime restored.
	fi, _ := os.Stat(path)
	data := readAll(t, path)
	edited := bytes.Replace(data, []byte("original-1"), []byte("originaL-1"), 1)
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	check("edited in place, same size and mtime", s)
	check("edited in place, through another handle", mustOpen(t, dir))

	// An edit, then an append: the cached prefix no longer hashes the
	// same, so the summary is decoded from the top, not resumed.
	mustAppend(t, s, "e", msgs("appended", 1))
	if err := os.WriteFile(path, bytes.Replace(readAll(t, path), []byte("originaL-1"), []byte("ORIGINAL-1"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "e", msgs("more", 1))
	_, _, resumed := listed(t, s)
	if resumed != 0 {
		t.Errorf("a file edited below its cached length was resumed")
	}
	if got := check("edited, then appended", s); got.Info.MessageCount != 5 || got.Info.LastUserMessage != "more-0" {
		t.Errorf("summary after the edit and append: %+v", got.Info)
	}
	if r, err := s.PrefixSHA256(t.Context(), "e", 100); err != nil || r != sum(readAll(t, path)[:100]) {
		t.Errorf("PrefixSHA256(100) = %s, %v", r, err)
	}
}

// readIndexFile decodes dir's IndexFile, which must be in this
// version's form.
func readIndexFile(t *testing.T, dir string) *index {
	t.Helper()
	data := readAll(t, filepath.Join(dir, IndexFile))
	if !bytes.HasPrefix(data, []byte(indexMagic)) {
		t.Fatal("the cache does not begin with its magic")
	}
	var idx index
	if _, err := decodeIndex(bufio.NewReader(bytes.NewReader(data)), &idx); err != nil {
		t.Fatal(err)
	}
	return &idx
}

// TestCacheOfOneMessage: a cache written as one gob message, as before
// the sessions went in chunks, still serves the listing without reading
// the files again, and the next save writes it in chunks.
func TestCacheOfOneMessage(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustAppend(t, s, "x", msgs("x", 2))
	mustAppend(t, s, "y", msgs("y", 3))
	want, _, _ := listed(t, s) // writes the cache
	current := readIndexFile(t, dir)
	var whole bytes.Buffer
	whole.WriteString(indexMagicWhole)
	if err := gob.NewEncoder(&whole).Encode(current); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), whole.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	got, _, _ := listed(t, s)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed from the old cache:\n got %+v\nwant %+v", got, want)
	}
	if s.index.decoded != 0 {
		t.Errorf("read %d files again, want 0: the old cache was not used", s.index.decoded)
	}
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again := readIndexFile(t, dir); len(again.Sessions) != 2 {
		t.Errorf("the cache saved after the old one holds %d sessions, want 2", len(again.Sessions))
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestListCacheOfAnOlderPanto: a cache an older panto wrote (version 2,
// whose summaries never folded titles or token totals) is not trusted,
// even for files it describes exactly: List folds them again.
func TestListCacheOfAnOlderPanto(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	answer := agent.AssistantText("a")
	answer.Usage = &agent.Usage{InputTokens: 7, OutputTokens: 3}
	mustAppend(t, s, "x", []agent.PersistentMessage{{Message: agent.UserText("q")}, {Message: answer, Usage: answer.Usage}, {Message: agent.TitleMessage("named")}})
	if got, _, _ := listed(t, s); got["x"].Title != "named" || got["x"].Usage.OutputTokens != 3 {
		t.Fatalf("List = %+v", got)
	}
	// The same cache as a version 2 panto would have written it: JSON,
	// in the file of its time.
	current := readIndexFile(t, dir)
	asJSON, err := json.Marshal(&current)
	if err != nil {
		t.Fatal(err)
	}
	var cache map[string]any
	if err := json.Unmarshal(asJSON, &cache); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatal(err)
	}
	cache["version"] = 2
	for _, e := range cache["sessions"].(map[string]any) {
		info := e.(map[string]any)["decoder"].(map[string]any)["info"].(map[string]any)
		delete(info, "Title")
		delete(info, "Usage")
	}
	old, _ := json.Marshal(cache)
	if err := os.WriteFile(filepath.Join(dir, LegacyIndexFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, _ := listed(t, mustOpen(t, dir))
	if got["x"].Title != "named" || got["x"].Usage.OutputTokens != 3 {
		t.Errorf("List from an older panto's cache: %+v", got["x"])
	}
}

// TestListCacheMovesFromJSON: the cache an earlier version kept as JSON
// (.panto-index.json) serves the listing as it did, without reading the
// files again, and the next save writes it in this version's form and
// removes the JSON.
func TestListCacheMovesFromJSON(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustAppend(t, s, "x", msgs("x", 2))
	mustAppend(t, s, "y", msgs("y", 3))
	listed(t, s) // writes the cache
	current := readIndexFile(t, dir)
	if len(current.Sessions) != 2 {
		t.Fatalf("the cache: %d sessions", len(current.Sessions))
	}
	asJSON, err := json.Marshal(&current)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, LegacyIndexFile), asJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, dir)
	got, decoded, _ := listed(t, r)
	if got["x"].MessageCount != 2 || got["y"].MessageCount != 3 {
		t.Fatalf("List from the JSON cache: %+v", got)
	}
	if decoded != 0 {
		t.Fatalf("%d files read again, though the JSON cache describes them", decoded)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatalf("no cache in this version's form after the save: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LegacyIndexFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the JSON cache is still there: %v", err)
	}
}
