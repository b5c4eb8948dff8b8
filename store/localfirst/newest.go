package localfirst

import (
	"context"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

var _ store.NewestLister = (*Store)(nil)

// ListNewest lists the newest sessions keep accepts of the replica and,
// online, of the bucket (store.ListNewest: a bucket's index log answers
// from its newest commit), merged as List merges, the newest limit kept.
// The newest limit of the two together are among each side's newest
// limit, so neither side lists more.
func (s *Store) ListNewest(ctx context.Context, limit int, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	local, remote, online, err := listBoth(ctx, s,
		func(ctx context.Context) ([]agent.SessionInfo, error) {
			return store.ListNewest(ctx, s.local, limit, keep)
		},
		func(ctx context.Context, b store.LogStore) ([]agent.SessionInfo, error) {
			return store.ListNewest(ctx, b, limit, keep)
		})
	list := local
	if online {
		list = merge(local, remote)
	}
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	return list, err
}
