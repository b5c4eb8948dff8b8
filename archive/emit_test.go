package archive

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
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

// TestReadsAheadBounded: a session slow to read (a large one, first in
// the order) holds the others back at a few times the reads at once:
// they read on meanwhile, the whole archive past it, every result held
// until it was done.
func TestReadsAheadBounded(t *testing.T) {
	st, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n, parallel = 100, 2
	for i := range n {
		if err := st.AppendMessages(t.Context(), fmt.Sprintf("f%031x", i), []agent.PersistentMessage{{Message: agent.UserText("text")}}); err != nil {
			t.Fatal(err)
		}
	}
	sessions, _, err := listed(t.Context(), st, nil)
	if err != nil || len(sessions) != n {
		t.Fatalf("listed %d sessions: %v", len(sessions), err)
	}
	release := make(chan struct{})
	var read atomic.Int64
	go func() {
		// Time for the others to read on, were they let.
		time.Sleep(300 * time.Millisecond)
		close(release)
	}()
	_, err = eachLog(t.Context(), st, sessions, Options{Parallel: parallel},
		func(_ context.Context, info agent.SessionInfo, r io.Reader) (int64, error) {
			if info.ID == sessions[0].ID {
				<-release
				return read.Load(), nil
			}
			read.Add(1)
			return 0, nil
		},
		func(info agent.SessionInfo, readMeanwhile int64) error {
			if info.ID == sessions[0].ID && readMeanwhile > aheadPerRead*parallel {
				return fmt.Errorf("%d sessions read while the first was, want at most %d", readMeanwhile, aheadPerRead*parallel)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if read.Load() != n-1 {
		t.Errorf("%d sessions read after the first, want %d", read.Load(), n-1)
	}
}

// TestSnippetOwnsItsText: a match's text and snippet are strings of
// their own, not parts of the message they were found in: a session's
// matches are gathered before they are printed, and a 300 MB session's
// messages, kept by the matches of a common word (one word, "the", was
// the message's own bytes), held 514 MB where 211 MB do.
func TestSnippetOwnsItsText(t *testing.T) {
	msg := strings.Repeat("some words before ", 10) + "the" + strings.Repeat(" some words after", 10)
	at := strings.Index(msg, "the")
	inMsg := func(s string) bool {
		if s == "" {
			return false
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		start := uintptr(unsafe.Pointer(unsafe.StringData(msg)))
		return p >= start && p < start+uintptr(len(msg))
	}
	before, after := context2(msg, at, at+3)
	for name, s := range map[string]string{"text": fold(msg[at : at+3]), "before": before, "after": after, "edge": fold(msg[:4])} {
		if inMsg(s) {
			t.Errorf("the %s %q is a part of the message", name, s)
		}
	}
}
