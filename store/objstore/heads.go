package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// Project heads (manifest.FeatureIndexHeads, docs/DESIGN.md §P3): the
// newest commit knows the 64 newest sessions of the whole index, which
// at 100,000 sessions in 20 projects hold three of a project's on
// average; a project's page would otherwise read the 256 partitions.
// So each project has a head, index/head/<hash>.json.zst: the newest
// manifest.HeadSize entries the partitions and runs hold of its sessions
// (a project's slice of the recent view, as restic's readers cache what
// they use and an LSM's head answers the newest keys). The sessions that
// know only their directory (imported from other agents' logs, or
// panto's outside a git tree) are in the head of that directory, and
// also in one head they share, "dirs", for the work tree that holds the
// directory, wherever in it.
//
// An entry enters a head where it leaves the unfolded set: the writes
// that move entries into the partitions (a fold, a bulk write, a move of
// format 3) or into a run write the heads of their sessions' projects
// before the commit that says so (commitLog), so a reader that reads the
// newest commit, then a head, finds each session of the project in one
// of them: unfolded in the commit, or in the head when the partitions or
// a run hold it (or no newer than the oldest the head holds). A
// checkpoint's commit writes no head: the sessions being written travel
// in the commit itself, and a turn sends no more than it did.

// dirsHead is the head of the sessions that know only their directory.
const dirsHead = "dirs"

// headsOf names the heads that hold sessions of project p: the head of
// its Key and, for a session that knows only its directory, the dirs
// head too (none for no project: only a listing of every project shows
// those). A panto that predates the commits' DirKeys put such a session
// in the dirs head alone (headsFor).
func headsOf(p agent.Project) []string {
	switch {
	case p.OnlyDir():
		// Its directory as a listing names it (a work tree's root, a
		// directory project.Detect found): an imported log's may be
		// spelled otherwise.
		return []string{dirsHead, keyHead(filepath.Clean(p.Dir))}
	case p.Key() == "":
		return nil
	}
	return []string{keyHead(p.Key())}
}

// headsKept names the heads that hold sessions of project p as the
// writers that wrote up to commit c (nil: none) kept them: headsOf, less
// the directory's head of a session that knows only its directory when c
// says DirHead without DirKeys.
func headsKept(p agent.Project, c *manifest.IndexShard) []string {
	names := headsOf(p)
	if p.OnlyDir() && c != nil && c.DirHead && !c.DirKeys {
		return names[:1] // the dirs head
	}
	return names
}

// keyHead is the name of the head of the sessions whose project's Key is
// key ("" for none).
func keyHead(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// headsFor names the heads a listing of project p's sessions reads
// (agent.Project.Holds), as the newest commit c says: the head of its
// Key (for a directory, its sessions and those whose work tree it is)
// and, when c says the dirs head holds sessions and its dir filter that
// some may be p's, the dirs head, or a smaller one that holds them. For
// a work tree: the dirs head when a session may be below its root; else,
// when one may be at the root itself, the root's own head, when that is
// not its Key's already (c says DirKeys: every session the dirs head
// holds is in its directory's head too) and c does not say p's head
// claimed it (claimedRoot: then the page reads it only if p's head
// holds no claim c vouches for). For a directory: its own head holds
// them when c says DirKeys, else the dirs head.
func headsFor(p agent.Project, c *manifest.IndexShard) []string {
	var names []string
	key := keyHead(p.Key())
	if key != "" {
		names = append(names, key)
	}
	if c == nil || !c.DirHead {
		return names
	}
	switch {
	case p.Root != "":
		at := manifest.DirFilterMayHoldAt(c.DirFilter, p.Root)
		switch {
		case manifest.DirFilterMayHoldBelow(c.DirFilter, p.Root) || at && !c.DirKeys:
			names = append(names, dirsHead)
		case at:
			// Unless p's head claimed the root's (claims.go): then the
			// page reads the root's head only when p's head says it
			// holds no claim c vouches for (newestFromHeads).
			if root := keyHead(p.Root); root != key && claimedRoot(p, c) == "" {
				names = append(names, root)
			}
		}
	case p.OnlyDir():
		if !c.DirKeys && manifest.DirFilterMayHoldAt(c.DirFilter, p.Dir) {
			names = append(names, dirsHead)
		}
	}
	return names
}

// dirFilterAfter is the dir filter of a commit that says dirHead, after
// prev, the commit before it when known (false: that one did not
// decode, and prev, if any, is older; nil and known: the log's first),
// with added (the directories this commit's writer queued for the dirs
// head; nil: none) and rebuilt (one made from every session of the
// index, by a rebuild of the heads or a sync's adoptDirFilter; nil:
// none). A commit after one that said DirHead without a filter it can
// read has none either: sessions went to the dirs head that no filter
// holds (a panto that predates the filter wrote them, or the commit that
// did is damaged) until a rebuild.
func dirFilterAfter(prev *manifest.IndexShard, known, dirHead bool, added, rebuilt []byte) []byte {
	if !dirHead {
		return nil
	}
	f := manifest.NewDirFilter()
	switch {
	case rebuilt != nil:
		manifest.MergeDirFilter(f, rebuilt)
	case !known:
		return nil
	case prev == nil || !prev.DirHead:
		// The dirs head held no session before this commit.
	case len(prev.DirFilter) != manifest.DirFilterBytes:
		return nil
	}
	if prev != nil && len(prev.DirFilter) == manifest.DirFilterBytes {
		manifest.MergeDirFilter(f, prev.DirFilter)
	}
	manifest.MergeDirFilter(f, added)
	return f
}

// dirKeysAfter reports whether a commit that says dirHead, after prev
// (known as dirFilterAfter has it), may say DirKeys: each writer since
// the first commit that said DirHead, or since rebuilt (the heads were
// written anew from the whole index), put every session it gave the dirs
// head in its directory's head too, which this version's writers do and
// a panto that predates DirKeys, dropping it from its commit, does not.
func dirKeysAfter(prev *manifest.IndexShard, known, dirHead, rebuilt bool) bool {
	switch {
	case !dirHead:
		return false
	case rebuilt:
		return true
	case !known:
		return false
	}
	return prev == nil || !prev.DirHead || prev.DirKeys
}

// dirFilterOf is the dir filter of every session of entries that knows
// only its directory.
func dirFilterOf(entries map[string]manifest.IndexEntry) []byte {
	f := manifest.NewDirFilter()
	for _, e := range entries {
		if e.Info.Project.OnlyDir() {
			manifest.AddDirTo(f, e.Info.Project.Dir)
		}
	}
	return f
}

func headKey(name string) string { return "index/head/" + name + ".json.zst" }

// headsIndex reports whether the prefix keeps project heads that every
// writer maintains (manifest.FeatureIndexHeads), so that a reader may
// trust them.
func (s *Store) headsIndex() bool {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	return slices.Contains(s.marker.Requires, manifest.FeatureIndexHeads)
}

// headState is what this Store queued for the heads, and the heads it
// read or wrote, by name.
type headState struct {
	wmu     sync.Mutex // one writer of the heads at a time
	mu      sync.Mutex // guards the fields below
	pending map[string]*headBatch
	read    map[string]headView
	// fetching are the readings under way that prefetchHead started,
	// each closed when its reading is noted (or failed); fetches counts
	// them, for Close.
	fetching map[string]chan struct{}
	fetches  sync.WaitGroup
	// dirBits is the dir filter (manifest.DirFilterBytes) of the
	// directories of the entries queued for the dirs head since the
	// last commit that took them (takeDirBits); nil: none. claimBits
	// is the same of the claims written (claims.go; takeClaimBits).
	dirBits, claimBits []byte
	// claims are the work trees' roots whose heads the projects' heads
	// queued in pending may claim (claimWanted), keyed by the two
	// heads' names (wantClaim).
	claims map[string]claimWanted
}

// takeDirBits returns the dir filter of what was queued for the dirs
// head (nil: nothing), for the commit being written, and forgets it;
// a commit that fails gives it back (returnDirBits).
func (hs *headState) takeDirBits() []byte { return hs.takeBits(&hs.dirBits) }

// takeClaimBits returns the dir filter of the claims written (nil:
// none), as takeDirBits does the directories'; a commit that fails gives
// them back with those (returnDirBits).
func (hs *headState) takeClaimBits() []byte { return hs.takeBits(&hs.claimBits) }

func (hs *headState) takeBits(bits *[]byte) []byte {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	f := *bits
	*bits = nil
	return f
}

// returnDirBits gives back what takeDirBits took, for the next commit.
func (hs *headState) returnDirBits(f []byte) {
	if f == nil {
		return
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.dirBits == nil {
		hs.dirBits = manifest.NewDirFilter()
	}
	manifest.MergeDirFilter(hs.dirBits, f)
}

// headBatch is what waits for the next write of one head.
type headBatch struct {
	entries map[string]manifest.IndexEntry
	buried  map[string]manifest.Tombstone
	// claimed are the directories' heads this (a project's) head now
	// holds the sessions of, each with the commit its claim was written
	// as of (IndexShard.Claimed); unclaimed, those whose claim it drops.
	claimed   map[string]int64
	unclaimed map[string]bool
	// floor, when not zero, is the oldest session of a claimed head
	// that is not Complete, whose sessions this batch carries: that
	// head lacks sessions no newer than it, so this head keeps none
	// older and is not Complete either, and each session it lacks is
	// no newer than the oldest it holds (claims.go).
	floor time.Time
}

func newHeadBatch() *headBatch {
	return &headBatch{entries: map[string]manifest.IndexEntry{}, buried: map[string]manifest.Tombstone{}}
}

// headView is a head as this Store last read or wrote it (doc nil: there
// was none).
type headView struct {
	doc  *manifest.IndexShard
	etag string
	// read is when this Store read it (zero: not read, kept from a
	// write): a reading under indexStale old vouches for a session's
	// segments as the partition would (freshHeadEntry).
	read time.Time
}

// queueHeads queues entries, which the partitions or a run now hold, for
// the heads of their projects; it reports whether one of them is the
// dirs head's.
func (s *Store) queueHeads(entries map[string]manifest.IndexEntry) (dirs bool) {
	hs := &s.heads
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for id, e := range entries {
		for _, name := range headsOf(e.Info.Project) {
			if name == dirsHead {
				dirs = true
				if hs.dirBits == nil {
					hs.dirBits = manifest.NewDirFilter()
				}
				manifest.AddDirTo(hs.dirBits, e.Info.Project.Dir)
			}
			b := hs.batch(name)
			if old, ok := b.entries[id]; !ok || old.Length <= e.Length {
				e.Resume = e.Resume.Where() // a listing needs no append state
				b.entries[id] = e
			}
		}
		hs.wantClaim(e.Info.Project)
	}
	return dirs
}

// queueHeadBurial queues tombstone t for the heads of project p, the
// deleted session's.
func (s *Store) queueHeadBurial(p agent.Project, t manifest.Tombstone) {
	hs := &s.heads
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, name := range headsOf(p) {
		b := hs.batch(name)
		b.buried[t.ID] = t
		delete(b.entries, t.ID)
	}
}

// batch is the queue of head name. Callers hold hs.mu.
func (hs *headState) batch(name string) *headBatch {
	if hs.pending == nil {
		hs.pending = map[string]*headBatch{}
	}
	b := hs.pending[name]
	if b == nil {
		b = newHeadBatch()
		hs.pending[name] = b
	}
	return b
}

// requeue puts b back for head name, where what was queued since wins.
func (hs *headState) requeue(name string, b *headBatch) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	q := hs.batch(name)
	for id, e := range b.entries {
		if old, ok := q.entries[id]; !ok || old.Length < e.Length {
			if _, gone := q.buried[id]; !gone {
				q.entries[id] = e
			}
		}
	}
	for id, t := range b.buried {
		q.buried[id] = t
		delete(q.entries, id)
	}
	q.mergeClaims(b)
}

// mergeClaims takes in b's claims, the claims it drops and its floor.
func (q *headBatch) mergeClaims(b *headBatch) {
	for name, at := range b.claimed {
		if q.claimed == nil {
			q.claimed = map[string]int64{}
		}
		q.claimed[name] = max(q.claimed[name], at)
	}
	for name := range b.unclaimed {
		if q.unclaimed == nil {
			q.unclaimed = map[string]bool{}
		}
		q.unclaimed[name] = true
	}
	if b.floor.After(q.floor) {
		q.floor = b.floor
	}
}

// writeHeads writes what is queued for the heads, each head once, in
// parallel. A head that fails keeps its batch queued for the next
// writer, and fails the write: the commit it comes before must wait, or
// a reader would miss what the head does not hold yet. The claims that
// are due go first (claimRoots), and what a claimed directory's head
// took goes on to the heads that claimed it (claims.go), in a round trip
// of its own, before the commit as well.
func (s *Store) writeHeads(ctx context.Context) error {
	hs := &s.heads
	hs.wmu.Lock()
	defer hs.wmu.Unlock()
	hs.mu.Lock()
	pending, claims := hs.pending, hs.claims
	hs.pending, hs.claims = nil, nil
	hs.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	s.claimRoots(ctx, claims, pending)
	written, err := s.putHeads(ctx, pending)
	if err != nil {
		return err
	}
	_, err = s.putHeads(ctx, claimantBatches(pending, written))
	return err
}

// putHeads writes each head of pending, in parallel, and returns each as
// written; a head that fails is queued again and fails the whole.
func (s *Store) putHeads(ctx context.Context, pending map[string]*headBatch) (map[string]*manifest.IndexShard, error) {
	hs := &s.heads
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	var mu sync.Mutex
	var failed []error
	written := map[string]*manifest.IndexShard{}
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		b := pending[name]
		g.Go(func() error {
			doc, err := s.putHead(gctx, name, b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				hs.requeue(name, b)
				failed = append(failed, err)
				return nil
			}
			written[name] = doc
			return nil
		})
	}
	_ = g.Wait()
	return written, errors.Join(failed...)
}

// putHead applies b to head name and writes it (writeHead); it returns
// the head as it now is.
func (s *Store) putHead(ctx context.Context, name string, b *headBatch) (*manifest.IndexShard, error) {
	var doc *manifest.IndexShard
	err := s.writeHead(ctx, name, func(was *manifest.IndexShard, damaged bool) *manifest.IndexShard {
		doc = headAfter(was, b, s.headsIndex() && !damaged, s.now())
		return doc
	})
	return doc, err
}

// writeHead writes head name as next makes it from the reading it has
// (nil: none; damaged: one that does not decode), with If-Match on that
// reading's ETag (If-None-Match: * when there was none), reading it again
// after each lost race. A head next leaves as it was is not written.
func (s *Store) writeHead(ctx context.Context, name string, next func(doc *manifest.IndexShard, damaged bool) *manifest.IndexShard) error {
	key := headKey(name)
	v, loaded, err := s.heldHead(ctx, name)
	if err != nil {
		return err
	}
	damaged := false
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !loaded {
			var err error
			v, err = s.readHead(ctx, name)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				return err
			}
			// A head that does not decode is written anew from what this
			// write knows, and not Complete; repair rebuilds the rest.
			damaged, loaded = err != nil, true
		}
		doc := next(v.doc, damaged)
		doc.Written = s.now().UTC()
		if v.doc != nil && sameHead(v.doc, doc) {
			return nil
		}
		data, err := s.codec.EncodeIndexShard(key, doc)
		if err != nil {
			return err
		}
		cond := putCond{ifNoneMatch: true}
		if v.etag != "" {
			cond = putCond{ifMatch: v.etag}
		}
		etag, err := s.put(ctx, key, data, cond, "application/zstd")
		if err == nil {
			s.noteHead(name, headView{doc: doc, etag: etag})
			return nil
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			return fmt.Errorf("write index head %s: %w", key, err)
		}
		loaded = false
		if errors.Is(err, errConflict) {
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("index head %s: too many concurrent updates", key)
}

// heldHead is head name as this Store last read or wrote it, waiting
// for a reading prefetchHead started rather than sending its own; loaded
// is false when it holds none.
func (s *Store) heldHead(ctx context.Context, name string) (v headView, loaded bool, err error) {
	hs := &s.heads
	hs.mu.Lock()
	v, loaded = hs.read[name]
	fetched := hs.fetching[name]
	hs.mu.Unlock()
	if !loaded && fetched != nil {
		select {
		case <-fetched:
		case <-ctx.Done():
			return headView{}, false, ctx.Err()
		}
		hs.mu.Lock()
		v, loaded = hs.read[name]
		hs.mu.Unlock()
	}
	return v, loaded, nil
}

// knownHead is head name as this Store holds it (heldHead), else as
// read now.
func (s *Store) knownHead(ctx context.Context, name string) (headView, error) {
	v, loaded, err := s.heldHead(ctx, name)
	if err != nil || loaded {
		return v, err
	}
	return s.readHead(ctx, name)
}

// rebuildHeads writes every project's head from all, the entries of the
// whole index (a catalog, or repair's reading of the sessions), grouped
// by head: each head then holds the newest manifest.HeadSize of its
// group, Complete when that is the whole group, and partial (what a
// damaged index hid may be missing) says none is. exact (repair) drops
// what a head holds of sessions all lacks, and names, the heads that
// exist, are rewritten even when all holds none of theirs (emptied);
// otherwise what a head holds stays, as a writer's since the reading of
// all. It reports whether the dirs head holds sessions.
func (s *Store) rebuildHeads(ctx context.Context, all map[string]manifest.IndexEntry, partial, exact bool, names []string) (dirs bool, err error) {
	groups := map[string]map[string]manifest.IndexEntry{}
	for _, name := range names {
		groups[name] = map[string]manifest.IndexEntry{}
	}
	for id, e := range all {
		e.Resume = e.Resume.Where()
		for _, name := range headsOf(e.Info.Project) {
			if groups[name] == nil {
				groups[name] = map[string]manifest.IndexEntry{}
			}
			groups[name][id] = e
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	var mu sync.Mutex
	for name, entries := range groups {
		g.Go(func() error {
			return s.writeHead(gctx, name, func(doc *manifest.IndexShard, damaged bool) *manifest.IndexShard {
				next := manifest.NewIndexShard(manifest.HeadName)
				if doc != nil {
					next.Tombstones = maps.Clone(doc.Tombstones)
					// A directory's claims stay, whatever the rebuild: a
					// claimer's head may hold a claim of it that readers
					// trust (claims.go). A project's head keeps its own
					// unless exact, which takes out the sessions they
					// brought, and they with them.
					next.Claims = slices.Clone(doc.Claims)
					if !exact {
						next.Claimed = maps.Clone(doc.Claimed)
					}
					for id, e := range doc.Sessions {
						if _, ok := entries[id]; ok || !exact {
							next.Put(e)
						}
					}
				}
				for _, e := range entries {
					next.Put(e)
				}
				expireHeadTombstones(next, s.now())
				next.Complete = !manifest.TrimNewest(next.Sessions, manifest.HeadSize) && !partial
				if name == dirsHead && len(next.Sessions) > 0 {
					mu.Lock()
					dirs = true
					mu.Unlock()
				}
				return next
			})
		})
	}
	return dirs, g.Wait()
}

// adoptHeads gives a prefix whose writers did not keep project heads
// (before manifest.FeatureIndexHeads) its heads, from the catalog this
// Store read (a sync's), then requires the feature, so that an older
// panto refuses the prefix from then on and readers trust the heads. The
// writers of this version keep the heads whether or not the marker
// requires them, so what they wrote since the catalog's reading is in
// the heads already; an older panto that opened the prefix before the
// marker changed may leave a fold out of them until repair (§P3).
func (s *Store) adoptHeads(ctx context.Context) error {
	if s.headsIndex() || !s.indexLog() {
		return nil
	}
	s.cat.mu.Lock()
	doc := s.cat.doc
	s.cat.mu.Unlock()
	if doc == nil {
		return nil // no catalog read: the next sync that reads one
	}
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	if s.headsIndex() {
		return nil
	}
	dirs, err := s.rebuildHeads(ctx, doc.Sessions, false, false, nil)
	if err != nil {
		return fmt.Errorf("write the project heads: %w", err)
	}
	if dirs {
		if err := s.commitDirHead(ctx, doc.Sessions); err != nil {
			return err
		}
	}
	return s.ensureFeature(ctx, manifest.FeatureIndexHeads)
}

// adoptDirFilter gives the index log the dir filter and DirKeys it
// lacks (its dirs head written by an earlier version, or an older
// panto's commit since) from the catalog this Store read, a sync's, so
// that a team's bucket gets them without a repair: the directories'
// heads first (rebuildDirKeyHeads), then the commit. Only when that
// catalog is the newest commit's: what went to the dirs head after it
// would be in no filter, and perhaps in no directory's head. A commit
// that finds the log moved on gives up; the next sync tries again.
func (s *Store) adoptDirFilter(ctx context.Context) error {
	if !s.headsIndex() || !s.indexLog() {
		return nil
	}
	s.cat.mu.Lock()
	doc := s.cat.doc
	s.cat.mu.Unlock()
	s.ilog.mu.Lock()
	last := s.ilog.last
	s.ilog.mu.Unlock()
	if doc == nil || !lacksDirIndex(last) || doc.Through != last.Through {
		return nil
	}
	if err := s.rebuildDirKeyHeads(ctx, doc.Sessions); err != nil {
		return err
	}
	s.ilog.wmu.Lock()
	defer s.ilog.wmu.Unlock()
	err := s.commitLog(ctx, logChanges{dirHead: true, dirFilter: dirFilterOf(doc.Sessions), dirFilterAt: last.Through}, nil, false)
	if errors.Is(err, errDirFilterMoved) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write the index log: %w", err)
	}
	return nil
}

// lacksDirIndex reports whether commit c (nil: none) says the dirs head
// holds sessions without the dir filter or DirKeys that spare readers
// from reading it.
func lacksDirIndex(c *manifest.IndexShard) bool {
	return c != nil && c.DirHead && (len(c.DirFilter) != manifest.DirFilterBytes || !c.DirKeys)
}

// rebuildDirKeyHeads writes, from all (the whole index), the head of
// each directory that a session knowing only its directory names: the
// sessions of all it holds, merged with what it holds already
// (rebuildHeads: a writer's since the reading of all). A prefix whose
// dirs head a panto that predates DirKeys wrote gets them so. The dirs
// head is written with them, and changes only if it lacked one.
func (s *Store) rebuildDirKeyHeads(ctx context.Context, all map[string]manifest.IndexEntry) error {
	dirs := map[string]bool{}
	for _, e := range all {
		if e.Info.Project.OnlyDir() {
			dirs[keyHead(filepath.Clean(e.Info.Project.Dir))] = true
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	theirs := map[string]manifest.IndexEntry{}
	for id, e := range all {
		if slices.ContainsFunc(headsOf(e.Info.Project), func(name string) bool { return dirs[name] }) {
			theirs[id] = e
		}
	}
	if _, err := s.rebuildHeads(ctx, theirs, false, false, nil); err != nil {
		return fmt.Errorf("write the directories' heads: %w", err)
	}
	return nil
}

// errDirFilterMoved: a dir filter made from the catalog as of one
// commit would go after a newer one (logChanges.dirFilterAt).
var errDirFilterMoved = errors.New("the index log moved past the catalog the dir filter was made from")

// commitDirHead commits that the dirs head holds sessions
// (IndexShard.DirHead), with the dir filter of all, every session of the
// index, and DirKeys. The caller wrote every head from all
// (rebuildHeads). It commits even when the newest commit says all that
// already: a writer of this version that folded a session before the
// heads were adopted (or repaired) made a filter of its own directories
// alone, and this commit's, made from all, takes that one in.
func (s *Store) commitDirHead(ctx context.Context, all map[string]manifest.IndexEntry) error {
	s.ilog.wmu.Lock()
	defer s.ilog.wmu.Unlock()
	if err := s.commitLog(ctx, logChanges{dirHead: true, dirFilter: dirFilterOf(all)}, nil, false); err != nil {
		return fmt.Errorf("write the index log: %w", err)
	}
	return nil
}

// headAfter is head doc (nil: none) with b applied, at time now. A head
// that was not there starts Complete when every writer keeps the heads
// (known): then none means the project had no session in the partitions
// and runs.
func headAfter(doc *manifest.IndexShard, b *headBatch, known bool, now time.Time) *manifest.IndexShard {
	var next *manifest.IndexShard
	if doc != nil {
		next = doc.Clone()
	} else {
		next = manifest.NewIndexShard(manifest.HeadName)
		next.Complete = known
	}
	for _, e := range b.entries {
		next.Put(e)
	}
	for _, t := range b.buried {
		next.Bury(t)
	}
	for name, at := range b.claimed {
		if next.Claimed == nil {
			next.Claimed = map[string]int64{}
		}
		next.Claimed[name] = max(next.Claimed[name], at)
	}
	for name := range b.unclaimed {
		delete(next.Claimed, name)
	}
	if len(next.Claimed) == 0 {
		next.Claimed = nil
	}
	if !b.floor.IsZero() {
		for id, e := range next.Sessions {
			if e.Info.Modified.Before(b.floor) {
				delete(next.Sessions, id)
			}
		}
		next.Complete = false
	}
	expireHeadTombstones(next, now)
	if manifest.TrimNewest(next.Sessions, manifest.HeadSize) {
		next.Complete = false
	}
	return next
}

// expireHeadTombstones keeps a head's tombstones for the hour in which a
// writer may still hold an entry it took before the deletion, as the
// log's commits keep theirs (nextCommit), at most manifest.HeadSize.
func expireHeadTombstones(h *manifest.IndexShard, now time.Time) {
	for id, t := range h.Tombstones {
		if now.Sub(t.Deleted) >= logTombstoneGrace {
			delete(h.Tombstones, id)
		}
	}
	if len(h.Tombstones) > manifest.HeadSize {
		h.Tombstones = newestTombstones(h.Tombstones, manifest.HeadSize)
	}
	if len(h.Tombstones) == 0 {
		h.Tombstones = nil
	}
}

// sameHead reports whether a and b hold the same sessions, tombstones,
// completeness and claims: writing b over a would change nothing a
// reader or writer sees.
func sameHead(a, b *manifest.IndexShard) bool {
	return a.Complete == b.Complete && maps.Equal(a.Sessions, b.Sessions) && maps.Equal(a.Tombstones, b.Tombstones) &&
		slices.Equal(a.Claims, b.Claims) && maps.Equal(a.Claimed, b.Claimed)
}

// readHead reads head name and keeps the reading (noteHead); a head
// that is not there is the zero view and no error.
func (s *Store) readHead(ctx context.Context, name string) (headView, error) {
	v, err := s.fetchHead(ctx, name)
	if err == nil {
		s.noteHead(name, v)
	}
	return v, err
}

// fetchHead reads head name, as readHead does, without keeping it.
func (s *Store) fetchHead(ctx context.Context, name string) (headView, error) {
	key := headKey(name)
	data, etag, err := s.b.get(ctx, key, "")
	if errors.Is(err, errNotFound) {
		return headView{}, nil
	}
	if err != nil {
		return headView{}, fmt.Errorf("read index head %s: %w", key, err)
	}
	doc, err := s.decodeShardObject(key, manifest.HeadName, data)
	if err != nil {
		return headView{etag: etag}, err
	}
	return headView{doc: doc, etag: etag, read: s.now()}, nil
}

// headFetchTimeout bounds a reading prefetchHead starts, which no
// caller waits for.
const headFetchTimeout = time.Minute

// prefetchHead reads, in the background, the heads of project p that
// this Store has not read (prefetchHeadNamed).
func (s *Store) prefetchHead(ctx context.Context, p agent.Project) {
	for _, name := range headsOf(p) {
		s.prefetchHeadNamed(ctx, name)
	}
	if root := s.claimDue(p); root != "" {
		s.prefetchHeadNamed(ctx, root)
	}
}

// prefetchHeadNamed reads, in the background, head name when this
// Store has not read it: the fold of its sessions, at Close, writes
// the head with If-Match on what it read, and would otherwise read it
// first, a round trip of the exit's. An append calls it, so that the
// reading goes out with the segment, a turn before the exit. A reading
// that fails is left to the write; one that lands after a write of this
// Store's is dropped (the write's is newer).
func (s *Store) prefetchHeadNamed(ctx context.Context, name string) {
	ctx = context.WithoutCancel(ctx)
	hs := &s.heads
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, ok := hs.read[name]; ok {
		return
	}
	if _, ok := hs.fetching[name]; ok {
		return
	}
	if hs.fetching == nil {
		hs.fetching = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	hs.fetching[name] = done
	hs.fetches.Add(1)
	go func() {
		defer hs.fetches.Done()
		defer close(done)
		fctx, cancel := context.WithTimeout(ctx, headFetchTimeout)
		defer cancel()
		v, err := s.fetchHead(fctx, name)
		hs.mu.Lock()
		defer hs.mu.Unlock()
		delete(hs.fetching, name)
		if _, ok := hs.read[name]; !ok && err == nil {
			if hs.read == nil {
				hs.read = map[string]headView{}
			}
			hs.read[name] = v
		}
	}()
}

// waitHeadFetches waits for the readings prefetchHead started, or ctx.
func (s *Store) waitHeadFetches(ctx context.Context) { waitGroup(ctx, &s.heads.fetches) }

// waitGroup waits for wg, or ctx.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// freshHeadEntry is session id's entry in a head this Store read less
// than indexStale ago (the longest, should two hold it); it makes no
// request. A project's page read from its head (`panto -c` in a work
// tree whose sessions the recent view does not hold) so tells the load
// that follows where the session's segments are.
func (s *Store) freshHeadEntry(id string) (manifest.IndexEntry, bool) {
	hs := &s.heads
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var best manifest.IndexEntry
	found := false
	for _, v := range hs.read {
		if v.doc == nil || v.read.IsZero() || s.now().Sub(v.read) >= indexStale {
			continue
		}
		if e, ok := v.doc.Sessions[id]; ok && (!found || e.Length > best.Length) {
			best, found = e, true
		}
	}
	return best, found
}

// freshHeadIDs is the ids of the sessions the heads this Store read
// recently (indexStale) hold that start with prefix.
func (s *Store) freshHeadIDs(prefix string) []string {
	hs := &s.heads
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var ids []string
	for _, v := range hs.read {
		if v.doc == nil || v.read.IsZero() || s.now().Sub(v.read) >= indexStale {
			continue
		}
		for id := range v.doc.Sessions {
			if strings.HasPrefix(id, prefix) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// noteHead keeps v as this Store's reading of head name.
func (s *Store) noteHead(name string, v headView) {
	hs := &s.heads
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.read == nil {
		hs.read = map[string]headView{}
	}
	hs.read[name] = v
}

// newestFromHeads answers a project's page from the heads names, read
// after c, the newest commit (a fold writes the heads before the commit
// that takes its entries out of the unfolded set, so no session leaves
// both between the two reads), or beside c once the log's LIST had named
// it (Open's, WithPageAhead: openedHeads): each session's entry is the longest of
// c's recent and unfolded ones and the heads', less the sessions c says
// were deleted. ok is false when the heads cannot tell which are the
// limit newest: a head that is not Complete holds each session it lacks
// no newer than its oldest, so only the sessions newer than every such
// oldest are known to be all there are; when they are fewer than limit
// (or a head does not decode), the caller reads the catalog.
func (s *Store) newestFromHeads(ctx context.Context, c *manifest.IndexShard, names []string, claimed string, limit int, keep func(agent.SessionInfo) bool) (logs []store.Log, ok bool, err error) {
	docs, ok, err := s.pageHeads(ctx, c, names)
	if err != nil || !ok {
		return nil, false, err
	}
	if claimed != "" && !trustsClaim(docs[0], claimed, c.ClaimsSince) {
		// c says names[0], the project's head, claimed the root's
		// (claimedRoot), and it holds no claim c vouches for: read the
		// root's after all.
		more, ok, err := s.pageHeads(ctx, c, []string{claimed})
		if err != nil || !ok {
			return nil, false, err
		}
		docs = append(docs, more...)
	}
	entries := map[string]manifest.IndexEntry{}
	add := func(from map[string]manifest.IndexEntry) {
		for id, e := range from {
			if _, gone := c.Tombstones[id]; gone || !keep(e.Info) {
				continue
			}
			if old, ok := entries[id]; !ok || old.Length < e.Length {
				entries[id] = e
			}
		}
	}
	add(c.Recent)
	add(c.Unfolded)
	var floor time.Time // a session no newer than this may be missing
	for _, h := range docs {
		if h == nil {
			continue // none: the project has no session the partitions hold
		}
		add(h.Sessions)
		if h.Complete {
			continue
		}
		if len(h.Sessions) == 0 {
			return nil, false, nil
		}
		if oldest := oldestModified(h.Sessions); oldest.After(floor) {
			floor = oldest
		}
	}
	for _, e := range entries {
		if floor.IsZero() || e.Info.Modified.After(floor) {
			logs = append(logs, store.Log{Info: e.Info, Checkpoint: store.Checkpoint{Length: e.Length, SHA256: e.SHA256}})
		}
	}
	if len(logs) < limit && !floor.IsZero() {
		return nil, false, nil
	}
	sortLogsNewestFirst(logs)
	return logs[:min(limit, len(logs))], true, nil
}

// pageHeads reads heads names for a page after commit c (as Open read
// them beside c, when it did); ok is false when one does not decode.
func (s *Store) pageHeads(ctx context.Context, c *manifest.IndexShard, names []string) (docs []*manifest.IndexShard, ok bool, err error) {
	docs = make([]*manifest.IndexShard, len(names))
	damaged := make([]bool, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			var v headView
			var err error
			if h, ok := s.openedHead(name, c.Through); ok {
				v, err = h.v, h.err // read beside c, once the LIST named it
			} else {
				v, err = s.readHead(gctx, name)
			}
			if errors.Is(err, ErrCorrupt) {
				damaged[i] = true
				return nil
			}
			docs[i] = v.doc
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	return docs, !slices.Contains(damaged, true), nil
}

// oldestModified is the earliest Modified of entries (not empty).
func oldestModified(entries map[string]manifest.IndexEntry) time.Time {
	var oldest time.Time
	for _, e := range entries {
		if oldest.IsZero() || e.Info.Modified.Before(oldest) {
			oldest = e.Info.Modified
		}
	}
	return oldest
}
