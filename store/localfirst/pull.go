package localfirst

import (
	"context"
	"errors"
	"fmt"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
)

// refresh brings the replica's copy of session id up to the bucket's
// before a read, waiting at most ReadTimeout; offline (or when the bucket
// does not answer in time) the read goes on from the replica. A copy the
// replica is ahead on, or that diverged, is the shipper's: it is marked.
func (s *Store) refresh(ctx context.Context, id string) {
	b := s.online(ctx)
	if b == nil {
		return
	}
	// The bucket answered Open: bringing a session over is bounded as a
	// listing is (waitOnBucket), a slow one not taken for a silent one.
	rctx, cancel := s.waitOnBucket(ctx)
	defer cancel()
	err := s.pull(rctx, b, id)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// The reader gave up (a search stopped at its --limit cancels
		// the reads in flight): neither the bucket nor the copy is at
		// fault, and there is no one left to tell.
	case s.gaveUp(rctx, err):
		s.tellOffline(ctx)
	case errors.Is(err, errShipFirst):
		s.ship.mark(id)
	default:
		s.opts.Notify(fmt.Sprintf("session %s: could not bring this machine's copy up to date from %s, reading it as it is: %v", id, s.opts.Name, err))
	}
}

// errShipFirst: the replica holds what the bucket lacks; the shipper
// sends it (or keeps both) before anything can be pulled.
var errShipFirst = errors.New("the replica is ahead of the bucket")

// pull copies into the replica what the bucket holds of session id after
// the replica's copy, when that copy is a prefix of the bucket's, and
// carries a deletion the bucket made of a copy the replica holds no more
// of than was deleted.
func (s *Store) pull(ctx context.Context, b store.LogStore, id string) error {
	mine, err := head(ctx, s.local, id)
	var deletedHere *agent.DeletedError
	if errors.As(err, &deletedHere) {
		return nil // the replica's deletion is the shipper's to carry
	}
	if err != nil {
		return err
	}
	theirs, listed := s.listed(id)
	if !listed {
		theirs, err = head(ctx, b, id)
	}
	var gone *agent.DeletedError
	if errors.As(err, &gone) {
		return s.carryDeletion(ctx, id, gone, mine)
	}
	if err != nil {
		return err
	}
	rel, err := replica.Relate(ctx, b, s.local, id, theirs, mine)
	if err != nil {
		return err
	}
	switch rel {
	case replica.Same:
		s.shipped.set(id, mine)
		return nil
	case replica.DstAhead, replica.Diverged:
		return errShipFirst
	case replica.SrcOnly, replica.SrcAhead:
	default:
		return nil
	}
	events := replica.Transfer(ctx, b, s.local, []replica.Plan{{ID: id, Src: theirs, Dst: mine, Relation: rel}}, replica.Options{Concurrency: 1})
	e := events[0]
	switch e.Kind {
	case replica.Created, replica.Appended, replica.Unchanged:
		s.shipped.set(id, e.Plan.Src)
		return nil
	case replica.Failed:
		if e.Reached.Length > mine.Length {
			// Cut short between two chunks (the reader gave up): what
			// was copied is a prefix of the bucket's log, and came from
			// there. Unrecorded, Close counted it unsent, of a session
			// this machine never wrote, and the shipper would relate it
			// again to send nothing.
			s.shipped.set(id, e.Reached)
		}
		return e.Err
	case replica.Refused:
		return e.Err
	}
	return errShipFirst
}

// carryDeletion brings to the replica the bucket's deletion of session
// id (gone) of which the replica holds mine, when it covers that copy
// (srcCovered); the replica's Delete is of mine, so that an append since
// is refused it. A copy written to after the deletion is the shipper's,
// which keeps it as a new session: errShipFirst.
func (s *Store) carryDeletion(ctx context.Context, id string, gone *agent.DeletedError, mine store.Checkpoint) error {
	t := store.Tombstone{ID: id, Deleted: gone.Deleted, At: store.Checkpoint{Length: gone.Length, SHA256: gone.SHA256}}
	if !s.srcCovered(id, t, mine) {
		s.ship.mark(id)
		return errShipFirst
	}
	if mine.Length > 0 {
		t.At = mine
	}
	if err := s.local.Delete(ctx, t); err != nil {
		return err
	}
	s.shipped.forget(id)
	return nil
}
