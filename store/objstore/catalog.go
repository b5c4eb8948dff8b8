package objstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
)

// The catalog is every entry and tombstone of the index: what sync
// compares with the other side (Logs, Tombstones). Read from the 256
// partitions it costs what the archive weighs. With WithIndexCache a
// Store keeps it on disk between runs, with the number of the newest
// commit of the index log it includes, as restic's readers cache the
// index files and Litestream's remember their position: the next run
// reads the newest commit (Open did) and, when the log has not moved,
// nothing else; when it moved by at most logKeep commits, those commits
// (each holds what its write changed), in parallel; else the partitions.
// So a sync with nothing to do costs Open's requests, and one after a
// few changes reads those changes, whatever the size of the archive.
//
// A commit follows its partitions' write, so a writer that died between
// the two leaves a change the log does not show: the cache lags there,
// as the index does after such a crash (§P2), which sync handles (an
// append at a stale end meets the segment there and reads the log). To
// bound how long, a cache older than catalogRefresh is read again whole.

// catalogRefresh is how old a cached catalog may be before a full read.
const catalogRefresh = 24 * time.Hour

// WithIndexCache keeps the index's catalog in dir between runs (panto-sync:
// $XDG_CACHE_HOME/panto/index), one file per bucket and prefix, sealed
// in an encrypted prefix.
func WithIndexCache(dir string) Option { return func(o *options) { o.indexCache = dir } }

// catalogState is the catalog this Store read last: what cachedEntry
// resumes appends from when the partitions were not read.
type catalogState struct {
	// reading: one reading of the catalog at a time, so that readings
	// that overlap (a sync lists logs and tombstones at once) make one.
	reading sync.Mutex
	mu      sync.Mutex
	entries map[string]manifest.IndexEntry
	fresh   time.Time
	// doc and etag are the catalog last read whole or caught up (format
	// 4), and the ETag of its newest commit: the next reading in this
	// process starts from it as from the disk's.
	doc  *manifest.IndexShard
	etag string
}

// The catalog is stored on disk as a line of JSON, the ETag of the
// newest commit it includes (so that a bucket made anew under the same
// name, whose commits are numbered alike, is never taken for the one
// cached), then a shard document named catalogName, its Through that
// commit's number and Written when the partitions were last read whole,
// in the machine's form (manifest.Codec.EncodeCatalog: gob, which decodes
// in a sixth of JSON's time; an earlier version's JSON still reads).
const catalogName = "catalog"

// cacheHeader is the first line of a file of the index cache (the
// catalog, the base kept beside it): the number of the commit the
// document after it is, or includes, and that commit's ETag.
type cacheHeader struct {
	ETag string `json:"etag"`
	// N is the commit's number (also the document's Through), here so
	// that Open can read it without decoding the catalog.
	N int64 `json:"n,omitempty"`
}

// readCacheFile reads a file of the index cache: its header and the
// document after it (stored bytes, as the bucket holds them); ok is false
// when there is none or it is damaged.
func readCacheFile(path string) (h cacheHeader, doc []byte, ok bool) {
	if path == "" {
		return h, nil, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return h, nil, false
	}
	line, doc, cut := bytes.Cut(data, []byte("\n"))
	if !cut || json.Unmarshal(line, &h) != nil {
		return cacheHeader{}, nil, false
	}
	return h, doc, true
}

// writeCacheFile writes h and doc to path through a temporary file, so
// that a reader never sees half of it; a failure leaves path as it was
// (and only costs the next run a read of the bucket).
func writeCacheFile(path string, h cacheHeader, doc []byte) {
	line, err := json.Marshal(h)
	if err != nil {
		return
	}
	data := append(append(line, '\n'), doc...)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cache-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		_ = os.Remove(tmp.Name())
	}
}

// cachedCommitNumber is the number of the newest commit the cached
// catalog includes (0: no cache): the commit Open guesses is still the
// newest. Only the header line is read.
func (s *Store) cachedCommitNumber() int64 {
	path := s.catalogPath()
	if path == "" {
		return 0
	}
	noted := s.notedCommitNumber(path)
	f, err := os.Open(path)
	if err != nil {
		return noted
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return noted
	}
	var h cacheHeader
	if json.Unmarshal(line, &h) != nil {
		return noted
	}
	return max(h.N, noted)
}

// A Store that reads no catalog (a local-first panto's: its catch-up
// plans from its shipped record) still knows the newest commit it read
// or wrote. Close notes its number beside the catalog's path, so that
// the next Open reads that commit with its LIST, in one round trip,
// when the log has not moved since (prefetchLog).
const newestNoteSuffix = ".newest"

// notedCommitNumber is the number Close last noted for the catalog at
// path (0: none).
func (s *Store) notedCommitNumber(path string) int64 {
	data, err := os.ReadFile(path + newestNoteSuffix)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// noteNewestCommit notes the newest commit this Store knows, when it
// keeps an index cache and the note says otherwise. Best-effort: a note
// that is missing or wrong costs the next Open a round trip, no more.
func (s *Store) noteNewestCommit() {
	path := s.catalogPath()
	s.ilog.mu.Lock()
	n, known := s.ilog.n, s.ilog.known
	if st := s.ilog.stored; st != nil && (!known || st.n > n) {
		n, known = st.n, true // kept aside by Open (pageahead.go): as newest
	}
	s.ilog.mu.Unlock()
	if path == "" || !known || n <= 0 || s.notedCommitNumber(path) == n {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".newest-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(strconv.FormatInt(n, 10) + "\n")
	if cerr := tmp.Close(); werr == nil && cerr == nil {
		os.Rename(tmp.Name(), path+newestNoteSuffix)
	}
}

// catalogPath is where this prefix's catalog is cached, "" without a
// cache.
func (s *Store) catalogPath() string {
	if s.indexCache == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s.endpoint + "\n" + s.b.url("")))
	return filepath.Join(s.indexCache, hex.EncodeToString(sum[:12])+".json.zst")
}

// catalog returns every entry and tombstone of the index. A damaged
// partition does not hide the others: its error comes with the rest (and
// nothing is cached). Without a cache on disk, the process keeps what it
// read (a sync lists its logs, then its tombstones: one reading).
func (s *Store) catalog(ctx context.Context) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	if err := s.checkMoved(ctx); err != nil {
		return nil, nil, err
	}
	path := s.catalogPath() // "": no cache on disk, the process's own alone
	if !s.indexLog() {
		return s.readIndexAll(ctx, s.shardNames())
	}
	s.cat.reading.Lock()
	defer s.cat.reading.Unlock()
	for attempt := 0; ; attempt++ {
		all, tombs, err := s.catalogOnce(ctx, path)
		if errors.Is(err, errRunGone) && attempt < 3 {
			s.pageGone() // a page folded since the commit was read: again
			continue
		}
		return all, tombs, err
	}
}

// catalogOnce is one try of catalog, under s.cat.reading.
func (s *Store) catalogOnce(ctx context.Context, path string) (map[string]manifest.IndexEntry, map[string]manifest.Tombstone, error) {
	newest, err := s.newestCommit(ctx)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, nil, err
	}
	var n int64
	if newest != nil {
		n = newest.Through
	}
	etag := s.newestETag()
	// empty: the log has no commit (not one that does not decode), so a
	// catalog kept at commit 0 is still the index.
	empty := n == 0 && err == nil
	s.cat.mu.Lock()
	mem, memETag := s.cat.doc, s.cat.etag
	s.cat.mu.Unlock()
	if mem != nil && (n > 0 || empty && mem.Through == 0) {
		if c, ok := s.catchUpCatalog(ctx, mem, memETag, n, etag, false); ok {
			if c != mem {
				s.saveCatalog(path, c, etag)
			}
			s.noteCatalog(c, etag)
			return c.Sessions, c.Tombstones, nil
		}
	}
	if cached, cachedETag := s.loadCatalog(path); cached != nil && (n > 0 || empty && cached.Through == 0) && s.now().Sub(cached.Written) < catalogRefresh {
		if c, ok := s.catchUpCatalog(ctx, cached, cachedETag, n, etag, false); ok {
			if c != cached {
				s.saveCatalog(path, c, etag)
			}
			s.noteCatalog(c, etag)
			return c.Sessions, c.Tombstones, nil
		}
	}
	var logErr error
	if newest == nil && errors.Is(err, ErrCorrupt) && s.unfoldedIndex() {
		// The newest commit does not decode: its unfolded entries are
		// the ones before it had, and nothing is cached.
		newest, logErr = s.newestReadable(ctx)
		if logErr != nil && !errors.Is(logErr, ErrIndexDamaged) {
			return nil, nil, logErr
		}
	}
	var all map[string]manifest.IndexEntry
	var tombs map[string]manifest.Tombstone
	if empty && s.created {
		// This Store made the prefix, and nothing was committed since:
		// no partition was written (each write of one commits), so the
		// index is empty without 256 GETs that would say so.
		all, tombs, err = map[string]manifest.IndexEntry{}, map[string]manifest.Tombstone{}, nil
	} else {
		var swept sync.WaitGroup
		if err == nil {
			swept.Go(func() { s.sweepUnnamedPages(ctx, newest) })
		}
		all, tombs, err = s.readPartitions(ctx, s.shardNames(), newest)
		swept.Wait()
	}
	if all == nil || err != nil || logErr != nil {
		return all, tombs, errors.Join(err, logErr)
	}
	// Kept at commit 0 too (a log that has none: a new bucket): the
	// commits from 1 on then bring it up to date, so that the run after a
	// first push reads what the push committed, not the partitions.
	c := &manifest.IndexShard{Shard: manifest.LogName, Through: n, Written: s.now().UTC(), Sessions: all, Tombstones: tombs}
	s.saveCatalog(path, c, etag)
	s.noteCatalog(c, etag)
	return all, tombs, nil
}

// catchUpKept brings the catalog this Store read up to the newest commit
// it knows, from the commits and run pages it holds in memory (the ones
// it wrote: a sync's run), and reports whether it moved. Nothing is sent:
// when what it holds is not enough (a fold of pages it did not hold,
// another writer's commit it did not read), the catalog stays where it
// was and the next run catches up from the bucket. saveKeptCatalog then
// caches it, so that the next run, which finds the log where this one
// left it, reads no page of this one's write back. A run's commit does
// both (a push does not Close its stores: replica.Copy flushed them), and
// so does Close.
func (s *Store) catchUpKept(ctx context.Context) bool {
	if s.catalogPath() == "" || !s.indexLog() {
		return false
	}
	s.cat.reading.Lock()
	defer s.cat.reading.Unlock()
	s.cat.mu.Lock()
	doc, docETag := s.cat.doc, s.cat.etag
	s.cat.mu.Unlock()
	s.ilog.mu.Lock()
	n, etag, known := s.ilog.n, s.ilog.etag, s.ilog.known
	s.ilog.mu.Unlock()
	if doc == nil || !known || n <= doc.Through {
		return false
	}
	c, ok := s.catchUpCatalog(ctx, doc, docETag, n, etag, true)
	if ok {
		s.noteCatalog(c, etag)
	}
	return ok
}

// saveKeptCatalog caches the catalog this Store holds on disk
// (catchUpKept).
func (s *Store) saveKeptCatalog() {
	s.cat.mu.Lock()
	doc, etag := s.cat.doc, s.cat.etag
	s.cat.mu.Unlock()
	if doc == nil {
		return
	}
	s.saveCatalog(s.catalogPath(), doc, etag)
	// And the base of the newest commit (the commit itself when stored
	// whole), so that the next run makes that commit whole without a
	// GET of its base.
	s.ilog.mu.Lock()
	last, lastETag := s.ilog.last, s.ilog.etag
	s.ilog.mu.Unlock()
	switch {
	case last == nil:
	case last.Base == 0:
		s.saveBase(last, lastETag)
	default:
		if base, baseETag := s.knownBase(last.Base); base != nil {
			s.saveBase(base, baseETag)
		}
	}
}

// newestETag is the ETag of the newest commit this Store read.
func (s *Store) newestETag() string {
	s.ilog.mu.Lock()
	defer s.ilog.mu.Unlock()
	return s.ilog.etag
}

// catchUpCatalog brings cached, which includes the commits through its
// Through (whose ETag was cachedETag), to commit n (ETag etag) by
// applying the commits after it; ok is false when that cannot be done
// (too far behind, a commit pruned or damaged, or another bucket's).
// keptOnly: from what this Store holds in memory alone, without a
// request (ok is false when that is not enough).
func (s *Store) catchUpCatalog(ctx context.Context, cached *manifest.IndexShard, cachedETag string, n int64, etag string, keptOnly bool) (*manifest.IndexShard, bool) {
	from := cached.Through
	if from == n {
		return cached, cachedETag == etag
	}
	if from > n || n-from > logKeep {
		return nil, false
	}
	// Commit from itself too: its ETag says it is the one cached. A
	// catalog cached at commit 0 (none yet) is the partitions as they
	// were before the log's first commit, so commits 1 to n, all still
	// there, bring it up to date whatever bucket holds them.
	commits := make([]*manifest.IndexShard, n-from+1)
	etags := make([]string, len(commits))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range commits {
		if from+int64(i) == 0 {
			commits[i], etags[i] = &manifest.IndexShard{Shard: manifest.LogName}, cachedETag
			continue
		}
		if keptOnly {
			k, ok := s.keptCommitOf(from + int64(i))
			if !ok {
				return nil, false
			}
			commits[i], etags[i] = k.c, k.etag
			continue
		}
		g.Go(func() error {
			var err error
			commits[i], etags[i], err = s.readKeptCommit(gctx, from+int64(i))
			return err
		})
	}
	if err := g.Wait(); err != nil || etags[0] != cachedETag {
		return nil, false
	}
	// A bulk write's commit omits its changes: they are in the pages of
	// the run it added (runs.go), or else only in the partitions; a
	// commit this Store wrote, it may hold them (keepOmitted).
	own := make([]*logChanges, len(commits))
	for i := 1; i < len(commits); i++ {
		if commits[i].Omitted > 0 {
			own[i], _ = s.keptOmitted(from+int64(i), etags[i])
		}
	}
	pages, ok := s.catchUpPages(commits, own)
	if !ok {
		return nil, false
	}
	c := cached.Clone()
	if len(pages) > 0 {
		if keptOnly && !s.pagesKept(pages) {
			return nil, false
		}
		docs, damaged, err := s.readRunPages(ctx, pages)
		if err != nil || len(damaged) > 0 {
			return nil, false
		}
		// Before the commits' own changes, whose deletions bury what
		// the pages hold of a session deleted since.
		for _, e := range longestOf(docs) {
			c.Put(e)
		}
	}
	for i, commit := range commits[1:] {
		if ch := own[i+1]; ch != nil {
			for _, e := range ch.folded {
				c.Put(e)
			}
			for _, t := range ch.buried {
				c.Bury(t)
			}
		}
		c.Apply(commit)
	}
	c.Through = n
	return c, true
}

// catchUpPages is the run pages that hold what the commits after the
// first of commits omit (bulk writes'): the pages they added, when the
// newest commit still names them all; else, when the runs were only
// merged since (not folded), every page of the newest commit, which
// holds the merged entries. A commit whose own (same index) is not nil
// needs no page: own holds what it omits. ok is false when none of that
// serves: a commit omits changes no run holds, or a fold wrote them to
// the partitions.
func (s *Store) catchUpPages(commits []*manifest.IndexShard, own []*logChanges) (pages []manifest.RunPage, ok bool) {
	newest := commits[len(commits)-1]
	named := map[string]bool{}
	for _, p := range newest.Runs {
		named[p.Key] = true
	}
	allNamed, folded := true, false
	for i, commit := range commits[1:] {
		prev := commits[i]
		sum := 0
		var its []manifest.RunPage // the pages it added
		for _, p := range commit.Runs {
			if p.Commit == commit.Through {
				sum += p.Sessions
				its = append(its, p)
			}
		}
		if commit.Omitted > 0 && own[i+1] == nil {
			// Else the commit lists the run's entries itself (a small
			// run), or adds a merge's pages, which hold nothing new.
			if int64(sum) != commit.Omitted {
				return nil, false
			}
			for _, p := range its {
				pages = append(pages, p)
				allNamed = allNamed && named[p.Key]
			}
		}
		if len(commit.Runs) < len(prev.Runs) && !addsPages(prev, commit) {
			folded = true // pages retired, none added: a fold
		}
	}
	switch {
	case allNamed:
		return pages, true
	case folded:
		return nil, false
	}
	return newest.Runs, true
}

// addsPages reports whether commit names a page prev does not: a bulk
// write's, a merge's (a step of one adds pages to a run an earlier commit
// added), or a page rewritten without a deleted session.
func addsPages(prev, commit *manifest.IndexShard) bool {
	named := map[string]bool{}
	for _, p := range prev.Runs {
		named[p.Key] = true
	}
	return slices.ContainsFunc(commit.Runs, func(p manifest.RunPage) bool { return !named[p.Key] })
}

// loadCatalog reads the cached catalog at path and the ETag of its
// newest commit; nil when there is none usable (absent, damaged, another
// key's).
func (s *Store) loadCatalog(path string) (*manifest.IndexShard, string) {
	h, doc, ok := readCacheFile(path)
	if !ok {
		return nil, ""
	}
	c, err := s.codec.DecodeCatalog(catalogName, doc)
	if err != nil || c.Shard != manifest.LogName {
		return nil, ""
	}
	return c, h.ETag
}

// saveCatalog writes c, whose newest commit's ETag is etag, to path
// (through a temporary file, so that a reader never sees half of it). A
// failure only costs the next run a full read.
func (s *Store) saveCatalog(path string, c *manifest.IndexShard, etag string) {
	if path == "" {
		return
	}
	doc, err := s.codec.EncodeCatalog(catalogName, c)
	if err != nil {
		return
	}
	writeCacheFile(path, cacheHeader{ETag: etag, N: c.Through}, doc)
}

// noteCatalog keeps the catalog just read, whose newest commit's ETag is
// etag, for cachedEntry and the next reading.
func (s *Store) noteCatalog(c *manifest.IndexShard, etag string) {
	s.cat.mu.Lock()
	s.cat.entries, s.cat.fresh, s.cat.doc, s.cat.etag = c.Sessions, s.now(), c, etag
	s.cat.mu.Unlock()
	// From now on the commits this Store adopts are kept, from the one
	// the catalog includes: catchUpKept applies them.
	lg := &s.ilog
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.keepAdopted = true
	if lg.known && lg.last != nil && lg.n == c.Through {
		if lg.kept == nil {
			lg.kept = map[int64]keptCommit{}
		}
		lg.kept[lg.n] = keptCommit{c: lg.last, etag: lg.etag}
	}
}

// catalogEntry is session id's entry in the catalog this Store read,
// when that is recent (indexStale).
func (s *Store) catalogEntry(id string) (manifest.IndexEntry, bool) {
	s.cat.mu.Lock()
	defer s.cat.mu.Unlock()
	if s.cat.entries == nil || s.now().Sub(s.cat.fresh) >= indexStale {
		return manifest.IndexEntry{}, false
	}
	e, ok := s.cat.entries[id]
	return e, ok
}
