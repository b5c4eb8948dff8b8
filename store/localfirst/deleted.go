package localfirst

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// maxDeletionChecks bounds the sessions one listing asks the bucket about
// (deletedElsewhere), so that a listing stays a few round trips: after a
// prune of hundreds elsewhere, the next listings carry the rest, and the
// daily full catch-up whatever no listing showed.
const maxDeletionChecks = 32

// deletedElsewhere carries to the replica the bucket's deletions of
// sessions among ids, which the replica lists and the bucket's listing
// did not, and returns those it no longer holds. Another machine's `panto
// rm` reaches this one's copy through the shipper only once a day (a
// catch-up asks the bucket of the sessions it has unsent alone), so
// without this the listing showed a deleted session, and `panto -c`
// continued it. Only a session whose copy the bucket held whole (the
// shipped record, srcCovered) is asked, one request each, at once: a
// session not sent yet is missing from the bucket's listing for that
// reason, and one written to since it was sent is kept either way.
func (s *Store) deletedElsewhere(ctx context.Context, ids []string) map[string]bool {
	b := s.conn.current()
	if b == nil || len(ids) == 0 {
		return nil
	}
	var ask []string
	for _, id := range ids {
		sent, ok := s.shipped.get(id)
		if !ok || sent.Length == 0 {
			continue
		}
		if mine, err := head(ctx, s.local, id); err == nil && mine == sent {
			ask = append(ask, id)
		}
		if len(ask) == maxDeletionChecks {
			break
		}
	}
	if len(ask) == 0 {
		return nil
	}
	rctx, cancel := s.waitOnBucket(ctx)
	defer cancel()
	var mu sync.Mutex
	gone := map[string]bool{}
	var g errgroup.Group
	g.SetLimit(8)
	for _, id := range ask {
		g.Go(func() error {
			_, err := store.Head(rctx, b, id)
			var dead *agent.DeletedError
			if !errors.As(err, &dead) {
				return nil // there, or not answering: the listing stands
			}
			mine, err := head(rctx, s.local, id)
			if err == nil {
				err = s.carryDeletion(rctx, id, dead, mine)
			}
			if err == nil {
				mu.Lock()
				gone[id] = true
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return gone
}

// unlisted returns the ids of mine that theirs lacks.
func unlisted[T any](mine, theirs []T, id func(T) string) []string {
	listed := make(map[string]bool, len(theirs))
	for _, t := range theirs {
		listed[id(t)] = true
	}
	var out []string
	for _, m := range mine {
		if !listed[id(m)] {
			out = append(out, id(m))
		}
	}
	return out
}

// without returns list less the entries gone names.
func without[T any](list []T, gone map[string]bool, id func(T) string) []T {
	if len(gone) == 0 {
		return list
	}
	out := list[:0:0]
	for _, l := range list {
		if !gone[id(l)] {
			out = append(out, l)
		}
	}
	return out
}

func infoID(i agent.SessionInfo) string { return i.ID }
func logID(l store.Log) string          { return l.Info.ID }
