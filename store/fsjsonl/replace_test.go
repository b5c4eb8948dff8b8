package fsjsonl_test

import (
	"context"
	"errors"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

func TestReplace(t *testing.T) {
	ctx := context.Background()
	const id = "replace-me"
	other := append(encode(t, id, true, batch("theirs", 2), t0), encode(t, id, false, batch("theirs-more", 2), t0)...)
	cases := []struct {
		name    string
		at      func(have store.Checkpoint) store.Checkpoint
		data    []byte
		wantErr error // nil: replaced
	}{
		{"at the log's end", func(h store.Checkpoint) store.Checkpoint { return h }, other, nil},
		{"the log moved", func(h store.Checkpoint) store.Checkpoint { return store.Checkpoint{Length: 1, SHA256: "x"} }, other, store.ErrChanged},
		{"another session's log", func(h store.Checkpoint) store.Checkpoint { return h }, encode(t, "someone-else", true, batch("x", 1), t0), errMalformed},
		{"a torn batch", func(h store.Checkpoint) store.Checkpoint { return h }, other[:len(other)-3], errMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := fsjsonl.Open(t.TempDir(), fsjsonl.WithClock(fixedClock()))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.AppendMessages(ctx, id, batch("mine", 3)); err != nil {
				t.Fatal(err)
			}
			have, err := store.Head(ctx, s, id)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := s.Replace(ctx, id, tc.at(have), tc.data)
			switch {
			case tc.wantErr == errMalformed && err == nil, tc.wantErr != nil && tc.wantErr != errMalformed && !errors.Is(err, tc.wantErr):
				t.Fatalf("Replace: %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Replace: %v", err)
			}
			after, err := store.Head(ctx, s, id)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != nil {
				if after != have {
					t.Fatalf("a refused Replace changed the log: %v -> %v", have, after)
				}
				return
			}
			if after != cp || cp.Length != int64(len(other)) {
				t.Fatalf("after Replace the log is at %v, Replace said %v, want %d bytes", after, cp, len(other))
			}
			// The summary and appends follow the new file.
			if err := s.AppendMessages(ctx, id, batch("next", 1)); err != nil {
				t.Fatal(err)
			}
			if n := count(t, s, id); n != 5 {
				t.Fatalf("%d messages after Replace and an append, want 5", n)
			}
			if _, ok := infoOf(t, s, id); !ok {
				t.Fatal("not listed after Replace")
			}
		})
	}
}

// errMalformed marks a case where any error will do: the data is refused
// before anything is touched.
var errMalformed = errors.New("malformed replacement")

var _ agent.SessionStore = (*fsjsonl.Store)(nil)
