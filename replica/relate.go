package replica

import (
	"context"

	"github.com/panto-dev/panto/store"
)

// Relate relates the copies of session id in src and dst, whose committed
// logs are at s and d (zero when a side does not hold it), reading as
// little as the stores allow: the relation PlanAll finds for one session,
// without listing either side. store/localfirst plans each session it
// ships with it, then carries the plan out with Transfer.
func Relate(ctx context.Context, src, dst store.LogStore, id string, s, d store.Checkpoint) (Relation, error) {
	return relate(ctx, src, dst, id, s, d)
}
