package objstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// WithPageAhead is for a command whose first read is the newest page of
// project p (panto sessions in a work tree, panto -c's latest): Open reads the newest commit
// of the index log as stored, without the base a commit stored against
// one needs to be whole (logbase.go), and with it the project's head;
// the page is read from the commit's unfolded set and the head
// (docs/DESIGN.md §P3, "Project heads"), which need no base. So the page
// costs the marker and the log's LIST, then the commit and the head:
// four requests in two round trips, where the base made five in three
// (15 commits in 16 are stored against one). The base is read when
// something else needs the whole commit (a write, another listing, the
// load of a session, beside whose reads it goes), once. With WithOpenSnapshot only: the page
// is the bucket as it was during Open. The zero Project: none.
func WithPageAhead(p agent.Project) Option { return func(o *options) { o.pageAhead = p } }

// openedHeads are the heads of the project WithPageAhead names that Open
// read with the newest commit, n, once the log's LIST had named it: every
// head written for a commit up to n was written before that commit, so
// before the LIST's answer, and a head read after it holds what the page
// needs of it (newestFromHeads), as a head read after the commit does.
// With a commit newer than n they serve no page: a fold since may have
// moved sessions out of the unfolded set into a head read before.
type openedHeads struct {
	mu    sync.Mutex
	n     int64
	views map[string]openedHead
}

// openedHead is one head Open read: its view, or the error that says it
// does not decode (ErrCorrupt).
type openedHead struct {
	v   headView
	err error
}

// readOpenHead reads, for a Store opened WithPageAhead, head name of the
// project's sessions beside commit n, which the log's LIST named: the
// project's own, and those a commit Open read says may hold its
// sessions too (openMoreHeads). Errors other than a damaged head are dropped: the
// page reads it again.
func (s *Store) readOpenHead(ctx context.Context, name string, n int64) {
	if name == "" || n == 0 {
		return
	}
	v, err := s.readHead(ctx, name)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return
	}
	oh := &s.openHeads
	oh.mu.Lock()
	defer oh.mu.Unlock()
	if oh.n != n {
		oh.n, oh.views = n, nil
	}
	if oh.views == nil {
		oh.views = map[string]openedHead{}
	}
	oh.views[name] = openedHead{v, err}
}

// openMoreHeads names the heads Open should read for the project's page
// beside the newest commit and the project's own, judging from guess,
// the commit it read beside the LIST (the one the last run saw): the
// dirs head, or the work tree root's head, when guess says they may
// hold the project's sessions (headsFor). Once a commit says the dirs
// head holds sessions, every later one does (nextCommit carries DirHead
// on), and its filter only grows, so the page of a work tree in a bucket
// with imported sessions reads every head it needs in Open's second
// round trip, not one in a third. (Were one read for nothing, it would
// cost a request, not a wrong page: the page takes the heads the newest
// commit names.) Without a guess the newest commit's answer comes too
// late to gain a round trip, and the page reads them then
// (newestFromHeads).
func (s *Store) openMoreHeads(guess *manifest.IndexShard) []string {
	names := headsFor(s.pageAhead, guess)
	return slices.DeleteFunc(names, func(name string) bool { return name == keyHead(s.pageAhead.Key()) })
}

// openedHead is head name as Open read it beside commit n (ok false: it
// did not, or not beside n).
func (s *Store) openedHead(name string, n int64) (openedHead, bool) {
	oh := &s.openHeads
	oh.mu.Lock()
	defer oh.mu.Unlock()
	h, ok := oh.views[name]
	return h, ok && oh.n == n
}

// storedReading is Open's reading of the newest commit as stored, kept
// aside by a Store opened WithPageAhead when its base is not at hand:
// the page of the project reads it (newestFromStored); anything else
// makes it whole first (settleStored). It is not the Store's reading of
// the log (logState.last) until then, since every other reader and
// writer of that needs the recent view and the run pages whole.
type storedReading struct {
	n    int64
	c    *manifest.IndexShard // as stored: Recent and Runs against c.Base
	etag string
	// until: the end of Open's snapshot, after which the page reads
	// the log again, as any listing does (WithOpenSnapshot).
	until time.Time
}

// readOpenCommit is how Open reads commit n: as stored for a Store
// opened WithPageAhead (adoptOpened decides whether the base is read),
// else whole.
func (s *Store) readOpenCommit(ctx context.Context, n int64) (*manifest.IndexShard, string, error) {
	if s.pageAhead == (agent.Project{}) {
		return s.readCommit(ctx, n, "")
	}
	return s.readStoredCommit(ctx, n, "")
}

// adoptOpened makes commit n, which Open read (readOpenCommit), the
// Store's reading of the log; for a Store opened WithPageAhead whose
// commit needs a base it does not hold, it keeps the commit aside
// instead (storedReading), without the base's request.
func (s *Store) adoptOpened(ctx context.Context, n int64, c *manifest.IndexShard, etag string) {
	if s.pageAhead != (agent.Project{}) && c != nil {
		if c.Base != 0 && !s.baseAtHand(c) {
			st := &storedReading{n: n, c: c, etag: etag}
			if s.openSnapshot {
				st.until = s.now().Add(openSnapshotFor)
			}
			s.ilog.mu.Lock()
			s.ilog.stored = st
			s.ilog.mu.Unlock()
			return
		}
		if err := s.makeWhole(ctx, c, etag); err != nil {
			return // no reading: a reader makes its own
		}
	}
	s.adoptCommit(n, c, etag)
	if s.openSnapshot {
		s.ilog.mu.Lock()
		s.ilog.snapshot = s.now().Add(openSnapshotFor)
		s.ilog.mu.Unlock()
	}
}

// baseAtHand reports whether commit c's base is one this Store holds, or
// the one kept on disk (WithIndexCache): making c whole costs no request.
func (s *Store) baseAtHand(c *manifest.IndexShard) bool {
	if base, _ := s.knownBase(c.Base); base != nil {
		return true
	}
	base, etag := s.loadBase(c.Base)
	return base != nil && etag == c.BaseETag
}

// settleStored makes the commit Open kept aside (storedReading) whole,
// reading its base, and the Store's reading of the log; every reader and
// writer of that reading goes through it first (awaitLogPrefetch). When
// the base cannot be read the Store has no reading, as when Open's
// reading failed: the next reader makes its own.
func (s *Store) settleStored(ctx context.Context) {
	lg := &s.ilog
	lg.settleMu.Lock()
	defer lg.settleMu.Unlock()
	lg.mu.Lock()
	st := lg.stored
	lg.stored = nil
	lg.mu.Unlock()
	if st == nil {
		return
	}
	// A copy: a page may be reading the stored one (newestFromStored).
	whole := *st.c
	if err := s.makeWhole(ctx, &whole, st.etag); err != nil {
		return
	}
	s.adoptCommit(st.n, &whole, st.etag)
	lg.mu.Lock()
	if st.until.After(lg.snapshot) {
		lg.snapshot = st.until
	}
	lg.mu.Unlock()
}

// settleAhead starts making the commit Open kept aside whole, if there
// is one, for a write about to begin (panto -c's prompt, after a load
// that found the session's segments from the head): the base's GET then
// goes out with the write's segment, and the commit after the segment
// finds it read (settleStored waits for it), not one round trip later.
func (s *Store) settleAhead(ctx context.Context) {
	s.ilog.mu.Lock()
	pending := s.ilog.stored != nil
	s.ilog.mu.Unlock()
	if pending {
		go s.settleStored(ctx)
	}
}

// newestFromStored is the newest page of project p (limit sessions keep
// accepts) read from the commit Open kept aside and the project's heads,
// without the commit's base; ok is false when it cannot answer (no such
// commit, the snapshot is over, the prefix's heads are not to be
// trusted, a head says its project holds more than it), and the caller
// lists as it would have. The recent view as stored is only what changed
// since the base, and the page does not need the rest: every session is
// in the commit's unfolded set, which is stored whole, or in the
// partitions or a run, and then in its project's head, which its writer
// wrote before the commit that took it out of the set (§P3).
func (s *Store) newestFromStored(ctx context.Context, p agent.Project, limit int, keep func(agent.SessionInfo) bool) (logs []store.Log, ok bool, err error) {
	if err := s.waitLogPrefetch(ctx); err != nil {
		return nil, false, err
	}
	s.ilog.mu.Lock()
	st := s.ilog.stored
	s.ilog.mu.Unlock()
	if st == nil || !s.now().Before(st.until) || !s.headsIndex() {
		return nil, false, nil
	}
	names := headsFor(p, st.c)
	if len(names) == 0 {
		return nil, false, nil
	}
	return s.newestFromHeads(ctx, st.c, names, claimedRoot(p, st.c), limit, keep)
}
