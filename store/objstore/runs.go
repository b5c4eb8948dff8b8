package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/panto-dev/panto/internal/manifest"
)

// Runs (manifest.FeatureIndexUnfolded, docs/DESIGN.md §P3): a bulk write
// (a sync of more than unfoldedBatch sessions), and the fold of unfolded
// entries (an agent's Close: unfolded.go), writes its entries as a
// run of immutable pages, each the entries of a range of partitions, and
// commits the pages to the index log (IndexShard.Runs) instead of
// replacing every partition it touches. At 100,000 sessions, 1,000
// changed sessions fall in all 256 partitions (21 MB); their run is a few
// hundred KB. Restic's index files and an LSM tree's sorted runs.
//
// A session's entry is the longest of its partition's, the Unfolded
// set's and the pages'. Readers read the newest commit, then the
// partitions and the pages that cover them together; a catalog on disk
// catches up with a bulk write by reading the pages its commit added.
//
// Runs merge and fold:
//
//   - runs are merged by size tier (runsToMerge): a resolve reads the
//     page of each run that covers its partition, so the count stays
//     small (at most 3 per tier of 4x), and a merge costs what the runs
//     it takes hold, which never includes a run of a higher tier; a
//     writer that is not a sync (an agent) rewrites at most
//     runMergeBudget entries, and a bigger merge in steps
//     (manifest.RunMerge, stepMerge);
//   - past runFoldLimit entries (an eighth of the catalog, at least
//     runFoldMin), the runs are folded into the partitions, whose commit
//     retires the pages and lists no change (readers of the runs have
//     every entry already). So the partitions are rewritten once per
//     eighth of the index changed, and a bulk write costs what it
//     changed (amortized). A writer that is not a sync (an agent)
//     folds a few partitions at a time (manifest.RunFold, stepFold);
//   - a deletion of a session a page covers, and a repair, fold the
//     pages that cover it at once: they hold its summary.
//
// Pages are deleted once the commit that retires them is written: by a
// sync, a deletion's fold and repair at once, and those an agent's exit
// retires (its run's merge, exitmerge.go, a merge, a step) by the next
// writer of a run, which finds them in the commit's Discarded
// (sweepDiscarded). A reader that finds one gone reads the newest commit
// and the partitions again (readIndexAll).

const (
	// runPageSize is the most entries a page holds, unless one
	// partition alone has more (a page covers whole partitions).
	runPageSize = 128
	// runMergeFactor is how many runs of one size tier are merged into
	// one (runsToMerge), and the factor between tiers.
	runMergeFactor = 4
	// runFoldMin and runFoldShare: runs are folded into the partitions
	// past max(runFoldMin, catalog/runFoldShare) entries.
	runFoldMin   = 2048
	runFoldShare = 8
	// runMergeBudget is the most entries a writer that is not a sync
	// (an agent's Close) rewrites merging runs and folding them: about
	// 16 KB of pages or partitions at 290 bytes an entry, beside a
	// turn's 13 KB of commits and head and the commits of a step and a
	// merge, so that a turn sends at most 32 KB beyond its segments (64
	// entries left 60 of 13,500 turns just past it at 100,000 sessions).
	// A bigger merge goes a step at a time (stepMerge).
	runMergeBudget = 56
)

// errRunGone: a page the newest commit named was deleted since (a fold
// retired it); the reader reads the newest commit again.
var errRunGone = errors.New("index run page retired since the commit that named it was read")

// pageGone readies this Store to read the index again after a page its
// newest commit named was gone: Open's snapshot (WithOpenSnapshot) no
// longer serves, as it names the page.
func (s *Store) pageGone() {
	s.ilog.mu.Lock()
	s.ilog.snapshot = time.Time{}
	s.ilog.mu.Unlock()
}

// withRunFoldAt sets runFoldMin (tests fold small runs).
func withRunFoldAt(n int) Option { return func(o *options) { o.runFoldAt = n } }

// withMergeBudget sets runMergeBudget (tests merge small runs in steps).
func withMergeBudget(n int) Option { return func(o *options) { o.mergeBudget = n } }

// withPartitionsAtClose makes every fold fold all runs at once, past a
// limit of 0: a writer's Close leaves its entries in the partitions
// (tests that need them there).
func withPartitionsAtClose() Option {
	return func(o *options) { o.runFoldAt, o.foldAtOnce = 0, true }
}

// runState is this Store's cache of run pages (immutable: a key is
// written once) and the entries of the fold under way, which the index
// log need not list again (queueLog).
type runState struct {
	mu      sync.Mutex
	pages   map[string]*manifest.IndexShard
	folding map[string]int64 // id → length being folded from runs
	fold    sync.Mutex       // one fold or merge at a time
	// reads are the GETs of pages under way, shared (readRunPage).
	reads singleflight.Group
	// buried are the partitions that buried a session since the last
	// purge of the runs (purge.go); purge, one purge at a time.
	buried map[string]bool
	purge  sync.Mutex
	// deleted are the pages a purge's retirePages deleted (a purge
	// deletes those of a commit's Discarded that are not).
	deleted map[string]bool
	// deleting counts the deletions under way (purge.go:
	// prewritePurge).
	deleting atomic.Int32
	// fetching are the pages prefetchForExit is reading, fetches its
	// readings under way, planned what it last planned by (exitmerge.go).
	fetching map[string]bool
	fetches  sync.WaitGroup
	planned  exitPlan
	// spent is what an exit's run that took in a merge rewrote, in
	// entries: the next runsDue's budget is short of it.
	spent int
	// written is when this Store sent each page it wrote in the last
	// unnamedPageAge: a commit does not name one older than
	// pageCommitAge (stalePages).
	written map[string]time.Time
}

// commitRun writes entries as a run and commits its pages, then merges
// or folds the runs when they are due. A failure queues the entries for
// their partitions again (the next Flush tries again). Pages written for
// a commit that failed are left: the commit may have been written and
// its answer lost, and a page no commit names is never read (a sync or
// repair deletes it a day later: sweepUnnamedPages, removeUnnamedPages).
func (s *Store) commitRun(ctx context.Context, entries map[string]manifest.IndexEntry) error {
	if _, err := s.addRun(ctx, entries); err != nil {
		for _, e := range entries {
			s.queueIndex(e)
		}
		return fmt.Errorf("write the index run: %w", err)
	}
	s.afterRun(ctx)
	return nil
}

// addRun writes entries as a run and commits its pages, which takes
// them out of the Unfolded set where the run holds them as long
// (nextCommit). It reports false when the run took in a merge whose
// commit was voided (exitmerge.go): the entries are in the set still.
func (s *Store) addRun(ctx context.Context, entries map[string]manifest.IndexEntry) (bool, error) {
	w, err := s.writeRunAndHeads(ctx, entries)
	if err != nil {
		return false, err
	}
	var ch logChanges
	w.into(&ch, entries)
	s.ilog.wmu.Lock()
	err = s.commitLog(ctx, ch, nil, false)
	s.ilog.wmu.Unlock()
	if err != nil {
		return false, err
	}
	return s.finishRunWrite(ctx, w), nil
}

// writeRunAndHeads writes entries as a new run's pages and, at once, the
// heads of their projects, which the commit naming the run must follow
// (commitLog writes what is queued for the heads first; these are
// written already, so it sends nothing for them): one round trip where
// the page, then the heads, took two. The run takes in the merge its
// commit would make due when this Store holds its pages (mergeForExit);
// else the pages of that merge are read beside the writes. The pages
// an earlier merge left in IndexShard.Discarded are deleted beside them
// too (sweepDiscarded), for the commit to take out.
func (s *Store) writeRunAndHeads(ctx context.Context, entries map[string]manifest.IndexEntry) (runWrite, error) {
	s.queueHeads(entries)
	w := runWrite{merge: s.mergeForExit(ctx, len(entries))}
	run := entries
	if w.merge != nil {
		run = longest(w.merge.entries, entries)
	}
	w.entries = len(run)
	var g errgroup.Group
	g.Go(func() (err error) {
		w.pages, err = s.writeRun(ctx, run)
		return err
	})
	g.Go(func() error { return s.writeHeads(ctx) })
	g.Go(func() error { w.swept = s.sweepDiscarded(ctx); return nil })
	if w.merge == nil {
		g.Go(func() error { s.readAheadMerge(ctx, len(entries)); return nil })
	}
	if err := g.Wait(); err != nil {
		return runWrite{}, err
	}
	return w, nil
}

// readAheadMerge reads the pages of the merge that a new run of n
// entries would make due (runsDue, after its commit), beside the run's
// own writes: pages are immutable, so the merge finds them read
// (readRunPage), and an exit whose run completes a tier, when it did not
// hold them to merge them into its run (mergeForExit), takes one round
// trip less. Only a merge the exit's budget covers; a reading that fails
// is the merge's to make again.
func (s *Store) readAheadMerge(ctx context.Context, n int) {
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	due := mergeDuePages(c, n, s.mergeBudget)
	if len(due) == 0 || s.pagesKept(due) {
		return
	}
	_, _, _ = s.readRunPages(ctx, due)
}

// afterRun is what follows a run's commit: the catalog's catch-up, and
// the merge or fold the runs make due.
func (s *Store) afterRun(ctx context.Context) {
	// The commit omits the run's entries: a catalog cached before it
	// would read the pages back, which this Store holds. Caught up before
	// a fold too, which then moves only entries the catalog holds; cached
	// once, after.
	moved := s.catchUpKept(ctx)
	// Best effort: the entries are committed; a merge or fold that fails
	// is tried again after the next run.
	_ = s.runsDue(ctx)
	if s.catchUpKept(ctx) || moved {
		s.saveKeptCatalog()
	}
}

// writeRun writes entries as the pages of a new run, in parallel, and
// returns them in partition order (their Commit set by the commit).
func (s *Store) writeRun(ctx context.Context, entries map[string]manifest.IndexEntry) ([]manifest.RunPage, error) {
	byPartition := map[string][]manifest.IndexEntry{}
	for _, e := range entries {
		name := s.shardOf(e.Info.ID)
		byPartition[name] = append(byPartition[name], e)
	}
	run, err := newRunName()
	if err != nil {
		return nil, err
	}
	var pages []manifest.RunPage
	var docs []*manifest.IndexShard
	doc := manifest.NewIndexShard(manifest.RunName)
	var first, last string
	cut := func() {
		if len(doc.Sessions) == 0 {
			return
		}
		key := runPageKey(run, len(pages))
		pages = append(pages, manifest.RunPage{Key: key, First: first, Last: last, Sessions: len(doc.Sessions)})
		docs = append(docs, doc)
		doc = manifest.NewIndexShard(manifest.RunName)
	}
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		if len(doc.Sessions) > 0 && len(doc.Sessions)+len(byPartition[p]) > runPageSize {
			cut()
		}
		if len(doc.Sessions) == 0 {
			first = p
		}
		for _, e := range byPartition[p] {
			doc.Sessions[e.Info.ID] = e
		}
		last = p
	}
	cut()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, p := range pages {
		g.Go(func() error { return s.putPage(gctx, p.Key, docs[i]) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return pages, nil
}

// newRunName is a new run's random name, the first part of its pages'
// keys.
func newRunName() (string, error) {
	var name [8]byte
	if _, err := rand.Read(name[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(name[:]), nil
}

// runPageKey is the key of page i of run.
func runPageKey(run string, i int) string {
	return fmt.Sprintf("%s%s-%03d.json.zst", manifest.RunKeyPrefix, run, i)
}

// putPage creates run page key (If-None-Match: a key is written once)
// and caches its content.
func (s *Store) putPage(ctx context.Context, key string, doc *manifest.IndexShard) error {
	data, err := s.codec.EncodeIndexShard(key, doc)
	if err != nil {
		return err
	}
	s.notePageSent(key)
	if _, err := s.put(ctx, key, data, putCond{ifNoneMatch: true}, "application/zstd"); err != nil {
		return fmt.Errorf("write index run page %s: %w", key, err)
	}
	s.keepPage(key, doc)
	return nil
}

// notePageSent records that page key goes out now, for stalePages; a
// record older than unnamedPageAge is forgotten (its page is named by
// now, or a sweep may delete it).
func (s *Store) notePageSent(key string) {
	now := s.now()
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	if s.runs.written == nil {
		s.runs.written = map[string]time.Time{}
	}
	for k, at := range s.runs.written {
		if now.Sub(at) > unnamedPageAge {
			delete(s.runs.written, k)
		}
	}
	s.runs.written[key] = now
}

// pageCommitAge is how old a page this Store wrote may be when a commit
// first names it: half of unnamedPageAge, after which a sync or repair
// deletes a page no commit names. A process suspended between its
// pages and their commit (a laptop's lid shut) would otherwise name a
// page a sweep deleted meanwhile, and every reader of the commit would
// find it gone.
const pageCommitAge = unnamedPageAge / 2

// errStalePages is a commit refused because it would first name a page
// written more than pageCommitAge ago.
var errStalePages = errors.New("index run pages written too long ago to be named")

// stalePages returns the pages that next names and last (the commit it
// follows; nil: none) does not, which this Store wrote more than
// pageCommitAge ago. Pages it did not write are another writer's
// commit's, carried on.
func (s *Store) stalePages(next, last *manifest.IndexShard) []string {
	named := namedPages(last)
	now := s.now()
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	var stale []string
	for _, p := range next.Runs {
		if at, ok := s.runs.written[p.Key]; ok && !named[p.Key] && now.Sub(at) > pageCommitAge {
			stale = append(stale, p.Key)
		}
	}
	return stale
}

// keepPage caches page key's content.
func (s *Store) keepPage(key string, doc *manifest.IndexShard) {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	if s.runs.pages == nil {
		s.runs.pages = map[string]*manifest.IndexShard{}
	}
	s.runs.pages[key] = doc
}

// pagesKept reports whether this Store holds every page of pages in
// memory (read or written), so that reading them makes no request.
func (s *Store) pagesKept(pages []manifest.RunPage) bool {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	for _, p := range pages {
		if _, ok := s.runs.pages[p.Key]; !ok {
			return false
		}
	}
	return true
}

// forgetPages drops from the cache every page c (nil: none) does not name.
func (s *Store) forgetPages(c *manifest.IndexShard) {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	for key := range s.runs.pages {
		if c == nil || !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return p.Key == key }) {
			delete(s.runs.pages, key)
		}
	}
}

// readRunPage returns page p's content, read once per Store. A page that
// is gone is errRunGone; one that does not decode, or holds a session
// outside its partitions, ErrCorrupt.
func (s *Store) readRunPage(ctx context.Context, p manifest.RunPage) (*manifest.IndexShard, error) {
	s.runs.mu.Lock()
	doc, ok := s.runs.pages[p.Key]
	s.runs.mu.Unlock()
	if ok {
		return doc, nil
	}
	// Readers of one page at once (the deletions of an rm of many
	// sessions each read the pages over their partitions ahead) share
	// one GET. It runs apart from the first caller's cancellation, so
	// that a caller that gives up does not fail the others; each waits
	// for it as long as its own ctx lets it.
	read := s.runs.reads.DoChan(p.Key, func() (any, error) {
		return s.fetchRunPage(context.WithoutCancel(ctx), p)
	})
	select {
	case r := <-read:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*manifest.IndexShard), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("read index run page %s: %w", p.Key, ctx.Err())
	}
}

// fetchRunPage reads run page p from the bucket, checks that it holds
// only sessions of the partitions it names, and keeps it.
func (s *Store) fetchRunPage(ctx context.Context, p manifest.RunPage) (*manifest.IndexShard, error) {
	data, _, err := s.b.get(ctx, p.Key, "")
	if errors.Is(err, errNotFound) {
		return nil, fmt.Errorf("%s: %w", s.objectURL(p.Key), errRunGone)
	}
	if err != nil {
		return nil, fmt.Errorf("read index run page %s: %w", p.Key, err)
	}
	doc, err := s.decodeShardObject(p.Key, manifest.RunName, data)
	if err != nil {
		return nil, err
	}
	for id := range doc.Sessions {
		if !p.Covers(s.shardOf(id)) {
			return nil, fmt.Errorf("%s: %w: holds session %s, outside partitions %s to %s", s.objectURL(p.Key), ErrCorrupt, id, p.First, p.Last)
		}
	}
	s.keepPage(p.Key, doc)
	return doc, nil
}

// pagesCovering is the pages of c (nil: none) that cover any of the
// partitions names.
func pagesCovering(c *manifest.IndexShard, names []string) []manifest.RunPage {
	if c == nil {
		return nil
	}
	var pages []manifest.RunPage
	for _, p := range c.Runs {
		if slices.ContainsFunc(names, p.Covers) {
			pages = append(pages, p)
		}
	}
	return pages
}

// readRunPages reads pages in parallel. A page that does not decode, or
// is gone (errRunGone: retired since, or lost), is left out, its error
// in damaged; any other failure fails the read.
func (s *Store) readRunPages(ctx context.Context, pages []manifest.RunPage) (docs []*manifest.IndexShard, damaged map[string]error, err error) {
	docs = make([]*manifest.IndexShard, len(pages))
	errs := make([]error, len(pages))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, p := range pages {
		g.Go(func() error {
			var err error
			docs[i], err = s.readRunPage(gctx, p)
			if errors.Is(err, ErrCorrupt) || errors.Is(err, errRunGone) {
				errs[i], err = err, nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	for i, err := range errs {
		if err != nil {
			if damaged == nil {
				damaged = map[string]error{}
			}
			damaged[pages[i].Key] = err
		}
	}
	return docs, damaged, nil
}

// withRunEntries adds to all, the entries read from the partitions
// names, the longer entries the pages docs hold for them; a session the
// partitions or commit c bury stays buried.
func (s *Store) withRunEntries(c *manifest.IndexShard, names []string, docs []*manifest.IndexShard, all map[string]manifest.IndexEntry, tombs map[string]manifest.Tombstone) {
	if c == nil {
		return
	}
	for _, doc := range docs {
		if doc != nil {
			s.addLonger(all, tombs, c.Tombstones, names, doc.Sessions)
		}
	}
}

// runDamage is the error of the pages that did not decode or are gone,
// or nil. It wraps errRunGone when one is gone: the caller reads the
// newest commit again, and says the index is damaged only when the page
// is still named (lost, not retired).
func (s *Store) runDamage(damaged map[string]error) error {
	if len(damaged) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(damaged))
	var gone error
	for _, key := range keys {
		if errors.Is(damaged[key], errRunGone) {
			gone = errRunGone
		}
	}
	return fmt.Errorf("%w: index run page %s is damaged or missing, so the sessions a bulk write listed there may be missing or show an older state (their data is untouched): run `panto-sync repair %s` (%w)",
		ErrIndexDamaged, strings.Join(keys, ", "), strings.TrimSuffix(s.b.url(""), "/"), errors.Join(damaged[keys[0]], gone))
}

// runFoldLimit is how many entries the runs may hold before they are
// folded: an eighth of the catalog this Store read (a sync reads it), or
// else of the count the newest commit it knows carries (IndexShard.
// Indexed: an agent's), at least the Store's runFoldAt.
func (s *Store) runFoldLimit() int {
	indexed := int64(s.catalogCount())
	if indexed == 0 {
		s.ilog.mu.Lock()
		if s.ilog.last != nil {
			indexed = s.ilog.last.Indexed
		}
		s.ilog.mu.Unlock()
	}
	return max(s.runFoldAt, int(indexed/runFoldShare))
}

// catalogCount is how many sessions the catalog this Store read holds (0:
// it read none).
func (s *Store) catalogCount() int64 {
	s.cat.mu.Lock()
	defer s.cat.mu.Unlock()
	return int64(len(s.cat.entries))
}

// runsDue folds the runs of the newest commit this Store knows into the
// partitions when they hold more than runFoldLimit entries, else merges
// the runs of a tier that has runMergeFactor of them (runsToMerge).
//
// A merge can fill the tier above (the fourth run of 4 makes the fourth
// of 16): the merges cascade, as many as there are tiers at most. A
// sync (WithDeferredIndex) does them all, folds every run at once and
// finishes a merge under way at once, as a batch job may; any other
// writer (an agent's Close) folds a few partitions at a time
// (stepFold), so that no exit rewrites a sixteenth of the index, and
// rewrites at most mergeBudget entries with the step: the merges that
// fit, lowest tier first, then a step of the merge under way, or of a
// new one that does not fit (stepMerge), of the runs the fold does not
// take. What is left waits for the next writer.
func (s *Store) runsDue(ctx context.Context) error {
	// Not by whether it read the catalog: a local-first panto's shipper
	// reads it (replica.PlanAll) and is an agent's exit all the same.
	batch := s.deferIndex
	budget := s.mergeBudget
	if !batch {
		budget = s.exitBudget()
	}
	// A commit stored whole (every logFullEvery-th) in this exit's turn,
	// or due as the next, is its share of the turn's bytes: the budget
	// shrinks by it, and the step of the fold waits for the next exit
	// (at 100,000 sessions, 11 KB beside a step, a merge and the turn's
	// 13 KB put 60 of 13,500 exits past 32 KB). Predicted, the exit
	// that would have written it leaves the number to the next one,
	// which then stores it (its turn's commit) and takes no step
	// either: a step waits for about a third of the exits.
	whole := s.takeWholeStored()
	if whole && !batch {
		budget -= wholeCommitEntries
	}
	s.runs.mu.Lock()
	budget -= s.runs.spent
	s.runs.spent = 0
	s.runs.mu.Unlock()
	stepped := false // a step of a fold taken
	for range 16 {
		if !whole && !batch && s.nextCommitWhole() {
			// Checked before each commit of the exit's: the step's,
			// then each merge's (a merge's commit after the step's was
			// the whole one beside it in 39 of 13,500 turns).
			whole = true
			budget -= wholeCommitEntries
		}
		s.ilog.mu.Lock()
		c := s.ilog.last
		s.ilog.mu.Unlock()
		if c == nil || len(c.Runs) == 0 {
			return nil
		}
		total := 0
		for _, p := range c.Runs {
			total += p.Sessions
		}
		if (total > s.runFoldLimit() || c.Fold != nil) && (batch || s.foldAtOnce) {
			return s.foldRuns(ctx, c.Runs, false)
		}
		if (total > s.runFoldLimit() || c.Fold != nil) && !stepped {
			// A step of the fold, then the merges that fit, of the runs
			// it does not take: a fold of a few partitions per exit
			// lasts many exits, whose own runs must not pile up. The
			// step and the merges share the budget: a merge due that
			// fits alone but not beside the step is this exit's, and
			// the step the next one's (at 100,000 sessions a step's
			// 14 KB and a merge's 19 KB were 33 KB on top of the turn's
			// commits). The step is charged what its partitions hold
			// once written, not what they were estimated to.
			stepped = true
			step := s.foldStepSize(c)
			if whole {
				continue
			}
			if n := runEntries(runsToMerge(notMerging(c))); n > 0 && n <= budget && n+step > budget {
				continue
			}
			wrote, err := s.stepFold(ctx, c)
			if err != nil {
				return err
			}
			budget -= wrote
			continue
		}
		if c.Merge != nil && batch {
			if err := s.mergeRuns(ctx, merging(c)); err != nil {
				return err
			}
			continue
		}
		pages := runsToMerge(notMerging(c))
		n := runEntries(pages)
		switch {
		case len(pages) > 0 && (batch || n <= budget):
			if err := s.mergeRuns(ctx, pages); err != nil {
				return err
			}
			budget -= n
		case budget <= 0 || c.Merge != nil && foldTakes(c, c.Merge):
			// A merge whose runs the fold under way takes waits for the
			// fold, which retires them (a fold that starts drops the
			// merge: nextCommit; one an older panto started may not).
			return nil
		case c.Merge != nil:
			return s.stepMerge(ctx, c, nil, budget, budget < s.mergeBudget)
		case len(pages) > 0:
			// During a fold too: the pages are of runs it does not take
			// (notMerging), and a fold of a partition per exit lasts
			// thousands of exits, whose runs of 64 entries would else
			// pile up for every resolve to read a page of each.
			return s.stepMerge(ctx, c, pages, budget, budget < s.mergeBudget)
		default:
			return nil
		}
	}
	return nil
}

// foldTakes reports whether c's fold under way takes a run merge m
// merges or merges into.
func foldTakes(c *manifest.IndexShard, m *manifest.RunMerge) bool {
	if c.Fold == nil || m == nil {
		return false
	}
	return slices.Contains(c.Fold.From, m.Into) || slices.ContainsFunc(m.From, func(run int64) bool { return slices.Contains(c.Fold.From, run) })
}

// exitBudget is the entries an agent's exit may rewrite merging and
// folding runs: the merge budget, less the dir filter its turn's commits
// carry (dirFilterEntries) when the newest commit has one.
func (s *Store) exitBudget() int {
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	if c := s.ilog.last; c != nil && c.DirFilter != nil {
		return s.mergeBudget - dirFilterEntries
	}
	return s.mergeBudget
}

// dirFilterEntries is what the dir filter costs an exit's budget, in
// entries of about 290 bytes (runMergeBudget): about 690 bytes in each
// of a turn's commits, up to three of them (lastCommits). At 100,000
// sessions the costliest turn of a fold sent 29.9 KB beyond its
// segments without one.
const dirFilterEntries = 7

// wholeCommitEntries is what a commit stored whole costs an exit's
// budget, in entries of about 290 bytes (runMergeBudget): the recent
// view of 64 sessions, 11 to 12 KB at 100,000 sessions in 20 projects.
const wholeCommitEntries = 40

// lastCommits is how many of a Store's last commits are its exit's turn
// (takeWholeStored): a one-turn panto's two, its prompt's and its
// Close's (which carries its answer's checkpoint, commitFoldingMine), or
// three when the answer's checkpoint went before Close; an interactive
// session's last turn's and its Close's. Not every commit since Open: a session of many turns
// stores one whole every sixteen, and would never take a fold's step.
const lastCommits = 3

// takeWholeStored reports whether this Store stored one of its last
// lastCommits commits whole, and forgets them.
func (s *Store) takeWholeStored() bool {
	whole := s.storedWholeLately()
	s.ilog.mu.Lock()
	s.ilog.lastWhole = nil
	s.ilog.mu.Unlock()
	return whole
}

// storedWholeLately reports whether this Store stored one of its last
// lastCommits commits whole.
func (s *Store) storedWholeLately() bool {
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	return slices.Contains(s.ilog.lastWhole, true)
}

// nextCommitWhole reports whether the next commit this Store would write
// is one stored whole (its number a multiple of logFullEvery), unless
// another writer takes that number first.
func (s *Store) nextCommitWhole() bool {
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	return s.ilog.known && (s.ilog.n+1)%logFullEvery == 0
}

// runEntries is how many entries pages hold.
func runEntries(pages []manifest.RunPage) int {
	n := 0
	for _, p := range pages {
		n += p.Sessions
	}
	return n
}

// merging is the pages of c's merge under way: the runs it merges and the
// run it merges them into.
func merging(c *manifest.IndexShard) []manifest.RunPage {
	var pages []manifest.RunPage
	for _, p := range c.Runs {
		if c.Merge != nil && (p.Commit == c.Merge.Into || slices.Contains(c.Merge.From, p.Commit)) {
			pages = append(pages, p)
		}
	}
	return pages
}

// notMerging is the pages of c that neither its merge under way nor its
// fold under way takes.
func notMerging(c *manifest.IndexShard) []manifest.RunPage {
	if c.Merge == nil && c.Fold == nil {
		return c.Runs
	}
	var pages []manifest.RunPage
	for _, p := range c.Runs {
		merging := c.Merge != nil && (p.Commit == c.Merge.Into || slices.Contains(c.Merge.From, p.Commit))
		folding := c.Fold != nil && slices.Contains(c.Fold.From, p.Commit)
		if !merging && !folding {
			pages = append(pages, p)
		}
	}
	return pages
}

// stepMerge does one step of c's merge under way, or, when start names
// pages, of a new merge of their runs: the next partitions whose entries
// in the runs merged come to about budget (one partition at least, the
// entries of a page spread evenly over the partitions it covers) are
// read and written as pages of the run merged into; the commit names
// them, retires the pages merged whole, and says where the merge is.
// The last step retires what is left of the runs merged. So an agent's
// Close rewrites a bounded part of a big merge, and a reader finds each
// entry in the run merged into, or in a page not yet retired. spent:
// the exit wrote some of its budget already (a fold's step, a merge),
// so a first partition that holds more than budget is the next exit's.
func (s *Store) stepMerge(ctx context.Context, c *manifest.IndexShard, start []manifest.RunPage, budget int, spent bool) error {
	s.runs.fold.Lock()
	defer s.runs.fold.Unlock()
	from := c.Merge
	var runs []int64
	var into int64 // 0: the new merge's, numbered by its first commit
	next := s.shardNames()[0]
	if from != nil {
		runs, into, next = from.From, from.Into, from.Next
	} else {
		for _, p := range start {
			if !slices.Contains(runs, p.Commit) {
				runs = append(runs, p.Commit)
			}
		}
		slices.Sort(runs)
	}
	var sources []manifest.RunPage
	for _, p := range c.Runs {
		if slices.Contains(runs, p.Commit) {
			sources = append(sources, p)
		}
	}
	names := s.shardNames()
	first := partitionIndex(names, next)
	if first < 0 || len(sources) == 0 {
		return nil // nothing left to merge: the next commit drops the merge
	}
	// The partitions of this step: from next on, while the entries they
	// are estimated to hold fit the budget.
	estimate := func(name string) float64 {
		n := 0.0
		for _, p := range sources {
			if p.Covers(name) {
				n += float64(p.Sessions) / float64(coveredCount(p, names))
			}
		}
		return n
	}
	if spent && estimate(names[first]) > float64(budget) {
		return nil
	}
	end, sum := first, 0.0
	for end < len(names) {
		n := estimate(names[end])
		if end > first && sum+n > float64(budget) {
			break
		}
		sum += n
		end++
	}
	step := names[first:end]
	var read []manifest.RunPage
	for _, p := range sources {
		if overlaps(p, step[0], step[len(step)-1]) {
			read = append(read, p)
		}
	}
	docs, damaged, err := s.readRunPages(ctx, read)
	if err != nil || len(damaged) > 0 {
		return errors.Join(err, s.runDamage(damaged)) // repair's to mend
	}
	// The estimate may be short: the step ends where what the pages
	// hold passes the budget (a partition at least).
	perPartition := map[string]map[string]manifest.IndexEntry{}
	for id, e := range withoutDeleted(c, longestOf(docs)) {
		if name := manifest.PartitionOf(id, len(step[0])); name >= step[0] && name <= step[len(step)-1] {
			if perPartition[name] == nil {
				perPartition[name] = map[string]manifest.IndexEntry{}
			}
			perPartition[name][id] = e
		}
	}
	entries := map[string]manifest.IndexEntry{}
	for i, name := range step {
		if (i > 0 || spent) && len(entries)+len(perPartition[name]) > budget {
			end = first + i
			break
		}
		maps.Copy(entries, perPartition[name])
	}
	if end == first {
		return nil // spent: not even the first partition fits what is left
	}
	var added []manifest.RunPage
	if len(entries) > 0 {
		if added, err = s.writeRun(ctx, entries); err != nil {
			return fmt.Errorf("merge the index runs: %w", err)
		}
		for i := range added {
			added[i].Commit = into // 0 for a new merge: its commit's number
		}
	}
	to := &manifest.RunMerge{Into: into, From: runs}
	var retired []manifest.RunPage
	if end == len(names) {
		to, retired = nil, sources
	} else {
		to.Next = names[end]
		for _, p := range sources {
			if manifest.ComparePartitions(p.Last, to.Next) < 0 {
				retired = append(retired, p)
			}
		}
	}
	return s.retirePages(ctx, logChanges{pages: added, merge: &mergeStep{from: from, to: to}, read: pageKeys(read), width: len(names[0]), discard: !s.deferIndex}, retired)
}

// partitionIndex is the index in names of the first partition not
// before next, which may be of another width (a fold or merge under way
// when the index widened: widen.go); -1 when none is.
func partitionIndex(names []string, next string) int {
	return slices.IndexFunc(names, func(name string) bool { return manifest.ComparePartitions(name, next) >= 0 })
}

// overlaps reports whether page p may hold sessions of the partitions
// first through last.
func overlaps(p manifest.RunPage, first, last string) bool {
	return manifest.ComparePartitions(p.First, last) <= 0 && manifest.ComparePartitions(p.Last, first) >= 0
}

// coveredCount is how many of names page p covers (at least 1).
func coveredCount(p manifest.RunPage, names []string) int {
	n := 0
	for _, name := range names {
		if p.Covers(name) {
			n++
		}
	}
	return max(n, 1)
}

// foldStepEntries is about how many entries one step of a fold by an
// agent writes to the partitions (stepFold): whole partitions, one at
// least, as many as hold about that many entries of the index (its
// count, IndexShard.Indexed). At 100,000 sessions one partition of
// three characters (24 entries, 6.4 KB at the median, 10.4 KB at the
// most); at 10,000 one of two (39 entries, about 10 KB); at 1,000,
// eight; before the index was counted, one. Two partitions at 100,000
// (64 entries) sent up to 29 KB beside a turn's 13 KB of commits and
// head: a fold now takes 4,096 steps there (about 6,000 exits, since
// an exit with a commit stored whole takes none), while merges of the
// runs it does not take go on in steps (runsDue).
const foldStepEntries = 32

// foldStepWidth is how many partitions a step of a fold writes: those
// that hold about foldStepEntries entries of the index (by its count,
// c.Indexed), one at least, one alone before the index was counted.
func (s *Store) foldStepWidth(c *manifest.IndexShard) int {
	if c.Indexed <= 0 {
		return 1
	}
	return max(1, foldStepEntries*len(s.shardNames())/int(c.Indexed))
}

// foldStepSize is about how many entries a step of a fold writes (the
// share of the index its partitions hold), taken as foldStepEntries
// before the index was counted.
func (s *Store) foldStepSize(c *manifest.IndexShard) int {
	if c.Indexed <= 0 {
		return foldStepEntries
	}
	return int(c.Indexed) * s.foldStepWidth(c) / len(s.shardNames())
}

// stepFold does one step of c's fold under way, or starts one of every
// run c names: the next partitions, from the fold's Next on, that hold
// about foldStepEntries entries of the index (one at least) are written
// with the entries the runs folded hold of them; the commit retires the
// pages whose partitions are all written now and says where the fold
// is; the last step retires what is left of the runs. Partitions no
// page of the runs covers are passed over. So an agent's Close writes a
// few partitions, not a sixteenth of the index (1.3 MB at 100,000
// sessions), and a reader finds each entry in its partition or in a
// page not yet retired. It returns how many entries the partitions it
// wrote hold.
func (s *Store) stepFold(ctx context.Context, c *manifest.IndexShard) (int, error) {
	plan, ok := s.planFoldStep(c)
	if !ok {
		return 0, nil // nothing left to fold: the next commit drops the fold
	}
	if len(plan.pages) == 0 {
		// Only the retirement of what is left: nothing to write.
		s.runs.fold.Lock()
		defer s.runs.fold.Unlock()
		return 0, s.retirePages(ctx, logChanges{fold: plan.step, width: plan.width, discard: true}, plan.retired)
	}
	if err := s.foldPlanned(ctx, plan); err != nil {
		return 0, err
	}
	return s.partitionEntries(plan.within), nil
}

// planFoldStep is the next step of c's fold under way, or the first of
// a fold of every run c names (stepFold): the pages to read, the
// partitions to write, the pages to retire. false: nothing left to fold.
func (s *Store) planFoldStep(c *manifest.IndexShard) (foldPlan, bool) {
	from := c.Fold
	names := s.shardNames()
	var runs []int64
	next := names[0]
	if from != nil {
		runs, next = from.From, from.Next
	} else {
		for _, p := range c.Runs {
			if !slices.Contains(runs, p.Commit) {
				runs = append(runs, p.Commit)
			}
		}
		slices.Sort(runs)
	}
	var sources []manifest.RunPage
	for _, p := range c.Runs {
		if slices.Contains(runs, p.Commit) {
			sources = append(sources, p)
		}
	}
	first := partitionIndex(names, next)
	if first < 0 || len(sources) == 0 {
		return foldPlan{}, false
	}
	covered := func(name string) bool {
		return slices.ContainsFunc(sources, func(p manifest.RunPage) bool { return p.Covers(name) })
	}
	for first < len(names) && !covered(names[first]) {
		first++
	}
	end := min(first+s.foldStepWidth(c), len(names))
	var read, retired []manifest.RunPage
	if first < len(names) {
		for _, p := range sources {
			if overlaps(p, names[first], names[end-1]) {
				read = append(read, p)
			}
		}
	}
	to := &manifest.RunFold{From: runs}
	if end == len(names) {
		to, retired = nil, sources
	} else {
		to.Next = names[end]
		for _, p := range sources {
			if manifest.ComparePartitions(p.Last, to.Next) < 0 {
				retired = append(retired, p)
			}
		}
	}
	plan := foldPlan{pages: read, retired: retired, step: &foldChange{from: from, to: to}, width: len(names[0])}
	if first < len(names) {
		plan.within = names[first:end]
	}
	return plan, true
}

// runTier is the size tier of a run of n entries: floor(log4 n), so a
// tier's runs are within a factor of runMergeFactor of each other.
func runTier(n int) int {
	t := 0
	for n >= runMergeFactor {
		n /= runMergeFactor
		t++
	}
	return t
}

// runsToMerge is the pages of the runs a merge takes (nil: none due),
// size-tiered as an LSM tree's compaction (Cassandra's STCS, Lucene's
// merge policy): the lowest tier that holds runMergeFactor runs is
// merged with every run of the tiers below it, into a run of (about)
// the next tier. So an entry is rewritten once per tier it climbs,
// log4 of the runs' size, and a one-session run (an agent's exit,
// foldMine) never rewrites a big one; the runs number at most
// runMergeFactor-1 per tier.
func runsToMerge(pages []manifest.RunPage) []manifest.RunPage {
	sizes := map[int64]int{} // run (its commit) → entries
	for _, p := range pages {
		sizes[p.Commit] += p.Sessions
	}
	perTier := map[int]int{}
	for _, n := range sizes {
		perTier[runTier(n)]++
	}
	due := -1
	for _, t := range slices.Sorted(maps.Keys(perTier)) {
		if perTier[t] >= runMergeFactor {
			due = t
			break
		}
	}
	if due < 0 {
		return nil
	}
	var merged []manifest.RunPage
	for _, p := range pages {
		if runTier(sizes[p.Commit]) <= due {
			merged = append(merged, p)
		}
	}
	return merged
}

// longestOf is the entries of docs, the longest of a session in several.
func longestOf(docs []*manifest.IndexShard) map[string]manifest.IndexEntry {
	entries := map[string]manifest.IndexEntry{}
	for _, doc := range docs {
		if doc == nil {
			continue
		}
		for id, e := range doc.Sessions {
			if old, ok := entries[id]; !ok || old.Length < e.Length {
				entries[id] = e
			}
		}
	}
	return entries
}

// foldRuns writes the entries of pages to their partitions, then commits
// the pages' retirement, then deletes them. salvage (repair, a
// deletion) folds what can be read and retires the rest too: pages that
// do not decode (repair reads their sessions instead) and pages gone.
func (s *Store) foldRuns(ctx context.Context, pages []manifest.RunPage, salvage bool) error {
	if len(pages) == 0 {
		return nil
	}
	return s.foldPlanned(ctx, foldPlan{pages: pages, retired: pages, salvage: salvage})
}

// foldPlan is a fold of runs: the pages read, the partitions written
// (within; nil: every one the pages' entries fall in), the pages the
// commit retires (retired: the pages read, unless the fold is a step of
// one in steps, step, which retires those it wrote the last partition
// of).
type foldPlan struct {
	pages, retired []manifest.RunPage
	within         []string
	salvage        bool
	// rebuilds: the fold of a repair (foldAllRuns), which rebuilds the
	// damaged partitions from the sessions after it: it writes the
	// others and drops what the runs hold of those.
	rebuilds bool
	step     *foldChange
	// width is that of the partitions' names when the plan was made (0:
	// as they are when written), which its commit checks (widen.go).
	width int
}

// foldPlanned does plan (foldRuns).
func (s *Store) foldPlanned(ctx context.Context, plan foldPlan) error {
	buried, err := s.foldRunsLocked(ctx, plan)
	// A deletion queued meanwhile, which a partition's write took with
	// the fold's entries, purges after the fold (purge.go).
	if len(buried) > 0 {
		err = errors.Join(err, s.purgeDeleted(ctx, buried))
	}
	return err
}

// foldRunsLocked is foldRuns under the fold lock; it returns the
// partitions whose writes buried a session.
func (s *Store) foldRunsLocked(ctx context.Context, plan foldPlan) (buried []string, err error) {
	s.runs.fold.Lock()
	defer s.runs.fold.Unlock()
	pages, salvage := plan.pages, plan.salvage
	docs := make([]*manifest.IndexShard, len(pages))
	var mu sync.Mutex
	var errs []error
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, p := range pages {
		g.Go(func() error {
			doc, err := s.readRunPage(gctx, p)
			switch {
			case err == nil:
				docs[i] = doc
			case errors.Is(err, errRunGone):
				// Retired by another fold, which wrote its entries.
			case salvage && errors.Is(err, ErrCorrupt):
			default:
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fold the index runs: %w", err)
	}
	entries := longestOf(docs)
	if plan.within != nil {
		for id := range entries {
			if !slices.Contains(plan.within, s.shardOf(id)) {
				delete(entries, id)
			}
		}
	}
	// What the runs hold, the log's readers have: the partitions' writes
	// do not list it again (queueLog).
	s.runs.mu.Lock()
	s.runs.folding = map[string]int64{}
	for id, e := range entries {
		s.runs.folding[id] = e.Length
	}
	s.runs.mu.Unlock()
	names := map[string]bool{}
	for _, e := range entries {
		names[s.queueIndex(e)] = true
	}
	var damaged []string // not written: repair rebuilds them
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(16)
	for name := range names {
		g.Go(func() error {
			b, err := s.writeQueuedLocked(gctx, name)
			if plan.rebuilds && errors.Is(err, ErrCorrupt) {
				// A damaged partition: the repair rebuilds it from
				// the sessions next, which brings back what the runs
				// held of it, so its entries are dropped and the
				// pages retired with the rest, as a damaged page's
				// are.
				s.dropQueued(name)
				mu.Lock()
				damaged = append(damaged, name)
				mu.Unlock()
				return nil
			}
			if b {
				mu.Lock()
				buried = append(buried, name)
				mu.Unlock()
			}
			return err
		})
	}
	err = g.Wait()
	s.runs.mu.Lock()
	s.runs.folding = nil
	s.runs.mu.Unlock()
	if err != nil {
		return buried, fmt.Errorf("fold the index runs: %w", err)
	}
	written := slices.DeleteFunc(slices.Collect(maps.Keys(names)), func(name string) bool { return slices.Contains(damaged, name) })
	width := plan.width
	if w := narrowest(written); width == 0 || w > 0 && w < width {
		width = w
	}
	// An agent's step leaves the pages it retires to the next writer's
	// sweep; a fold at once (a sync, a deletion's, repair's) deletes them.
	return buried, s.retirePages(ctx, logChanges{indexed: s.estimateIndexed(written), fold: plan.step, width: width, discard: plan.step != nil && !s.deferIndex}, plan.retired)
}

// estimateIndexed is how many sessions the index holds, estimated from
// the partitions written just now (a fold's step: one at least), when
// this Store holds no catalog to count them: the count agents fold by
// (IndexShard.Indexed), and size a fold's step by. 0 when none was
// written.
// Only partitions that took an entry are written, so a sparse index
// (fewer sessions than partitions) is counted high; the limit it sets
// is then below runFoldMin, which bounds it anyway.
//
// A step of one or two partitions is a small sample (a partition of 24
// entries at 100,000 sessions varies by a fifth), and the count sizes
// the next steps: it moves the count the commit carries by the share of
// indexSample partitions it read, as an average over the last few steps.
func (s *Store) estimateIndexed(written []string) int64 {
	if s.catalogCount() > 0 || len(written) == 0 {
		return 0
	}
	sample := int64(s.partitionEntries(written)) * int64(len(s.shardNames())) / int64(len(written))
	s.ilog.mu.Lock()
	var counted int64
	if s.ilog.last != nil {
		counted = s.ilog.last.Indexed
	}
	s.ilog.mu.Unlock()
	if counted <= 0 || len(written) >= indexSample {
		return sample
	}
	return max(1, counted+(sample-counted)*int64(len(written))/indexSample)
}

// indexSample is how many partitions a count of the index from them
// replaces the count before it whole (estimateIndexed).
const indexSample = 16

// partitionEntries is how many entries this Store's readings of the
// partitions names hold (those it read or wrote).
func (s *Store) partitionEntries(names []string) int {
	n := 0
	for _, name := range names {
		st := s.shardState(name)
		st.mu.Lock()
		if st.view.shard != nil {
			n += len(st.view.shard.Sessions)
		}
		st.mu.Unlock()
	}
	return n
}

// mergeRuns writes the entries of pages as one new run, commits it in
// their place, and deletes them.
func (s *Store) mergeRuns(ctx context.Context, pages []manifest.RunPage) error {
	s.runs.fold.Lock()
	defer s.runs.fold.Unlock()
	docs, damaged, err := s.readRunPages(ctx, pages)
	if err != nil || len(damaged) > 0 {
		return errors.Join(err, s.runDamage(damaged)) // repair's to mend
	}
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	merged, err := s.writeRun(ctx, withoutDeleted(c, longestOf(docs)))
	if err != nil {
		return fmt.Errorf("merge the index runs: %w", err)
	}
	return s.retirePages(ctx, logChanges{pages: merged, read: pageKeys(pages), discard: !s.deferIndex}, pages)
}

// pageKeys is the keys of pages.
func pageKeys(pages []manifest.RunPage) []string {
	keys := make([]string, len(pages))
	for i, p := range pages {
		keys[i] = p.Key
	}
	return keys
}

// withoutDeleted is entries without the sessions commit c says are
// deleted (its recent tombstones, and those a purge has still to take
// out of the runs): a merge does not copy a deleted session's summary
// into a new run.
func withoutDeleted(c *manifest.IndexShard, entries map[string]manifest.IndexEntry) map[string]manifest.IndexEntry {
	if c == nil {
		return entries
	}
	for id := range c.Tombstones {
		delete(entries, id)
	}
	for _, id := range c.Unpurged {
		delete(entries, id)
	}
	return entries
}

// retirePages commits ch (a merge's or a fold's: the pages added in
// their place, the index's size a fold estimated, a step of a merge) with
// the retirement of pages, then deletes those the newest commit does not
// name (a merge's step that another writer took first retires none), and
// the pages ch added that it does not name (a void step's: they may hold
// a summary that a purge took out since). An agent's merge or step
// (ch.discard) lists the pages it retires in the commit's Discarded
// instead, for the next writer of a run to delete beside its own writes
// (sweepDiscarded): its exit waits for no deletion.
func (s *Store) retirePages(ctx context.Context, ch logChanges, pages []manifest.RunPage) error {
	ch.retired = map[string]bool{}
	for _, p := range pages {
		ch.retired[p.Key] = true
	}
	s.ilog.wmu.Lock()
	err := s.commitLog(ctx, ch, nil, false)
	s.ilog.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("retire the index runs: %w", err)
	}
	s.ilog.mu.Lock()
	last := s.ilog.last
	s.ilog.mu.Unlock()
	if ch.discard {
		// Retired, they wait in Discarded for the next writer of a run
		// (sweepDiscarded); named still (a void commit), they stay.
		pages = nil
	}
	return s.deleteRetired(ctx, last, append(slices.Clone(pages), ch.pages...), ch.purge != nil)
}

// deleteRetired deletes the pages of pages that commit last (this
// Store's newest) does not name: those a commit retired, and those a
// voided one added. A purge's (purge) are noted, so that it does not
// delete them again from a commit's Discarded.
func (s *Store) deleteRetired(ctx context.Context, last *manifest.IndexShard, pages []manifest.RunPage, purge bool) error {
	s.forgetPages(last)
	var keys []string
	for _, p := range pages {
		if last == nil || !slices.ContainsFunc(last.Runs, func(named manifest.RunPage) bool { return named.Key == p.Key }) {
			keys = append(keys, p.Key)
		}
	}
	if err := s.b.deleteKeys(ctx, keys); err != nil {
		return fmt.Errorf("delete %d index run pages: %w", len(keys), err)
	}
	if purge {
		s.runs.mu.Lock()
		if s.runs.deleted == nil {
			s.runs.deleted = map[string]bool{}
		}
		for _, k := range keys {
			s.runs.deleted[k] = true
		}
		s.runs.mu.Unlock()
	}
	return nil
}

// notFolding filters out of entries the ones a fold of runs under way
// writes to their partitions as the runs hold them: the index log's
// readers have those already.
func (s *Store) notFolding(entries map[string]manifest.IndexEntry) map[string]manifest.IndexEntry {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	if len(s.runs.folding) == 0 {
		return entries
	}
	out := map[string]manifest.IndexEntry{}
	for id, e := range entries {
		if n, ok := s.runs.folding[id]; !ok || n != e.Length {
			out[id] = e
		}
	}
	return out
}

// foldAllRuns folds every page of the newest commit (repair), salvaging
// what can be read, into the partitions that are not damaged (the
// repair rebuilds those from the sessions).
func (s *Store) foldAllRuns(ctx context.Context) error {
	if !s.unfoldedIndex() {
		return nil
	}
	c, err := s.newestReadable(ctx)
	if err != nil && !errors.Is(err, ErrIndexDamaged) {
		return err
	}
	if c == nil {
		return nil
	}
	if len(c.Runs) == 0 {
		return nil
	}
	return s.foldPlanned(ctx, foldPlan{pages: c.Runs, retired: c.Runs, salvage: true, rebuilds: true})
}

// unnamedPageAge is how old a run page that no commit names must be
// before a sync or repair deletes it: its write's commit failed, or its
// answer was lost and the commit went to another number (commitRun
// leaves such pages, since the commit may have been made). A page
// younger than that may belong to a write whose commit is on its way.
const unnamedPageAge = 24 * time.Hour

// removeUnnamedPages deletes the run pages older than unnamedPageAge
// that the newest commit does not name (repair, after foldAllRuns): no
// reader reads them, but they hold summaries and cost storage. It
// returns their keys. Nothing is deleted when the newest commit cannot
// be read, which would make every page look unnamed.
func (s *Store) removeUnnamedPages(ctx context.Context) ([]string, error) {
	if !s.unfoldedIndex() {
		return nil, nil
	}
	objects, _, err := s.b.list(ctx, manifest.RunKeyPrefix, "")
	if err != nil || len(objects) == 0 {
		return nil, err
	}
	_, c, _, err := s.readNewestCommit(ctx)
	if err != nil {
		return nil, err
	}
	return s.removePagesUnnamedBy(ctx, objects, c)
}

// sweepUnnamedPages is removeUnnamedPages for a full reading of the
// catalog (a sync's once a day, with the index cache), beside it: c is
// the newest commit, which that reading read whole (nil: the log has
// none). So a page left by a write cut short, which may hold the
// summary of a session deleted since, is deleted within a day or two of
// daily syncs, not only when someone runs repair. A pruned or damaged
// log, or a listing refused, leaves them to the next one.
func (s *Store) sweepUnnamedPages(ctx context.Context, c *manifest.IndexShard) {
	if !s.unfoldedIndex() || s.WriteRefused() != nil {
		return
	}
	objects, _, err := s.b.list(ctx, manifest.RunKeyPrefix, "")
	if err != nil || len(objects) == 0 {
		return
	}
	_, _ = s.removePagesUnnamedBy(ctx, objects, c)
}

// unnamedPages lists the run pages that commit c (the newest: nil,
// none) does not name, whatever their age (CheckIndex's Unnamed).
func (s *Store) unnamedPages(ctx context.Context, c *manifest.IndexShard) ([]string, error) {
	if !s.unfoldedIndex() {
		return nil, nil
	}
	objects, _, err := s.b.list(ctx, manifest.RunKeyPrefix, "")
	if err != nil {
		return nil, fmt.Errorf("list the index run pages: %w", err)
	}
	named := namedPages(c)
	var keys []string
	for _, o := range objects {
		if !named[o.key] {
			keys = append(keys, o.key)
		}
	}
	return keys, nil
}

// namedPages is the set of the run pages commit c (nil: none) names.
func namedPages(c *manifest.IndexShard) map[string]bool {
	named := map[string]bool{}
	if c != nil {
		for _, p := range c.Runs {
			named[p.Key] = true
		}
	}
	return named
}

// removePagesUnnamedBy deletes the run pages of objects (a listing of
// them) older than unnamedPageAge that commit c (nil: none) does not
// name, and returns their keys.
func (s *Store) removePagesUnnamedBy(ctx context.Context, objects []listed, c *manifest.IndexShard) ([]string, error) {
	named := namedPages(c)
	var removed []string
	for _, o := range objects {
		if named[o.key] || o.modified.IsZero() || s.now().Sub(o.modified) < unnamedPageAge {
			continue
		}
		if err := s.b.delete(ctx, o.key); err != nil && !errors.Is(err, errNotFound) {
			return removed, fmt.Errorf("delete unnamed index run page %s: %w", s.objectURL(o.key), err)
		}
		removed = append(removed, o.key)
	}
	return removed, nil
}
