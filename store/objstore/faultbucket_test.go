package objstore

import (
	"context"
	"errors"
	"sync"
	"time"
)

// faultBucket wraps a bucket at the seam: it records every operation the
// protocol makes and can inject faults into them. It is how the protocol
// tests count requests, crash a Store after its Nth request, lose the
// answer of a write that landed, or slow a request down, on any bucket.
type faultBucket struct {
	bucket

	mu    sync.Mutex
	ops   []Op
	fault func(Op) error // before the operation: it does not happen
	lose  func(Op) bool  // after it: it happened, the caller gets errAnswerLost
	delay time.Duration  // added to every answer
}

// Op is one operation at the seam, as faultBucket records it.
type Op struct {
	Method string   // GET, HEAD, PUT, DELETE, DELETES (many in one request) or LIST
	Key    string   // relative to the store's prefix; a LIST's prefix
	Keys   []string // a DELETES's
	// IfNoneMatch and IfMatch: a PUT's condition ("*" for a create), a
	// GET's If-None-Match.
	IfNoneMatch, IfMatch string
	Delimiter            string // a LIST's
	Size                 int    // a PUT's body, in bytes
	Err                  error  // what the caller got (errAnswerLost when Lost)
	Lost                 bool   // the operation happened, its answer was dropped
	Start, End           time.Time
}

// Precondition reports whether the bucket refused the operation's
// condition (412), whether or not the answer reached the caller.
func (o Op) Precondition() bool { return errors.Is(o.Err, errPrecondition) }

// ErrInjected is what a fault injected before an operation returns.
var ErrInjected = errors.New("injected fault: connection lost")

// errAnswerLost is what the caller sees of an operation whose answer was
// dropped: the connection broke after the bucket had acted on it.
var errAnswerLost = errors.New("injected fault: connection lost before the answer")

func newFaultBucket(b bucket) *faultBucket { return &faultBucket{bucket: b} }

// SetFault makes f decide, before each operation, whether it fails
// (nil: it goes through).
func (f *faultBucket) SetFault(fn func(Op) error) { f.mu.Lock(); f.fault = fn; f.mu.Unlock() }

// SetLose makes the answers of the operations fn picks lost (nil: none).
func (f *faultBucket) SetLose(fn func(Op) bool) { f.mu.Lock(); f.lose = fn; f.mu.Unlock() }

// SetDelay adds d to every answer, so that operations sent together
// overlap however the goroutines sending them are scheduled.
func (f *faultBucket) SetDelay(d time.Duration) { f.mu.Lock(); f.delay = d; f.mu.Unlock() }

// Take returns the operations recorded since the last Take.
func (f *faultBucket) Take() []Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.ops
	f.ops = nil
	return out
}

// do runs one operation through the faults and records it.
func (f *faultBucket) do(ctx context.Context, op Op, call func() error) error {
	f.mu.Lock()
	fault, lose, delay := f.fault, f.lose, f.delay
	f.mu.Unlock()
	op.Start = time.Now()
	if fault != nil {
		if err := fault(op); err != nil {
			op.Err, op.End = err, time.Now()
			f.record(op)
			return err
		}
	}
	err := call()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
	op.Err, op.End = err, time.Now()
	if lose != nil && lose(op) {
		op.Lost = true
		err = errAnswerLost
	}
	f.record(op)
	return err
}

func (f *faultBucket) record(op Op) {
	f.mu.Lock()
	f.ops = append(f.ops, op)
	f.mu.Unlock()
}

func (f *faultBucket) get(ctx context.Context, key, ifNoneMatch string) (data []byte, etag string, err error) {
	err = f.do(ctx, Op{Method: "GET", Key: key, IfNoneMatch: ifNoneMatch}, func() error {
		data, etag, err = f.bucket.get(ctx, key, ifNoneMatch)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return data, etag, nil
}

func (f *faultBucket) head(ctx context.Context, key string) error {
	return f.do(ctx, Op{Method: "HEAD", Key: key}, func() error { return f.bucket.head(ctx, key) })
}

func (f *faultBucket) put(ctx context.Context, key string, data []byte, cond putCond, contentType string) (etag string, err error) {
	op := Op{Method: "PUT", Key: key, IfMatch: cond.ifMatch, Size: len(data)}
	if cond.ifNoneMatch {
		op.IfNoneMatch = "*"
	}
	err = f.do(ctx, op, func() error {
		etag, err = f.bucket.put(ctx, key, data, cond, contentType)
		return err
	})
	if err != nil {
		return "", err
	}
	return etag, nil
}

func (f *faultBucket) delete(ctx context.Context, key string) error {
	return f.do(ctx, Op{Method: "DELETE", Key: key}, func() error { return f.bucket.delete(ctx, key) })
}

// deleteKeys is one request (S3's DeleteObjects), Method DELETES, its
// keys in Keys and the first in Key.
func (f *faultBucket) deleteKeys(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil // the S3 bucket sends no request
	}
	op := Op{Method: "DELETES", Key: keys[0], Keys: keys}
	return f.do(ctx, op, func() error { return f.bucket.deleteKeys(ctx, keys) })
}

func (f *faultBucket) list(ctx context.Context, prefix, delimiter string) (objects []listed, prefixes []string, err error) {
	err = f.do(ctx, Op{Method: "LIST", Key: prefix, Delimiter: delimiter}, func() error {
		objects, prefixes, err = f.bucket.list(ctx, prefix, delimiter)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return objects, prefixes, nil
}
