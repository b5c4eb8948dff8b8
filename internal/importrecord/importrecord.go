// Package importrecord is what panto import remembers of the logs it
// imported, so that a log not changed since is neither read nor
// converted again (DESIGN §1, "Importing again reads only the logs that
// changed"). For each log it keeps the log's filekey.Key as it was
// before the log was read, the session it went to, and the checkpoint
// the store held after: a log whose Key is the same, and whose session
// the store lists at that checkpoint (length and hash), converts to what
// the store holds, so its import is "unchanged" without reading it. A
// log an agent appends to has another size and change time, and is
// read; so is one whose session changed in the store (continued in
// panto, deleted, synced from elsewhere), or that another store holds
// otherwise. A log skipped (not an agent's log, or a panto export not
// gone on with) or waiting (no message complete yet) comes to that
// again while its Key is the same, which its bytes alone decide: the
// record keeps that outcome too, so that a timer's import does not read
// such logs each time.
//
// It is a cache, as restic's and git's records of unchanged files are:
// a lost or damaged record costs a read of every log, never a turn. It
// is one file of JSON lines under the user's cache directory, appended
// to (the last line of a log wins; a torn line is passed over) and
// rewritten whole when it holds more than twice the lines it needs. Its
// lines name the panto executable that wrote them: another panto (an
// upgrade) may convert a log otherwise, so its lines are not used.
package importrecord

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/store"
)

// Record is the record as one run of panto import loaded it, with what
// it noted since; a nil Record records nothing. Its methods may be
// called at once from several goroutines.
type Record struct {
	path  string
	rules string

	mu      sync.Mutex
	entries map[string]Entry
	lines   int // in the file
	pending []Entry
}

// Entry is one line of the record: a log, as the import read it,
// and what that import found.
type Entry struct {
	// Source is the log's absolute path.
	Source string      `json:"source"`
	File   filekey.Key `json:"file"`
	// Rules names the panto that wrote the entry (Record.rules).
	Rules     string `json:"rules"`
	Agent     string `json:"agent"`
	ForeignID string `json:"foreign_id"`
	ID        string `json:"id"`
	Messages  int    `json:"messages"`
	Held      bool   `json:"held,omitempty"`
	// Length and SHA256 are the session's checkpoint in the store after
	// the import.
	Length int64  `json:"length"`
	SHA256 string `json:"sha256"`
	// Outcome, when set, is what the import came to without the store:
	// OutcomeSkipped (Reason says why) or OutcomeWaiting. Both follow
	// from the log's bytes alone, so that an unchanged log comes to it
	// again without a read, and no checkpoint vouches for it.
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// The outcomes an Entry may record instead of a checkpoint.
const (
	// OutcomeSkipped: not a log of an agent panto imports, or an export
	// of a panto session not gone on with since.
	OutcomeSkipped = "skipped"
	// OutcomeWaiting: no message of the log is complete yet.
	OutcomeWaiting = "waiting"
)

// Path is $XDG_CACHE_HOME/panto/import/record.jsonl, else
// under ~/.cache ("": neither is known, and nothing is recorded).
func Path(getenv func(string) string) string {
	dir := getenv("XDG_CACHE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if home == "" || !filepath.IsAbs(home) {
			return ""
		}
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "panto", "import", "record.jsonl")
}

// Load reads the record at path; a record that cannot be read is an
// empty one (every log is read), and a nil record (path "" or no
// executable to name) records nothing.
func Load(path string) *Record {
	rules, err := executableRules()
	if path == "" || err != nil {
		return nil
	}
	r := &Record{path: path, rules: rules, entries: map[string]Entry{}}
	data, err := os.ReadFile(path)
	if err != nil {
		return r
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r.lines++
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Source == "" {
			continue // torn by a crash mid-append, or damaged
		}
		if e.Rules != rules {
			delete(r.entries, e.Source) // an older line of this panto's is stale too
			continue
		}
		r.entries[e.Source] = e
	}
	return r
}

// executableRules names the running panto by its executable's path and
// filekey.Key: a rebuilt or upgraded panto is another, whose conversions
// the record does not vouch for.
func executableRules() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	k := filekey.Of(fi)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%d", exe, k.Ino, k.Size, k.MtimeNS, k.CtimeNS))
	return hex.EncodeToString(sum[:8]), nil
}

// File is a log as the import found it before reading it: its
// absolute path and its Key. What the agent appends while it is read
// changes the Key, so the next import reads the log again.
type File struct {
	abs string
	key filekey.Key
}

// File returns the File of the log at path (known false: the
// record cannot say anything of it).
func (r *Record) File(path string) (File, bool) {
	if r == nil {
		return File{}, false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return File{}, false
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.Mode().IsRegular() {
		return File{}, false
	}
	return File{abs: abs, key: filekey.Of(fi)}, true
}

// Lookup returns the entry of the log f when the log has not changed
// since it was noted (and, given one, was read as agent's).
func (r *Record) Lookup(f File, agent string) (Entry, bool) {
	if r == nil || f.abs == "" {
		return Entry{}, false
	}
	r.mu.Lock()
	e, ok := r.entries[f.abs]
	r.mu.Unlock()
	return e, ok && e.File == f.key && (agent == "" || agent == e.Agent)
}

// Holds reports whether at, the checkpoint the store lists e's session
// at, is the one e's import left it at: the log's conversion is then
// what the store holds. An entry of an Outcome holds no checkpoint.
func (e Entry) Holds(at store.Checkpoint) bool {
	return e.Outcome == "" && at.SHA256 != "" && at.Length == e.Length && at.SHA256 == e.SHA256
}

// Note records e as what the import of the log f came to: the caller
// gives the session and the checkpoint the store holds of it now, which
// must be exactly the log's conversion, or more (new, appended, or
// unchanged in the form this panto converts it to); or, for an outcome
// the log's bytes alone decide (Entry.Outcome), that outcome. It is kept
// in memory until Save.
func (r *Record) Note(f File, e Entry) {
	switch {
	case r == nil || f.abs == "":
		return
	case e.Outcome == OutcomeSkipped || e.Outcome == OutcomeWaiting:
	case e.Outcome != "" || e.Length == 0 || e.SHA256 == "":
		return
	}
	e.Source, e.File, e.Rules = f.abs, f.key, r.rules
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries[f.abs] == e {
		return
	}
	r.entries[f.abs] = e
	r.pending = append(r.pending, e)
}

// Save appends the entries noted since the last save, or rewrites the
// record when it holds more than twice the lines its entries need (the
// entries of logs no longer there left out). It is best effort: an
// entry not saved costs the next import a read.
func (r *Record) Save() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return fmt.Errorf("import record: %w", err)
	}
	if r.lines+len(r.pending) > 2*len(r.entries)+64 {
		return r.rewrite()
	}
	var buf bytes.Buffer
	for _, e := range r.pending {
		line, _ := json.Marshal(e)
		buf.Write(append(line, '\n'))
	}
	// One write of whole lines, appended: two imports saving at once do
	// not mix their lines.
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("import record: %w", err)
	}
	_, werr := f.Write(buf.Bytes())
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("import record: %w", err)
	}
	r.lines += len(r.pending)
	r.pending = nil
	return nil
}

// rewrite writes the record's live entries to a new file that replaces
// it. Called with r.mu held.
func (r *Record) rewrite() error {
	var buf bytes.Buffer
	n := 0
	for abs, e := range r.entries {
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			delete(r.entries, abs)
			continue
		}
		line, _ := json.Marshal(e)
		buf.Write(append(line, '\n'))
		n++
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".record-*")
	if err != nil {
		return fmt.Errorf("import record: %w", err)
	}
	_, werr := tmp.Write(buf.Bytes())
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("import record: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("import record: %w", err)
	}
	r.lines, r.pending = n, nil
	return nil
}
