//go:build !linux

package fsjsonl

import "context"

// syncBatch makes files (in dir) and dir's entries durable: an fsync of
// each file, in parallel, and of the directory (no syncfs(2) here).
func syncBatch(ctx context.Context, dir string, files []string) error {
	return syncEach(ctx, dir, files)
}
