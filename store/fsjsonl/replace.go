package fsjsonl

import (
	"context"
	"fmt"
	"os"

	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// Replace swaps the log of session id, if its committed bytes are exactly
// at, for data (whole committed lines beginning with the session's
// header); otherwise it fails with a *store.ChangedError and touches
// nothing. It is the one write of this package that is not an append,
// for a caller that keeps the catalog as a copy of another store's log
// (store/localfirst, when the bucket's log diverged from the replica's:
// its own copy went to a new session first).
//
// The new file is written and fsynced whole beside the old one, then
// renamed over it while the old one is held exclusively locked: a writer
// that waited on that lock finds the name now holds another file
// (openLocked) and appends to the new one, so no append lands in the
// file that was replaced.
func (s *Store) Replace(ctx context.Context, id string, at store.Checkpoint, data []byte) (store.Checkpoint, error) {
	fail := func(err error) (store.Checkpoint, error) {
		return store.Checkpoint{}, fmt.Errorf("replace session %s: %w", id, err)
	}
	path, err := s.Path(id)
	if err != nil {
		return fail(err)
	}
	if n, err := sessionlog.CommittedLength(path+" (replacement)", data); err != nil {
		return fail(err)
	} else if n != len(data) || n == 0 {
		return fail(fmt.Errorf("%w: the replacement is not whole committed batches", sessionlog.ErrMalformed))
	}
	next, _, err := extend(path, &indexEntry{Decoder: sessionlog.Decoder{Name: path}, HashState: emptyHashState()}, data)
	if err != nil {
		return fail(err)
	}
	if next.Decoder.Info.ID != id {
		return fail(fmt.Errorf("%w: the replacement's header names session %q", sessionlog.ErrMalformed, next.Decoder.Info.ID))
	}
	l, _, err := s.lockAt(ctx, id, at, false)
	if err != nil {
		return fail(err)
	}
	defer l.close()
	if err := s.renameOver(path, data); err != nil {
		return fail(err)
	}
	s.forget(id, true)
	return next.checkpoint(), nil
}

// renameOver writes data to a temporary file in the directory, fsyncs it,
// renames it to path and fsyncs the directory.
func (s *Store) renameOver(path string, data []byte) error {
	tmp, err := os.CreateTemp(s.dir, ".panto-tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(s.dir)
}
