//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fsjsonl

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// lockFile takes an advisory flock on f, exclusive or shared. flock locks
// belong to the open file description, so two handles in one process
// exclude each other as two processes do. It polls rather than blocks so
// that ctx can cancel the wait.
func lockFile(ctx context.Context, f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	wait := 100 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return &fs.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if wait < 5*time.Millisecond {
			wait *= 2
		}
	}
}

// unlockFile releases the lock; closing f would too, this only makes the
// release explicit before a slow close.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
