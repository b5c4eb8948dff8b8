//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package fsjsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// errNoLocking: this platform has no flock, and appending without a lock
// could interleave two writers' batches, so the store refuses to write.
var errNoLocking = fmt.Errorf("file locking is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func lockFile(ctx context.Context, f *os.File, exclusive bool) error { return errNoLocking }

func unlockFile(f *os.File) error { return nil }

type fileKey struct {
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

func keyOf(fi fs.FileInfo) fileKey {
	return fileKey{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
}
