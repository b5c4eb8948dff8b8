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
}

func openShipped(dir string) *shippedFile {
	f := &shippedFile{path: filepath.Join(dir, shippedName), at: map[string]store.Checkpoint{}}
	f.at = f.read()
	return f
}

// read returns what the file holds (nothing when it is missing or
// unreadable: it is rebuilt).
func (f *shippedFile) read() map[string]store.Checkpoint {
	data, err := os.ReadFile(f.path)
	var j shippedJSON
	if err != nil || json.Unmarshal(data, &j) != nil || j.Version != 1 || j.Sessions == nil {
		return map[string]store.Checkpoint{}
	}
	return j.Sessions
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
}

func (f *shippedFile) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, id)
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
	for id, cp := range f.read() {
		if have, ok := f.at[id]; !ok || cp.Length > have.Length {
			f.at[id] = cp
		}
	}
	data, err := json.Marshal(shippedJSON{Version: 1, Sessions: f.at})
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

// pending counts the messages of the replica after what the bucket was
// seen to hold, and its deletions the bucket was not seen to take.
func (s *Store) pending(ctx context.Context) (unsent, error) {
	var u unsent
	logs, err := s.local.Logs(ctx)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return u, err
	}
	for _, l := range logs {
		cp, ok := s.shipped.get(l.Info.ID)
		if ok && cp.Length >= l.Length {
			continue
		}
		n, err := s.countLines(ctx, l.Info.ID, cp.Length)
		if err != nil {
			return u, err
		}
		u.messages += n
	}
	tombs, err := s.local.Tombstones(ctx)
	if err != nil {
		return u, err
	}
	for _, t := range tombs {
		if _, ok := s.shipped.get(t.ID); ok {
			u.deletions++
		}
	}
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
