package objstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
)

// Purging a deleted session's summary from the index (format 4,
// docs/DESIGN.md §P3, "Deleting sessions"). Besides its partition, three
// kinds of index object may hold the summary once a session is deleted:
// the log's older commits (their recent view), and the run pages that
// cover its partition. A deletion commits its tombstone (which takes the
// session out of the recent view and names it in the commit's
// Unpurged), deletes the commits before that one (purgeLog), buries the
// session in its partition, then rewrites the pages that hold it
// without it, in a commit that takes it out of Unpurged (purgeDeleted).
//
// Every step but the last is idempotent and the note outlives a process
// cut short anywhere between them: every commit carries Unpurged on
// (nextCommit), so the next writer that lists the tombstones (a sync,
// before it plans) finishes the burial and the purges
// (finishDeletions). Without it, a sync killed after a partition's
// burial and before the purge of its pages left the summary in a named
// page for good: every listing then says the session is deleted, and no
// later run carries the deletion again.

// noteBuried records that partition name buried a session, for the next
// purgeBuried.
func (s *Store) noteBuried(name string) {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	if s.runs.buried == nil {
		s.runs.buried = map[string]bool{}
	}
	s.runs.buried[name] = true
}

// purgeBuried purges the deletions the partitions written since the last
// call buried (noteBuried): once for all of them, however many
// partitions a sync's flush wrote at once. A failure notes them again.
func (s *Store) purgeBuried(ctx context.Context) error {
	s.runs.mu.Lock()
	names := slices.Sorted(maps.Keys(s.runs.buried))
	s.runs.buried = nil
	s.runs.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	err := s.purgeDeleted(ctx, names)
	if err != nil {
		for _, name := range names {
			s.noteBuried(name)
		}
	}
	return err
}

// purgeDeleted rewrites, at once, the run pages of the newest commit
// that cover partitions names (where sessions were just buried) or the
// partitions of the commit's Unpurged sessions, without the deleted
// sessions: they may hold their summaries, which a deletion must not
// leave behind (§8). Each page that holds one is replaced in its run by
// a new page without it (or retired, when nothing is left), so a
// deletion sends a page per run, not the partitions a fold of the pages
// would write. A page that cannot be read is folded, salvaging what can
// be. The commit takes out of Unpurged the sessions whose partitions
// this Store has seen bury them; one a concurrent deletion has not
// buried yet is its own to purge.
//
// A purge that a fold, a merge or another purge overtook is void
// (purgeChange.holds), and done again on a fresh reading.
func (s *Store) purgeDeleted(ctx context.Context, names []string) error {
	if !s.indexLog() {
		return nil
	}
	reread := false
	for attempt, steps := 0, 0; attempt < s.maxAttempts && steps < 4*s.maxAttempts; steps++ {
		step, fold, err := s.purgeDeletedOnce(ctx, names, reread)
		if err == nil && len(fold) > 0 {
			// Folded and retired: the next attempt finds no page holding
			// the deleted sessions, and clears the note.
			err = s.foldRuns(ctx, fold, true)
		}
		switch {
		case err != nil || step == purgeDone:
			return err
		case step == purgeAgain:
			reread = false // the commit just made serves
		default:
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
			attempt++
			reread = true
		}
	}
	return fmt.Errorf("purge the index runs of deleted sessions: too many concurrent changes")
}

// purgeStep is how an attempt of purgeDeleted ended.
type purgeStep int

const (
	purgeDone  purgeStep = iota
	purgeAgain           // pages replaced: the next attempt clears the note
	purgeVoid            // overtaken by another writer: read again, retry
)

// purgeDeletedOnce is one attempt of purgeDeleted, from the newest
// commit this Store read (reread: read it again). Pages fold names
// could not be read, and are to be folded (outside the purge's lock: a
// fold purges what its partitions bury).
//
// An attempt that replaces pages commits their retirement and names
// them in Discarded before it deletes them, and leaves Unpurged as it
// is; only an attempt that finds no page to replace, and has deleted
// the pages Discarded names, takes sessions out of Unpurged. So a purge
// cut short after its commit leaves the retired pages, which still
// hold the summaries, named for the next writer to delete.
func (s *Store) purgeDeletedOnce(ctx context.Context, names []string, reread bool) (step purgeStep, fold []manifest.RunPage, err error) {
	// One purge at a time: a Store's concurrent purges would read and
	// replace the same pages, all but one of them in vain.
	s.runs.purge.Lock()
	defer s.runs.purge.Unlock()
	// The deletion committed its tombstone just before (finishDelete):
	// that reading of the log serves, without a round trip of its own
	// on every deletion; an older one is read again.
	s.ilog.mu.Lock()
	c, fresh := s.ilog.last, s.ilog.last != nil && s.now().Sub(s.ilog.fresh) < indexStale
	s.ilog.mu.Unlock()
	if !fresh || reread {
		if c, err = s.newestCommit(ctx); err != nil && !errors.Is(err, ErrCorrupt) {
			return purgeVoid, nil, err
		}
	}
	within, buried := s.purgeScope(c, names)
	var pages []manifest.RunPage
	if s.unfoldedIndex() {
		pages = pagesCovering(c, within)
	}
	docs, damaged, err := s.readRunPages(ctx, pages)
	if err != nil {
		return purgeVoid, nil, err
	}
	if len(damaged) > 0 {
		return purgeVoid, pages, nil
	}
	var unpurged []string
	if c != nil {
		unpurged = c.Unpurged
	}
	var ids []string // the sessions of Unpurged this purge clears
	tombs := map[string]manifest.Tombstone{}
	for _, id := range unpurged {
		if t, ok := s.partitionBuries(id); ok {
			ids, tombs[id] = append(ids, id), t
		}
	}
	replaced, keeps := pagesPurged(pages, docs, buried)
	var added []manifest.RunPage
	for i, p := range replaced {
		if len(keeps[i]) == 0 {
			continue
		}
		page, err := s.writePage(ctx, p, keeps[i])
		if err != nil {
			return purgeVoid, nil, fmt.Errorf("rewrite index run page %s without the deleted sessions: %w", p.Key, err)
		}
		added = append(added, page)
	}
	var discard []string
	if c != nil {
		discard = c.Discarded
	}
	if len(replaced) > 0 {
		ids = nil // once the pages replaced are deleted
	}
	if len(replaced) == 0 && len(ids) == 0 && len(discard) == 0 {
		return purgeDone, nil, nil
	}
	// Those this Store's retirePages deleted just now need no DELETE.
	s.runs.mu.Lock()
	discard = slices.DeleteFunc(slices.Clone(discard), func(k string) bool { return s.runs.deleted[k] })
	s.runs.mu.Unlock()
	if err := s.b.deleteKeys(ctx, discard); err != nil {
		return purgeVoid, nil, fmt.Errorf("delete %d index run pages: %w", len(discard), err)
	}
	if len(ids) > 0 && !s.ilog.logPurged() {
		// The commits before the deletion's hold the summaries too, and
		// the note goes only once they are gone: this Store commits the
		// deletions again (whole, as a deletion's commit is stored) and
		// deletes the commits before that one (writeLog), as the
		// deletion cut short may not have.
		s.queueLog(nil, tombs, 0)
		if err := s.writeLog(ctx); err != nil {
			return purgeVoid, nil, err
		}
	}
	s.runs.fold.Lock()
	if c != nil {
		discard = c.Discarded // every one is deleted now
	}
	// width: of the partitions seen to bury ids (widen.go).
	err = s.retirePages(ctx, logChanges{pages: added, purge: &purgeChange{partitions: within, read: pageKeys(pages), ids: ids, discarded: discard}, width: narrowest(within)}, replaced)
	s.runs.fold.Unlock()
	if err != nil {
		return purgeVoid, nil, err
	}
	// Void when another writer changed the pages first: retirePages
	// deleted what this attempt wrote, named by no commit.
	s.ilog.mu.Lock()
	last := s.ilog.last
	s.ilog.mu.Unlock()
	named := func(p manifest.RunPage) bool { return namesAll(last, []string{p.Key}) }
	void := !namesAll(last, pageKeys(added)) || slices.ContainsFunc(replaced, named) ||
		last != nil && slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(last.Unpurged, id) })
	switch {
	case void:
		return purgeVoid, nil, nil
	case len(replaced) > 0:
		return purgeAgain, nil, nil
	}
	return purgeDone, nil, nil
}

// purgeScope is what a purge of the pages covering partitions names
// deletes from them, after commit c (nil: none): the partitions whose
// pages it reads (names, and those of c's Unpurged sessions), and the
// sessions it takes out (buried: those c's tombstones, the partitions as
// this Store last read or wrote them, or c's Unpurged say are deleted).
func (s *Store) purgeScope(c *manifest.IndexShard, names []string) (within []string, buried map[string]bool) {
	partitions := map[string]bool{}
	for _, name := range names {
		partitions[name] = true
	}
	var unpurged []string
	if c != nil {
		unpurged = c.Unpurged
	}
	for _, id := range unpurged {
		partitions[s.shardOf(id)] = true
	}
	within = slices.Sorted(maps.Keys(partitions))
	buried = s.buriedIn(c, within)
	for _, id := range unpurged {
		buried[id] = true
	}
	return within, buried
}

// pagesPurged is, of pages (read as docs), those that hold a session
// buried names, each with the entries it keeps without them (keeps[i]
// for replaced[i]; empty: the page goes whole).
func pagesPurged(pages []manifest.RunPage, docs []*manifest.IndexShard, buried map[string]bool) (replaced []manifest.RunPage, keeps []map[string]manifest.IndexEntry) {
	for i, p := range pages {
		kept := map[string]manifest.IndexEntry{}
		for id, e := range docs[i].Sessions {
			if !buried[id] {
				kept[id] = e
			}
		}
		if len(kept) == len(docs[i].Sessions) {
			continue
		}
		replaced, keeps = append(replaced, p), append(keeps, kept)
	}
	return replaced, keeps
}

// purgeAhead is the purge of the run pages that hold a session being
// deleted, made before the deletion's commit (prewritePurge), for that
// commit to carry (queueDeletion): the pages it retires, and those it
// wrote in their place without the session, from the pages the commit
// it was made from names over partitions within (read).
type purgeAhead struct {
	within, read []string
	retired      []manifest.RunPage
	added        []manifest.RunPage
}

// change is the part of the deletion's commit a: the pages it adds and
// retires, and the purge they are, which holds only where the commit
// before names the pages a read (purgeChange.holds): else a fold, a
// merge or another purge changed them since, and the commit carries the
// deletion alone (its pages unnamed, deleted after it: deleteRetired).
// It takes no session out of Unpurged: the partition has not buried the
// session yet, and the purge after the burial does that (purgeDeleted).
func (a *purgeAhead) change(ch *logChanges) {
	ch.pages = a.added
	ch.retired = map[string]bool{}
	for _, p := range a.retired {
		ch.retired[p.Key] = true
	}
	ch.purge = &purgeChange{partitions: a.within, read: a.read}
}

// prewritePurge writes, for the deletion of session id, the run pages
// that hold its summary anew without it, from the newest commit this
// Store read, so that their PUTs go out beside seg/0's tombstone
// (finishDelete) and the deletion's commit retires the pages that hold
// it, rather than a purge after the commit and the burial writing them
// and committing again (docs/DESIGN.md §8, "Its round trips"). A page
// no commit names is never read, so writing it early changes nothing a
// reader sees. Nil when there is nothing to purge, when a page could
// not be read or written (the purge after the burial does it), and
// while other deletions of this Store are under way: one purge takes
// all their burials.
func (s *Store) prewritePurge(ctx context.Context, id string) *purgeAhead {
	if !s.indexLog() || !s.unfoldedIndex() || s.deferIndex || s.runs.deleting.Load() > 1 {
		return nil
	}
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	if c == nil {
		return nil
	}
	within, buried := s.purgeScope(c, []string{s.shardOf(id)})
	buried[id] = true
	pages := pagesCovering(c, within)
	docs, damaged, err := s.readRunPages(ctx, pages)
	if err != nil || len(damaged) > 0 {
		return nil // the purge reads them again, and folds what is damaged
	}
	replaced, keeps := pagesPurged(pages, docs, buried)
	if len(replaced) == 0 {
		return nil
	}
	a := &purgeAhead{within: within, read: pageKeys(pages), retired: replaced}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for i, p := range replaced {
		if len(keeps[i]) == 0 {
			continue // retired whole
		}
		g.Go(func() error {
			page, err := s.writePage(gctx, p, keeps[i])
			if err != nil {
				return err
			}
			mu.Lock()
			a.added = append(a.added, page)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.dropAhead(context.WithoutCancel(ctx), a)
		return nil
	}
	return a
}

// dropAhead deletes the pages a wrote, which no commit names: the
// deletion did not get as far as its commit.
func (s *Store) dropAhead(ctx context.Context, a *purgeAhead) {
	if a == nil {
		return
	}
	// Left, each is an unnamed page that a sync or repair deletes a day
	// later.
	_ = s.b.deleteKeys(ctx, pageKeys(a.added))
}

// partitionBuries returns session id's tombstone in its partition as
// this Store last read or wrote it, if the partition buries it.
func (s *Store) partitionBuries(id string) (manifest.Tombstone, bool) {
	st := s.shardState(s.shardOf(id))
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.view.shard == nil {
		return manifest.Tombstone{}, false
	}
	t, ok := st.view.shard.Tombstones[id]
	return t, ok
}

// finishDeletions finishes the deletions that the newest commit this
// Store read says were cut short (IndexShard.Unpurged): the log's older
// commits deleted, the sessions buried in their partitions (from the
// commit's tombstones; one whose tombstone it no longer carries is
// looked for in its partition, then in the session's first segment),
// and the pages purged. Tombstones calls
// it, as it finishes the partitions' purges: a sync lists them before
// it plans.
func (s *Store) finishDeletions(ctx context.Context) error {
	if !s.indexLog() {
		return nil
	}
	if err := s.awaitLogPrefetch(ctx); err != nil {
		return err
	}
	s.ilog.mu.Lock()
	c := s.ilog.last
	s.ilog.mu.Unlock()
	if c == nil || len(c.Unpurged) == 0 || s.WriteRefused() != nil {
		return nil // nothing cut short, or a reader's: a writer finishes it
	}
	// This Store did not commit the deletions: the process that did may
	// have been cut short before it deleted the older commits.
	s.ilog.mu.Lock()
	s.ilog.unpurgedAt = max(s.ilog.unpurgedAt, s.ilog.n+1)
	s.ilog.mu.Unlock()
	names := map[string]bool{}
	for _, id := range c.Unpurged {
		name := s.shardOf(id)
		t, ok := c.Tombstones[id]
		if !ok {
			// Past the hour the commits carry a deletion's tombstone
			// (logTombstoneGrace): the partition's, or the one in the
			// place of the session's first segment.
			if _, err := s.readShardView(ctx, name); err != nil {
				return err
			}
			if _, buried := s.partitionBuries(id); !buried {
				t, ok = s.tombstoneAt(ctx, id)
			}
		}
		if ok {
			s.queueTombstoneIn(name, t)
		}
		names[name] = true
	}
	var errs []error
	for name := range names {
		errs = append(errs, s.writeQueued(ctx, name))
	}
	// Purged here, once, rather than at the next flush: a failure leaves
	// the note in the bucket, not a purge this Store would retry.
	s.runs.mu.Lock()
	for name := range names {
		delete(s.runs.buried, name)
	}
	s.runs.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.purgeDeleted(ctx, slices.Sorted(maps.Keys(names)))
}

// buriedIn is the sessions that commit c's tombstones, or partitions
// names as this Store last read or wrote them, bury.
func (s *Store) buriedIn(c *manifest.IndexShard, names []string) map[string]bool {
	buried := map[string]bool{}
	if c != nil {
		for id := range c.Tombstones {
			buried[id] = true
		}
	}
	for _, name := range names {
		st := s.shardState(name)
		st.mu.Lock()
		if st.view.shard != nil {
			for id := range st.view.shard.Tombstones {
				buried[id] = true
			}
		}
		st.mu.Unlock()
	}
	return buried
}

// writePage writes entries as a new page that takes page p's place in
// its run: the same partitions and run (Commit), a new key.
func (s *Store) writePage(ctx context.Context, p manifest.RunPage, entries map[string]manifest.IndexEntry) (manifest.RunPage, error) {
	name, err := newRunName()
	if err != nil {
		return manifest.RunPage{}, err
	}
	doc := manifest.NewIndexShard(manifest.RunName)
	maps.Copy(doc.Sessions, entries)
	page := manifest.RunPage{Key: runPageKey(name, 0), First: p.First, Last: p.Last, Sessions: len(entries), Commit: p.Commit}
	return page, s.putPage(ctx, page.Key, doc)
}
