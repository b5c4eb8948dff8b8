package fsjsonl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// Deleting a session (package store's Deleter): its file goes, and a
// tombstone stays in TombstoneDir, one small file per session holding
// when it was deleted and the length and sha256 of its log then (no
// content), so that sync carries the deletion to the other copies and no
// copy brings the session back. The tombstone is written before the
// file is removed: a crash between the two leaves a tombstone beside the
// file, which lists as deleted and is removed by the next Delete. Every
// append checks for a tombstone once it holds the file's lock, so none
// can recreate a deleted session. Tombstones older than
// store.TombstoneRetention are dropped by Tombstones.

// TombstoneDir is the directory of a catalog's tombstones, <id>.json each.
const TombstoneDir = ".panto-deleted"

var _ store.Deleter = (*Store)(nil)

// tombstoneFile is a tombstone as the catalog stores it.
type tombstoneFile struct {
	ID      string    `json:"id"`
	Deleted time.Time `json:"deleted"`
	Length  int64     `json:"length"`
	SHA256  string    `json:"sha256,omitempty"`
}

func (s *Store) tombstonePath(id string) string {
	return filepath.Join(s.dir, TombstoneDir, id+".json")
}

// tombstone returns session id's tombstone, or nil when it has none.
func (s *Store) tombstone(id string) (*store.Tombstone, error) {
	data, err := os.ReadFile(s.tombstonePath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the tombstone of session %s: %w", id, err)
	}
	var f tombstoneFile
	if err := json.Unmarshal(data, &f); err != nil || f.ID != id {
		return nil, fmt.Errorf("%s: not a tombstone of session %s: remove it to forget the deletion", s.tombstonePath(id), id)
	}
	return &store.Tombstone{ID: f.ID, Deleted: f.Deleted, At: store.Checkpoint{Length: f.Length, SHA256: f.SHA256}}, nil
}

// deleted is the error of a tombstoned session, or nil when id has no
// tombstone.
func (s *Store) deleted(id string) error {
	t, err := s.tombstone(id)
	if err != nil || t == nil {
		return err
	}
	return &agent.DeletedError{ID: id, Deleted: t.Deleted, Length: t.At.Length, SHA256: t.At.SHA256}
}

// Delete removes session t.ID's file and leaves tombstone t, if t covers
// the committed bytes of the file (store.Tombstone.Covers); otherwise it
// fails with a *store.ChangedError. A session the catalog does not hold
// gets the tombstone alone.
func (s *Store) Delete(ctx context.Context, t store.Tombstone) error {
	path, err := s.Path(t.ID)
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	fail := func(err error) error { return fmt.Errorf("delete session %s: %w", t.ID, err) }
	if old, err := s.tombstone(t.ID); err != nil || old != nil {
		if err != nil {
			return fail(err)
		}
		// Deleted already: finish a removal a crash cut short.
		return s.removeFile(ctx, t.ID, path)
	}
	l, err := s.lock(ctx, t.ID, false)
	if errors.Is(err, fs.ErrNotExist) {
		return s.writeTombstone(t)
	}
	if err != nil {
		return fail(err)
	}
	defer l.close()
	e, err := s.lockedEntry(ctx, t.ID, l)
	if err != nil {
		return fail(err)
	}
	if have := e.checkpoint(); !t.Covers(have) {
		return fail(&store.ChangedError{ID: t.ID, Want: t.At, Have: have})
	}
	if err := s.writeTombstone(t); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	s.forget(t.ID, true)
	return syncDir(s.dir)
}

// removeFile removes session id's file, whose tombstone is written, under
// its lock.
func (s *Store) removeFile(ctx context.Context, id, path string) error {
	f, _, err := openLocked(ctx, path, false, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	defer f.Close()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	s.forget(id, true)
	return syncDir(s.dir)
}

// writeTombstone writes t atomically (a temporary file renamed into
// place, both fsynced).
func (s *Store) writeTombstone(t store.Tombstone) error {
	dir := filepath.Join(s.dir, TombstoneDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("delete session %s: %w", t.ID, err)
	}
	data, err := json.Marshal(tombstoneFile{ID: t.ID, Deleted: t.Deleted.UTC(), Length: t.At.Length, SHA256: t.At.SHA256})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("delete session %s: %w", t.ID, err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("delete session %s: write its tombstone: %w", t.ID, err)
	}
	if err := os.Rename(tmp.Name(), s.tombstonePath(t.ID)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("delete session %s: write its tombstone: %w", t.ID, err)
	}
	return syncDir(dir)
}

// Tombstones lists the catalog's tombstones younger than
// store.TombstoneRetention, and removes the older ones. A session file
// its tombstone outlived (a deletion cut short between the two) is
// removed: sync, which lists tombstones before it plans, sees a deleted
// session on both sides as done, and would not come back for it.
func (s *Store) Tombstones(ctx context.Context) ([]store.Tombstone, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, TombstoneDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the tombstones of %s: %w", s.dir, err)
	}
	var out []store.Tombstone
	for _, de := range entries {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || agent.ValidateSessionID(id) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := s.tombstone(id)
		if err != nil {
			return nil, err
		}
		if t == nil {
			continue
		}
		if s.now().Sub(t.Deleted) > store.TombstoneRetention {
			os.Remove(s.tombstonePath(id)) // best-effort: it only stops being listed
			continue
		}
		if path, err := s.Path(id); err == nil {
			if _, err := os.Lstat(path); err == nil {
				if err := s.removeFile(ctx, id, path); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, *t)
	}
	return out, nil
}

// Tombstoned returns the ids that have a tombstone, from the names alone
// (one read of the directory; Tombstones reads each tombstone).
func (s *Store) Tombstoned() map[string]bool {
	entries, err := os.ReadDir(filepath.Join(s.dir, TombstoneDir))
	if err != nil {
		return nil
	}
	ids := make(map[string]bool, len(entries))
	for _, de := range entries {
		if id, ok := strings.CutSuffix(de.Name(), ".json"); ok {
			ids[id] = true
		}
	}
	return ids
}
