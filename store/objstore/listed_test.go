package objstore_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// TestReadListed: ReadListed reads a session as the reader's last Logs
// listed it, from the segments the index entry names, in one round of
// GETs and none past the entry's end: a session appended since comes as
// listed. When it cannot (a checkpoint the listing did not give, a
// session compacted since so that the entry's end is no segment's end)
// it is ReadLog: the log as it is now.
func TestReadListed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after changes the session after it was listed; w wrote it.
		after func(t *testing.T, w *objstore.Store, id string)
		// other reads at a checkpoint the listing did not give.
		other bool
		// asListed: the read ends where the listing said, else where
		// the log ends now.
		asListed bool
	}{
		{name: "unchanged", after: func(*testing.T, *objstore.Store, string) {}, asListed: true},
		{name: "appended since", after: appendOne, asListed: true},
		{name: "a checkpoint not listed", after: appendOne, other: true},
		{name: "compacted past the listed end", after: func(t *testing.T, w *objstore.Store, id string) {
			appendOne(t, w, id)
			for range 2 { // the second deletes what the first replaced
				if err := w.Compact(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			e := newMemEnv(t)
			w := e.open(t, objstore.WithDeferredIndex(), objstore.WithCompactGrace(0))
			id := agent.NewSessionID()
			for i := range 3 {
				if err := w.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("m", i))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			fb := e.faults(t)
			r := e.openOn(t, fb)
			listed := listedCheckpoint(t, r, id)
			tc.after(t, w, id)
			now := logOf(t, e.open(t), id)

			at := listed
			if tc.other {
				at = store.Checkpoint{Length: listed.Length - 1, SHA256: listed.SHA256}
			}
			fb.Take()
			rd, end, err := r.ReadListed(ctx, id, 0, at)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rd)
			rd.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := now
			if tc.asListed {
				want = now[:listed.Length]
				if end != listed {
					t.Errorf("ended at %v, want the listed %v", end, listed)
				}
			} else if end.Length != int64(len(now)) {
				t.Errorf("ended at %v, want the log's end now, %d bytes", end, len(now))
			}
			if string(got) != string(want) {
				t.Fatalf("read %d bytes, want %d", len(got), len(want))
			}
			if !tc.asListed {
				return
			}
			probe := manifest.SegmentName(listed.Length)
			for _, op := range fb.Take() {
				if op.Method != "GET" || op.Key == "sessions/"+id+"/"+probe {
					t.Errorf("%s %s: a read as listed sends only the GETs of the entry's objects", op.Method, op.Key)
				}
			}
		})
	}
}

func appendOne(t *testing.T, w *objstore.Store, id string) {
	t.Helper()
	if err := w.AppendMessages(t.Context(), id, []agent.PersistentMessage{user("after the listing")}); err != nil {
		t.Fatal(err)
	}
}

// listedCheckpoint is what s's Logs lists of session id.
func listedCheckpoint(t *testing.T, s *objstore.Store, id string) store.Checkpoint {
	t.Helper()
	logs, err := s.Logs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if l.Info.ID == id {
			return l.Checkpoint
		}
	}
	t.Fatalf("session %s not listed", id)
	return store.Checkpoint{}
}

// logOf is the whole committed log of session id as s reads it now.
func logOf(t *testing.T, s *objstore.Store, id string) []byte {
	t.Helper()
	rd, _, err := s.ReadLog(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
