package objstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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
	etag string
	err  error
}

// logBase returns whole commit k, read once per Store (bases are never
// rewritten: a number is created once), or from the disk when the
// Store keeps an index cache and etag (the one the commit stored
// against it names; "" when not known) says the cached one is it.
func (s *Store) logBase(ctx context.Context, k int64, etag string) (*manifest.IndexShard, error) {
	c, err := s.logBaseOnce(ctx, k, etag)
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The fetch this reader joined ended with its own caller (an
		// Open's prefetch): read it once more, for this one.
		return s.logBaseOnce(ctx, k, etag)
	}
	return c, err
}

// logBaseOnce is one try of logBase: the fetch under way, or a new one.
func (s *Store) logBaseOnce(ctx context.Context, k int64, etag string) (*manifest.IndexShard, error) {
	lg := &s.ilog
	lg.mu.Lock()
	f, ok := lg.bases[k]
	if ok && etag != "" {
		// The fields of a fetch are its fetcher's until done is closed.
		select {
		case <-f.done:
			if f.etag != "" && f.etag != etag { // another bucket's commit k
				delete(lg.bases, k)
				ok = false
			}
		default:
		}
	}
	if !ok {
		f = &baseFetch{done: make(chan struct{})}
		if lg.bases == nil {
			lg.bases = map[int64]*baseFetch{}
		}
		lg.bases[k] = f
		lg.mu.Unlock()
		if c, cached := s.loadBase(k); c != nil && etag != "" && cached == etag {
			f.c, f.etag = c, cached
		} else {
			f.c, f.etag, f.err = s.readStoredCommit(ctx, k, "")
			if f.err == nil && f.c.Base != 0 {
				f.err = fmt.Errorf("%s: %w: stored against commit %d, and named a base", s.objectURL(logKey(k)), ErrCorrupt, f.c.Base)
			}
			if f.err == nil {
				s.saveBase(f.c, f.etag)
			}
		}
		if f.err != nil {
			lg.mu.Lock()
			if lg.bases[k] == f {
				delete(lg.bases, k) // the next reader tries again
			}
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

// noteBase keeps c, a whole commit this Store read or wrote with etag,
// as a base (and on disk, for the next run), and forgets the bases more
// than two full intervals before it.
func (s *Store) noteBase(c *manifest.IndexShard, etag string) {
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
		f := &baseFetch{done: make(chan struct{}), c: c, etag: etag}
		close(f.done)
		lg.bases[c.Through] = f
		if c.Through%logFullEvery == 0 {
			go s.saveBase(c, etag)
		}
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

// knownBase is whole commit k and its ETag when this Store holds it,
// without a request.
func (s *Store) knownBase(k int64) (*manifest.IndexShard, string) {
	lg := &s.ilog
	lg.mu.Lock()
	f, ok := lg.bases[k]
	lg.mu.Unlock()
	if !ok {
		return nil, ""
	}
	select {
	case <-f.done:
		return f.c, f.etag
	default:
		return nil, ""
	}
}

// storedCommit is commit next as its writer stores it: against the base
// of prev (the commit it follows) when it may be, whole otherwise (see
// the top of this file). whole says the caller needs it whole (a
// deletion's, a repair's, a move's).
func (s *Store) storedCommit(next, prev *manifest.IndexShard, prevETag string, whole bool) *manifest.IndexShard {
	if whole || prev == nil || next.Through%logFullEvery == 0 {
		return next
	}
	k := prev.Base
	if k == 0 {
		k = prev.Through
	}
	base, baseETag := s.knownBase(k)
	if base == nil && k == prev.Through {
		base, baseETag = prev, prevETag
	}
	if base == nil || next.Through-k >= logFullEvery {
		return next
	}
	delta, ok := manifest.DeltaRecent(next.Recent, base.Recent)
	if !ok || len(delta) > manifest.RecentSize/2 {
		// More than half the view changed since the base (a bulk
		// write's commit): stored whole, this one is the base of the
		// commits after it, which then send what changed since it, not
		// since the base (11 KB a commit at 100,000 sessions, until the
		// next multiple of 16).
		return next
	}
	stored := *next
	stored.Base, stored.BaseETag, stored.Recent = k, baseETag, delta
	if s.runDeltas() {
		// The run pages too: past a few thousand entries in runs they
		// are most of a commit (250 pages, 8 KB of a turn's 15, at
		// 12,500 entries), and a commit changes a page or two.
		if added, gone, ok := manifest.DeltaRuns(next.Runs, base.Runs); ok {
			stored.Runs, stored.RunsDelta, stored.RunsGone = added, true, gone
		}
	}
	return &stored
}

// runDeltas reports whether the marker lets a commit stored against a
// base store its run pages as a delta (manifest.FeatureIndexRunDeltas).
func (s *Store) runDeltas() bool {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	return slices.Contains(s.marker.Requires, manifest.FeatureIndexRunDeltas)
}

// adoptRunDeltas requires manifest.FeatureIndexRunDeltas of a prefix
// whose commits name run pages, so that the commits after store them
// against their base; an older panto refuses the prefix from then on.
// Best effort, tried once per Store (credentials that may not write the
// marker would otherwise cost every commit a marker's GET and PUT):
// without it, commits store their pages whole, as before.
func (s *Store) adoptRunDeltas(ctx context.Context, last *manifest.IndexShard) {
	if last == nil || len(last.Runs) == 0 || !s.unfoldedIndex() || s.runDeltas() || s.runDeltasTried.Swap(true) {
		return
	}
	_ = s.ensureFeature(ctx, manifest.FeatureIndexRunDeltas)
}

// readWholeCommit reads commit n as stored and, when it is stored against
// a base, makes its recent view whole from the base (read once, logBase).
// A base that is gone or damaged makes the commit unreadable: ErrCorrupt.
// makeWhole makes c, read with etag, whole from its base, if it has
// one; a whole one is kept as a base.
func (s *Store) makeWhole(ctx context.Context, c *manifest.IndexShard, etag string) error {
	if c.Base == 0 {
		s.noteBase(c, etag)
		return nil
	}
	base, err := s.logBase(ctx, c.Base, c.BaseETag)
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
// n's; and, when the log's listing (objects, nil: none) names a commit
// since that one as big as a whole one (wholeSince), that commit too.
// The reading joins wg: Open waits for it as it waits for n's, so that
// no request of Open's is still to go out once Open returns.
func (s *Store) prefetchBase(ctx context.Context, n int64, objects []listed, wg *sync.WaitGroup) {
	k := guessBase(n)
	if n%logFullEvery == 0 || k == n {
		return
	}
	if h, _, ok := readCacheFile(s.basePath()); ok && h.N >= k && h.N < n {
		// On disk, and newer than the guess (a deletion's, repair's or
		// move's whole commit since the multiple of 16): most likely
		// n's base, and the commit's base ETag says whether it serves.
		return
	}
	guesses := []int64{k}
	if v := wholeSince(k, n, objects); v > 0 {
		guesses = append(guesses, v)
	}
	for _, k := range guesses {
		if c, _ := s.knownBase(k); c != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.logBase(ctx, k, "")
		}()
	}
}

// wholeSince is the newest commit after k and before n that the listing
// objects says is most likely stored whole (0: none): one at least 3/4
// the size of the biggest from k on. A commit stored against a base
// holds at most half the recent view (storedCommit), so one stored whole
// since the multiple of 16 (a bulk write's, a deletion's) is bigger
// than those after it, and is their base. A wrong guess costs a GET
// that goes out with the others, not a round trip.
func wholeSince(k, n int64, objects []listed) int64 {
	sizes := map[int64]int64{}
	var most int64
	for _, o := range objects {
		if v := newestListed([]listed{o}); v >= k && v < n {
			sizes[v] = o.size
			most = max(most, o.size)
		}
	}
	for v := n - 1; v > k; v-- {
		if size, ok := sizes[v]; ok && size > 0 && size*4 >= most*3 {
			return v
		}
	}
	return 0
}

// The newest base this machine read is kept beside the bucket's cached
// catalog (WithIndexCache), its header (number and ETag) then the commit
// as stored: the next run makes the newest commit whole
// without reading it, when that commit names it with the same ETag.

func (s *Store) basePath() string {
	if p := s.catalogPath(); p != "" {
		return strings.TrimSuffix(p, ".json.zst") + ".base.json.zst"
	}
	return ""
}

// loadBase is commit k and its ETag from the disk, nil when it is not
// the one kept there.
func (s *Store) loadBase(k int64) (*manifest.IndexShard, string) {
	h, doc, ok := readCacheFile(s.basePath())
	if !ok || h.N != k || h.ETag == "" {
		return nil, ""
	}
	c, err := s.codec.DecodeIndexShard(logKey(k), doc)
	if err != nil || c.Shard != manifest.LogName || c.Through != k || c.Base != 0 {
		return nil, ""
	}
	return c, h.ETag
}

// saveBase keeps c, whole commit of ETag etag, on disk when it is newer
// than the one kept. A failure only costs the next run a GET.
func (s *Store) saveBase(c *manifest.IndexShard, etag string) {
	path := s.basePath()
	if path == "" || etag == "" {
		return
	}
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	if h, _, ok := readCacheFile(path); ok && h.N >= c.Through {
		return
	}
	doc, err := s.codec.EncodeIndexShard(logKey(c.Through), c)
	if err != nil {
		return
	}
	writeCacheFile(path, cacheHeader{N: c.Through, ETag: etag}, doc)
}
