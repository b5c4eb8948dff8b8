package objstore

import (
	"context"

	"github.com/panto-dev/panto/store"
)

var _ store.Closer = (*Store)(nil)

// Close finishes what the Store does in the background (Flush: the
// checkpoints, and the index entries of WithDeferredIndex) and reports
// what still fails: the Store's background work is those writes, so Close
// is its last Flush. A process that appended calls it before exiting, so
// that other processes list what it wrote.
//
// It then folds the index entries of the sessions it committed unfolded
// into a run (unfolded.go), which Flush leaves to Close: a process that
// flushes after each round (a sync) would otherwise write them each
// time. The checkpoints that Close's Flush writes fold them in their own
// commit (commitFoldingMine), so that a turn's exit takes one commit of
// the index, not two and a reading of the log between them.
//
// Last, it caches the catalog as of the newest commit it knows, when
// what it holds in memory brings it there (catchUpKept): the next run
// does not read back what this one wrote.
func (s *Store) Close(ctx context.Context) error {
	s.closing.Store(true)
	if err := s.Flush(ctx); err != nil {
		return err
	}
	err := s.foldMine(ctx)
	if s.catchUpKept(ctx) {
		s.saveKeptCatalog()
	}
	s.noteNewestCommit()
	s.waitHeadFetches(ctx)
	s.waitMergeFetches(ctx)
	return err
}
