package localfirst

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

var _ store.NewestLister = (*Store)(nil)

// newestLogger is a bucket that lists its newest sessions with their
// checkpoints (objstore: from its index log's newest commit).
type newestLogger interface {
	NewestLogsIn(ctx context.Context, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]store.Log, error)
}

// bucketNewest lists the bucket's newest sessions; when it says their
// checkpoints too, they are the view the reads of the next viewFor take
// (bucketLogs), so that panto -c asks the bucket nothing after Open.
func (s *Store) bucketNewest(ctx context.Context, b store.LogStore, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	nl, ok := b.(newestLogger)
	if !ok {
		return store.ListNewestIn(ctx, b, limit, p, keep)
	}
	at := time.Now()
	logs, err := nl.NewestLogsIn(ctx, limit, p, keep)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return nil, err
	}
	v := bucketView{at: at, logs: make(map[string]store.Checkpoint, len(logs))}
	infos := make([]agent.SessionInfo, len(logs))
	for i, l := range logs {
		v.logs[l.Info.ID] = l.Checkpoint
		infos[i] = l.Info
	}
	s.mu.Lock()
	s.view = v
	s.mu.Unlock()
	return infos, err
}

// ListNewest lists the newest sessions keep accepts of the replica and,
// online, of the bucket (ListNewestIn of every project).
func (s *Store) ListNewest(ctx context.Context, limit int, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	return s.ListNewestIn(ctx, limit, agent.Project{}, keep)
}

// ListNewestIn lists the newest sessions of project p that keep accepts
// of the replica and, online, of the bucket (store.ListNewestIn: a
// bucket's index log answers from its newest commit, or the project's
// head), merged as List merges, the newest limit kept. The newest limit
// of the two together are among each side's newest limit, so neither
// side lists more.
//
// A session of the replica's that the bucket deleted is not listed
// (deletedElsewhere), and the replica is listed again in its place, at
// most a few times; nor is one the replica deleted and the bucket still
// holds (List).
func (s *Store) ListNewestIn(ctx context.Context, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	listLocal := func(ctx context.Context) ([]agent.SessionInfo, error) {
		return store.ListNewestIn(ctx, s.local, limit, p, keep)
	}
	local, remote, online, err := listBoth(ctx, s, listLocal,
		func(ctx context.Context, b store.LogStore) ([]agent.SessionInfo, error) {
			// Not the sessions the replica deleted (List), so that the
			// bucket's newest limit are others.
			deleted := s.local.Tombstoned()
			return s.bucketNewest(ctx, b, limit, p, func(info agent.SessionInfo) bool {
				return !deleted[info.ID] && (keep == nil || keep(info))
			})
		})
	if !online {
		return newest(local, limit), err
	}
	list := newest(merge(local, remote), limit)
	asked := map[string]bool{}
	for range 3 {
		ask := slices.DeleteFunc(unlisted(list, remote, infoID), func(id string) bool { return asked[id] })
		for _, id := range ask {
			asked[id] = true
		}
		if len(s.deletedElsewhere(ctx, ask)) == 0 {
			break
		}
		again, lerr := listLocal(ctx)
		if lerr != nil {
			break
		}
		list = newest(merge(again, remote), limit)
	}
	return list, err
}

// newest is the first limit of list (all of it when limit is 0).
func newest(list []agent.SessionInfo, limit int) []agent.SessionInfo {
	if limit > 0 && len(list) > limit {
		return list[:limit]
	}
	return list
}
