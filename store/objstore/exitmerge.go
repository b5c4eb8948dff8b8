package objstore

import (
	"context"
	"math"
	"slices"

	"github.com/panto-dev/panto/internal/manifest"
)

// An exit's run merged as it is written (docs/DESIGN.md §P3 "Unfolded
// entries"). An agent's exit folds its sessions into a run of their own,
// a page of an entry or a few; every fourth such run completes a tier,
// and the merge that runsDue then made cost the exit two round trips
// after its commit (the merged run's pages, their commit) before the
// deletion of the pages merged. When this Store holds the pages of that
// merge (read in the background at its appends: prefetchForExit), the
// exit writes the merged run, its own entries in it, in the place of its
// own run: one write of pages and one commit, which names the merged run
// and retires the pages merged, as mergeRuns's commit does. The commit
// lists those pages in IndexShard.Discarded instead of the exit deleting
// them after it: the next writer of a run deletes them beside its own
// writes (sweepDiscarded) and takes them out of the list. So the exit
// is two round trips, as one that merges nothing.
//
// The commit is voided as a whole merge's is (nextCommit) when a page it
// read was retired since (another writer merged them first, a purge
// rewrote one): the exit's entries then stay in the unfolded set, the
// pages it wrote are deleted, and the Store folds the entries as it would
// have without the merge (fold, foldMine).

// runWrite is what writeRunAndHeads wrote: the pages of the run, and the
// merge they took in (nil: none).
type runWrite struct {
	pages   []manifest.RunPage
	entries int // in the pages
	merge   *exitMerge
	swept   []string // pages of Discarded deleted beside the run's
}

// exitMerge is a merge an exit's run takes in: the pages it merges, and
// their entries less the sessions deleted.
type exitMerge struct {
	pages   []manifest.RunPage
	entries map[string]manifest.IndexEntry
}

// into records w in ch, the changes of the commit naming the run of
// entries: the run, and the retirement of the pages it merged, which
// void the merge should one of them be gone by then.
func (w runWrite) into(ch *logChanges, entries map[string]manifest.IndexEntry) {
	ch.run, ch.pages, ch.swept = entries, w.pages, w.swept
	if w.merge == nil {
		return
	}
	ch.read, ch.discard = pageKeys(w.merge.pages), true
	ch.retired = map[string]bool{}
	for _, p := range w.merge.pages {
		ch.retired[p.Key] = true
	}
}

// exitMergePages is the pages of the merge that a new run of n entries
// would make due (mergeDuePages) when the commit after c is the run's,
// if runsDue would then make that merge at once: no fold due or under
// way (a fold's step goes first). nil: none. Not for a sync
// (WithDeferredIndex), whose bulk runs merge as a batch.
func (s *Store) exitMergePages(c *manifest.IndexShard, n, budget int) []manifest.RunPage {
	if c == nil || len(c.Runs) == 0 || c.Fold != nil || s.deferIndex || s.foldAtOnce {
		return nil
	}
	if runEntries(c.Runs)+n > s.runFoldLimit() {
		return nil
	}
	return mergeDuePages(c, n, budget)
}

// mergeDuePages is the pages of the merge that a new run of n entries
// would make due (runsToMerge) once committed after c, when the merge
// with the run is within budget entries; nil: none.
func mergeDuePages(c *manifest.IndexShard, n, budget int) []manifest.RunPage {
	if c == nil {
		return nil
	}
	const next = math.MaxInt64 // the new run's commit: none yet
	due := runsToMerge(append(slices.Clone(notMerging(c)), manifest.RunPage{Commit: next, Sessions: n}))
	due = slices.DeleteFunc(due, func(p manifest.RunPage) bool { return p.Commit == next })
	if len(due) == 0 || runEntries(due)+n > budget {
		return nil
	}
	return due
}

// prefetchForExit reads, in the background, what this Store's exit
// would read, by the newest commit it knows: the pages of the merge its
// run would take in (exitMergePages), so that the exit finds them read
// (pages are immutable), and what the step of the runs' fold the exit
// would take reads: the fold's pages that cover the step's partitions,
// and the partitions, whose writes then wait for these readings
// (awaitPrefetch) and send If-Match on them, as on any reading. A step's
// exit so makes its writes without a round trip of reads first (two
// before: the pages, then the partitions). At each append, as the
// project's head (prefetchHead), and planned once per commit known and
// count of the Store's own sessions: an append on the same reading
// plans nothing. Only an agent's (a sync merges and folds at once); a
// reading the exit does not use (another writer took the step) costs its
// bytes and no round trip.
func (s *Store) prefetchForExit(ctx context.Context) {
	if s.deferIndex || s.foldAtOnce || !s.indexLog() {
		return
	}
	s.ilog.mu.Lock()
	c, n := s.ilog.last, max(1, len(s.ilog.mine))
	s.ilog.mu.Unlock()
	if c == nil || len(c.Runs) == 0 {
		return
	}
	at := exitPlan{through: c.Through, mine: n}
	s.runs.mu.Lock()
	planned := s.runs.planned == at
	s.runs.planned = at
	s.runs.mu.Unlock()
	if planned {
		return
	}
	s.prefetchPages(ctx, s.exitMergePages(c, n, s.exitBudget()))
	if c.Fold == nil && runEntries(c.Runs)+n <= s.runFoldLimit() {
		return
	}
	if plan, ok := s.planFoldStep(c); ok {
		s.prefetchPages(ctx, plan.pages)
		for _, name := range plan.within {
			s.prefetchPartition(ctx, name)
		}
	}
}

// exitPlan is what prefetchForExit last planned by: the number of the
// commit, and how many sessions of the Store's own its exit folds.
type exitPlan struct {
	through int64
	mine    int
}

// prefetchPages reads pages in the background, but those this Store
// holds or is reading; waitMergeFetches waits for them.
func (s *Store) prefetchPages(ctx context.Context, pages []manifest.RunPage) {
	rs := &s.runs
	rs.mu.Lock()
	var missing []manifest.RunPage
	for _, p := range pages {
		if _, kept := rs.pages[p.Key]; !kept && !rs.fetching[p.Key] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		rs.mu.Unlock()
		return
	}
	if rs.fetching == nil {
		rs.fetching = map[string]bool{}
	}
	for _, p := range missing {
		rs.fetching[p.Key] = true
	}
	rs.fetches.Add(1)
	rs.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer rs.fetches.Done()
		fctx, cancel := context.WithTimeout(ctx, headFetchTimeout)
		defer cancel()
		// A page that fails to read is read again where it is needed.
		_, _, _ = s.readRunPages(fctx, missing)
		rs.mu.Lock()
		for _, p := range missing {
			delete(rs.fetching, p.Key)
		}
		rs.mu.Unlock()
	}()
}

// waitMergeFetches waits for the readings of pages prefetchPages started
// (prefetchForExit), or ctx.
func (s *Store) waitMergeFetches(ctx context.Context) { waitGroup(ctx, &s.runs.fetches) }

// mergeForExit is the merge that a run of n entries written now takes in
// (nil: none), when this Store holds every page of it (prefetchForExit):
// the exit then makes no request to read them. The budget is runsDue's,
// less a commit stored whole in this turn, or due as the next.
func (s *Store) mergeForExit(ctx context.Context, n int) *exitMerge {
	if s.deferIndex || !s.indexLog() {
		return nil
	}
	s.waitMergeFetches(ctx)
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	budget := s.exitBudget()
	if s.storedWholeLately() || s.nextCommitWhole() {
		budget -= wholeCommitEntries
	}
	pages := s.exitMergePages(c, n, budget)
	if len(pages) == 0 || !s.pagesKept(pages) {
		return nil
	}
	docs, damaged, err := s.readRunPages(ctx, pages) // kept: no request
	if err != nil || len(damaged) > 0 {
		return nil
	}
	return &exitMerge{pages: pages, entries: withoutDeleted(c, longestOf(docs))}
}

// finishRunWrite is what follows the commit of w, a run written by
// writeRunAndHeads: when the commit voided its merge, the deletion of
// the pages it wrote (best effort: a page no commit names is never read,
// and a sync or repair deletes it, sweepUnnamedPages). The pages a
// merge retired are left to the next writer's sweep (sweepDiscarded):
// the exit waits for no deletion. It reports whether the commit named
// the run (runNamed).
func (s *Store) finishRunWrite(ctx context.Context, w runWrite) bool {
	ran := s.runNamed(w)
	if w.merge == nil {
		return ran
	}
	s.ilog.mu.Lock()
	last := s.ilog.last
	s.ilog.mu.Unlock()
	s.forgetPages(last)
	if ran {
		// The merges and the step of a fold after it share the exit's
		// budget with it (runsDue).
		s.runs.mu.Lock()
		s.runs.spent += w.entries
		s.runs.mu.Unlock()
	} else {
		_ = s.deleteRetired(ctx, last, w.pages, false)
	}
	return ran
}

// sweepDiscarded deletes the pages that the newest commit this Store
// knows names in Discarded (retired by an exit's merge, or by a purge
// cut short), and returns their keys, for its commit to take out of the
// list (logChanges.swept). A retired page is named by no later commit
// (a page's key is written once), so a reading of any age serves, and
// a deletion whose commit fails is made again by the next writer
// (DeleteObjects of a key gone succeeds). Best effort: a failure leaves
// the list as it is.
func (s *Store) sweepDiscarded(ctx context.Context) []string {
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	if c == nil || len(c.Discarded) == 0 {
		return nil
	}
	keys := slices.Clone(c.Discarded)
	if err := s.b.deleteKeys(ctx, keys); err != nil {
		return nil
	}
	return keys
}

// runNamed reports whether the newest commit this Store knows names the
// run of w, just committed: a run alone always is, a run that took in a
// merge is not when its commit voided the merge (its entries stay in the
// unfolded set).
func (s *Store) runNamed(w runWrite) bool {
	if w.merge == nil {
		return true
	}
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	return s.ilog.last != nil && len(w.pages) > 0 && slices.ContainsFunc(s.ilog.last.Runs, func(p manifest.RunPage) bool { return p.Key == w.pages[0].Key })
}
