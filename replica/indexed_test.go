package replica

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// syncBuffer is a bytes.Buffer safe for the trace's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPullAsIndexed: a pull mirrors the bucket's index. A session
// appended after its index entry was written (its writer has not
// flushed the index yet) is pulled as the entry lists it, a prefix of
// the log, without a request past the entry's end (no probe); once the
// index holds the append, the next pull brings the rest. Both shapes of
// an entry: a session in segments no manifest lists (the entry's tail
// names them all), and one whose manifest is stored, with a tail after
// it.
func TestPullAsIndexed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		appends int // before the index is written
	}{
		{"no manifest stored", 1},
		{"a manifest and a tail", 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			writer, _, bucket := bucketStore(t, "p")
			url := "s3://" + bucket + "/p"
			id := agent.NewSessionID()
			for i := range tc.appends {
				write(t, writer, id, batch(t, id, i == 0, 2, fmt.Sprint("before ", i)))
			}
			if err := store.Close(ctx, writer); err != nil {
				t.Fatal(err)
			}
			indexed := bytesOf(t, openBucket(t, url), id)

			appender := openBucket(t, url) // defers its index to its Flush
			write(t, appender, id, batch(t, id, false, 2, "after the index"))
			whole := bytesOf(t, appender, id)
			if len(whole) <= len(indexed) {
				t.Fatalf("the append left %d bytes, the index %d", len(whole), len(indexed))
			}

			dst := dirStore(t)
			var trace syncBuffer
			src, err := objstore.Open(ctx, url, objstore.WithDeferredIndex(), objstore.WithTrace(slog.New(slog.NewTextHandler(&trace, nil))))
			if err != nil {
				t.Fatal(err)
			}
			pull(ctx, t, src, dst, Created)
			if got := bytesOf(t, dst, id); !bytes.Equal(got, indexed) {
				t.Fatalf("pulled %d bytes, want the %d the index lists (the log holds %d)", len(got), len(indexed), len(whole))
			}
			if probe := manifest.SegmentName(int64(len(indexed))); strings.Contains(trace.String(), probe) {
				t.Errorf("the pull asked for %s, past the indexed end:\n%s", probe, trace.String())
			}

			if err := store.Close(ctx, appender); err != nil {
				t.Fatal(err)
			}
			pull(ctx, t, openBucket(t, url), dst, Appended)
			if got := bytesOf(t, dst, id); !bytes.Equal(got, whole) {
				t.Fatalf("after the index caught up, pulled %d bytes, want all %d", len(got), len(whole))
			}
		})
	}
}

// pull copies src to dst, which must do to its one session what want
// says.
func pull(ctx context.Context, t *testing.T, src, dst store.LogStore, want Kind) {
	t.Helper()
	sum, err := Copy(ctx, src, dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed > 0 || sum.FlushErr != nil || sum.Counts[want] != 1 {
		t.Fatalf("pull: %+v, want one session %v", sum, want)
	}
}
