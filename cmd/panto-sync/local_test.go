package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// batch encodes one batch of session id with n user messages.
func batch(t testing.TB, id string, header bool, n int, text string) []byte {
	t.Helper()
	var msgs []agent.PersistentMessage
	for i := 0; i < n; i++ {
		msgs = append(msgs, agent.PersistentMessage{Message: agent.UserText(text)})
	}
	b, err := sessionlog.EncodeBatch(id, header, msgs, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
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

func TestScanLocal(t *testing.T) {
	dir := t.TempDir()
	id := "s1"
	path := filepath.Join(dir, id+".jsonl")

	st, err := scanLocal(id, path, nil, true)
	if err != nil || st.Committed != 0 {
		t.Fatalf("missing file: %+v, %v", st, err)
	}

	first := batch(t, id, true, 2, "hello")
	appendFile(t, path, first)
	st1, err := scanLocal(id, path, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Committed != int64(len(first)) || st1.SHA256 != sha256Hex(first) || st1.Lines != 3 {
		t.Fatalf("first scan = %+v, want %d bytes, 3 lines", st1, len(first))
	}

	// A torn batch (complete lines without the batch's end, and a line
	// without its newline) is not committed.
	torn := batch(t, id, false, 3, "torn")
	appendFile(t, path, torn[:len(torn)-5])
	st2, err := scanLocal(id, path, st1, true)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Committed != st1.Committed || st2.SHA256 != st1.SHA256 {
		t.Fatalf("torn tail counted: %+v", st2)
	}

	// Growth resumes from the saved hash: the prefix is not read again.
	// Prove it by scribbling over the prefix (same length): a resumed scan
	// cannot notice, a full re-read would.
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	st3, err := scanLocal(id, path, st1, true)
	if err != nil {
		t.Fatal(err)
	}
	second := batch(t, id, false, 1, "more")
	appendFile(t, path, second)
	raw, _ := os.ReadFile(path)
	scribbled := []byte(strings.Replace(string(raw), "hello", "HELLO", 1))
	if err := os.WriteFile(path, scribbled, 0o644); err != nil {
		t.Fatal(err)
	}
	st4, err := scanLocal(id, path, st3, true)
	if err != nil {
		t.Fatal(err)
	}
	whole := append(append([]byte{}, first...), second...)
	if st4.Committed != int64(len(whole)) || st4.SHA256 != sha256Hex(whole) || st4.Lines != 4 {
		t.Fatalf("resumed scan = %+v, want the hash of the old prefix and the new batch", st4)
	}
	// Without state, the file is read in full.
	st5, err := scanLocal(id, path, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if st5.SHA256 != sha256Hex(scribbled) {
		t.Fatal("a scan without state did not hash the whole file")
	}

	// An unchanged file (size and mtime) is not read at all.
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	st6, err := scanLocal(id, path, st5, true)
	os.Chmod(path, 0o644)
	if os.Getuid() != 0 && err != nil {
		t.Fatalf("unchanged file was read: %v", err)
	}
	if err == nil && st6.SHA256 != st5.SHA256 {
		t.Fatal("unchanged file got another hash")
	}

	// A file that shrank below the saved length is read again in full.
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	st7, err := scanLocal(id, path, st5, true)
	if err != nil {
		t.Fatal(err)
	}
	if st7.Committed != int64(len(first)) || st7.SHA256 != sha256Hex(first) {
		t.Fatalf("shrunk file: %+v", st7)
	}
}

func TestScanLocalMalformed(t *testing.T) {
	dir := t.TempDir()
	id := "s1"
	path := filepath.Join(dir, id+".jsonl")
	first := batch(t, id, true, 2, "hello") // lines 1-3
	appendFile(t, path, first)
	prev, err := scanLocal(id, path, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	// Line 4 is garbage inside the committed part, followed by a good batch.
	appendFile(t, path, []byte("{not json\n"))
	appendFile(t, path, batch(t, id, false, 1, "after"))
	for name, p := range map[string]*SessionState{"resumed": prev, "from scratch": nil} {
		_, err := scanLocal(id, path, p, true)
		if !errors.Is(err, sessionlog.ErrMalformed) || !strings.Contains(err.Error(), path+":4:") {
			t.Errorf("%s: err = %v, want ErrMalformed at %s:4", name, err, path)
		}
	}
	// Without validation the scan finds the committed part from the end
	// and does not decode the middle; validateFile names the line.
	if _, err := scanLocal(id, path, nil, false); err != nil {
		t.Errorf("scan without validation: %v", err)
	}
	if err := validateFile(path, id); !errors.Is(err, sessionlog.ErrMalformed) || !strings.Contains(err.Error(), path+":4:") {
		t.Errorf("validateFile: %v, want ErrMalformed at %s:4", err, path)
	}
	// A garbage last line is reported too (CommittedLength meets it).
	path2 := filepath.Join(dir, "s2.jsonl")
	appendFile(t, path2, batch(t, "s2", true, 1, "x"))
	appendFile(t, path2, []byte("garbage\n"))
	if _, err := scanLocal("s2", path2, nil, false); !errors.Is(err, sessionlog.ErrMalformed) || !strings.Contains(err.Error(), ":3:") {
		t.Errorf("garbage last line: %v", err)
	}
}

func TestScanLocalHeaderMismatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	appendFile(t, path, batch(t, "b", true, 1, "x"))
	if _, err := scanLocal("a", path, nil, true); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("a file whose header names another session: %v", err)
	}
}

func TestPrefixSHA256AndReadRange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := prefixSHA256(path, 4)
	if err != nil || got != sha256Hex([]byte("0123")) {
		t.Errorf("prefixSHA256 = %s, %v", got, err)
	}
	if _, err := prefixSHA256(path, 11); err == nil {
		t.Error("prefixSHA256 beyond the end: no error")
	}
	b, err := readRange(path, 3, 4)
	if err != nil || string(b) != "3456" {
		t.Errorf("readRange = %q, %v", b, err)
	}
}
