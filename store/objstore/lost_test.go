package objstore_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/objstore"
)

// TestAnswerLost: "did the write land?", made deterministic. A segment
// PUT reaches the bucket, which commits it, and its answer is dropped on
// the way back (the fault wrapper at the seam lets the PUT through, then
// loses its answer).
// Whatever the appender learns afterwards, the batch is in the log once:
//
//   - the answer of the first PUT alone is lost: the retry is refused
//     412, and the segment found at the position holds our own bytes, so
//     the append succeeded;
//   - every answer of the segment is lost: after its retries the
//     appender looks once whether its bytes are there (they are), so the
//     append succeeded;
//   - every answer is lost and the look fails too: the append says its
//     outcome is unknown (ErrOutcomeUnknown, one line), and the batch is
//     in fact whole in the log, once, and the next append goes after it.
func TestAnswerLost(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		loseAll     bool // every answer of the segment's PUTs, not only the first
		failLook    bool // the GETs of the segment fail before they are sent
		wantUnknown bool
		want412     bool // a retry was answered 412, and the answer reached us
	}{
		{name: "once", want412: true},
		{name: "every time", loseAll: true},
		{name: "and the look fails", loseAll: true, failLook: true, wantUnknown: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			fb := e.faults(t)
			s := e.openOn(t, fb)
			id := agent.NewSessionID()
			if err := s.AppendMessages(ctx, id, batchOf(0, 0)); err != nil {
				t.Fatal(err)
			}
			// The segments after the first: the next append's.
			var lost atomic.Int32
			isNext := func(op objstore.Op) bool {
				return strings.Contains(op.Key, "/seg/") && !strings.HasSuffix(op.Key, "/seg/00000000000000000000.jsonl.zst")
			}
			fb.SetLose(func(op objstore.Op) bool {
				if op.Method != "PUT" || !isNext(op) {
					return false
				}
				return lost.Add(1) == 1 || tc.loseAll
			})
			if tc.failLook {
				fb.SetFault(func(op objstore.Op) error {
					if op.Method == "GET" && isNext(op) {
						return objstore.ErrInjected
					}
					return nil
				})
			}
			fb.Take()
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			err := s.AppendMessages(actx, id, batchOf(0, 1))
			cancel()
			fb.SetLose(nil)
			fb.SetFault(nil)
			var puts, lostPuts, answered412 int
			for _, op := range fb.Take() {
				if op.Method == "PUT" && strings.Contains(op.Key, "/seg/") {
					puts++
					if op.Lost {
						lostPuts++
					} else if op.Precondition() {
						answered412++
					}
				}
			}
			t.Logf("%d segment PUTs, %d answers lost, %d answered 412; append: %v", puts, lostPuts, answered412, err)
			if lostPuts == 0 || (tc.want412 && answered412 == 0) {
				t.Fatalf("the fault did not happen as planned: %d segment PUTs, %d answers lost, %d answered 412", puts, lostPuts, answered412)
			}
			switch {
			case tc.wantUnknown:
				if !errors.Is(err, objstore.ErrOutcomeUnknown) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("append whose outcome cannot be known: %v, want one line wrapping ErrOutcomeUnknown", err)
				}
			case err != nil:
				t.Fatalf("append whose write landed: %v", err)
			}
			// The batch is there once, whatever the appender said; the
			// next append through the same Store goes after it.
			if err := s.AppendMessages(ctx, id, batchOf(0, 2)); err != nil {
				t.Fatalf("append after: %v", err)
			}
			conv, err := e.open(t).Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			checkBatches(t, conv, 1, 3)
		})
	}
}

// TestUnansweredWriteNotThere: a segment PUT that went out and got no
// answer, whose bytes are not there when the writer looks, may still be
// written by the server (MinIO holds a write behind a lock a lost node
// held for up to a minute): the append's outcome is unknown. A PUT whose
// connection was refused never reached a server: the append failed.
func TestUnansweredWriteNotThere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		err         error
		wantUnknown bool
	}{
		{"a timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"a connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newMemEnv(t)
			fb := e.faults(t)
			s := e.openOn(t, fb)
			id := agent.NewSessionID()
			if err := s.AppendMessages(ctx, id, batchOf(0, 0)); err != nil {
				t.Fatal(err)
			}
			fb.SetFault(func(op objstore.Op) error {
				if op.Method == "PUT" && strings.Contains(op.Key, "/seg/") {
					return tc.err
				}
				return nil
			})
			err := s.AppendMessages(ctx, id, batchOf(0, 1))
			fb.SetFault(nil)
			switch {
			case err == nil:
				t.Fatal("an append whose every PUT failed succeeded")
			case tc.wantUnknown && (!errors.Is(err, objstore.ErrOutcomeUnknown) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("append whose PUT went out unanswered: %v, want one line wrapping ErrOutcomeUnknown", err)
			case !tc.wantUnknown && errors.Is(err, objstore.ErrOutcomeUnknown):
				t.Fatalf("append whose PUT never went out: %v, want a failure, not an unknown outcome", err)
			}
			if err := s.AppendMessages(ctx, id, batchOf(0, 2)); err != nil {
				t.Fatalf("append after: %v", err)
			}
			conv, err := e.open(t).Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, b := range []int{0, 2} {
				for _, pm := range batchOf(0, b) {
					want = append(want, pm.Message.Text())
				}
			}
			if got := texts(conv); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("the log holds %q, want batches 0 and 2", got)
			}
		})
	}
}
