package objstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/panto-dev/panto/internal/manifest"
)

// Commits stored against a base (docs/DESIGN.md §P3): the recent view,
// 64 sessions, is most of a commit (about 12 KB), and most commits change
// one or two of them. So every logFullEvery-th commit stores it whole,
// and the commits between store the entries that differ from the last
// whole one before them (manifest.IndexShard.Base): a turn's two commits
// send a few KB instead of 24. A reader reads the newest commit and its
// base (the GET of the base guessed from the number goes out with the
// commit's); whoever read a base keeps it for the commits after it.
// Deletions and repairs store their commit whole: a deletion purges
// every commit before its own, bases included.

// logFullEvery: commits whose number it divides store the recent view
// whole, as do the first of a log and the ones written after a deletion.
const logFullEvery = 16

// guessBase is the base a commit numbered n most likely has: the last
// multiple of logFullEvery, or commit 1 before the first.
func guessBase(n int64) int64 {
	if k := n - n%logFullEvery; k > 0 {
		return k
	}
	return 1
}

// baseFetch is one reading of a whole commit, shared by the readers of
// the commits stored against it.
type baseFetch struct {
	done chan struct{}
	c    *manifest.IndexShard
	err  error
}

// logBase returns whole commit k, read once per Store (bases are never
// rewritten: a number is created once).
func (s *Store) logBase(ctx context.Context, k int64) (*manifest.IndexShard, error) {
	lg := &s.ilog
	lg.mu.Lock()
	f, ok := lg.bases[k]
	if !ok {
		f = &baseFetch{done: make(chan struct{})}
		if lg.bases == nil {
			lg.bases = map[int64]*baseFetch{}
		}
		lg.bases[k] = f
		lg.mu.Unlock()
		f.c, f.err = s.readWholeCommit(ctx, k)
		if f.err == nil && f.c.Base != 0 {
			f.err = fmt.Errorf("%s: %w: stored against commit %d, and named a base", s.objectURL(logKey(k)), ErrCorrupt, f.c.Base)
		}
		if f.err != nil {
			lg.mu.Lock()
			delete(lg.bases, k) // the next reader tries again
			lg.mu.Unlock()
		}
		close(f.done)
	} else {
		lg.mu.Unlock()
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return f.c, f.err
}

// noteBase keeps c, a whole commit this Store read or wrote, as a base,
// and forgets the bases more than two full intervals before it.
func (s *Store) noteBase(c *manifest.IndexShard) {
	if c == nil || c.Base != 0 {
		return
	}
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.bases == nil {
		lg.bases = map[int64]*baseFetch{}
	}
	if _, ok := lg.bases[c.Through]; !ok {
		f := &baseFetch{done: make(chan struct{}), c: c}
		close(f.done)
		lg.bases[c.Through] = f
	}
	for k, f := range lg.bases {
		select {
		case <-f.done:
			if k < c.Through-2*logFullEvery {
				delete(lg.bases, k)
			}
		default:
		}
	}
}

// knownBase is whole commit k when this Store holds it, without a
// request.
func (s *Store) knownBase(k int64) *manifest.IndexShard {
	lg := &s.ilog
	lg.mu.Lock()
	f, ok := lg.bases[k]
	lg.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-f.done:
		return f.c
	default:
		return nil
	}
}

// storedCommit is commit next as its writer stores it: against the base
// of prev (the commit it follows) when it may be, whole otherwise (see
// the top of this file). whole says the caller needs it whole (a
// deletion's, a repair's, a move's).
func (s *Store) storedCommit(next, prev *manifest.IndexShard, whole bool) *manifest.IndexShard {
	if whole || prev == nil || next.Through%logFullEvery == 0 {
		return next
	}
	k := prev.Base
	if k == 0 {
		k = prev.Through
	}
	base := s.knownBase(k)
	if base == nil && k == prev.Through {
		base = prev
	}
	if base == nil || next.Through-k >= logFullEvery {
		return next
	}
	delta, ok := manifest.DeltaRecent(next.Recent, base.Recent)
	if !ok {
		return next
	}
	stored := *next
	stored.Base, stored.Recent = k, delta
	return &stored
}

// readWholeCommit reads commit n as stored and, when it is stored against
// a base, makes its recent view whole from the base (read once, logBase).
// A base that is gone or damaged makes the commit unreadable: ErrCorrupt.
func (s *Store) readWholeCommit(ctx context.Context, n int64) (*manifest.IndexShard, error) {
	c, _, err := s.readStoredCommit(ctx, n, "")
	if err != nil {
		return nil, err
	}
	return c, s.makeWhole(ctx, c)
}

// makeWhole makes c's recent view whole from its base, if it has one.
func (s *Store) makeWhole(ctx context.Context, c *manifest.IndexShard) error {
	if c.Base == 0 {
		s.noteBase(c)
		return nil
	}
	base, err := s.logBase(ctx, c.Base)
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("%s: %w: its base, commit %d, is gone", s.objectURL(logKey(c.Through)), ErrCorrupt, c.Base)
	}
	if err != nil {
		return err
	}
	if err := c.WithBase(base); err != nil {
		return s.corrupt(logKey(c.Through), err)
	}
	return nil
}

// prefetchBase starts reading the base commit n most likely has (see
// guessBase) when n is not whole itself, so that its GET goes out with
// n's.
func (s *Store) prefetchBase(ctx context.Context, n int64) {
	if k := guessBase(n); n%logFullEvery != 0 && k != n && s.knownBase(k) == nil {
		go func() { _, _ = s.logBase(ctx, k) }()
	}
}
