package fsjsonl

import "context"

// SetSyncBatch replaces how s makes a batch of deferred writes durable,
// so that a test can see when, and of what, it is called.
func SetSyncBatch(s *Store, f func(ctx context.Context, dir string, files []string) error) {
	s.syncBatch = f
}
