package localfirst

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/panto-dev/panto/store"
)

// openAttemptTimeout bounds one attempt to open the bucket: a frozen
// server must not hold the connector for longer.
const openAttemptTimeout = 15 * time.Second

// connector opens the bucket's store in the background, retrying with
// backoff while the bucket does not answer. Once open, the store is kept:
// its own requests retry, and the shipper and the reads bound them.
type connector struct {
	opts    Options
	stopped chan struct{}
	cancel  context.CancelFunc

	mu        sync.Mutex
	bucket    store.LogStore
	fatal     error         // an answer that was not unreachable: given up
	answered  chan struct{} // closed after the first attempt
	connected chan struct{} // closed once bucket or fatal is set
	stopOnce  sync.Once
	// started counts the attempts begun, failedAt is the number of the
	// last one that found the bucket not answering (1-based).
	started, failedAt int
	// again wakes the connector for an attempt now.
	again chan struct{}
}

func newConnector(opts Options) *connector {
	ctx, cancel := context.WithCancel(context.Background())
	c := &connector{opts: opts, stopped: make(chan struct{}), cancel: cancel, answered: make(chan struct{}), connected: make(chan struct{}), again: make(chan struct{}, 1)}
	go c.run(ctx)
	return c
}

func (c *connector) run(ctx context.Context) {
	defer close(c.stopped)
	answered := false
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		c.started++
		n := c.started
		c.mu.Unlock()
		actx, cancel := context.WithTimeout(ctx, openAttemptTimeout)
		b, err := c.opts.OpenBucket(actx)
		cancel()
		if err != nil {
			b = nil // a typed nil would pass for a store
		}
		c.mu.Lock()
		switch {
		case err == nil && ctx.Err() != nil:
			// Stopped meanwhile: nobody will use it.
			_ = store.Close(context.Background(), b)
		case err == nil:
			c.bucket = b
		case ctx.Err() != nil:
		case !c.opts.Unreachable(err) && !isTimeout(err):
			c.fatal = err
		default:
			c.failedAt = n
		}
		done := c.bucket != nil || c.fatal != nil
		c.mu.Unlock()
		if !answered {
			answered = true
			close(c.answered)
		}
		if done {
			close(c.connected)
			return
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(attempt, c.opts.MaxBackoff)):
		case <-c.again:
		}
	}
}

// firstAnswer waits for the first attempt (at most until ctx ends) and
// returns its error when it was not unreachable; reached reports whether
// the bucket is open.
func (c *connector) firstAnswer(ctx context.Context) (reached bool, err error) {
	select {
	case <-c.answered:
	case <-ctx.Done():
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bucket != nil, c.fatal
}

// wait returns the bucket's store, waiting for it until ctx ends; nil
// when it is not open by then (or gave an answer that was an error).
func (c *connector) wait(ctx context.Context) store.LogStore {
	if b := c.current(); b != nil {
		return b
	}
	select {
	case <-c.connected:
	case <-ctx.Done():
	}
	return c.current()
}

// ready is closed once the connector is done (the bucket open, or given
// up on).
func (c *connector) ready() <-chan struct{} { return c.connected }

// attempts returns the number of attempts begun, and asks for one now.
func (c *connector) attempts() int {
	select {
	case c.again <- struct{}{}:
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// failedSince reports whether an attempt begun after the first n found
// the bucket not answering (and none connected).
func (c *connector) failedSince(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bucket == nil && c.fatal == nil && c.failedAt > n
}

// current returns the bucket's store if it is open.
func (c *connector) current() store.LogStore {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bucket
}

// failure is the error the connector gave up on, if any.
func (c *connector) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal
}

// stop ends the attempts to connect.
func (c *connector) stop() { c.stopOnce.Do(c.cancel) }

// backoff is the wait after the attempt-th failure to reach the bucket:
// doubling from 250 ms up to max.
func backoff(attempt int, max time.Duration) time.Duration {
	d := 250 * time.Millisecond
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// isTimeout: an attempt that ran out of time got no answer.
func isTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
