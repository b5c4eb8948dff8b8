package archive

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"weak"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// TestEmittedResultLetGo: once a session's result is handed on, the read
// of many sessions holds it no more. It held every one until the last
// session: a search of a common word kept every match, and the message
// text each snippet is cut from (8,000 sessions, 46,518 matches: 317 MB
// resident, 118 MB without), and so grew with the archive.
func TestEmittedResultLetGo(t *testing.T) {
	st, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.AppendMessages(t.Context(), fmt.Sprintf("e%031x", i), []agent.PersistentMessage{{Message: agent.UserText("text")}}); err != nil {
			t.Fatal(err)
		}
	}
	sessions, _, err := listed(t.Context(), st, nil)
	if err != nil || len(sessions) != 3 {
		t.Fatalf("listed %d sessions: %v", len(sessions), err)
	}
	var first weak.Pointer[[]byte]
	_, err = eachLog(t.Context(), st, sessions, Options{Parallel: 1},
		func(_ context.Context, _ agent.SessionInfo, r io.Reader) (*[]byte, error) {
			b := make([]byte, 1<<20) // a result of some weight
			_, err := io.ReadAll(r)
			return &b, err
		},
		func(info agent.SessionInfo, v *[]byte) error {
			if info.ID == sessions[0].ID {
				first = weak.Make(v)
				return nil
			}
			runtime.GC()
			if first.Value() != nil {
				return fmt.Errorf("the first session's result is still held while session %s is handed on", info.ID)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
}
