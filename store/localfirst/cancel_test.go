package localfirst_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
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

// cancelAfter is a bucket whose log reads end their caller's context
// once more than after bytes were read: the reader gives up in the middle
// of a pull.
type cancelAfter struct {
	store.LogStore
	after  int64
	cancel context.CancelFunc
	read   atomic.Int64
}

func (c *cancelAfter) ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	rc, cp, err := c.LogStore.ReadLog(ctx, id, from)
	if err != nil {
		return nil, cp, err
	}
	return cancelReader{ReadCloser: rc, c: c}, cp, nil
}

type cancelReader struct {
	io.ReadCloser
	c *cancelAfter
}

func (r cancelReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if r.c.read.Add(int64(n)) > r.c.after {
		r.c.cancel()
	}
	return n, err
}

// TestCancelledPullBetweenChunks: a pull of a session of more than one
// chunk that its reader gives up on between two chunks leaves a prefix of
// the bucket's log in the replica, which the replica records as in the
// bucket: Close says nothing is left to send (it said "N messages not
// yet sent" of a session this machine never wrote), nothing is sent back,
// and the next read brings the rest.
func TestCancelledPullBetweenChunks(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	a, b := newMachine(t, srv, bucket), newMachine(t, srv, bucket)
	ctx := context.Background()
	id := agent.NewSessionID()
	data, err := sessiongen.New(3).Session(id, 3*replica.DefaultChunkSize/2+(1<<20), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := bucketStore(t, a).AppendLog(ctx, id, store.Checkpoint{}, data)
	if err != nil {
		t.Fatal(err)
	}
	pull, giveUp := context.WithCancel(ctx)
	defer giveUp()
	src := &cancelAfter{after: replica.DefaultChunkSize + (1 << 20), cancel: giveUp}
	sb, err := localfirst.Open(ctx, localfirst.Options{
		Dir: b.dir, Name: b.url, Unreachable: objstore.IsUnreachable,
		ReadTimeout: 10 * time.Second, CloseTimeout: 30 * time.Second, MaxBackoff: 200 * time.Millisecond,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			st, err := b.openBucket(ctx)
			if err != nil {
				return nil, err
			}
			src.LogStore = st
			return src, nil
		},
		Notify: func(s string) { b.mu.Lock(); b.notes = append(b.notes, s); b.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rc, _, err := sb.ReadLog(pull, id, 0); err == nil {
		rc.Close()
	}
	held, err := store.Head(ctx, sb.Replica(), id)
	if err != nil || held.Length <= 0 || held.Length >= theirs.Length {
		t.Fatalf("the replica holds %v (%v) after a pull given up between chunks, want a prefix of the bucket's %v", held, err, theirs)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close after a pull given up between chunks: %v", err)
	}
	if got, err := store.Head(ctx, bucketStore(t, a), id); err != nil || got != theirs {
		t.Fatalf("the bucket holds %v (%v) after the cancelled pull, want %v untouched", got, err, theirs)
	}
	sb = b.open()
	defer sb.Close(ctx)
	rc, end, err := sb.ReadLog(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if end != theirs {
		t.Fatalf("the next read finds %v in the replica, want the bucket's %v", end, theirs)
	}
}
