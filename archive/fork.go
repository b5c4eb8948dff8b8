package archive

import (
	"context"
	"fmt"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// Fork starts a new session of st holding the first at messages of
// session parent (all of them when at is 0), its header linking it to
// the parent (sessionlog.Fork), and returns it. The fork is one raw
// append of a new log; the parent is only read.
func Fork(ctx context.Context, st store.LogStore, parent string, at int, now time.Time) (*agent.Session, error) {
	r, _, err := st.ReadLog(ctx, parent, 0)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", parent, err)
	}
	defer r.Close()
	id := agent.NewSessionID()
	data, _, err := sessionlog.Fork(r, parent, id, at, now)
	if err != nil {
		return nil, err
	}
	if _, err := st.AppendLog(ctx, id, store.Checkpoint{}, data); err != nil {
		return nil, fmt.Errorf("fork %s: %w", parent, err)
	}
	sess, err := st.Resolve(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("fork %s: the new session %s: %w", parent, id, err)
	}
	return sess, nil
}
