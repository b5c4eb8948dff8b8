package localfirst_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/objstore"
)

// TestSendLeftovers: what a local-first store kept on this machine when
// the bucket did not answer is sent by SendLeftovers (panto-sync push and
// watch), exactly once, and the replica's record follows, so that the
// next local-first store has nothing left to tell.
func TestSendLeftovers(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	m.offline = true
	s := m.open()
	sess := s.Create()
	for _, text := range []string{"kept 1", "kept 2"} {
		if err := sess.Append(ctx, []agent.PersistentMessage{user(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close with the bucket unreachable said nothing is left")
	}
	m.offline = false

	b := bucketStore(t, m)
	var reported []replica.Event
	opts := localfirst.LeftoverOptions{Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable,
		Report: func(e replica.Event) { reported = append(reported, e) }}
	for round, want := range []int{1, 0} {
		sent, err := localfirst.SendLeftovers(ctx, b, opts)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if sent != want {
			t.Fatalf("round %d: sent %d sessions, want %d (events %+v)", round, sent, want, reported)
		}
	}
	if got, want := texts(t, b, sess.Info.ID), []string{"kept 1", "kept 2"}; !equal(got, want) {
		t.Fatalf("the bucket holds %q, want %q", got, want)
	}
	if err := m.open().Close(ctx); err != nil {
		t.Fatalf("the next local-first store still has something to send: %v", err)
	}

	none, err := localfirst.SendLeftovers(ctx, b, localfirst.LeftoverOptions{Dir: filepath.Join(t.TempDir(), "never"), Name: m.url})
	if none != 0 || err != nil {
		t.Fatalf("a replica that does not exist: sent %d, %v", none, err)
	}
}

// TestSendLeftoversUnreachable: a bucket that does not answer leaves the
// leftovers where they are, and says so.
func TestSendLeftoversUnreachable(t *testing.T) {
	t.Parallel()
	srv := miniotest.New(t)
	m := newMachine(t, srv, srv.NewBucket(t))
	ctx := context.Background()
	m.offline = true
	s := m.open()
	if err := s.Create().Append(ctx, []agent.PersistentMessage{user("kept")}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(ctx)
	m.offline = false
	b := bucketStore(t, m)
	srv.Kill()
	_, err := localfirst.SendLeftovers(ctx, b, localfirst.LeftoverOptions{Dir: m.dir, Name: m.url, Unreachable: objstore.IsUnreachable})
	if !errors.Is(err, localfirst.ErrLeftoversNotSent) {
		t.Fatalf("SendLeftovers to a dead bucket: %v, want ErrLeftoversNotSent", err)
	}
}
