package replica

import (
	"context"
	"io"

	"github.com/panto-dev/panto/store"
)

// This file exports what a caller needs to make, on its own side, the
// same copy KeepBoth makes in the destination (store/localfirst: the
// replica keeps this machine's copy under the id the bucket got it as).

// KeptID is the id KeepBoth stores the source's copy of diverged session
// id under, when the source's log hashes to srcSHA and the destination's
// to dstSHA (Event.NewID of a KeptBoth event).
func KeptID(id, srcSHA, dstSHA string) string { return forkID(id, srcSHA, dstSHA) }

// KeptLog returns log (the whole committed log of session from) as the
// log of its kept copy newID: byte for byte what KeepBoth stores, the
// header linking the original. It also returns how much longer it is.
func KeptLog(log io.Reader, newID, from string) (io.Reader, int64, error) {
	return forkReader(log, newID, from)
}

// Relate relates the copies of session id in src and dst, whose committed
// logs are at s and d (zero when a side does not hold it), reading as
// little as the stores allow: the relation PlanAll finds for one session,
// without listing either side.
func Relate(ctx context.Context, src, dst store.LogStore, id string, s, d store.Checkpoint) (Relation, error) {
	return relate(ctx, src, dst, id, s, d)
}
