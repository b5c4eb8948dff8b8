//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package fsjsonl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
)

// errNoLocking: this platform has no flock, and appending without a lock
// could interleave two writers' batches, so the store refuses to write.
var errNoLocking = fmt.Errorf("file locking is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func lockFile(ctx context.Context, f *os.File, exclusive bool) error { return errNoLocking }

func unlockFile(f *os.File) error { return nil }
