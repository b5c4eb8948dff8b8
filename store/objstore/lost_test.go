package objstore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/objstore"
)

// TestAnswerLost: "did the write land?", made deterministic. A segment
// PUT reaches MinIO, which commits it, and its answer is dropped on the
// way back (the recorder forwards the request, then loses the response).
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
			e := newEnv(t)
			rec := &recorder{}
			s := e.open(t, rec.option())
			id := agent.NewSessionID()
			if err := s.AppendMessages(ctx, id, batchOf(0, 0)); err != nil {
				t.Fatal(err)
			}
			// The segments after the first: the next append's.
			var lost atomic.Int32
			isNext := func(r *http.Request) bool {
				return strings.Contains(r.URL.Path, "/seg/") && !strings.HasSuffix(r.URL.Path, "/seg/00000000000000000000.jsonl.zst")
			}
			rec.setLose(func(r *http.Request) bool {
				if r.Method != http.MethodPut || !isNext(r) {
					return false
				}
				return lost.Add(1) == 1 || tc.loseAll
			})
			if tc.failLook {
				rec.setFault(func(r *http.Request) error {
					if r.Method == http.MethodGet && isNext(r) {
						return errInjected
					}
					return nil
				})
			}
			rec.take()
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			err := s.AppendMessages(actx, id, batchOf(0, 1))
			cancel()
			rec.setLose(nil)
			rec.setFault(nil)
			reqs := rec.take()
			var puts, lostPuts, answered412 int
			for _, q := range reqs {
				if q.method == http.MethodPut && strings.Contains(q.path, "/seg/") {
					puts++
					if q.lost {
						lostPuts++
					} else if q.status == http.StatusPreconditionFailed {
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
