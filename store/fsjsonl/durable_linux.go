package fsjsonl

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncBatch makes files (in dir) and dir's entries durable with one
// syncfs(2) of the file system that holds dir: it writes back every
// dirty page and inode of that file system and commits its journal,
// which covers each of the files and the directory at once (since Linux
// 5.8 it also reports a write-back error of any of them). Where syncfs
// is not available, an fsync of each file and of the directory.
func syncBatch(ctx context.Context, dir string, files []string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	err = unix.Syncfs(int(d.Fd()))
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return syncEach(ctx, dir, files)
	}
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
