package objstore_test

import (
	"sync"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/objstore"
	"github.com/panto-dev/panto/store/storetest"
)

// TestConformance runs the SessionStore suite against every kind of
// server that honours conditional writes (miniotest.Matrix: MinIO,
// versitygw, gofakes3); Reopen is another Open of the same bucket and
// prefix, as another process would, and the concurrency case appends to
// one session through several such handles at once.
func TestConformance(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) { conformance(t, srv, false) })
}

// TestConformanceEncrypted is TestConformance on encrypted prefixes: every
// handle opens its prefix with the prefix's key.
func TestConformanceEncrypted(t *testing.T) {
	t.Parallel()
	miniotest.Matrix(t, func(t *testing.T, srv *miniotest.Server) {
		conformance(t, srv, true, objstore.WithKey(newKey(t)))
	})
}

// conformance runs the suite on prefixes opened with opts. Of a plaintext
// prefix it also checks the refusal of appends to a log a newer panto
// wrote (putNewer stores that log as plaintext objects, which an
// encrypted prefix would refuse as tampered before reading its format).
func conformance(t *testing.T, srv *miniotest.Server, encrypted bool, opts ...objstore.Option) {
	opts = append(opts, objstore.WithCompactThreshold(4))
	var mu sync.Mutex
	envs := map[agent.SessionStore]*env{}
	h := storetest.Harness{
		New: func(t *testing.T) agent.SessionStore {
			e := newEnvOn(t, srv)
			s := e.open(t, opts...)
			mu.Lock()
			envs[s] = e
			mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T, s agent.SessionStore) agent.SessionStore {
			mu.Lock()
			e := envs[s]
			mu.Unlock()
			return e.open(t, opts...)
		},
		Settle: func(t *testing.T, s agent.SessionStore) {
			if err := s.(*objstore.Store).Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
	}
	if !encrypted {
		// With a manifest: it is all an appender reads of the log's
		// start, so the format must be taken from it.
		h.Newer = func(t *testing.T, s agent.SessionStore, id string, log []byte) func() []byte {
			mu.Lock()
			e := envs[s]
			mu.Unlock()
			return putNewer(t, e, id, log, true)
		}
	}
	storetest.Run(t, h)
}
