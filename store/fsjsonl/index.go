package fsjsonl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/internal/gobmap"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// IndexFile is the name of the summary cache in the catalog directory:
// gob after indexMagic. Not JSON: at 100,000 sessions decoding the JSON
// took 3.5 s of a no-op sync's 8 (BENCHMARKS.md), gob a sixth of that,
// and no other program reads the file.
const IndexFile = ".panto-index"

// LegacyIndexFile is the summary cache as earlier versions kept it
// (JSON): read when there is no IndexFile, and removed once IndexFile is
// written.
const LegacyIndexFile = ".panto-index.json"

// indexMagic begins IndexFile: the index without its sessions in one gob
// message, then the sessions in messages of at most gobmap.Chunk (one
// message of them all made a no-op sync of 100,000 sessions allocate
// about 360 MB while gob grew its buffer, BENCHMARKS.md).
const indexMagic = "panto-index-gob-2\n"

// indexMagicWhole begins IndexFile as an earlier version wrote it: the
// whole index in one gob message. Read, never written.
const indexMagicWhole = "panto-index-gob\n"

// indexVersion changes whenever the cache's meaning changes; a cache of
// another version is ignored and rebuilt. 2: entries keep the sha256 of
// the committed bytes, files are keyed by ctime too. 3: summaries hold
// the title, the fork link and token totals, which a version 2 entry
// never folded. 4: summaries hold the project.
const indexVersion = 4

// index is the summary cache (see the package doc).
type index struct {
	Version    int                    `json:"version"`
	LogVersion int                    `json:"log_version"`
	Sessions   map[string]*indexEntry `json:"sessions"`

	dirty bool
	// decoded counts files read since the store was opened, and resumed
	// those whose summary was resumed from a cached one (for tests).
	decoded, resumed int
}

// indexEntry summarises one version of one session file: its committed
// length, their sha256 (and the hash state after them, so that an append
// extends it without reading the file), and the decoder state after them.
type indexEntry struct {
	File      filekey.Key        `json:"file"`
	Committed int64              `json:"committed"`
	SHA256    string             `json:"sha256"`
	HashState []byte             `json:"hash_state"`
	Decoder   sessionlog.Decoder `json:"decoder"`
	// err is why the file could not be read as a log (a malformed
	// line), with Decoder holding what was read before it; such an entry
	// is never cached.
	err error
}

// clean reports whether the summarised file had no torn tail: only then
// may its summary be trusted on a matching stat, because only then is
// every later change to it visible in its stat.
func (e *indexEntry) clean() bool { return e.Committed == e.File.Size }

func (e *indexEntry) checkpoint() store.Checkpoint {
	return store.Checkpoint{Length: e.Committed, SHA256: e.SHA256}
}

// loadIndex returns the cache, reading it from the directory on first use.
// s.mu must be held.
func (s *Store) loadIndex() *index {
	if s.index != nil {
		return s.index
	}
	idx := &index{}
	legacy := false
	if f, err := os.Open(filepath.Join(s.dir, IndexFile)); err == nil {
		whole, err := decodeIndex(bufio.NewReaderSize(f, 1<<16), idx)
		if err != nil || idx.Version != indexVersion || idx.LogVersion != sessionlog.Version {
			idx = &index{}
		}
		f.Close()
		legacy = whole // written in chunks at the next save
	} else if data, err := os.ReadFile(filepath.Join(s.dir, LegacyIndexFile)); err == nil {
		if json.Unmarshal(data, idx) != nil || idx.Version != indexVersion || idx.LogVersion != sessionlog.Version {
			idx = &index{}
		}
		legacy = true // written in this version's form at the next save
	}
	idx.Version, idx.LogVersion, idx.dirty = indexVersion, sessionlog.Version, legacy
	if idx.Sessions == nil {
		idx.Sessions = map[string]*indexEntry{}
	}
	for id, e := range idx.Sessions {
		if e == nil || e.Decoder.Header == nil || e.Decoder.Info.ID != id || len(e.HashState) == 0 {
			delete(idx.Sessions, id)
			continue
		}
		e.Decoder.Name = "" // as JSON left it: set by whoever reads the file
	}
	s.index = idx
	return idx
}

// decodeIndex reads IndexFile's bytes from r into idx, in this
// version's form or, reporting whole, an earlier one's (one message);
// straight from the file, since the form in chunks needs no buffer of
// the whole.
func decodeIndex(r *bufio.Reader, idx *index) (whole bool, err error) {
	if head, _ := r.Peek(len(indexMagic)); string(head) == indexMagic {
		r.Discard(len(indexMagic))
		dec := gob.NewDecoder(r)
		if err := dec.Decode(idx); err != nil {
			return false, err
		}
		if len(idx.Sessions) > 0 {
			return false, errors.New("sessions before their chunks")
		}
		idx.Sessions, err = gobmap.Decode[string, *indexEntry](dec)
		return false, err
	}
	if head, _ := r.Peek(len(indexMagicWhole)); string(head) == indexMagicWhole {
		r.Discard(len(indexMagicWhole))
		return true, gob.NewDecoder(r).Decode(idx)
	}
	return false, errors.New("not a summary cache")
}

// saveIndex writes the cache if it changed, atomically and best-effort:
// a failure (a read-only directory) only costs speed later. s.mu must be
// held.
func (s *Store) saveIndex() {
	idx := s.index
	if idx == nil || !idx.dirty {
		return
	}
	var buf bytes.Buffer
	buf.WriteString(indexMagic)
	head := *idx
	head.Sessions = nil
	enc := gob.NewEncoder(&buf)
	if enc.Encode(&head) != nil || gobmap.Encode(enc, idx.Sessions) != nil {
		return
	}
	data := buf.Bytes()
	tmp, err := os.CreateTemp(s.dir, ".panto-index-*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(s.dir, IndexFile)) != nil {
		os.Remove(tmp.Name())
		return
	}
	os.Remove(filepath.Join(s.dir, LegacyIndexFile))
	idx.dirty = false
}

// Flush makes what a Store that defers its syncs wrote durable (one
// sync of the batch), then writes the summary cache, so that the next
// process lists from it (panto-sync updates it as it appends). The cache
// never records a write before it is durable: a sync that fails fails
// the Flush, and the cache is not saved.
func (s *Store) Flush(ctx context.Context) error {
	if err := s.syncDeferred(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saveIndex()
	return ctx.Err()
}

// cached returns the cache entry of session id if it describes the file
// whose stat is key, else nil.
func (s *Store) cached(id string, key filekey.Key, useIndex bool) *indexEntry {
	if !useIndex {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.loadIndex().Sessions[id]; e != nil && e.File == key && e.clean() {
		return e
	}
	return nil
}

// entry returns the summary and checkpoint of session id, whose file stat
// is fi: from the cache when it is still valid, else by reading the file
// (see scan). ok is false when the file is not a session (gone, or no
// committed bytes). A file that cannot be decoded is still returned,
// with its err set and what could be read; it is not cached, so it is
// read again until fixed.
//
// With useIndex false the cache is neither read nor updated: for a
// lookup of a few files by a process that has not loaded the cache,
// reading those files costs less than loading the cache of the whole
// catalog.
func (s *Store) entry(ctx context.Context, id string, fi fs.FileInfo, useIndex bool) (e *indexEntry, ok bool, err error) {
	if e := s.cached(id, filekey.Of(fi), useIndex); e != nil {
		return e, true, nil
	}
	path := filepath.Join(s.dir, id+Ext)
	f, _, err := openLocked(ctx, path, false, false)
	if errors.Is(err, fs.ErrNotExist) {
		s.forget(id, useIndex)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("summarise session %s: %w", id, err)
	}
	defer f.Close()
	e, err = s.scanLocked(ctx, id, f, useIndex)
	if err != nil {
		return nil, false, fmt.Errorf("summarise session %s: %w", id, err)
	}
	if e == nil {
		return nil, false, nil
	}
	return e, true, nil
}

// scanLocked is entry's read of f, the session's file, locked by the
// caller: it returns the entry of the version it holds (nil when it has
// no committed bytes) and updates the cache. held is f's stat.
func (s *Store) scanLocked(ctx context.Context, id string, f *os.File, useIndex bool) (*indexEntry, error) {
	held, err := f.Stat()
	if err != nil {
		return nil, err
	}
	key := filekey.Of(held) // under the lock: the version actually read
	if e := s.cached(id, key, useIndex); e != nil {
		return e, nil
	}
	var prev *indexEntry
	if useIndex {
		s.mu.Lock()
		prev = s.loadIndex().Sessions[id]
		s.mu.Unlock()
	}
	path := filepath.Join(s.dir, id+Ext)
	e, resumed, err := scan(ctx, f, path, key, prev)
	if err != nil {
		return nil, err
	}
	if e.err == nil && e.Committed > 0 && e.Decoder.Info.ID != id {
		e.err = headerMismatch(path, e.Decoder.Info.ID)
	}
	switch {
	case e.err != nil:
		// Broken: listed with what was read, under the file's id.
		s.forget(id, useIndex)
		e.Decoder.Info.ID = id
		if e.Decoder.Info.Created.IsZero() {
			e.Decoder.Info.Created, e.Decoder.Info.Modified = held.ModTime().UTC(), held.ModTime().UTC()
		}
		return e, nil
	case e.Committed == 0:
		s.forget(id, useIndex)
		return nil, nil
	}
	if useIndex {
		s.remember(id, e, resumed)
	}
	return e, nil
}

// scan reads the file f (of stat key) through its committed length: it
// hashes every committed byte, and decodes the lines. When prev, an entry
// of an earlier version of the file, covers a prefix that still hashes
// the same, only the lines after that prefix are decoded (resumed): the
// file grew. Nothing is taken on trust from a stat: an edit anywhere
// below the cached length changes the hash, and then the whole file is
// decoded again. The file is read as a stream, so a large one costs no
// more memory than a small one.
func scan(ctx context.Context, f *os.File, path string, key filekey.Key, prev *indexEntry) (e *indexEntry, resumed bool, err error) {
	committed, err := committedLength(f, path, key.Size)
	if err != nil {
		return &indexEntry{File: key, Decoder: sessionlog.Decoder{Name: path}, err: err}, false, nil
	}
	h := sha256.New()
	d := sessionlog.Decoder{Name: path}
	var from int64
	if prev != nil && prev.Committed > 0 && prev.Committed <= committed {
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, prev.Committed)); err != nil {
			return nil, false, err
		}
		if hex.EncodeToString(h.Sum(nil)) == prev.SHA256 {
			from, resumed = prev.Committed, true
			d = prev.Decoder
			d.Name = path
		} else {
			h.Reset()
		}
	}
	e = &indexEntry{File: key, Committed: committed}
	lines := io.TeeReader(io.NewSectionReader(f, from, committed-from), h)
	err = sessionlog.ReadLines(lines, func(line []byte, _ bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := d.SummarizeLine(line)
		return err
	})
	d.Name = ""
	e.Decoder = d
	if err != nil {
		if errors.Is(err, sessionlog.ErrMalformed) || errors.Is(err, sessionlog.ErrNewerVersion) {
			e.err = err
			return e, false, nil
		}
		return nil, false, err
	}
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	if e.HashState, err = h.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		return nil, false, err
	}
	return e, resumed, nil
}

func (s *Store) remember(id string, e *indexEntry, resumed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.loadIndex()
	idx.Sessions[id] = e
	idx.dirty = true
	idx.decoded++
	if resumed {
		idx.resumed++
	}
}

func (s *Store) forget(id string, useIndex bool) {
	if !useIndex {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.loadIndex()
	if _, ok := idx.Sessions[id]; ok {
		delete(idx.Sessions, id)
		idx.dirty = true
	}
	idx.decoded++
}

// List returns every session, newest first by Modified (ties by id).
func (s *Store) List(ctx context.Context) ([]agent.SessionInfo, error) {
	logs, err := s.Logs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]agent.SessionInfo, len(logs))
	for i, l := range logs {
		out[i] = l.Info
	}
	return out, nil
}

// Logs returns every session with the checkpoint of its committed bytes,
// newest first by Modified (ties by id): a directory read and a stat per
// file (or, right after a ListingToken, its stats: the listing then shows
// the directory as the token named it), plus a read of each file the
// cache does not cover (in parallel).
// A session whose file cannot be read as a log is listed with its Err.
func (s *Store) Logs(ctx context.Context) ([]store.Log, error) {
	files := s.takeStatted()
	if files == nil {
		var err error
		if files, err = s.sessionFiles(ctx); err != nil {
			return nil, err
		}
	}
	found, misses := s.cachedEntries(files)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2 * runtime.GOMAXPROCS(0))
	for _, i := range misses {
		g.Go(func() error {
			var err error
			found[i], _, err = s.entry(gctx, files[i].id, files[i].fi, true)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}

	s.mu.Lock()
	s.saveIndex()
	s.mu.Unlock()
	out := make([]store.Log, 0, len(files))
	for _, e := range found {
		if e != nil {
			out = append(out, store.Log{Info: e.Decoder.Info, Checkpoint: e.checkpoint(), Err: e.err})
		}
	}
	slices.SortFunc(out, func(a, b store.Log) int {
		if c := b.Info.Modified.Compare(a.Info.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.Info.ID, b.Info.ID)
	})
	return out, nil
}

// sessionFile is the log file of session id.
type sessionFile struct {
	id string
	fi fs.FileInfo
}

// sessionFiles lists the log files of the directory, leaving out those
// of deleted sessions and removing stale temporary files on the way.
func (s *Store) sessionFiles(ctx context.Context) ([]sessionFile, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list sessions in %s: %w", s.dir, err)
	}
	files := make([]sessionFile, 0, len(entries))
	deleted := s.Tombstoned() // a crash may leave a deleted file beside its tombstone
	for i, de := range entries {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("list sessions: %w", err)
			}
		}
		id, ok := idOf(de.Name())
		if !ok {
			s.removeStaleTemp(de)
			continue
		}
		if deleted[id] {
			continue
		}
		fi, err := s.stat(de)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if fi.Mode().IsRegular() {
			files = append(files, sessionFile{id, fi})
		}
	}
	return files, nil
}

// cachedEntries returns the summary cache's entry of each of files (nil
// where it has none for the file as it is now), and the positions of the
// files it has none for. It drops the cache's entries of files that are
// gone.
func (s *Store) cachedEntries(files []sessionFile) (found []*indexEntry, misses []int) {
	found = make([]*indexEntry, len(files))
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.loadIndex()
	present := make(map[string]bool, len(files))
	for i, f := range files {
		present[f.id] = true
		if e := idx.Sessions[f.id]; e != nil && e.File == filekey.Of(f.fi) && e.clean() {
			found[i] = e
		} else {
			misses = append(misses, i)
		}
	}
	for id := range idx.Sessions {
		if !present[id] {
			delete(idx.Sessions, id)
			idx.dirty = true
		}
	}
	return found, misses
}

// staleTempAge is how old a temporary file must be before List takes it
// for the leftover of a crashed write and removes it.
const staleTempAge = time.Hour

// removeStaleTemp removes a temporary file this package made (a new
// session file or the cache) that a crash left behind. Best-effort.
func (s *Store) removeStaleTemp(de fs.DirEntry) {
	name := de.Name()
	if !strings.HasPrefix(name, ".panto-tmp-") && !(strings.HasPrefix(name, ".panto-index-") && strings.HasSuffix(name, ".tmp")) {
		return
	}
	if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleTempAge {
		os.Remove(filepath.Join(s.dir, name))
	}
}

// stat returns the file info of a directory entry, following a symlink.
func (s *Store) stat(de fs.DirEntry) (fs.FileInfo, error) {
	if de.Type()&fs.ModeSymlink != 0 {
		return os.Stat(filepath.Join(s.dir, de.Name()))
	}
	return de.Info()
}

// fewFiles is the number of files a lookup reads directly rather than
// load the catalog's summary cache (when this handle has not loaded it).
const fewFiles = 8

// Resolve returns the session whose id is idOrPrefix, or else the only
// one whose id starts with it. It reads the directory's names and stats
// only the candidates.
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (*agent.Session, error) {
	if err := agent.ValidateSessionID(idOrPrefix); err != nil {
		return nil, fmt.Errorf("resolve session: %w", err)
	}
	s.mu.Lock()
	loaded := s.index != nil
	s.mu.Unlock()
	if err := s.deleted(idOrPrefix); err != nil {
		return nil, fmt.Errorf("resolve session: %w", err)
	}
	// A full id needs only its own file.
	if fi, err := os.Stat(filepath.Join(s.dir, idOrPrefix+Ext)); err == nil && fi.Mode().IsRegular() {
		e, ok, err := s.entry(ctx, idOrPrefix, fi, loaded)
		if err != nil {
			return nil, fmt.Errorf("resolve session: %w", err)
		}
		if ok {
			return &agent.Session{Info: e.Decoder.Info, Store: s}, nil
		}
	}
	ids, err := s.ids(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve session: %w", err)
	}
	// The file of a listed id may be gone since (deleted, or a stale
	// listing), and a big match reads the catalog rather than each file.
	deleted := s.Tombstoned()
	useIndex := loaded || len(store.PrefixCandidates(idOrPrefix, ids, deleted)) > fewFiles
	var found agent.SessionInfo
	r, err := store.ResolvePrefix(idOrPrefix, ids, deleted, func(id string) (bool, error) {
		fi, err := os.Stat(filepath.Join(s.dir, id+Ext))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil || !fi.Mode().IsRegular() {
			return false, err
		}
		e, ok, err := s.entry(ctx, id, fi, useIndex)
		if ok {
			found = e.Decoder.Info
		}
		return ok, err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("resolve session: %w", err)
	case r.ID != "":
		return &agent.Session{Info: found, Store: s}, nil
	case r.Gone != "":
		// A prefix of one deleted session says so.
		if err := s.deleted(r.Gone); err != nil {
			return nil, fmt.Errorf("resolve session: %w", err)
		}
	}
	return nil, fmt.Errorf("resolve session: %w", agent.NotFoundError(idOrPrefix))
}

// Latest returns the most recently modified session.
func (s *Store) Latest(ctx context.Context) (*agent.Session, error) {
	infos, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("latest session: %w", err)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("latest session: %w: %s holds none", agent.ErrSessionNotFound, s.dir)
	}
	return &agent.Session{Info: infos[0], Store: s}, nil
}
