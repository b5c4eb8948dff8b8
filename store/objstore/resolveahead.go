package objstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
)

// WithResolveAhead is for a command that resolves these id prefixes
// right after Open (panto show PREFIX, panto -r PREFIX, panto rm): Open
// sends, with its own requests, the LIST of the sessions under each
// (with the delimiter) that a resolve of one of the newest sessions makes
// (resolveRecent), so that the resolve costs no round trip of its own.
// A prefix that is not a session id's is ignored; at most
// maxResolveAhead are listed.
func WithResolveAhead(prefixes ...string) Option {
	return func(o *options) {
		for _, p := range prefixes {
			if agent.ValidateSessionID(p) == nil && len(o.resolveAhead) < maxResolveAhead {
				o.resolveAhead = append(o.resolveAhead, p)
			}
		}
	}
}

// maxResolveAhead bounds the listings Open sends for WithResolveAhead.
const maxResolveAhead = 8

// aheadLists are the listings Open sent for WithResolveAhead, each taken
// by the first resolve of its prefix.
type aheadLists struct {
	prefixes []string
	mu       sync.Mutex
	lists    map[string]*aheadList
}

// aheadList is one listing Open sent: the sessions' common prefixes
// under a prefix, once done is closed.
type aheadList struct {
	done     chan struct{}
	at       time.Time
	prefixes []string
	err      error
}

// listAhead sends Open's listings for WithResolveAhead. They outlive
// Open's context: the resolve that takes one may come after it.
func (s *Store) listAhead(ctx context.Context) {
	if len(s.ahead.prefixes) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	s.ahead.mu.Lock()
	defer s.ahead.mu.Unlock()
	s.ahead.lists = map[string]*aheadList{}
	for _, p := range s.ahead.prefixes {
		if _, ok := s.ahead.lists[p]; ok {
			continue
		}
		l := &aheadList{done: make(chan struct{}), at: s.now()}
		s.ahead.lists[p] = l
		go func() {
			defer close(l.done)
			_, l.prefixes, l.err = s.b.list(ctx, sessionsPrefix+p, "/")
		}()
	}
}

// sessionsUnder returns the ids of the sessions whose ids start with
// prefix: Open's listing of it (its answer, or its error) when it sent
// one (WithResolveAhead) that no resolve took yet and that is younger
// than openSnapshotFor (a listing serves a command, as Open's snapshot
// does); else one LIST.
func (s *Store) sessionsUnder(ctx context.Context, prefix string) ([]string, error) {
	s.ahead.mu.Lock()
	l := s.ahead.lists[prefix]
	delete(s.ahead.lists, prefix)
	s.ahead.mu.Unlock()
	var prefixes []string
	var err error
	if l != nil && s.now().Sub(l.at) < openSnapshotFor {
		// Its error too: credentials that may not list are refused once.
		select {
		case <-l.done:
			prefixes, err = l.prefixes, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		_, prefixes, err = s.b.list(ctx, sessionsPrefix+prefix, "/")
	}
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(p, sessionsPrefix), "/"))
	}
	return ids, nil
}
