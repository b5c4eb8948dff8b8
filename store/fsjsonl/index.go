package fsjsonl

import (
	"bytes"
	"context"
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
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// IndexFile is the name of the summary cache in the catalog directory.
const IndexFile = ".panto-index.json"

// indexVersion changes whenever the cache's meaning changes; a cache of
// another version is ignored and rebuilt.
const indexVersion = 1

// anchorLen is how many bytes before the committed length an entry
// remembers, to check that a grown file still starts with what was
// summarised.
const anchorLen = 64

// index is the summary cache (see the package doc).
type index struct {
	Version    int                    `json:"version"`
	LogVersion int                    `json:"log_version"`
	Sessions   map[string]*indexEntry `json:"sessions"`

	dirty bool
	// decoded counts files read since the store was opened, and resumed
	// those read from a cached offset (for tests).
	decoded, resumed int
}

// indexEntry summarises one version of one session file.
type indexEntry struct {
	File      fileKey `json:"file"`
	Committed int64   `json:"committed"`
	// Anchor is the file's bytes just before Committed.
	Anchor  []byte             `json:"anchor"`
	Decoder sessionlog.Decoder `json:"decoder"`
}

// clean reports whether the summarised file had no torn tail: only then
// may its summary be trusted on a matching stat, because only then is
// every later change to it a growth.
func (e *indexEntry) clean() bool { return e.Committed == e.File.Size }

// loadIndex returns the cache, reading it from the directory on first use.
// s.mu must be held.
func (s *Store) loadIndex() *index {
	if s.index != nil {
		return s.index
	}
	idx := &index{}
	if data, err := os.ReadFile(filepath.Join(s.dir, IndexFile)); err == nil {
		if json.Unmarshal(data, idx) != nil || idx.Version != indexVersion || idx.LogVersion != sessionlog.Version {
			idx = &index{}
		}
	}
	idx.Version, idx.LogVersion = indexVersion, sessionlog.Version
	if idx.Sessions == nil {
		idx.Sessions = map[string]*indexEntry{}
	}
	for id, e := range idx.Sessions {
		if e == nil || e.Decoder.Header == nil || e.Decoder.Info.ID != id {
			delete(idx.Sessions, id)
		}
	}
	s.index = idx
	return idx
}

// saveIndex writes the cache if it changed, atomically and best-effort:
// a failure (a read-only directory) only costs speed later. s.mu must be
// held.
func (s *Store) saveIndex() {
	idx := s.index
	if idx == nil || !idx.dirty {
		return
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return
	}
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
	idx.dirty = false
}

// summary returns the info of session id, whose file stat is fi, from the
// cache when it is still valid, else by decoding the file (from the
// cached offset when the file only grew). ok is false when the file is
// not a session (gone, or no committed bytes). A file that cannot be
// decoded is still listed, with what could be read (Load reports the
// error); it is not cached, so it is read again until fixed.
//
// With useIndex false the cache is neither read nor updated: for a
// lookup of a few files by a process that has not loaded the cache,
// reading those files costs less than loading the cache of the whole
// catalog.
func (s *Store) summary(ctx context.Context, id string, fi fs.FileInfo, useIndex bool) (info agent.SessionInfo, ok bool, err error) {
	key := keyOf(fi)
	var cached *indexEntry
	if useIndex {
		s.mu.Lock()
		cached = s.loadIndex().Sessions[id]
		s.mu.Unlock()
	}
	if cached != nil && cached.File == key && cached.clean() {
		return cached.Decoder.Info, true, nil
	}
	remember := func(e *indexEntry, resumed bool) {
		if useIndex {
			s.remember(id, e, resumed)
		}
	}
	forget := func() {
		if useIndex {
			s.forget(id)
		}
	}

	path := filepath.Join(s.dir, id+Ext)
	f, _, err := openLocked(ctx, path, false, false)
	if errors.Is(err, fs.ErrNotExist) {
		forget()
		return agent.SessionInfo{}, false, nil
	}
	if err != nil {
		return agent.SessionInfo{}, false, fmt.Errorf("summarise session %s: %w", id, err)
	}
	defer f.Close()
	held, err := f.Stat()
	if err != nil {
		return agent.SessionInfo{}, false, fmt.Errorf("summarise session %s: %w", id, err)
	}
	key = keyOf(held) // under the lock: the version actually read
	if cached != nil && cached.File.Ino == key.Ino && key.Size > cached.File.Size && cached.clean() {
		if e, ok := resume(f, path, key, cached); ok {
			remember(e, true)
			return e.Decoder.Info, true, nil
		}
	}
	data := make([]byte, key.Size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return agent.SessionInfo{}, false, fmt.Errorf("summarise session %s: %w", id, err)
	}
	e, err := decode(path, key, sessionlog.Decoder{Name: path}, 0, data)
	if err == nil && e.Committed == 0 {
		forget()
		return agent.SessionInfo{}, false, nil
	}
	if err == nil && e.Decoder.Info.ID != id {
		err = headerMismatch(path, e.Decoder.Info.ID)
	}
	if err != nil {
		// Broken: list it with what was read, under the file's id.
		forget()
		info := e.Decoder.Info
		info.ID = id
		if info.Created.IsZero() {
			info.Created, info.Modified = held.ModTime().UTC(), held.ModTime().UTC()
		}
		return info, true, nil
	}
	remember(e, false)
	return e.Decoder.Info, true, nil
}

// resume decodes the bytes a clean file gained since entry e, after
// checking that the anchor bytes before them are unchanged.
func resume(f *os.File, path string, key fileKey, e *indexEntry) (*indexEntry, bool) {
	from := e.Committed - int64(len(e.Anchor))
	buf := make([]byte, key.Size-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return nil, false
	}
	if !bytes.Equal(buf[:len(e.Anchor)], e.Anchor) {
		return nil, false
	}
	d := e.Decoder
	d.Name = path
	ne, err := decode(path, key, d, e.Committed, buf[len(e.Anchor):])
	if err != nil {
		return nil, false // decode in full, for errors with the right line numbers
	}
	if ne.Committed == e.Committed {
		ne.Anchor = e.Anchor // nothing new committed (a torn tail only)
	}
	return ne, true
}

// decode folds the committed lines of data (the file's bytes from offset
// base, which is a committed boundary) into d. On error the returned
// entry still holds what was decoded before the bad line.
func decode(path string, key fileKey, d sessionlog.Decoder, base int64, data []byte) (*indexEntry, error) {
	e := &indexEntry{File: key, Committed: base}
	n, err := sessionlog.CommittedLength(path, data)
	if err != nil {
		e.Decoder = d
		return e, err
	}
	err = sessionlog.Lines(data[:n], func(line []byte) error {
		_, err := d.SummarizeLine(line)
		return err
	})
	e.Decoder = d
	if err != nil {
		return e, err
	}
	e.Committed = base + int64(n)
	e.Anchor = bytes.Clone(data[max(0, n-anchorLen):n])
	return e, nil
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

func (s *Store) forget(id string) {
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
// Files the cache does not cover are read in parallel: a cold list is
// bound by reading and decoding every file.
func (s *Store) List(ctx context.Context) ([]agent.SessionInfo, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list sessions in %s: %w", s.dir, err)
	}
	type file struct {
		id string
		fi fs.FileInfo
	}
	files := make([]file, 0, len(entries))
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
		fi, err := s.stat(de)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if fi.Mode().IsRegular() {
			files = append(files, file{id, fi})
		}
	}

	infos := make([]agent.SessionInfo, len(files))
	found := make([]bool, len(files))
	var misses []int
	s.mu.Lock()
	idx := s.loadIndex()
	present := make(map[string]bool, len(files))
	for i, f := range files {
		present[f.id] = true
		if e := idx.Sessions[f.id]; e != nil && e.File == keyOf(f.fi) && e.clean() {
			infos[i], found[i] = e.Decoder.Info, true
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
	s.mu.Unlock()

	if len(misses) > 0 {
		workers := min(len(misses), 2*runtime.GOMAXPROCS(0))
		jobs := make(chan int)
		errs := make([]error, len(files))
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					infos[i], found[i], errs[i] = s.summary(ctx, files[i].id, files[i].fi, true)
				}
			}()
		}
		for _, i := range misses {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
	}

	s.mu.Lock()
	s.saveIndex()
	s.mu.Unlock()
	out := make([]agent.SessionInfo, 0, len(files))
	for i := range files {
		if found[i] {
			out = append(out, infos[i])
		}
	}
	slices.SortFunc(out, func(a, b agent.SessionInfo) int {
		if c := b.Modified.Compare(a.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
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
	// A full id needs only its own file.
	if fi, err := os.Stat(filepath.Join(s.dir, idOrPrefix+Ext)); err == nil && fi.Mode().IsRegular() {
		info, ok, err := s.summary(ctx, idOrPrefix, fi, loaded)
		if err != nil {
			return nil, fmt.Errorf("resolve session: %w", err)
		}
		if ok {
			return &agent.Session{Info: info, Store: s}, nil
		}
	}
	ids, err := s.IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve session: %w", err)
	}
	var candidates []string
	for _, id := range ids {
		if id != idOrPrefix && strings.HasPrefix(id, idOrPrefix) {
			candidates = append(candidates, id)
		}
	}
	useIndex := loaded || len(candidates) > fewFiles
	var matches []string
	var found agent.SessionInfo
	for _, id := range candidates {
		fi, err := os.Stat(filepath.Join(s.dir, id+Ext))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("resolve session: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		info, ok, err := s.summary(ctx, id, fi, useIndex)
		if err != nil {
			return nil, fmt.Errorf("resolve session: %w", err)
		}
		if ok {
			matches = append(matches, id)
			found = info
		}
	}
	switch len(matches) {
	case 0:
		return nil, fmt.Errorf("resolve session: %w", agent.NotFoundError(idOrPrefix))
	case 1:
		return &agent.Session{Info: found, Store: s}, nil
	}
	return nil, fmt.Errorf("resolve session: %w", agent.AmbiguousError(idOrPrefix, matches))
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
