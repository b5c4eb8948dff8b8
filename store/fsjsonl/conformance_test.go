package fsjsonl_test

import (
	"os"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/storetest"
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
		// A newer panto's session is its file; what is stored of it is
		// the file's bytes.
		Newer: func(t *testing.T, s agent.SessionStore, id string, log []byte) func() []byte {
			path, err := s.(*fsjsonl.Store).Path(id)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, log, 0o600); err != nil {
				t.Fatal(err)
			}
			return func() []byte {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		},
	})
}
