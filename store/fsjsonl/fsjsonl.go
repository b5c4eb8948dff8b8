// Package fsjsonl is panto's default session store: a directory (a
// "catalog") holding one <id>.jsonl file per session, in the line format
// of internal/sessionlog, byte for byte what the object store keeps and
// what panto-sync pushes and pulls. It implements agent.SessionStore and
// the raw-log vocabulary of package store (log.go). docs/DESIGN.md, "The
// local catalog", is the design.
//
// # Appends
//
// An append opens the session's file, takes an exclusive flock (so two
// processes, or two goroutines, never interleave), finds the committed
// length (sessionlog.CommittedLength, reading only the file's tail),
// refuses a file whose header names a newer line format, cuts off any
// torn tail a crash left behind (this is the repair), writes the whole
// batch with one write at the committed end and fsyncs before it returns;
// creating the file also fsyncs the directory (a bulk writer, panto-sync
// pull, defers both to one sync of the batch at Flush: WithDeferredSync,
// durable.go). A crash at any point
// leaves either the old committed bytes or the new ones: a batch cut
// short is a torn tail that readers ignore and the next append cuts. The
// batch is encoded before any file is touched, so a message that cannot
// be encoded fails the append with nothing written.
//
// Readers (Load, List, ReadLog) take a shared flock while they find the
// committed length, so they never see an append half-way, nor a repair
// racing with their read; bytes below it never change, so ReadLog streams
// them after releasing it.
//
// Ids are validated (agent.ValidateSessionID) before any path is built:
// nothing outside [A-Za-z0-9_-] reaches the file system, so no id can
// escape the directory.
//
// A malformed complete line in the committed part is corruption: Load
// fails with an error naming file:line (wrapping sessionlog.ErrMalformed),
// and never drops it silently. List still lists such a session with what
// could be read before the bad line, so that the other sessions and the
// broken one stay visible; loading it reports where it is broken, and
// Logs reports it in the session's Err.
//
// # The summary cache
//
// List, Logs, Resolve and Latest need each session's summary (count, last
// user message, identity, times) and, for sync, the sha256 of its
// committed bytes. Reading 10,000 whole files for every List would be
// slow, so the directory holds a summary cache, .panto-index (not a
// *.jsonl, so never taken for a session), mapping each id to the identity
// of the file version it summarises (inode, size, mtime and ctime in ns),
// its committed length, their sha256 and the hash state after them, and
// the resumable sessionlog.Decoder state at that length. Then:
//
//   - a file whose identity matches and that had no torn tail costs only
//     the stat that ReadDir gives;
//   - any other file is read as a stream and hashed in full; when the
//     bytes of its cached length still hash to the cached sha256 (it
//     grew), only the lines after them are decoded, else all are;
//   - a file that is gone drops out of the cache.
//
// Why this never goes stale: no summary or hash is taken on trust for
// bytes that were not re-read. Every change to a file changes its ctime,
// which no user can set back (an editor may restore the mtime, or keep
// the size); a file with a torn tail, whose repair rewrites bytes in
// place, is never trusted on its stat at all. Summaries are taken under
// the shared lock from the file's own fstat, so they never describe an
// append half-way. The cache is an optimisation only: it is written
// atomically (temp file + rename) and best-effort (a read-only directory
// still lists), any process may overwrite it, and a cache that is
// missing, unreadable or from another version is rebuilt. AppendLog keeps
// it up to date as it writes (a pull appends chunk after chunk), and
// Flush saves it.
package fsjsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// Ext is the extension of a session file.
const Ext = ".jsonl"

// Store is a catalog directory of session files. It is safe for
// concurrent use, and several Stores (in one process or many) may share
// a directory.
type Store struct {
	dir string
	now func() time.Time
	// deferSync: files and the directory are made durable once, at
	// Flush, not at each write (WithDeferredSync); pending is what was
	// written since, syncBatch how it is synced (syncfs(2) on Linux).
	deferSync bool
	pending   deferredSync
	syncBatch func(ctx context.Context, dir string, files []string) error

	mu    sync.Mutex
	index *index // the summary cache, loaded on first use
	// statted are the session files as the last ListingToken stat'ed
	// them, for the Logs after it (takeStatted); nil once taken.
	statted *statted
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock that stamps created and ts in the bytes
// written (default time.Now). Tests use it to get deterministic bytes.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// WithDeferredSync is for a caller that writes many session files and
// flushes once at the end (panto-sync pull, whose record step is that
// Flush): AppendLog writes each file (a new one linked into place whole,
// as always) without an fsync, and Flush makes all of them and the
// directory durable in one sync of the batch (syncfs(2) on Linux, else
// an fsync of each file in parallel and one of the directory) before it
// saves the summary cache. Once Flush returns, every byte written is
// durable, as if each write had been fsynced. A crash before it may lose
// the newest writes, or leave a file cut short: a prefix of what was
// written, which the line format reads as a torn tail (its committed
// batches, and nothing of a batch cut short), as a crash during an
// append leaves; the copy run again completes it. docs/DESIGN.md §2.
func WithDeferredSync() Option {
	return func(s *Store) { s.deferSync = true }
}

// wrote makes a write to path durable (created: it created the file), at
// once or, for a Store that defers its syncs, at Flush. f is the file,
// when the caller holds it open.
func (s *Store) wrote(f *os.File, path string, created bool) error {
	if s.deferSync {
		s.pending.wrote(path, created)
		return nil
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if created {
		return syncDir(s.dir)
	}
	return nil
}

// Open returns the store of dir, creating the directory (mode 0700:
// sessions are private) if it is missing.
func Open(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open session directory: no directory given")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open session directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open session directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open session directory %s: not a directory", dir)
	}
	s := &Store{dir: dir, now: time.Now, syncBatch: syncBatch}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

var (
	_ store.LogStore     = (*Store)(nil)
	_ store.PrefixHasher = (*Store)(nil)
	_ store.Flusher      = (*Store)(nil)

	_ agent.ProjectRecorder = (*Store)(nil)
)

// Dir returns the catalog directory.
func (s *Store) Dir() string { return s.dir }

// Path returns the file of session id (after validating the id).
func (s *Store) Path(id string) (string, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, id+Ext), nil
}

// Create mints a handle on a new session. It does no I/O: the file is
// created by the first append.
func (s *Store) Create() *agent.Session {
	return &agent.Session{Info: agent.SessionInfo{ID: agent.NewSessionID()}, Store: s}
}

// AppendMessages appends msgs to session id as one atomic batch, creating
// the file (with its header) on the first append.
func (s *Store) AppendMessages(ctx context.Context, id string, msgs []agent.PersistentMessage) error {
	return s.AppendMessagesIn(ctx, agent.Project{}, id, msgs)
}

// AppendMessagesIn is AppendMessages whose first append records project
// in the header (agent.ProjectRecorder).
func (s *Store) AppendMessagesIn(ctx context.Context, project agent.Project, id string, msgs []agent.PersistentMessage) error {
	if err := agent.ValidateSessionID(id); err != nil {
		return fmt.Errorf("append to session: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	at := s.now()
	// Encode first: an unencodable message fails before any file is touched.
	body, err := sessionlog.EncodeBatch(id, false, msgs, at)
	if err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	l, err := s.lock(ctx, id, true)
	if err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	defer l.close()
	if l.committed == 0 {
		if body, err = sessionlog.EncodeBatchIn(project, id, true, msgs, at); err != nil {
			return fmt.Errorf("append to session %s: %w", id, err)
		}
	}
	if err := l.write(body); err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	return nil
}

// createWhole creates path holding exactly data, atomically: it writes a
// temporary file in the directory, fsyncs it (at Flush, when the Store
// defers its syncs: the temporary file is made durable under its new
// name) and links it into place.
// It reports false (and does nothing) when path already exists. A link
// rather than a rename, because a rename would silently replace a file
// another writer created meanwhile.
func (s *Store) createWhole(ctx context.Context, path string, data []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if _, err := os.Lstat(path); err == nil {
		return false, nil
	}
	tmp, err := os.CreateTemp(s.dir, ".panto-tmp-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if !s.deferSync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return false, err
		}
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		// A file system without hard links: the locked append path
		// creates the file instead (still atomic to readers, by the
		// batch framing).
		return false, nil
	}
	if err := s.wrote(nil, path, true); err != nil {
		return false, err
	}
	return true, nil
}

// lockedFile is a session file open and exclusively locked for an
// append, with its size and committed length as the lock found them.
type lockedFile struct {
	s         *Store
	f         *os.File
	path      string
	size      int64
	committed int64
	created   bool // this append created the file
}

// lock opens session id's file (creating it when create is set), locks it
// exclusively and finds its committed length, reading only the file's
// tail. A file whose header names a newer line format is refused: an
// append would mix formats in one log.
func (s *Store) lock(ctx context.Context, id string, create bool) (*lockedFile, error) {
	path, err := s.Path(id)
	if err != nil {
		return nil, err
	}
	if err := s.deleted(id); err != nil {
		return nil, err
	}
	f, created, err := openLocked(ctx, path, create, true)
	if err != nil {
		return nil, err
	}
	// A deletion may have gone between the check and the lock: a deleted
	// session takes no append, and is not recreated by one.
	if err := s.deleted(id); err != nil {
		if created {
			os.Remove(path)
		}
		f.Close()
		return nil, err
	}
	l := &lockedFile{s: s, f: f, path: path, created: created}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l.size = fi.Size()
	if l.committed, err = committedLength(f, path, l.size); err != nil {
		f.Close()
		return nil, err
	}
	if l.committed > 0 {
		if err := checkHeader(f, path); err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

// checkHeader decodes the header line of a log: a header of a newer
// format (or none) is an error that leaves the file alone.
func checkHeader(f *os.File, path string) error {
	var buf [4096]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else if n == len(buf) {
		return nil // a header longer than any panto writes: the decoder of the next read reports it
	}
	d := sessionlog.Decoder{Name: path}
	_, _, err = d.DecodeLine(line)
	return err
}

// write cuts any torn tail (the repair: a write that never completed),
// writes data at the committed length with one write, and fsyncs (the
// directory too when the append created the file), at once or at Flush
// (WithDeferredSync).
func (l *lockedFile) write(data []byte) error {
	if l.committed < l.size {
		if err := l.f.Truncate(l.committed); err != nil {
			return fmt.Errorf("cut torn tail of %s: %w", l.path, err)
		}
	}
	if _, err := l.f.WriteAt(data, l.committed); err != nil {
		// Whatever part of data landed is a torn tail: invisible, and
		// cut by the next append.
		return err
	}
	if err := l.s.wrote(l.f, l.path, l.created); err != nil {
		return err
	}
	l.committed += int64(len(data))
	l.size = l.committed
	return nil
}

// close releases the lock and the file.
func (l *lockedFile) close() {
	unlockFile(l.f)
	l.f.Close()
}

// openLocked opens path read-write (exclusive) or read-only (shared) and
// locks it, making sure the lock is on the file path names once locked:
// a rename may have replaced it between the open and the lock. created
// reports that this call created the file.
func openLocked(ctx context.Context, path string, create, exclusive bool) (f *os.File, created bool, err error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		created = false
		if exclusive && create {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err == nil {
				created = true
			} else if errors.Is(err, fs.ErrExist) {
				f, err = os.OpenFile(path, os.O_RDWR, 0)
			}
		} else if exclusive {
			f, err = os.OpenFile(path, os.O_RDWR, 0)
		} else {
			f, err = os.Open(path)
		}
		if err != nil {
			if create && errors.Is(err, fs.ErrNotExist) && attempt < 10 {
				continue // deleted between the two opens
			}
			return nil, false, err
		}
		if err := lockFile(ctx, f, exclusive); err != nil {
			f.Close()
			return nil, false, err
		}
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return f, created, nil
		}
		f.Close()
		if err1 != nil {
			return nil, false, err1
		}
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return nil, false, err2
		}
		if attempt >= 10 {
			return nil, false, fmt.Errorf("lock %s: the file keeps being replaced", path)
		}
		if !create && errors.Is(err2, fs.ErrNotExist) {
			return nil, false, err2
		}
	}
}

// tailWindow is how much of a file's end an append reads to find the
// committed length: the last batch normally fits.
const tailWindow = 64 << 10

// committedLength returns the committed length of f (of the given size),
// reading only as much of its end as it needs.
func committedLength(f *os.File, name string, size int64) (int64, error) {
	window := int64(tailWindow)
	for {
		start := max(0, size-window)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		base := start
		chunk := buf
		if start > 0 {
			// Begin at a line boundary.
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				window *= 4
				continue
			}
			chunk, base = buf[i+1:], start+int64(i)+1
		}
		n, err := sessionlog.CommittedLength(name, chunk)
		if err != nil {
			if start > 0 {
				window = size // read it all, for the right line number
				continue
			}
			return 0, err
		}
		if n > 0 || start == 0 {
			return base + int64(n), nil
		}
		window *= 4
	}
}

// readLocked reads the whole file of path under a shared lock.
func readLocked(ctx context.Context, path string) ([]byte, error) {
	f, _, err := openLocked(ctx, path, false, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Load returns the committed messages of session id.
func (s *Store) Load(ctx context.Context, id string) (*agent.Conversation, error) {
	path, err := s.Path(id)
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	if err := s.deleted(id); err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	data, err := readLocked(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load session: %w", agent.NotFoundError(id))
	}
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	log, err := sessionlog.Parse(path, data)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	if log == nil {
		return nil, fmt.Errorf("load session: %w", agent.NotFoundError(id))
	}
	if log.Header.ID != id {
		return nil, fmt.Errorf("load session %s: %w", id, headerMismatch(path, log.Header.ID))
	}
	return &agent.Conversation{Messages: log.Messages}, nil
}

func headerMismatch(path, headerID string) error {
	return fmt.Errorf("%s:1: %w: the header names session %q, not the file's", path, sessionlog.ErrMalformed, headerID)
}

// ids lists the session ids in the directory (from file names; no file
// is read), sorted. A file may not hold a committed byte yet (a first
// append in progress or cut by a crash).
func (s *Store) ids(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list session directory: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := idOf(e.Name()); ok && !e.IsDir() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// idOf returns the session id of a file name, if it is a session file.
func idOf(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, Ext)
	if !ok || agent.ValidateSessionID(id) != nil {
		return "", false
	}
	return id, true
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
