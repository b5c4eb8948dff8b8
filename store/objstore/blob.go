package objstore

import (
	"context"
	"errors"
	"time"
)

// bucket is the seam between the protocol (§P1–§P7: append, checkpoint,
// read, index, compaction, deletion, repair, encryption) and the object
// store under it: the few operations the protocol makes, on keys relative
// to the store's prefix, with the outcomes it branches on as the sentinels
// below. s3Bucket (s3bucket.go) is the one production implementation;
// what is S3's business (the SDK client, its retries, stall timeouts,
// request traces, error classification) stays behind it. Tests run the
// protocol on an in-memory bucket with the same conditional semantics,
// wrapped to inject faults.
//
// An implementation must honour the conditions of put atomically: of two
// creates of one key, one gets errPrecondition; of two replaces naming
// one ETag, one gets errPrecondition. Every put gives the object a new
// ETag.
type bucket interface {
	// get returns the object's bytes and ETag. With ifNoneMatch set it
	// returns errNotModified when the object still has that ETag.
	get(ctx context.Context, key, ifNoneMatch string) (data []byte, etag string, err error)
	// head returns nil when the object exists, errNotFound when not.
	head(ctx context.Context, key string) error
	// put stores data under key if cond holds and returns the new ETag.
	put(ctx context.Context, key string, data []byte, cond putCond, contentType string) (etag string, err error)
	// delete removes an object; a missing object is not an error.
	delete(ctx context.Context, key string) error
	// deleteKeys removes objects, as many in one request as the server
	// takes (S3's DeleteObjects: up to 1,000): what the index's upkeep
	// deletes by the dozen (pruned log commits, retired run pages) would
	// otherwise cost a writer's exit a request each. A missing object is
	// not an error; the first key refused is.
	deleteKeys(ctx context.Context, keys []string) error
	// list returns the objects under prefix (key and ETag) and, with a
	// delimiter, the common prefixes, in lexical order. No routine path
	// lists (docs/DESIGN.md §P6) but ChangeToken's one bounded listing
	// of the index: only the explicit checks do.
	list(ctx context.Context, prefix, delimiter string) (objects []listed, prefixes []string, err error)
	// url names an object (key "": the store's prefix) in messages.
	url(key string) string
	// explainOpenError turns the error of the store's first requests into
	// one line that says what to fix (wrapping ErrOpen).
	explainOpenError(err error) error
}

// listed is an object a list found, with when it was last written
// (a sync or repair deletes the run pages no commit names once they
// are old).
type listed struct {
	key, etag string
	modified  time.Time
	size      int64
}

// listedKeys is the keys of objects, in their order.
func listedKeys(objects []listed) []string {
	keys := make([]string, len(objects))
	for i, o := range objects {
		keys[i] = o.key
	}
	return keys
}

// putCond is the precondition of a put.
type putCond struct {
	ifNoneMatch bool   // create only: If-None-Match: *
	ifMatch     string // replace only this version: If-Match: etag
	// once: the bucket sends it once and does not retry (the caller does,
	// and must know whether a 412 answers its own earlier attempt).
	once bool
}

// The outcomes of a request that the protocol acts on. Everything else is
// an error to report (after the bucket's own retries).
var (
	errNotFound     = errors.New("object not found")
	errPrecondition = errors.New("precondition failed")          // 412: lost a race
	errConflict     = errors.New("conditional request conflict") // 409: retry
	errNotModified  = errors.New("not modified")                 // 304
	// errNotImplemented: the server does not implement a request's
	// headers (501); the probe refuses such a server (probe.go).
	errNotImplemented = errors.New("not implemented")
	// errForbidden: the credentials may not make the request (403).
	errForbidden = errors.New("access denied")
	// errThrottled: the server answered that it cannot take the request
	// now (503 SlowDown, and MinIO's SlowDownWrite while an erasure set
	// lacks a node): nothing was written, try again later.
	errThrottled = errors.New("server busy")
)

// exists reports whether the object key exists.
func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	switch err := s.b.head(ctx, key); {
	case err == nil:
		return true, nil
	case errors.Is(err, errNotFound):
		return false, nil
	default:
		return false, err
	}
}
