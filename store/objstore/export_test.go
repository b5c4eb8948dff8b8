package objstore

import (
	"context"
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
func NewMemBucket(name, prefix string) Bucket { return newMemBucket(name, prefix) }

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

// OpenWrapped opens a Store on the S3 bucket of rawURL as Open does, with
// the bucket wrapped by wrap first (a FaultBucket): faults injected at the
// seam of a real server's store.
func OpenWrapped(ctx context.Context, rawURL string, wrap func(Bucket) Bucket, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, fn := range opts {
		fn(&o)
	}
	bucketName, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	b, err := newS3Bucket(ctx, bucketName, prefix, o)
	if err != nil {
		return nil, err
	}
	return openBucket(ctx, wrap(b), o)
}

// MemObjects reads every object of the memory bucket b (NewMemBucket),
// by key from its root, in key order.
func MemObjects(b Bucket) []MemObject { return b.(*memBucket).objectsUnder() }

// MemPut stores data under key (from the bucket's root) in the memory
// bucket b, unconditionally: tampering, a fixture, a newer panto.
func MemPut(b Bucket, key string, data []byte) { b.(*memBucket).putUnder(key, data) }

// MemDelete deletes key (from the bucket's root) of the memory bucket b.
func MemDelete(b Bucket, key string) { b.(*memBucket).deleteUnder(key) }

// The Store's test-only knobs (their doc is at their definition).
var (
	WithCompactThreshold  = withCompactThreshold
	WithCompactGrace      = withCompactGrace
	WithManifestInterval  = withManifestInterval
	WithMaxAttempts       = withMaxAttempts
	WithRunFoldAt         = withRunFoldAt
	WithWideAfter         = withWideAfter
	WithMergeBudget       = withMergeBudget
	WithPartitionsAtClose = withPartitionsAtClose
)

// SetIndexPruneAfter lets tests see index deltas deleted without waiting
// for indexPruneAfter.
func SetIndexPruneAfter(s *Store, d time.Duration) { s.indexPruneAfter = d }

// SetNow sets the clock of the Store's caches and delays (not the one
// that stamps lines).
func SetNow(s *Store, now func() time.Time) { s.now = now }

// ErrStalePages is a commit refused for naming a page sent too long ago.
var ErrStalePages = errStalePages

// ErrNotFound is what a bucket answers a GET of an object it does not
// hold (404).
var ErrNotFound = errNotFound

// ErrForbidden is what a bucket answers a request its credentials do not
// allow: a fault that makes a FaultBucket's LIST a forbidden one.
var ErrForbidden = errForbidden

// ErrThrottled is what a bucket answers a request the server is too busy
// to take (503 SlowDown): a fault that makes a FaultBucket's PUT one.
var ErrThrottled = errThrottled

// Classify is the one classification of S3's errors (s3bucket.go).
var Classify = classify

// WholeCommitEntries is wholeCommitEntries: what an exit's commit stored
// whole costs its budget.
const WholeCommitEntries = wholeCommitEntries

// DirFilterEntries is dirFilterEntries: what the dir filter costs an
// exit's budget.
const DirFilterEntries = dirFilterEntries

// ProjectHeadKey is the key of the head of the sessions whose project's
// Key is key.
func ProjectHeadKey(key string) string { return headKey(keyHead(key)) }

// LogFullEvery is logFullEvery: commits whose number it divides are
// stored whole.
const LogFullEvery = logFullEvery

// LogKeep is logKeep: a pruning comes every LogKeep commits.
const LogKeep = logKeep

// NarrowPrunes is narrowPrunes: the prunings that share the deletion of
// the partitions of two characters after the index widened.
const NarrowPrunes = narrowPrunes

// WaitPrefetches waits for the readings s started in the background at
// its appends (the project's head, the pages of a merge its exit would
// take in, the pages and partitions of its fold's step).
func WaitPrefetches(ctx context.Context, s *Store) {
	s.waitHeadFetches(ctx)
	s.waitMergeFetches(ctx)
	for _, name := range s.shardNames() {
		_ = s.awaitPrefetch(ctx, name)
	}
}

// ProbeNotePath is where s notes the last probe that passed (probePath).
func ProbeNotePath(s *Store) string { return s.probePath() }
