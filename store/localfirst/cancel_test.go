package localfirst_test

import (
	"context"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestCancelledReadTellsNothing: a read its caller gave up on (panto
// search stopping at --limit cancels the reads still in flight) is not a
// bucket the replica could not catch up from: the user is told nothing,
// and the store is not taken for offline.
func TestCancelledReadTellsNothing(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ids := a.newSessions("one", "two")
	ctx := context.Background()
	sb := b.open()
	defer sb.Close(ctx)
	// The sessions are listed, so that the store knows the bucket's
	// checkpoints, as a search's listing does before its reads.
	if _, err := sb.Logs(ctx); err != nil {
		t.Fatal(err)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	if rc, _, err := sb.ReadLog(gaveUp, ids[0], 0); err == nil {
		rc.Close()
	}
	b.mu.Lock()
	notes := b.notes
	b.mu.Unlock()
	if len(notes) != 0 {
		t.Errorf("a cancelled read told the user %q", notes)
	}
	// The bucket is still read from: the other session comes over.
	if got := texts(t, sb, ids[1]); !equal(got, []string{"two"}) {
		t.Fatalf("machine b reads %q after a cancelled read", got)
	}
}
