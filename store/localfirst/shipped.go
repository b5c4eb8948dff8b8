package localfirst

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// shippedName is the file in the replica that records, per session, a
// checkpoint the bucket was seen to hold that is a prefix of the
// replica's log. Not a *.jsonl, so never taken for a session.
const shippedName = ".panto-shipped.json"

// shippedFile is the shipper's record of what the bucket holds. It is an
// optimisation and a count: a record that is missing or behind costs a
// checkpoint read and a refused append; one that is lost counts the
// session as unsent until the next catch-up. Every process sharing the
// replica writes it, merging (the longer checkpoint wins: both are
// prefixes of the one replica log).
type shippedFile struct {
	path string
	mu   sync.Mutex
	at   map[string]store.Checkpoint
	// full is when a catch-up last planned the whole replica against the
	// whole bucket (the shipper's catchUp), zero when none is recorded.
	full time.Time
	// forgot holds the sessions forgotten since the last save, whose
	// records in the file save must not bring back (a record is only an
	// optimisation: one dropped costs a checkpoint read).
	forgot map[string]bool
	// savedAt is when save last wrote the file.
	savedAt time.Time
}

// saveEvery spaces the saves of a shipper's rounds: each is a rename in
// the replica's directory, whose metadata the next append's fsync would
// commit with it (on a journaling file system), in the prompt's path.
// Close saves what is left.
const saveEvery = 5 * time.Second

type shippedJSON struct {
	Version  int                         `json:"version"`
	Sessions map[string]store.Checkpoint `json:"sessions"`
	// FullCatchUp: shippedFile.full (added later in version 1: a file
	// without it, or a panto that ignores it, makes the next catch-up a
	// full one, as before).
	FullCatchUp time.Time `json:"full_catch_up,omitzero"`
}

func openShipped(dir string) *shippedFile {
	f := &shippedFile{path: filepath.Join(dir, shippedName), at: map[string]store.Checkpoint{}}
	f.at, f.full = f.read()
	return f
}

// read returns what the file holds (nothing when it is missing or
// unreadable: it is rebuilt).
func (f *shippedFile) read() (map[string]store.Checkpoint, time.Time) {
	data, err := os.ReadFile(f.path)
	var j shippedJSON
	if err != nil || json.Unmarshal(data, &j) != nil || j.Version != 1 || j.Sessions == nil {
		return map[string]store.Checkpoint{}, time.Time{}
	}
	return j.Sessions, j.FullCatchUp
}

// fullDue reports whether the last full catch-up recorded is
// fullCatchUpEvery old at now, or none is.
func (f *shippedFile) fullDue(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.full.IsZero() || now.Sub(f.full) >= fullCatchUpEvery || now.Before(f.full)
}

// fullDone records a full catch-up at t.
func (f *shippedFile) fullDone(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full = t
}

func (f *shippedFile) get(id string) (store.Checkpoint, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp, ok := f.at[id]
	return cp, ok
}

func (f *shippedFile) set(id string, cp store.Checkpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at[id] = cp
	delete(f.forgot, id)
}

func (f *shippedFile) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, id)
	if f.forgot == nil {
		f.forgot = map[string]bool{}
	}
	f.forgot[id] = true
}

// saveSoon saves the record when the last save is saveEvery old.
func (f *shippedFile) saveSoon() {
	f.mu.Lock()
	due := time.Since(f.savedAt) >= saveEvery
	f.mu.Unlock()
	if due {
		f.save()
	}
}

// save merges the record into the file, atomically (best-effort: a
// replica that cannot be written is reported by its appends).
func (f *shippedFile) save() {
	f.mu.Lock()
	defer f.mu.Unlock()
	stored, full := f.read()
	for id, cp := range stored {
		if f.forgot[id] {
			continue // a deletion, or a send that failed: not held
		}
		if have, ok := f.at[id]; !ok || cp.Length > have.Length {
			f.at[id] = cp
		}
	}
	if full.After(f.full) {
		f.full = full
	}
	data, err := json.Marshal(shippedJSON{Version: 1, Sessions: f.at, FullCatchUp: f.full.UTC()})
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".panto-shipped-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return
	}
	if tmp.Close() == nil && os.Rename(tmp.Name(), f.path) == nil {
		f.savedAt = time.Now()
		f.forgot = nil
	}
}

// unsent is what the replica holds that the bucket was not seen to hold.
type unsent struct{ messages, deletions int }

func (u unsent) String() string {
	s := plural(u.messages, "message")
	if u.deletions > 0 {
		if u.messages == 0 {
			return plural(u.deletions, "deletion")
		}
		s += " and " + plural(u.deletions, "deletion")
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// unsentWork is what the replica holds that the shipped record does not
// say the bucket holds: the logs past their record or with none (or not
// the record's checkpoint), and the deletions whose sessions still have a
// record; held is how many sessions and tombstones the replica holds.
type unsentWork struct {
	logs      []store.Log
	deletions []string
	held      int
}

// ids are the sessions of w, logs then deletions.
func (w unsentWork) ids() []string {
	ids := make([]string, 0, len(w.logs)+len(w.deletions))
	for _, l := range w.logs {
		ids = append(ids, l.Info.ID)
	}
	return append(ids, w.deletions...)
}

// unshipped returns the replica's unsent work. A listing of the replica
// that is incomplete comes with what it listed and an error wrapping
// agent.ErrIncompleteList.
func (s *Store) unshipped(ctx context.Context) (unsentWork, error) {
	var w unsentWork
	logs, lerr := s.local.Logs(ctx)
	if lerr != nil && !errors.Is(lerr, agent.ErrIncompleteList) {
		return w, lerr
	}
	tombs, err := s.local.Tombstones(ctx)
	if err != nil {
		return w, err
	}
	for _, l := range logs {
		if cp, ok := s.shipped.get(l.Info.ID); !ok || cp != l.Checkpoint {
			w.logs = append(w.logs, l)
		}
	}
	for _, t := range tombs {
		if _, ok := s.shipped.get(t.ID); ok {
			w.deletions = append(w.deletions, t.ID)
		}
	}
	w.held = len(logs) + len(tombs)
	return w, lerr
}

// pending counts the messages of the replica after what the bucket was
// seen to hold, and its deletions the bucket was not seen to take.
func (s *Store) pending(ctx context.Context) (unsent, error) {
	var u unsent
	w, err := s.unshipped(ctx)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return u, err
	}
	for _, l := range w.logs {
		cp, _ := s.shipped.get(l.Info.ID)
		if cp.Length >= l.Length {
			continue // a record at the log's end that is not its checkpoint: nothing to count
		}
		n, err := s.countLines(ctx, l.Info.ID, cp.Length)
		if err != nil {
			return u, err
		}
		u.messages += n
	}
	u.deletions = len(w.deletions)
	return u, nil
}

// countLines counts the message lines of session id's replica log after
// byte from (the header is no message).
func (s *Store) countLines(ctx context.Context, id string, from int64) (int, error) {
	r, _, err := s.local.ReadLog(ctx, id, from)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if from == 0 && n > 0 {
		n--
	}
	return n, nil
}
