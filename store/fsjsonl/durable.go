package fsjsonl

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
)

// This file is how a bulk writer (WithDeferredSync: panto-sync pull)
// makes what it wrote durable: one sync of the batch at Flush, before the
// summary cache records it, instead of an fsync per file as it goes.

// deferredSync is what a Store that defers its syncs wrote since its
// last Flush.
type deferredSync struct {
	mu sync.Mutex
	// files are the session files written to (created or appended).
	files map[string]struct{}
	// created: a file was created, so the directory's entries changed.
	created bool
}

// wrote notes that path was written (and created, when it was): made
// durable by the next Flush.
func (d *deferredSync) wrote(path string, created bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.files == nil {
		d.files = map[string]struct{}{}
	}
	d.files[path] = struct{}{}
	d.created = d.created || created
}

// take returns what was written since the last take and forgets it.
func (d *deferredSync) take() (files []string, created bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for f := range d.files {
		files = append(files, f)
	}
	created, d.files, d.created = d.created, nil, false
	slices.Sort(files)
	return files, created
}

// syncDeferred makes durable every file written since the last call and
// the directory's entries (s.syncBatch: syncfs(2) on Linux). On failure
// what it was to sync stays noted, for the next Flush.
func (s *Store) syncDeferred(ctx context.Context) error {
	files, created := s.pending.take()
	if len(files) == 0 && !created {
		return nil
	}
	if err := s.syncBatch(ctx, s.dir, files); err != nil {
		for _, f := range files {
			s.pending.wrote(f, created)
		}
		return fmt.Errorf("make the %d files written to %s durable: %w", len(files), s.dir, err)
	}
	return nil
}

// syncEach is the portable batch sync: an fsync of each file, in
// parallel (a disk serves many at once, and the file system's journal
// commits them together), then one of the directory, for the entries of
// the files created.
func syncEach(ctx context.Context, dir string, files []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, path := range files {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return syncDir(dir)
}
