package fsjsonl

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// This file is the raw-log side of the Store (package store's LogStore
// and PrefixHasher): what panto-sync reads and appends, under the same
// locks as the agent's appends.

// ReadLog returns a reader of session id's committed bytes from offset
// from, and the checkpoint at their end. The committed length and hash
// are found under a shared lock (from the summary cache when it is fresh,
// else by reading the file); the bytes are then read without it, since
// bytes below the committed length never change (every writer of this
// package only appends, and only cuts an uncommitted tail).
func (s *Store) ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	f, e, err := s.openEntry(ctx, id)
	if err != nil {
		return nil, store.Checkpoint{}, fmt.Errorf("read session: %w", err)
	}
	if from < 0 || from > e.Committed {
		f.Close()
		return nil, e.checkpoint(), fmt.Errorf("read session %s: offset %d outside its %d bytes", id, from, e.Committed)
	}
	return &sectionFile{SectionReader: io.NewSectionReader(f, from, e.Committed-from), f: f}, e.checkpoint(), nil
}

// sectionFile reads a section of a file it closes.
type sectionFile struct {
	*io.SectionReader
	f *os.File
}

func (r *sectionFile) Close() error { return r.f.Close() }

// openEntry opens session id's file and returns it with the entry of the
// version it holds: unlocked, for reading below the committed length.
func (s *Store) openEntry(ctx context.Context, id string) (*os.File, *indexEntry, error) {
	path, err := s.Path(id)
	if err != nil {
		return nil, nil, err
	}
	if err := s.deleted(id); err != nil {
		return nil, nil, err
	}
	f, _, err := openLocked(ctx, path, false, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, agent.NotFoundError(id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("session %s: %w", id, err)
	}
	e, err := s.scanLocked(ctx, id, f, true)
	unlockFile(f)
	switch {
	case err != nil:
	case e == nil:
		err = agent.NotFoundError(id)
	case e.err != nil:
		err = e.err
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, e, nil
}

// PrefixSHA256 returns the hex sha256 of the first n committed bytes of
// session id: from the summary cache for the whole log, else by reading
// the prefix.
func (s *Store) PrefixSHA256(ctx context.Context, id string, n int64) (string, error) {
	f, e, err := s.openEntry(ctx, id)
	if err != nil {
		return "", fmt.Errorf("hash session: %w", err)
	}
	defer f.Close()
	switch {
	case n == e.Committed:
		return e.SHA256, nil
	case n < 0 || n > e.Committed:
		return "", fmt.Errorf("hash session %s: %d bytes asked, %d committed", id, n, e.Committed)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
		return "", fmt.Errorf("hash session %s: %w", id, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// AppendLog appends data — whole committed lines in the line format,
// beginning with the header of session id when at is the empty log — if
// and only if the file's committed bytes are exactly at; it returns the
// checkpoint after data. Otherwise it fails with a *store.ChangedError
// and touches nothing. Every line of data is decoded first (a malformed
// one, or a header naming another session, is refused before anything is
// written), under the same lock as AppendMessages; the write repairs a
// torn tail and fsyncs, and a new file is created atomically.
//
// The committed length and hash come from the summary cache when it is
// fresh (a pull appends chunk after chunk), else from reading the file,
// and the cache is brought up to date after the write, so that a log
// copied in many appends is not read again for each one.
func (s *Store) AppendLog(ctx context.Context, id string, at store.Checkpoint, data []byte) (store.Checkpoint, error) {
	path, err := s.Path(id)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("append to session: %w", err)
	}
	fail := func(err error) (store.Checkpoint, error) {
		return store.Checkpoint{}, fmt.Errorf("append to session %s: %w", id, err)
	}
	if len(data) == 0 {
		return fail(errors.New("no data"))
	}
	if n, err := sessionlog.CommittedLength(path+" (appended data)", data); err != nil {
		return fail(err)
	} else if n != len(data) {
		return fail(fmt.Errorf("%w: data does not end with a complete batch (%d of %d bytes committed)", sessionlog.ErrMalformed, n, len(data)))
	}
	if err := s.deleted(id); err != nil {
		return fail(err)
	}
	if at.Length == 0 {
		if cp, done, err := s.createLog(ctx, id, path, data); err != nil || done {
			if err != nil {
				return fail(err)
			}
			return cp, nil
		}
		// The file exists (maybe with no committed bytes): append under
		// the lock like any other writer.
	}
	l, e, err := s.lockAt(ctx, id, at, at.Length == 0)
	if err != nil {
		return fail(err)
	}
	defer l.close()
	next, h, err := extend(path, e, data)
	if err != nil {
		return fail(err)
	}
	if err := l.write(data); err != nil {
		return fail(err)
	}
	if fi, err := l.f.Stat(); err == nil {
		next.File = filekey.Of(fi)
		if next.HashState, err = h.(encoding.BinaryMarshaler).MarshalBinary(); err == nil {
			s.update(id, next)
		}
	}
	return next.checkpoint(), nil
}

// createLog creates the file of a new session holding exactly data,
// atomically. done is false when the file exists already.
func (s *Store) createLog(ctx context.Context, id, path string, data []byte) (cp store.Checkpoint, done bool, err error) {
	if _, err := os.Lstat(path); err == nil {
		return store.Checkpoint{}, false, nil
	}
	e, h, err := extend(path, &indexEntry{Decoder: sessionlog.Decoder{Name: path}}, data)
	if err != nil {
		return store.Checkpoint{}, false, err
	}
	if e.Decoder.Info.ID != id {
		return store.Checkpoint{}, false, fmt.Errorf("%s: %w: the header names session %q", path, sessionlog.ErrMalformed, e.Decoder.Info.ID)
	}
	created, err := s.createWhole(ctx, path, data)
	if err != nil || !created {
		return store.Checkpoint{}, false, err
	}
	if fi, err := os.Stat(path); err == nil {
		e.File = filekey.Of(fi)
		if e.HashState, err = h.(encoding.BinaryMarshaler).MarshalBinary(); err == nil {
			s.update(id, e)
		}
	}
	return e.checkpoint(), true, nil
}

// lockedEntry returns the entry of the file l holds locked: the cached one
// when it describes this version, else by reading it.
// lockAt locks session id's file (creating it with create) and checks
// that its committed log is exactly at checkpoint at, else a
// *store.ChangedError saying what it holds (a missing file holds
// nothing). The caller closes the lock.
func (s *Store) lockAt(ctx context.Context, id string, at store.Checkpoint, create bool) (*lockedFile, *indexEntry, error) {
	l, err := s.lock(ctx, id, create)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &store.ChangedError{ID: id, Want: at}
	}
	if err != nil {
		return nil, nil, err
	}
	e, err := s.lockedEntry(ctx, id, l)
	if err == nil && e.checkpoint() != at {
		err = &store.ChangedError{ID: id, Want: at, Have: e.checkpoint()}
	}
	if err != nil {
		l.close()
		return nil, nil, err
	}
	return l, e, nil
}

func (s *Store) lockedEntry(ctx context.Context, id string, l *lockedFile) (*indexEntry, error) {
	e, err := s.scanLocked(ctx, id, l.f, true)
	switch {
	case err != nil:
		return nil, err
	case e == nil: // no committed bytes
		return &indexEntry{Decoder: sessionlog.Decoder{Name: l.path}, HashState: emptyHashState()}, nil
	case e.err != nil:
		return nil, e.err
	}
	return e, nil
}

// extend decodes data after the state of e (validating every line) and
// returns the entry after it, and the hash that has hashed every byte of
// it. The new entry's File is not set.
func extend(path string, e *indexEntry, data []byte) (*indexEntry, hash.Hash, error) {
	d := e.Decoder
	if d.Header != nil {
		h := *d.Header
		d.Header = &h
	}
	d.Name = path + " (appended data)"
	if err := sessionlog.Lines(data, func(line []byte) error {
		_, err := d.SummarizeLine(line)
		return err
	}); err != nil {
		return nil, nil, err
	}
	d.Name = ""
	h := sha256.New()
	if len(e.HashState) > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(e.HashState); err != nil {
			return nil, nil, fmt.Errorf("resume the hash of %s: %w", path, err)
		}
	}
	h.Write(data)
	next := &indexEntry{Committed: e.Committed + int64(len(data)), SHA256: hex.EncodeToString(h.Sum(nil)), Decoder: d}
	return next, h, nil
}

// update records e as the cache entry of session id (a version this Store
// wrote itself).
func (s *Store) update(id string, e *indexEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.loadIndex()
	idx.Sessions[id] = e
	idx.dirty = true
}

func emptyHashState() []byte {
	st, _ := sha256.New().(encoding.BinaryMarshaler).MarshalBinary() // sha256 state always marshals
	return st
}
