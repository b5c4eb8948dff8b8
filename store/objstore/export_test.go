package objstore

import (
	"context"
	"errors"
	"time"
)

// This file exports to the package's external tests (objstore_test) what
// only tests may reach: the bucket seam, an in-memory bucket, the fault
// wrapper and the Store's test-only knobs.

// Bucket is the seam (bucket): external tests hold and pass buckets.
type Bucket = bucket

// FaultBucket is faultBucket, for external tests.
type FaultBucket = faultBucket

// NewMemBucket is an empty bucket in memory (memBucket).
func NewMemBucket(name string) Bucket { return newMemBucket(name) }

// NewFaultBucket wraps b to record its operations and inject faults.
func NewFaultBucket(b Bucket) *FaultBucket { return newFaultBucket(b) }

// OpenBucket opens a Store on b, as Open does on an S3 bucket.
func OpenBucket(ctx context.Context, b Bucket, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, fn := range opts {
		fn(&o)
	}
	return openBucket(ctx, b, o)
}

// PutObject writes an object of b unconditionally, as another program
// would (tampering, a fixture, a newer panto).
func PutObject(ctx context.Context, b Bucket, key string, data []byte) error {
	_, err := b.put(ctx, key, data, putCond{}, "application/octet-stream")
	return err
}

// GetObject reads an object of b.
func GetObject(ctx context.Context, b Bucket, key string) ([]byte, error) {
	data, _, err := b.get(ctx, key, "")
	return data, err
}

// DeleteObject deletes an object of b.
func DeleteObject(ctx context.Context, b Bucket, key string) error { return b.delete(ctx, key) }

// ListObjects lists the keys of b under prefix.
func ListObjects(ctx context.Context, b Bucket, prefix string) ([]string, error) {
	keys, _, err := b.list(ctx, prefix, "")
	return keys, err
}

// IsNotFound reports whether err is the seam's "object not found".
func IsNotFound(err error) bool { return errors.Is(err, errNotFound) }

// SetIndexPruneAfter lets tests see index deltas deleted without waiting
// for indexPruneAfter.
func SetIndexPruneAfter(s *Store, d time.Duration) { s.indexPruneAfter = d }

// SetNow sets the clock of the Store's caches and delays (not the one
// that stamps lines).
func SetNow(s *Store, now func() time.Time) { s.now = now }
