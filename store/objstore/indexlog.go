package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// The index log (format 4, docs/DESIGN.md §P3): after a write of
// partitions, a commit, index/log/<n:020d>.json.zst, created with
// If-None-Match: * at the number after the newest one its writer knows.
// It holds what the write changed (Sessions, Tombstones) and the newest
// manifest.RecentSize sessions of the whole index (Recent), folded from
// the commit before it. A 412 means another writer took the number: the
// writer reads that commit, folds its own changes into it, and tries the
// next number (the log of Delta Lake and Iceberg: put-if-absent of the
// next number). So the newest commit alone answers `panto -c` and the
// first page of `panto sessions`, whatever the number of sessions, and
// no writer replaces an object every other writer replaces too.
//
// Readers find the newest commit with one LIST of index/log/ (a page of
// keys: the log is pruned to its last logKeep commits), or, with
// credentials that may not list, from the hint index/log-head.json.zst
// (the number of the last commit that pruned) by probing forward.

const (
	// logKeep: each logKeep-th commit deletes the commits more than
	// logKeep before it, and writes the hint. A reader reads the newest
	// commit alone, and a reader that held one logKeep commits back reads
	// the partitions instead of the commits since.
	logKeep = 64
	// logProbeWindow is how many commit numbers a reader that may not
	// list asks for at once.
	logProbeWindow = 16
	// logTombstoneGrace and logTombstones: how long, and how many of,
	// the recent deletions each commit carries on from the one before.
	logTombstoneGrace = time.Hour
	logTombstones     = 256
	// logTrust is how long a writer takes an empty log it read to be
	// empty still (commit 1 may be pruned since).
	logTrust = time.Second
)

func logKey(n int64) string { return fmt.Sprintf("index/log/%020d.json.zst", n) }

const logHeadKey = "index/log-head.json.zst"

// logState is this Store's reading of the index log, and the changes
// waiting for its next commit.
type logState struct {
	wmu sync.Mutex // one commit writer at a time (group commit)
	mu  sync.Mutex // guards the fields below
	// n is the newest commit known, last its content (nil when n is 0:
	// no commit), etag its ETag; known: n was read or written.
	n     int64
	last  *manifest.IndexShard
	etag  string
	known bool
	// fresh is when the reading was last checked against the bucket;
	// snapshot: until then it serves as it is (WithOpenSnapshot).
	fresh, snapshot time.Time
	pending         map[string]manifest.IndexEntry
	buried          map[string]manifest.Tombstone
	// ahead is the purge of run pages a deletion queued with its burial
	// (queueDeletion), for the commit that takes the burial.
	ahead *purgeAhead
	// pendingWidth is the narrowest width of the partitions that took
	// the pending entries (queueLog).
	pendingWidth int
	// unpurgedAt: the commits before it may hold the summary of a
	// session deleted since (the newest commit of a deletion this Store
	// made, or found cut short); purgedBelow: every commit before it is
	// deleted (the last purgeLog that succeeded). A purge may take a
	// session out of Unpurged once purgedBelow reaches unpurgedAt
	// (logPurged). Numbers, not a flag, since the deletions of one rm
	// commit and purge the log at once.
	unpurgedAt, purgedBelow int64
	// unfolded are entries for the next commit's Unfolded set, which no
	// partition holds (unfolded.go); mine, the sessions this Store
	// committed so, which its Close folds.
	unfolded map[string]manifest.IndexEntry
	mine     map[string]bool
	// bases are the whole commits this Store read or wrote, by number,
	// which the commits after them are stored against (logbase.go).
	bases map[int64]*baseFetch
	// kept are the commits Open read besides the newest (keepCommit),
	// and, once keepAdopted (the catalog was read), the last logKeep this
	// Store adopted (adoptCommit).
	kept        map[int64]keptCommit
	keepAdopted bool
	// lastWhole says of this Store's last few commits (lastCommits)
	// which it stored whole, until its index upkeep takes them
	// (runsDue): one costs the exit a share of its budget.
	lastWhole []bool
	// prefetching is closed when Open's reading of the log ends.
	prefetching chan struct{}
	// stored is Open's reading of the newest commit kept aside, not yet
	// whole, by a Store opened WithPageAhead (pageahead.go); settleMu:
	// one settleStored at a time.
	stored   *storedReading
	settleMu sync.Mutex
}

// queueDeletion queues deletion t for the next commit, with the purge
// of run pages a made ahead for it (nil: none), so that one commit takes
// both. A purge queued already takes the place: one purge takes both
// deletions' burials after the commit (purgeDeleted), and a's pages,
// which no commit will name, are deleted.
func (s *Store) queueDeletion(ctx context.Context, t manifest.Tombstone, a *purgeAhead) {
	lg := &s.ilog
	lg.mu.Lock()
	s.queueLogLocked(nil, map[string]manifest.Tombstone{t.ID: t}, 0)
	if a != nil && lg.ahead == nil {
		lg.ahead, a = a, nil
	}
	lg.mu.Unlock()
	s.dropAhead(ctx, a)
}

// queueLog queues the changes a write of partitions applied for the
// next commit; width is the width of those partitions' names (0: none
// written), which the commit checks against the index's (widen.go).
func (s *Store) queueLog(entries map[string]manifest.IndexEntry, buried map[string]manifest.Tombstone, width int) {
	entries = s.notFolding(entries)
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	s.queueLogLocked(entries, buried, width)
}

// queueLogLocked is queueLog, entries filtered already. Callers hold
// s.ilog.mu.
func (s *Store) queueLogLocked(entries map[string]manifest.IndexEntry, buried map[string]manifest.Tombstone, width int) {
	if len(entries) == 0 && len(buried) == 0 {
		return
	}
	lg := &s.ilog
	if len(entries) > 0 && width > 0 && (lg.pendingWidth == 0 || width < lg.pendingWidth) {
		lg.pendingWidth = width
	}
	if lg.pending == nil {
		lg.pending = map[string]manifest.IndexEntry{}
	}
	for id, e := range entries {
		if old, ok := lg.pending[id]; !ok || old.Length <= e.Length {
			lg.pending[id] = e
		}
	}
	for id, t := range buried {
		if lg.buried == nil {
			lg.buried = map[string]manifest.Tombstone{}
		}
		lg.buried[id] = t
		delete(lg.pending, id)
	}
}

// writeLog writes the queued changes as the next commit. Changes queued
// while another writer of this Store commits go in its commit or the
// next. A failure leaves them queued for the next writer; the partitions
// already hold them, so only the recent sessions lag meanwhile.
func (s *Store) writeLog(ctx context.Context) error { return s.writeLogBeside(ctx, nil) }

// writeLogBeside is writeLog, then beside (when not nil) once the commit
// is made: alongside the deletion of the commits before it when the
// commit buries sessions, so that a deletion's burial in its partition
// (finishDelete) costs no round trip of its own. beside runs also when
// there was nothing to commit, and not when the commit failed.
func (s *Store) writeLogBeside(ctx context.Context, beside func(context.Context) error) error {
	if beside == nil {
		beside = func(context.Context) error { return nil }
	}
	if !s.indexLog() {
		return beside(ctx)
	}
	lg := &s.ilog
	lg.wmu.Lock()
	lg.mu.Lock()
	ch := lg.takeQueuedLocked()
	lg.mu.Unlock()
	if len(ch.folded) == 0 && len(ch.buried) == 0 && len(ch.unfolded) == 0 {
		// What the caller queued went out with the commit of a writer
		// that held the lock before (a commit that failed puts its
		// changes back, and they would be here): beside goes without
		// the lock, so that the deletions of an rm of many sessions,
		// whose burials one commit took, bury them in their partitions
		// at once, not one after another behind the lock.
		lg.wmu.Unlock()
		return beside(ctx)
	}
	// A commit that buries sessions is followed by the deletion of the
	// commits before it: their listing goes out beside the commit.
	var before <-chan logListing
	if len(ch.buried) > 0 {
		before = s.listLogBefore(ctx, slices.Collect(maps.Keys(ch.buried)))
	}
	if err := s.commitLog(ctx, ch, nil, false); err != nil {
		// The burials are queued again; a deletion's purge made ahead is
		// not (the purge after the burial does it), and its pages are
		// left: the commit may have landed with its answer lost, naming
		// them. One no commit names, a sync or repair deletes a day later.
		s.requeueLog(ch)
		lg.wmu.Unlock()
		return fmt.Errorf("write the index log: %w", err)
	}
	buried := ch.buried
	if len(buried) == 0 {
		lg.wmu.Unlock()
		return beside(ctx)
	}
	// The commits before this one may hold a deleted session's summary.
	// Cut short here, the commit's Unpurged has the next writer purge
	// them (purge.go). The lock goes before their deletion: the next
	// commit (another deletion's, in an rm of many) need not wait for
	// it, and each purgeLog deletes what comes before the newest commit
	// it knows.
	lg.mu.Lock()
	lg.unpurgedAt = max(lg.unpurgedAt, lg.n)
	last := lg.last
	lg.mu.Unlock()
	lg.wmu.Unlock()
	besideDone := make(chan error, 2)
	go func() { besideDone <- beside(ctx) }()
	go func() {
		// The pages a deletion's purge ahead retired (or, where it did
		// not hold, wrote), which the commit does not name: deleted with
		// the commits before it, not after a commit of their own.
		if ch.purge == nil {
			besideDone <- nil
			return
		}
		pages := slices.Clone(ch.pages)
		for k := range ch.retired {
			pages = append(pages, manifest.RunPage{Key: k})
		}
		besideDone <- s.deleteRetired(ctx, last, pages, true)
	}()
	below, err := s.purgeLog(ctx, before)
	besideErr := errors.Join(<-besideDone, <-besideDone)
	if err != nil {
		return fmt.Errorf("write the index log: %w", err)
	}
	lg.mu.Lock()
	lg.purgedBelow = max(lg.purgedBelow, below)
	lg.mu.Unlock()
	return besideErr
}

// takeQueuedLocked takes the changes queued for the next commit: the
// entries partitions took, the burials, the entries for the unfolded
// set. Callers hold lg.mu and lg.wmu (the commit's writer).
func (lg *logState) takeQueuedLocked() logChanges {
	ch := logChanges{folded: lg.pending, buried: lg.buried, unfolded: lg.unfolded, width: lg.pendingWidth}
	if lg.ahead != nil {
		lg.ahead.change(&ch)
	}
	lg.pending, lg.buried, lg.unfolded, lg.pendingWidth, lg.ahead = nil, nil, nil, 0, nil
	return ch
}

// requeueLog puts back what takeQueuedLocked took, for a commit that
// failed; what was queued since wins where it is as long.
func (s *Store) requeueLog(ch logChanges) {
	s.queueLog(ch.folded, ch.buried, ch.width)
	s.requeueUnfolded(ch.unfolded)
}

// logListing is a listing of the index log, and format 3's shards that
// may hold the summaries of sessions being deleted, for purgeLog.
type logListing struct {
	commits []listed
	err     error
	shards  []string
}

// listLogBefore lists the index log, and the keys of format 3's shards
// (and, once the index widened, the partitions of two characters) that
// may hold sessions ids, for the purge of the commits before the one its
// caller is about to make (purgeLog): beside that commit, not after it.
// A widened index's 4,096 partitions would make the shards' listing 5
// pages: there the keys that may hold the sessions go blind (widen.go).
func (s *Store) listLogBefore(ctx context.Context, ids []string) <-chan logListing {
	out := make(chan logListing, 1)
	go func() {
		shards := make(chan []string, 1)
		if s.wide() {
			shards <- narrowKeys(ids)
		} else {
			go func() { shards <- s.shardKeys(ctx) }()
		}
		objects, _, err := s.b.list(ctx, "index/log/", "")
		out <- logListing{commits: objects, err: err, shards: <-shards}
	}()
	return out
}

// purgeLog deletes every commit before the newest this Store knows (and
// format 3's shards, and once the index widened the partitions of two
// characters that held the sessions ids): each of them may hold the
// summary of a session deleted since. The commits are found by listing
// (before, sent beside the newest commit), or where the credentials may
// not list, by number (those pruning has not deleted: the last
// 2·logKeep). A listing sent before the commit was made misses the
// commits others made after it went out, up to the one this Store's
// commit follows: those are deleted by number. It returns that newest
// commit's number: every commit before it is deleted.
func (s *Store) purgeLog(ctx context.Context, before <-chan logListing) (int64, error) {
	s.ilog.mu.Lock()
	n := s.ilog.n
	s.ilog.mu.Unlock()
	var l logListing
	select {
	case l = <-before:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	var numbers []int64
	switch {
	case errors.Is(l.err, errForbidden):
		for k := max(n-2*logKeep, 1); k < n; k++ {
			numbers = append(numbers, k)
		}
	case l.err != nil:
		return 0, fmt.Errorf("list the index log: %w", l.err)
	default:
		newest := int64(0)
		for _, o := range l.commits {
			if k := newestListed([]listed{o}); k > 0 && k < n {
				numbers = append(numbers, k)
				newest = max(newest, k)
			}
		}
		for k := max(newest+1, n-2*logKeep, 1); k < n; k++ {
			numbers = append(numbers, k)
		}
	}
	keys := make([]string, len(numbers))
	for i, k := range numbers {
		keys[i] = logKey(k)
	}
	if err := s.b.deleteKeys(ctx, append(keys, l.shards...)); err != nil {
		return 0, fmt.Errorf("delete %d index log commits: %w", len(keys), err)
	}
	return n, nil
}

// logPurged reports whether the commits before the newest of a deletion
// this Store knows of are deleted (unpurgedAt, purgedBelow): false until
// a purgeLog of its own succeeded, since this Store cannot know what a
// deletion of another process left.
func (lg *logState) logPurged() bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.purgedBelow > 0 && lg.purgedBelow >= lg.unpurgedAt
}

// logChanges are what one commit records: entries its writer's
// partitions now hold (folded), entries no partition holds yet
// (unfolded), entries for the recent view that say neither (recent:
// repair's, read from the sessions), and deletions.
type logChanges struct {
	folded, unfolded, recent map[string]manifest.IndexEntry
	buried                   map[string]manifest.Tombstone
	// run is the entries of a bulk write's new run, pages its pages
	// (with a merge's: no entries); retired, the keys of the pages a
	// fold or merge takes out (runs.go).
	run     map[string]manifest.IndexEntry
	pages   []manifest.RunPage
	retired map[string]bool
	// dirHead: the dirs head holds sessions (a rebuild of the heads
	// wrote it), which the commit says (IndexShard.DirHead), and
	// dirFilter the dir filter of them all (IndexShard.DirFilter); a
	// dirFilter also says the rebuild wrote each directory's head
	// (IndexShard.DirKeys).
	dirHead   bool
	dirFilter []byte
	// dirFilterAt, when above 0, is the commit dirFilter was made as
	// of: the commit is written only after that one (else
	// errDirFilterMoved), since what a commit since put in the dirs
	// head may not be in it.
	dirFilterAt int64
	// indexed, when above 0, is how many sessions the writer counted in
	// the index (IndexShard.Indexed); else the commit carries its
	// predecessor's count on.
	indexed int64
	// merge, a step of a merge of runs (runs.go: stepMerge): pages and
	// retired are its, and apply only where the commit before holds the
	// merge as the step found it.
	merge *mergeStep
	// fold, a step of a fold of runs (runs.go: stepFold): retired is
	// its, and applies only where the commit before holds the fold as
	// the step found it.
	fold *foldChange
	// read is the keys of the pages a merge read (runs.go: mergeRuns,
	// stepMerge): a page retired since (a purge replaced it without a
	// deleted session's summary) voids the merge, whose pages may hold
	// that summary: they stay unnamed, and what it meant to retire
	// stays named.
	read []string
	// purge, a purge of the pages covering partitions (purge.go:
	// purgeDeleted): pages and retired are its, and apply, with the
	// sessions it takes out of Unpurged, only where the commit before
	// names the pages covering the partitions that the purge read.
	purge *purgeChange
	// width is the width of the partitions the change read or wrote (0:
	// none): one of two characters committed after the index widened is
	// narrowed first (widen.go). widen: the commit says the index moved
	// to three (widenIndex), after recheck (when not nil) has brought
	// over what writers put in the old partitions, at each try after
	// the first.
	width   int
	widen   bool
	recheck func(context.Context) error
	// discard: the pages retired go to IndexShard.Discarded, for a later
	// writer to delete (an exit's merge, exitmerge.go), not deleted
	// after the commit. swept: pages of Discarded the writer deleted
	// before the commit, which it takes out.
	discard bool
	swept   []string
}

// purgeChange is a purge of deleted sessions' summaries from the run
// pages covering partitions: the keys of the pages it read, the
// sessions of IndexShard.Unpurged it purged, and the pages of
// IndexShard.Discarded it deleted.
type purgeChange struct {
	partitions []string
	read       []string
	ids        []string
	discarded  []string
}

// holds reports whether commit prev names, of the pages covering the
// purge's partitions, exactly those the purge read: else a fold, a merge
// or another purge changed them since, and the purge is void (its pages
// unnamed, its sessions still unpurged) for its writer to do again.
func (p *purgeChange) holds(prev *manifest.IndexShard) bool {
	var named []string
	for _, page := range pagesCovering(prev, p.partitions) {
		named = append(named, page.Key)
	}
	slices.Sort(named)
	return slices.Equal(named, slices.Sorted(slices.Values(p.read)))
}

// foldChange is one step of a fold of runs (manifest.RunFold): the fold
// as the step found it (nil: the step starts it) and as it leaves it
// (nil: done).
type foldChange struct {
	from, to *manifest.RunFold
}

// mergeStep is one step of a merge of runs (manifest.RunMerge): the
// merge as the step found it (nil: the step starts it) and as it leaves
// it (nil: done). A new merge's Into is 0 until its commit numbers it.
type mergeStep struct {
	from, to *manifest.RunMerge
}

// namesAll reports whether commit prev names every page of keys.
func namesAll(prev *manifest.IndexShard, keys []string) bool {
	return !slices.ContainsFunc(keys, func(k string) bool {
		return prev == nil || !slices.ContainsFunc(prev.Runs, func(p manifest.RunPage) bool { return p.Key == k })
	})
}

// sameMerge reports whether a and b are the same merge at the same step.
func sameMerge(a, b *manifest.RunMerge) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Into == b.Into && a.Next == b.Next && slices.Equal(a.From, b.From)
}

// sameFold reports whether a and b are the same fold at the same step.
func sameFold(a, b *manifest.RunFold) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Next == b.Next && slices.Equal(a.From, b.From)
}

// entries is every entry ch records, the longest of a session's.
func (ch logChanges) entries() map[string]manifest.IndexEntry {
	return longest(longest(longest(ch.folded, ch.unfolded), ch.recent), ch.run)
}

// requeueUnfolded puts back entries of a commit that failed, where an
// entry queued since that is at least as long wins.
func (s *Store) requeueUnfolded(entries map[string]manifest.IndexEntry) {
	if len(entries) == 0 {
		return
	}
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.unfolded == nil {
		lg.unfolded = map[string]manifest.IndexEntry{}
	}
	for id, e := range entries {
		if old, ok := lg.unfolded[id]; !ok || old.Length < e.Length {
			lg.unfolded[id] = e
		}
	}
}

// commitLog creates the commit after the newest one with ch, reading
// the commit that took its number after each lost race. drop (nil:
// none), from repair, says which recent and unfolded sessions of the
// commit before are wrong (deleted, or not in the index); whole, that
// ch.folded is every session of the index (a move or a repair of a
// small one).
func (s *Store) commitLog(ctx context.Context, ch logChanges, drop func(manifest.IndexEntry) bool, whole bool) (err error) {
	if err := s.awaitLogPrefetch(ctx); err != nil {
		return err
	}
	// The heads of what the commit moves into the partitions or a run
	// come first (heads.go): once the commit takes an entry out of the
	// unfolded set, a reader finds it in its head.
	dirs := s.queueHeads(ch.folded)
	dirs = s.queueHeads(ch.run) || dirs
	// The directories of what went to the dirs head, for the commit's
	// filter: given back if it fails, for the next. Taken before the
	// heads are written, so that a commit written meanwhile (a
	// checkpoint's, which may not say DirHead yet) does not take them.
	dirBits := s.heads.takeDirBits()
	defer func() {
		if err != nil {
			s.heads.returnDirBits(dirBits)
		}
	}()
	if err := s.writeHeads(ctx); err != nil {
		return err
	}
	// And the claims the heads' write made (claims.go), which only a
	// commit that says DirHead carries, as every one after the first
	// that did (a claim needs one).
	if claims := s.heads.takeClaimBits(); claims != nil {
		if dirBits == nil {
			dirBits = claims
		} else {
			manifest.MergeDirFilter(dirBits, claims)
		}
	}
	if n := s.catalogCount(); n > 0 {
		ch.indexed = n // the count a writer without the catalog folds by
	}
	lg := &s.ilog
	lg.mu.Lock()
	n, last, lastETag, known, fresh := lg.n, lg.last, lg.etag, lg.known, lg.fresh
	lg.mu.Unlock()
	if known && n == 0 && s.now().Sub(fresh) > logTrust {
		known = false // an empty log long ago: commit 1 may be pruned since
	}
	if !known {
		var err error
		if n, last, lastETag, err = s.readNewestCommit(ctx); err != nil && !errors.Is(err, ErrCorrupt) {
			return err
		}
	}
	if last == nil && n > 0 {
		last, lastETag = s.commitBefore(ctx, n), "" // n does not decode: go on from the one before
	}
	s.adoptRunDeltas(ctx, last)
	lost := 0 // numbers other writers took first
	for attempt := 0; attempt < s.maxAttempts*4; attempt++ {
		if ch.width > 0 && ch.width < 3 && last != nil && last.Widened > 0 {
			if err := s.narrowed(ctx, &ch); err != nil {
				return err
			}
		}
		if ch.recheck != nil && attempt > 0 {
			if err := ch.recheck(ctx); err != nil {
				return err
			}
		}
		if ch.dirFilterAt > 0 && n != ch.dirFilterAt {
			return errDirFilterMoved
		}
		next := nextCommit(n+1, last, ch, drop, whole, s.now().UTC())
		next.DirHead = next.DirHead || dirs || ch.dirHead
		// last is commit n, unless n did not decode (then it is older).
		known := last == nil && n == 0 || last != nil && last.Through == n
		next.DirFilter = dirFilterAfter(last, known, next.DirHead, dirBits, ch.dirFilter)
		next.DirKeys = dirKeysAfter(last, known, next.DirHead, ch.dirFilter != nil)
		next.ClaimsSince = claimsSinceAfter(last, known, n+1)
		if stale := s.stalePages(next, last); len(stale) > 0 {
			// A sweep may have deleted them as unnamed: what they hold is
			// written again by the next write (the caller requeues it).
			return fmt.Errorf("commit %d of the index log: %w: %s, sent more than %s ago (was the process suspended?)", n+1, errStalePages, strings.Join(stale, ", "), pageCommitAge)
		}
		key := logKey(n + 1)
		// Stored against the base of the commit it follows, unless it
		// drops sessions (a deletion purges the bases; a repair).
		stored := s.storedCommit(next, last, lastETag, len(ch.buried) > 0 || drop != nil || whole)
		data, err := s.codec.EncodeIndexShard(key, stored)
		if err != nil {
			return err
		}
		// A number pruned since (the log moved on by 64 or more, or a
		// deletion purged it) would take a create at n+1: in the same
		// round trip, check that n is still there.
		var present error
		var wg sync.WaitGroup
		if n > 0 {
			wg.Add(1)
			go func() { defer wg.Done(); present = s.b.head(ctx, logKey(n)) }()
		}
		began := time.Now()
		etag, err := s.put(ctx, key, data, putCond{ifNoneMatch: true}, "application/zstd")
		took := time.Since(began)
		wg.Wait()
		if err == nil && errors.Is(present, errNotFound) {
			// Written where the log was long ago, which pruning or a
			// deletion's purge emptied: delete it (it may hold a deleted
			// session's summary), and commit again after the newest.
			if err := s.b.delete(ctx, key); err != nil && !errors.Is(err, errNotFound) {
				return fmt.Errorf("delete commit %d, written behind the log: %w", n+1, err)
			}
			if n, last, lastETag, err = s.readNewestCommit(ctx); err != nil && !errors.Is(err, ErrCorrupt) {
				return err
			}
			continue
		}
		if err == nil {
			// Whole in memory, with the base it was stored against
			// (the next commit is stored against that one too).
			next.Base, next.BaseETag = stored.Base, stored.BaseETag
			s.noteBase(next, etag)
			s.adoptCommit(n+1, next, etag)
			s.ilog.mu.Lock()
			s.ilog.lastWhole = append(s.ilog.lastWhole, stored.Base == 0)
			if len(s.ilog.lastWhole) > lastCommits {
				s.ilog.lastWhole = s.ilog.lastWhole[1:]
			}
			s.ilog.mu.Unlock()
			if next.Omitted > 0 && drop == nil && !whole {
				s.keepOmitted(n+1, next, ch)
			}
			if (n+1)%logKeep == 0 {
				s.pruneLog(ctx, n+1)
			}
			return nil
		}
		switch {
		case errors.Is(err, errPrecondition) && lost > 0:
			// Lost again: several writers at once. Spread out, then go on
			// from the newest commit (one LIST finds it, however many
			// numbers were taken meanwhile).
			lost++
			if err := spreadCommits(ctx, lost, took); err != nil {
				return err
			}
			if n, last, lastETag, err = s.readNewestCommit(ctx); err != nil && !errors.Is(err, ErrCorrupt) {
				return err
			}
			if last == nil && n > 0 {
				last, lastETag = s.commitBefore(ctx, n), ""
			}
		case errors.Is(err, errPrecondition):
			// Another writer took n+1: go on from its commit.
			lost++
			c, cEtag, err := s.readCommit(ctx, n+1, "")
			if errors.Is(err, errNotFound) {
				// Pruned already: far behind, find the newest again.
				if n, last, lastETag, err = s.readNewestCommit(ctx); err != nil && !errors.Is(err, ErrCorrupt) {
					return err
				}
				continue
			}
			if errors.Is(err, ErrCorrupt) {
				// Go on after it, from the newest commit before it that
				// decodes (ours); repair mends what it alone held.
				n = n + 1
				continue
			}
			if err != nil {
				return err
			}
			n, last, lastETag = n+1, c, cEtag
			s.adoptCommit(n, c, cEtag)
		case errors.Is(err, errConflict):
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return errors.New("too many concurrent commits")
}

// spreadCommits waits before the next try of a writer that lost the
// race for a commit number lost times, a random part of lost times the
// lost create's round trip (rtt), at most a second: writers that meet at
// one number (20 appending at once) would otherwise all try the next
// together, and each number costs every loser a create, a HEAD and a
// read of the winner: the n² of a lock-free log. Spread over a window
// that grows with the contention, they take the numbers one after
// another.
func spreadCommits(ctx context.Context, lost int, rtt time.Duration) error {
	window := min(time.Duration(min(lost, 32))*max(rtt, time.Millisecond), time.Second)
	return sleep(ctx, rand.N(window))
}

// nextCommit is commit n: the changes of ch (counted in Omitted
// instead, past manifest.LogChanges; none of a session deleted) and its
// deletions with those of prev's of the last hour, and the recent
// sessions of prev (nil: none; those drop says are wrong left out) with
// them folded in. Its Unfolded set is prev's with ch.unfolded added and
// what ch.folded and ch.run say the partitions or a run hold
// taken out (unfolded.go).
func nextCommit(n int64, prev *manifest.IndexShard, ch logChanges, drop func(manifest.IndexEntry) bool, whole bool, now time.Time) *manifest.IndexShard {
	c := &manifest.IndexShard{Shard: manifest.LogName, Through: n, Written: now, Sessions: map[string]manifest.IndexEntry{}, Recent: map[string]manifest.IndexEntry{}, Unfolded: map[string]manifest.IndexEntry{}}
	// The first commit of a fresh index holds all of it (none), as does
	// one whose entries are all of it; a complete view stays so until it
	// has to drop a session for room.
	c.Complete = whole || prev == nil && n == 1 || prev != nil && prev.Complete
	c.DirHead = prev != nil && prev.DirHead
	if prev != nil {
		c.Merge, c.Fold, c.Widened = prev.Merge, prev.Fold, prev.Widened
	}
	if ch.widen && c.Widened == 0 {
		// The fold or merge under way names partitions of two
		// characters: the next writers start them again (widen.go).
		c.Widened, c.Merge, c.Fold = n, nil, nil
	}
	if ch.fold != nil {
		if !sameFold(c.Fold, ch.fold.from) {
			// Another writer took this step first (or a sync folded
			// every run): what this one meant to retire stays named (its
			// partitions' writes were of entries the runs hold).
			ch.retired = nil
		} else {
			c.Fold = ch.fold.to
			if ch.fold.from == nil && foldTakes(c, c.Merge) {
				// The fold takes the merge's runs, whose entries it
				// writes to the partitions: the merge is dropped (its
				// pages stay named, as runs), so that merges of the
				// runs written during the fold go on (runsDue).
				c.Merge = nil
			}
		}
	}
	if ch.merge != nil {
		if !sameMerge(c.Merge, ch.merge.from) || !namesAll(prev, ch.read) || foldTakes(c, cmp.Or(ch.merge.to, ch.merge.from)) {
			// Another writer took this step first (or a sync finished
			// the merge, or a purge replaced a page it read, or a fold
			// that takes the runs it merges started meanwhile): this
			// one's pages stay unnamed, and what it meant to retire
			// stays named.
			ch.pages, ch.retired = nil, nil
		} else if c.Merge = ch.merge.to; c.Merge != nil && c.Merge.Into == 0 {
			m := *c.Merge
			m.Into = n
			c.Merge = &m
		}
	}
	if ch.purge != nil && !ch.purge.holds(prev) {
		ch.pages, ch.retired, ch.purge = nil, nil, nil
	}
	if ch.merge == nil && !namesAll(prev, ch.read) {
		ch.pages, ch.retired = nil, nil // a whole merge's (mergeRuns), as a step's
	}
	if len(ch.run) > 0 && len(ch.pages) == 0 {
		// The run took in a merge, voided (exitmerge.go): no page holds
		// its entries, which stay in the set.
		ch.unfolded, ch.run = longest(ch.unfolded, ch.run), nil
	}
	if c.Indexed = ch.indexed; c.Indexed == 0 && prev != nil {
		c.Indexed = prev.Indexed
	}
	gone := map[string]manifest.Tombstone{}
	if prev != nil {
		for id, e := range prev.Recent {
			if drop == nil || !drop(e) {
				c.Recent[id] = e
			}
		}
		for id, e := range prev.Unfolded {
			if drop == nil || !drop(e) {
				c.Unfolded[id] = e
			}
		}
		for _, p := range prev.Runs {
			if !ch.retired[p.Key] {
				c.Runs = append(c.Runs, p)
			}
		}
		// The recent deletions travel on (logTombstoneGrace), so that an
		// entry a writer took before a deletion and commits after it
		// does not bring the session back.
		for id, t := range prev.Tombstones {
			if now.Sub(t.Deleted) < logTombstoneGrace {
				gone[id] = t
			}
		}
	}
	for id, t := range ch.buried {
		gone[id] = t
	}
	for _, p := range ch.pages {
		if p.Commit == 0 {
			p.Commit = n // a new run's; a page rewritten keeps its run's
		}
		c.Runs = append(c.Runs, p)
	}
	if c.Merge != nil && !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return slices.Contains(c.Merge.From, p.Commit) }) {
		c.Merge = nil // every page of the runs it merges is retired: done, or folded
	}
	if c.Fold != nil && !slices.ContainsFunc(c.Runs, func(p manifest.RunPage) bool { return slices.Contains(c.Fold.From, p.Commit) }) {
		c.Fold = nil // every page of the runs it folds is retired
	}
	entries := ch.entries()
	list := len(entries)+len(ch.buried) <= manifest.LogChanges
	if !list {
		c.Omitted = int64(len(entries) + len(ch.buried))
	}
	for id, e := range ch.unfolded {
		if old, ok := c.Unfolded[id]; !ok || old.Length <= e.Length {
			c.Unfolded[id] = e
		}
	}
	for id, e := range longest(ch.folded, ch.run) {
		if u, ok := c.Unfolded[id]; ok && u.Length <= e.Length {
			delete(c.Unfolded, id) // its partition, or a run, holds it now
		}
	}
	for id, e := range entries {
		if _, deleted := gone[id]; deleted {
			continue
		}
		if list {
			c.Sessions[id] = e
		}
		r := e
		// A listing needs no append state; a reader of a session it
		// lists sends the GETs of its segments at once (cachedEntry).
		r.Resume = e.Resume.Where()
		if old, ok := c.Recent[id]; !ok || old.Length <= r.Length {
			c.Recent[id] = r
		}
	}
	for id := range gone {
		delete(c.Recent, id)
		delete(c.Unfolded, id)
	}
	if len(c.Unfolded) == 0 {
		c.Unfolded = nil
	}
	if len(gone) > 0 {
		c.Tombstones = newestTombstones(gone, logTombstones)
	}
	if len(c.Recent) > manifest.RecentSize {
		c.Complete = false
		manifest.TrimRecent(c.Recent)
	}
	// The purge notes: every deletion names its sessions, and the
	// commit of a purge takes out those it purged and the pages it
	// deleted, and names the pages it retires; an exit's merge names
	// the pages it retires too, and a writer takes out the pages it
	// deleted before its commit (sweepDiscarded).
	var prevUnpurged, prevDiscarded, purged, deleted, retired []string
	if prev != nil {
		prevUnpurged, prevDiscarded = prev.Unpurged, prev.Discarded
	}
	if ch.purge != nil || ch.discard {
		retired = slices.Collect(maps.Keys(ch.retired))
	}
	if ch.purge != nil {
		purged, deleted = ch.purge.ids, ch.purge.discarded
	}
	deleted = append(slices.Clone(deleted), ch.swept...)
	c.Unpurged = carriedOn(prevUnpurged, purged, slices.Collect(maps.Keys(ch.buried)))
	c.Discarded = carriedOn(prevDiscarded, deleted, retired)
	return c
}

// carriedOn is a note of the commit after one whose note was prev
// (Unpurged, Discarded): prev's entries, but those done, and added.
func carriedOn(prev, done, added []string) []string {
	set := map[string]bool{}
	for _, k := range prev {
		set[k] = true
	}
	for _, k := range done {
		delete(set, k)
	}
	for _, k := range added {
		set[k] = true
	}
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

// longest is the entries of a and b, the longer of the two for a
// session in both.
func longest(a, b map[string]manifest.IndexEntry) map[string]manifest.IndexEntry {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]manifest.IndexEntry, len(a)+len(b))
	for id, e := range a {
		out[id] = e
	}
	for id, e := range b {
		if old, ok := out[id]; !ok || old.Length < e.Length {
			out[id] = e
		}
	}
	return out
}

// newestTombstones keeps the max most recent deletions of gone.
func newestTombstones(gone map[string]manifest.Tombstone, max int) map[string]manifest.Tombstone {
	if len(gone) <= max {
		return gone
	}
	ts := make([]manifest.Tombstone, 0, len(gone))
	for _, t := range gone {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b manifest.Tombstone) int {
		if c := b.Deleted.Compare(a.Deleted); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := make(map[string]manifest.Tombstone, max)
	for _, t := range ts[:max] {
		out[t.ID] = t
	}
	return out
}

// adoptCommit makes commit n, read or written with etag, this Store's
// reading of the log when it is newer than the one it has.
func (s *Store) adoptCommit(n int64, c *manifest.IndexShard, etag string) {
	s.noteWidth(c)
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if !lg.known || n >= lg.n {
		lg.n, lg.last, lg.etag, lg.known, lg.fresh = n, c, etag, true, s.now()
	}
	if c == nil || !lg.keepAdopted {
		return
	}
	// Kept too, the last logKeep of them, once this Store read the
	// catalog (noteCatalog), so that it can bring the catalog up to date
	// through the commits it wrote or read without reading them again
	// (catchUpKept). A Store that never reads the catalog (an
	// agent's) keeps none.
	if lg.kept == nil {
		lg.kept = map[int64]keptCommit{}
	}
	lg.kept[n] = keptCommit{c: c, etag: etag}
	for k := range lg.kept {
		if k < n-logKeep {
			delete(lg.kept, k)
		}
	}
}

// readCommit reads commit n (a 304 when etag is still it: then nil).
// A commit stored against a base comes back whole (logbase.go).
func (s *Store) readCommit(ctx context.Context, n int64, etag string) (*manifest.IndexShard, string, error) {
	c, etag, err := s.readStoredCommit(ctx, n, etag)
	if err != nil || c == nil {
		return c, etag, err
	}
	if err := s.makeWhole(ctx, c, etag); err != nil {
		return nil, "", err
	}
	return c, etag, nil
}

// readStoredCommit is readCommit without the base: the commit as stored.
func (s *Store) readStoredCommit(ctx context.Context, n int64, etag string) (*manifest.IndexShard, string, error) {
	key := logKey(n)
	data, etag, err := s.b.get(ctx, key, etag)
	if err != nil {
		return nil, "", err
	}
	c, err := s.decodeShardObject(key, manifest.LogName, data)
	if err != nil {
		return nil, "", err
	}
	if c.Through != n {
		return nil, "", fmt.Errorf("%s: %w: holds commit %d", s.objectURL(key), ErrCorrupt, c.Through)
	}
	s.noteWidth(c)
	return c, etag, nil
}

// readNewestCommit finds the newest commit and reads it (n is 0 when the
// log has none), and makes it this Store's reading.
func (s *Store) readNewestCommit(ctx context.Context) (n int64, c *manifest.IndexShard, etag string, err error) {
	for range 3 {
		n, err = s.newestCommitNumber(ctx)
		if err != nil || n == 0 {
			if err == nil {
				s.adoptCommit(0, nil, "")
			}
			return n, nil, "", err
		}
		c, etag, err = s.readCommit(ctx, n, "")
		if errors.Is(err, errNotFound) {
			continue // pruned between the listing and the read
		}
		if err != nil {
			// n is still the newest (ErrCorrupt: a writer goes on after
			// it with what it knows, and repair rebuilds the view).
			return n, nil, "", fmt.Errorf("read the index log: %w", err)
		}
		s.adoptCommit(n, c, etag)
		return n, c, etag, nil
	}
	return 0, nil, "", errors.New("read the index log: its newest commit keeps disappearing")
}

// commitBefore is the newest commit before commit n (which does not
// decode) that does, among the few before it; nil when none does. What
// it holds is the index as it was a commit or a few earlier: a reader
// or writer goes on from it, lagging by what the damaged commit alone
// held, until a repair.
func (s *Store) commitBefore(ctx context.Context, n int64) *manifest.IndexShard {
	for k := n - 1; k >= max(n-4, 1); k-- {
		if c, _, err := s.readCommit(ctx, k, ""); err == nil {
			return c
		}
	}
	return nil
}

// newestReadable is newestCommit, or when the newest commit does not
// decode, the newest before it that does (commitBefore) with the error
// of the damage, for a reader that must say the index is damaged.
func (s *Store) newestReadable(ctx context.Context) (*manifest.IndexShard, error) {
	c, err := s.newestCommit(ctx)
	if !errors.Is(err, ErrCorrupt) {
		return c, err
	}
	n, lerr := s.newestCommitNumber(ctx)
	if lerr != nil {
		return nil, lerr
	}
	return s.commitBefore(ctx, n), s.logDamage(err)
}

// newestCommitNumber is the number of the newest commit: one LIST, or
// where the credentials may not list, the hint and probes after it.
func (s *Store) newestCommitNumber(ctx context.Context) (int64, error) {
	objects, _, err := s.b.list(ctx, "index/log/", "")
	if errors.Is(err, errForbidden) {
		return s.probeNewestCommit(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("list the index log: %w", err)
	}
	return newestListed(objects), nil
}

// newestListed is the highest commit number among the listed keys.
func newestListed(objects []listed) int64 {
	var n int64
	for _, o := range objects {
		name := strings.TrimSuffix(o.key[strings.LastIndex(o.key, "/")+1:], ".json.zst")
		if v, err := strconv.ParseInt(name, 10, 64); err == nil && v > n {
			n = v
		}
	}
	return n
}

// probeNewestCommit finds the newest commit without listing: from the
// hint (or this Store's reading, when later), logProbeWindow numbers at
// a time, until a window ends in a missing one.
func (s *Store) probeNewestCommit(ctx context.Context) (int64, error) {
	var from int64
	data, _, err := s.b.get(ctx, logHeadKey, "")
	switch {
	case err == nil:
		h, err := s.decodeShardObject(logHeadKey, manifest.LogName, data)
		if err != nil {
			return 0, err
		}
		from = h.Through
	case !errors.Is(err, errNotFound):
		return 0, fmt.Errorf("read the index log's head: %w", err)
	}
	s.ilog.mu.Lock()
	if s.ilog.known && s.ilog.n > from {
		from = s.ilog.n
	}
	s.ilog.mu.Unlock()
	for {
		found := make([]bool, logProbeWindow)
		g, gctx := errgroup.WithContext(ctx)
		for i := range found {
			g.Go(func() error {
				err := s.b.head(gctx, logKey(from+1+int64(i)))
				if errors.Is(err, errNotFound) {
					return nil
				}
				found[i] = err == nil
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return 0, fmt.Errorf("probe the index log: %w", err)
		}
		last := -1
		for i, ok := range found {
			if ok {
				last = i
			}
		}
		from += int64(last + 1)
		if last < logProbeWindow-1 {
			return from, nil
		}
	}
}

// pruneLog deletes the commits more than logKeep before commit n, which
// its writer just created (and format 3's shards, dropShards), and
// records n in the hint. Both are best
// effort: a commit left behind is read by nobody, and an old hint costs
// a reader that may not list a few more probes.
func (s *Store) pruneLog(ctx context.Context, n int64) {
	head := &manifest.IndexShard{Shard: manifest.LogName, Through: n, Written: s.now().UTC(), Sessions: map[string]manifest.IndexEntry{}}
	if data, err := s.codec.EncodeIndexShard(logHeadKey, head); err == nil {
		_, _ = s.b.put(ctx, logHeadKey, data, putCond{}, "application/zstd")
	}
	// n-logKeep itself stays: it is whole, and the commits after it up
	// to the next whole one are stored against it (logbase.go).
	var keys []string
	for k := max(n-2*logKeep, 1); k < n-logKeep; k++ {
		keys = append(keys, logKey(k))
	}
	s.ilog.mu.Lock()
	widened := int64(0)
	if s.ilog.last != nil {
		widened = s.ilog.last.Widened
	}
	s.ilog.mu.Unlock()
	if widened == 0 {
		s.dropShards(ctx)
	}
	keys = append(keys, narrowKeysPrunedAt(n, widened)...)
	_ = s.b.deleteKeys(ctx, keys)
}

// narrowPrunes is how many prunings share the deletion of the 272
// partitions of two characters and shards of format 3 after the index
// widened: all of them in one DeleteObjects is a 17 KB body, which the
// one writer's exit that prunes would send beside its turn (§P3, "a
// turn sends at most 32 KB"); a quarter, 68 keys, is 4.4 KB.
const narrowPrunes = 4

// narrowKeysPrunedAt is the share of the partitions of two characters
// (allNarrowKeys) that the pruning at commit n deletes, in an index that
// widened at commit widened (0: never). The first share goes with the
// pruning that deletes the commit that widened: every Store that read
// the index before the move has read a newer commit since. The others
// go with the prunings after it, one every logKeep commits.
func narrowKeysPrunedAt(n, widened int64) []string {
	since := n - logKeep - widened // in (0, logKeep] at the pruning that deletes commit widened
	if widened == 0 || since <= 0 {
		return nil
	}
	share := int((since - 1) / logKeep)
	if share >= narrowPrunes {
		return nil
	}
	all := allNarrowKeys()
	per := (len(all) + narrowPrunes - 1) / narrowPrunes
	return all[min(share*per, len(all)):min((share+1)*per, len(all))]
}

// prefetchLog reads the newest commit from the moment Open starts (its
// LIST goes out with the marker's read); Open waits for it. Errors are
// dropped: a reader that finds no reading makes its own.
func (s *Store) prefetchLog(ctx context.Context) *sync.WaitGroup {
	s.ilog.prefetching = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(s.ilog.prefetching)
		// The newest commit the last run saw (the catalog cache says
		// which): read it with the listing, so that when the log has not
		// moved since, Open reads it in its one round trip.
		type reading struct {
			c    *manifest.IndexShard
			etag string
			err  error
		}
		// The LIST goes out first: the cache files read below must not
		// hold it back past the marker's answer (a loaded machine's disk
		// would otherwise cost Open a round trip).
		type listing struct {
			objects []listed
			err     error
		}
		listedLog := make(chan listing, 1)
		go func() {
			objects, _, err := s.b.list(ctx, "index/log/", "")
			listedLog <- listing{objects, err}
		}()
		// A Store opened WithPageAhead reads no base now (pageahead.go),
		// nor the commits a listing of the catalog would want.
		pageAhead := s.pageAhead != (agent.Project{})
		var guess chan reading
		var bases sync.WaitGroup
		defer bases.Wait()
		last := s.cachedCommitNumber()
		if last > 0 {
			guess = make(chan reading, 1)
			if !pageAhead {
				s.prefetchBase(ctx, last, nil, &bases)
			}
			go func() {
				c, etag, err := s.readOpenCommit(ctx, last)
				guess <- reading{c, etag, err}
			}()
		}
		l := <-listedLog
		if l.err != nil {
			return
		}
		n := newestListed(l.objects)
		if n != last && !pageAhead {
			s.prefetchBase(ctx, n, l.objects, &bases)
		}
		if pageAhead {
			// The project's head goes out with the commit: the page
			// is Open's two round trips (pageahead.go).
			bases.Add(1)
			go func() {
				defer bases.Done()
				s.readOpenHead(ctx, keyHead(s.pageAhead.Key()), n)
			}()
		}
		// The commits between the cached one and the newest, when few:
		// a listing the newest commit cannot answer applies them to the
		// cached catalog, and read with the newest they cost it no
		// round trip of its own.
		var since sync.WaitGroup
		if !pageAhead && last > 0 && n > last+1 && n-last <= logReadAhead {
			for k := last + 1; k < n; k++ {
				since.Add(1)
				go func() {
					defer since.Done()
					if c, etag, err := s.readCommit(ctx, k, ""); err == nil {
						s.keepCommit(k, c, etag)
					}
				}()
			}
		}
		defer since.Wait()
		var early *reading
		if guess != nil {
			r := <-guess
			if r.err == nil && !pageAhead {
				s.keepCommit(last, r.c, r.etag)
			}
			if r.err == nil && pageAhead && n > 0 {
				for _, name := range s.openMoreHeads(r.c) {
					bases.Add(1)
					go func() {
						defer bases.Done()
						s.readOpenHead(ctx, name, n)
					}()
				}
			}
			if r.err == nil && r.c.Through == n {
				early = &r
			}
		}
		if n == 0 {
			s.adoptOpened(ctx, 0, nil, "")
		} else if early != nil {
			s.adoptOpened(ctx, n, early.c, early.etag)
		} else if c, etag, err := s.readOpenCommit(ctx, n); err == nil {
			s.adoptOpened(ctx, n, c, etag)
		}
	}()
	return &wg
}

// logReadAhead is how many commits past the cached catalog's Open reads
// with the newest.
const logReadAhead = 16

// keepCommit keeps commit k, read during Open, for the catalog's
// catch-up (keptCommit).
func (s *Store) keepCommit(k int64, c *manifest.IndexShard, etag string) {
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.kept == nil {
		lg.kept = map[int64]keptCommit{}
	}
	lg.kept[k] = keptCommit{c: c, etag: etag}
}

// keptCommit is a commit as this Store read it and its ETag; for a
// commit this Store wrote that omits its changes (Omitted), those
// changes, which the catalog's catch-up applies without reading the
// partitions they went to (keepOmitted).
type keptCommit struct {
	c       *manifest.IndexShard
	etag    string
	omitted *logChanges
}

// keepOmitted records the changes of commit n, which this Store just
// wrote and adopted, when the commit omits them: a bulk write's to the
// partitions (a first push's) is named by no page, so without them the
// catalog this Store read could not catch up with its own write
// (catchUpPages), and the next run would read all 256 partitions back.
func (s *Store) keepOmitted(n int64, c *manifest.IndexShard, ch logChanges) {
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if k, ok := lg.kept[n]; ok && k.c == c {
		k.omitted = &logChanges{folded: ch.entries(), buried: ch.buried}
		lg.kept[n] = k
	}
}

// keptOmitted is what keepOmitted recorded of commit k, when the commit
// held is the one with etag.
func (s *Store) keptOmitted(k int64, etag string) (*logChanges, bool) {
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	kept, ok := lg.kept[k]
	if !ok || kept.omitted == nil || kept.etag != etag {
		return nil, false
	}
	return kept.omitted, true
}

// keptCommitOf is commit k as this Store holds it in memory (keepCommit,
// adoptCommit), if it does.
func (s *Store) keptCommitOf(k int64) (keptCommit, bool) {
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	kept, ok := lg.kept[k]
	if !ok && lg.known && lg.n == k && lg.last != nil {
		kept, ok = keptCommit{c: lg.last, etag: lg.etag}, true
	}
	return kept, ok
}

// readKeptCommit is readCommit of commit k, served by what Open read
// (keepCommit, or the newest) when it has it: a number is created once.
func (s *Store) readKeptCommit(ctx context.Context, k int64) (*manifest.IndexShard, string, error) {
	if kept, ok := s.keptCommitOf(k); ok {
		return kept.c, kept.etag, nil
	}
	return s.readCommit(ctx, k, "")
}

// awaitLogPrefetch waits for Open's reading of the log to end and makes a
// commit it kept aside whole (settleStored): what a reader or writer of
// the Store's reading of the log does first.
func (s *Store) awaitLogPrefetch(ctx context.Context) error {
	if err := s.waitLogPrefetch(ctx); err != nil {
		return err
	}
	s.settleStored(ctx)
	return nil
}

// waitLogPrefetch waits for Open's reading of the log to end, and leaves
// a commit it kept aside as it is (newestFromStored reads it).
func (s *Store) waitLogPrefetch(ctx context.Context) error {
	if ch := s.ilog.prefetching; ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// newestCommit returns the newest commit (nil: the log has none), read
// now: a listing reflects every write that completed before it began.
// Knowing commit n, that is one GET of n+1 (a 404: n is still the
// newest); with WithOpenSnapshot, Open's reading serves as it is for a
// moment.
func (s *Store) newestCommit(ctx context.Context) (*manifest.IndexShard, error) {
	if err := s.awaitLogPrefetch(ctx); err != nil {
		return nil, err
	}
	lg := &s.ilog
	lg.mu.Lock()
	n, last, known := lg.n, lg.last, lg.known
	serves := known && s.now().Before(lg.snapshot)
	lg.mu.Unlock()
	if serves {
		return last, nil
	}
	if !known {
		_, c, _, err := s.readNewestCommit(ctx)
		return c, err
	}
	// Chase the commits after n; past a few, list instead. A missing n+1
	// means n is the newest only if n is still there (a HEAD in the same
	// round trip): pruning deletes a commit once the log has moved on
	// past it.
	for range 2 {
		var (
			c       *manifest.IndexShard
			etag    string
			err     error
			present error
		)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n > 0 {
				present = s.b.head(ctx, logKey(n))
			}
		}()
		c, etag, err = s.readCommit(ctx, n+1, "")
		wg.Wait()
		if errors.Is(err, errNotFound) && n > 0 && errors.Is(present, errNotFound) {
			break // pruned: list
		}
		if errors.Is(err, errNotFound) && present == nil {
			lg.mu.Lock()
			lg.fresh = s.now()
			lg.mu.Unlock()
			return last, nil
		}
		if errors.Is(err, errNotFound) {
			return nil, fmt.Errorf("read the index log: %w", present)
		}
		if err != nil {
			return nil, fmt.Errorf("read the index log: %w", err)
		}
		n, last = n+1, c
		s.adoptCommit(n, c, etag)
	}
	_, c, _, err := s.readNewestCommit(ctx)
	return c, err
}

// ListNewest returns up to limit sessions keep accepts (nil: all), newest
// first (NewestLogs without the checkpoints).
func (s *Store) ListNewest(ctx context.Context, limit int, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	return s.ListNewestIn(ctx, limit, agent.Project{}, keep)
}

// ListNewestIn is ListNewest of the sessions of project p (none: of
// every project) that keep accepts (store.NewestLister).
func (s *Store) ListNewestIn(ctx context.Context, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	logs, err := s.NewestLogsIn(ctx, limit, p, keep)
	if logs == nil {
		return nil, err
	}
	infos := make([]agent.SessionInfo, len(logs))
	for i, l := range logs {
		infos[i] = l.Info
	}
	return infos, err
}

// NewestLogs returns up to limit sessions keep accepts (nil: all), newest
// first, each with the checkpoint the index lists (NewestLogsIn of every
// project).
func (s *Store) NewestLogs(ctx context.Context, limit int, keep func(agent.SessionInfo) bool) ([]store.Log, error) {
	return s.NewestLogsIn(ctx, limit, agent.Project{}, keep)
}

// NewestLogsIn returns up to limit sessions of project p (agent.Project.Holds;
// the zero Project: of every project) that keep accepts (nil: all),
// newest first, each with the checkpoint the index lists. In format 4 the
// newest commit of the index log answers when its recent sessions hold
// limit of them, or all there are (Complete: a small index): one or two
// requests, whatever the number of sessions (none in the moment after
// Open, WithOpenSnapshot); else, for a project, its head does (heads.go:
// one request more). Otherwise (fewer match, limit <= 0, or an older
// index) it lists every partition (Logs).
func (s *Store) NewestLogsIn(ctx context.Context, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]store.Log, error) {
	if p != (agent.Project{}) {
		inner := keep
		keep = func(info agent.SessionInfo) bool { return p.Holds(info.Project) && (inner == nil || inner(info)) }
	}
	if keep == nil {
		keep = func(agent.SessionInfo) bool { return true }
	}
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if err := s.checkMoved(ctx); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if limit > 0 && p != (agent.Project{}) && s.indexLog() {
		logs, ok, err := s.newestFromStored(ctx, p, limit, keep)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if ok {
			return logs, nil
		}
	}
	if limit > 0 && s.indexLog() {
		c, err := s.newestCommit(ctx)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if c != nil {
			logs := make([]store.Log, 0, len(c.Recent))
			for _, e := range c.Recent {
				if keep(e.Info) {
					logs = append(logs, store.Log{Info: e.Info, Checkpoint: store.Checkpoint{Length: e.Length, SHA256: e.SHA256}})
				}
			}
			if len(logs) >= limit || c.Complete {
				sortLogsNewestFirst(logs)
				return logs[:min(limit, len(logs))], nil
			}
			if names := headsFor(p, c); len(names) > 0 && s.headsIndex() {
				logs, ok, err := s.newestFromHeads(ctx, c, names, claimedRoot(p, c), limit, keep)
				if err != nil {
					return nil, fmt.Errorf("list sessions: %w", err)
				}
				if ok {
					return logs, nil
				}
			}
		}
	}
	all, _, err := s.catalog(ctx)
	if all == nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	logs := make([]store.Log, 0, len(all))
	for _, e := range all {
		if keep(e.Info) {
			logs = append(logs, store.Log{Info: e.Info, Checkpoint: store.Checkpoint{Length: e.Length, SHA256: e.SHA256}})
		}
	}
	sortLogsNewestFirst(logs)
	if limit > 0 && len(logs) > limit {
		logs = logs[:limit]
	}
	if err != nil {
		return logs, fmt.Errorf("list sessions: %w", err)
	}
	return logs, nil
}

func sortLogsNewestFirst(logs []store.Log) {
	slices.SortFunc(logs, func(a, b store.Log) int {
		if c := b.Info.Modified.Compare(a.Info.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.Info.ID, b.Info.ID)
	})
}
