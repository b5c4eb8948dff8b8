package objstore_test

import (
	"sync"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/storetest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestConformance runs the SessionStore suite against a real MinIO; Reopen
// is a second Open of the same bucket and prefix, as another process would.
func TestConformance(t *testing.T) {
	var mu sync.Mutex
	envs := map[agent.SessionStore]*env{}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) agent.SessionStore {
			e := newEnv(t)
			s := e.open(t, objstore.WithCompactThreshold(4))
			mu.Lock()
			envs[s] = e
			mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T, s agent.SessionStore) agent.SessionStore {
			mu.Lock()
			e := envs[s]
			mu.Unlock()
			return e.open(t, objstore.WithCompactThreshold(4))
		},
		Settle: func(t *testing.T, s agent.SessionStore) {
			if err := s.(*objstore.Store).Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
	})
}
