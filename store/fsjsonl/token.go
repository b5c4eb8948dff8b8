package fsjsonl

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/store"
)

var _ store.ListingTokener = (*Store)(nil)

// ListingToken names the directory's sessions as they are now
// (store.ListingTokener): the hash of every session file's name and file
// key (inode, size, mtime and ctime, as the summary cache tells a
// changed file) and of every tombstone's. A listing after it shows that
// state or a newer one, since no write leaves a file's key as it was.
// It costs what a listing costs before its cache: a stat per file (0.35 s
// at 100,000 sessions on 2 cores), none of the cache's decoding; and the
// Logs right after it lists from those stats (takeStatted).
func (s *Store) ListingToken(ctx context.Context) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "fsjsonl %s\n", s.dir)
	files, err := s.hashDir(ctx, h, s.dir, func(name string) bool { _, ok := idOf(name); return ok })
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "deleted\n")
	tombs := filepath.Join(s.dir, TombstoneDir)
	if _, err := s.hashDir(ctx, h, tombs, func(string) bool { return true }); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	s.mu.Lock()
	s.statted = &statted{files: files, at: time.Now()}
	s.mu.Unlock()
	return hex.EncodeToString(h.Sum(nil)), nil
}

// statted is what a ListingToken stat'ed of the session files.
type statted struct {
	files []sessionFile // every entry named as a session, in name order
	at    time.Time
}

// stattedFresh is how long a Logs may list from the stats of the
// ListingToken before it, instead of stat'ing every file again (0.3 s
// at 100,000 sessions): a sync takes the token, then lists at once.
const stattedFresh = 10 * time.Second

// takeStatted returns the session files as the last ListingToken found
// them, filtered as sessionFiles filters them, when it was within
// stattedFresh; nil otherwise. Once: the next Logs stats again. The
// listing so shows the directory as the token named it, which is what
// the token promises (that state or a newer one); a file read because
// its summary is not cached is read as it is now, under its own stat
// (scanLocked), so no stale stat reaches the cache.
func (s *Store) takeStatted() []sessionFile {
	s.mu.Lock()
	st := s.statted
	s.statted = nil
	s.mu.Unlock()
	if st == nil || time.Since(st.at) > stattedFresh {
		return nil
	}
	deleted := s.Tombstoned()
	files := make([]sessionFile, 0, len(st.files))
	for _, f := range st.files {
		if !deleted[f.id] && f.fi.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	return files
}

// tokenChunk is how many entries of a directory one goroutine of
// hashDir stats: a fixed number, so that the token does not depend on
// the machine's cores.
const tokenChunk = 4096

// hashDir writes to h the name and file key of every entry of dir that
// keep accepts, in name order: the digests of chunks of tokenChunk
// entries, stat'ed in parallel (a stat is a system call; 100,000 of them
// take 0.3 s on one core). A regular file's key comes from the
// directory's own stat of it (fstatat), a symlink's from its target.
func (s *Store) hashDir(ctx context.Context, h io.Writer, dir string, keep func(string) bool) ([]sessionFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	digests := make([][sha256.Size]byte, (len(entries)+tokenChunk-1)/tokenChunk)
	stats := make([]fs.FileInfo, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for c := range digests {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			ch := sha256.New()
			buf := make([]byte, 0, 128)
			first := c * tokenChunk
			for i, de := range entries[first:min(first+tokenChunk, len(entries))] {
				if !keep(de.Name()) {
					continue
				}
				var fi fs.FileInfo
				var err error
				if de.Type().IsRegular() {
					fi, err = de.Info()
				} else {
					fi, err = os.Stat(filepath.Join(dir, de.Name()))
				}
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since ReadDir: the listing will not show it either
				}
				if err != nil {
					return fmt.Errorf("stat %s: %w", de.Name(), err)
				}
				stats[first+i] = fi
				k := filekey.Of(fi)
				buf = append(buf[:0], de.Name()...)
				buf = append(buf, 0)
				for _, v := range []uint64{k.Ino, uint64(k.Size), uint64(k.MtimeNS), uint64(k.CtimeNS)} {
					buf = binary.LittleEndian.AppendUint64(buf, v)
				}
				ch.Write(buf)
			}
			ch.Sum(digests[c][:0])
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, d := range digests {
		h.Write(d[:])
	}
	var files []sessionFile
	for i, fi := range stats {
		if id, ok := idOf(entries[i].Name()); ok && fi != nil {
			files = append(files, sessionFile{id, fi})
		}
	}
	return files, nil
}
