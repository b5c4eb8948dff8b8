package fsjsonl_test

import (
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/storetest"
	"github.com/panto-dev/panto/store/fsjsonl"
)

func open(t testing.TB, dir string, opts ...fsjsonl.Option) *fsjsonl.Store {
	t.Helper()
	s, err := fsjsonl.Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) agent.SessionStore { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, s agent.SessionStore) agent.SessionStore {
			return open(t, s.(*fsjsonl.Store).Dir())
		},
	})
}
