package localfirst

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// ErrLeftoversNotSent: SendLeftovers could not send all of a replica's
// leftovers (the bucket did not answer, or refused a session); they stay
// in the replica for the next try.
var ErrLeftoversNotSent = errors.New("not all sent")

// LeftoverOptions configure SendLeftovers.
type LeftoverOptions struct {
	// Dir is the replica (Dir of the bucket's URL and endpoint).
	Dir string
	// Name is the bucket's URL, named in messages.
	Name string
	// Unreachable and Notify are as in Options.
	Unreachable func(error) bool
	Notify      func(string)
	// Report, when set, is told what became of each session sent.
	Report func(replica.Event)
}

// SendLeftovers sends the bucket b what the local-first replica at
// opts.Dir holds and the bucket lacks: what panto kept on this machine
// when it exited before the bucket took it (the package doc's step 5).
// It is the catch-up a local-first store makes at each connection, for a
// process that is not panto (panto-sync push and watch), with the same
// rules: conditional appends, a diverged session kept twice and the
// replica following the bucket. A replica that does not exist holds
// nothing. It returns the number of sessions sent (created, appended to,
// deleted or kept twice); an error wrapping ErrLeftoversNotSent when some
// are still to send.
func SendLeftovers(ctx context.Context, b store.LogStore, opts LeftoverOptions) (int, error) {
	if fi, err := os.Stat(opts.Dir); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return 0, nil
	}
	local, err := fsjsonl.Open(opts.Dir)
	if err != nil {
		return 0, fmt.Errorf("send what %s kept for %s: %w", opts.Dir, opts.Name, err)
	}
	o := Options{Dir: opts.Dir, Name: opts.Name, Unreachable: opts.Unreachable, Notify: opts.Notify}
	o.defaults()
	s := &Store{opts: o, local: local, redirect: map[string]string{}, shipped: openShipped(opts.Dir)}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := 0
	sh := &shipper{s: s, kickCh: make(chan struct{}, 1), ctx: sctx, cancel: cancel, done: make(chan struct{}),
		dirty: map[string]bool{}, idle: make(chan struct{}), idleOpen: true, failing: map[string]bool{},
		report: func(e replica.Event) {
			switch e.Kind {
			case replica.Created, replica.Appended, replica.Deleted, replica.KeptBoth:
				sent++
			}
			if opts.Report != nil {
				opts.Report(e)
			}
		}}
	s.ship = sh
	ok := sh.round(b)
	for ok && sh.pendingWork() { // a session kept twice marks its copy
		ok = sh.round(b)
	}
	s.shipped.save()
	ferr := local.Flush(ctx)
	if !ok {
		return sent, fmt.Errorf("send what %s kept for %s: %w (the bucket did not answer, or refused a session)", opts.Dir, opts.Name, ErrLeftoversNotSent)
	}
	return sent, ferr
}

// Kept says what the local-first replica at dir holds that its shipped
// record does not say the bucket holds, as Close says it ("2 messages and
// 1 deletion"); "" when nothing is, or there is no replica. It reads the
// replica alone: what panto-sync status and push --dry-run say push
// sends first (SendLeftovers).
func Kept(ctx context.Context, dir string) (string, error) {
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return "", nil
	}
	local, err := fsjsonl.Open(dir)
	if err != nil {
		return "", fmt.Errorf("read what %s kept: %w", dir, err)
	}
	s := &Store{opts: Options{Dir: dir}, local: local, shipped: openShipped(dir)}
	n, err := s.pending(ctx)
	if err != nil {
		return "", fmt.Errorf("read what %s kept: %w", dir, err)
	}
	if n.messages+n.deletions == 0 {
		return "", nil
	}
	return n.String(), nil
}
