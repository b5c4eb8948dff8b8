package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// A log whose header names a newer line format than this panto reads was
// written by a newer panto: this one cannot know what its lines mean, so
// it must not add lines of its own format to it (the log would mix two
// formats, and the newer panto would meet lines it did not write). Every
// path that appends refuses it with a one-line error, and leaves the
// stored bytes as they were.

func runNewer(t *testing.T, h Harness) {
	if h.Newer == nil {
		return
	}
	t.Run("AppendRefusesNewerFormat", func(t *testing.T) { testAppendRefusesNewer(t, h) })
}

// newerLog is a log of session id as a panto of the next line format
// would write it: the header says sessionlog.Version+1.
func newerLog(t *testing.T, id string) []byte {
	t.Helper()
	log := encodeBatch(t, id, true, "written by a newer panto")
	old := fmt.Sprintf(`"version":%d,`, sessionlog.Version)
	if !bytes.Contains(log, []byte(old)) {
		t.Fatalf("the header does not spell %s: %s", old, log)
	}
	return bytes.Replace(log, []byte(old), fmt.Appendf(nil, `"version":%d,`, sessionlog.Version+1), 1)
}

// refusedNewer fails unless err is a one-line refusal of a newer format.
func refusedNewer(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s succeeded on a log of a newer format", what)
	case !errors.Is(err, sessionlog.ErrNewerVersion):
		t.Errorf("%s: %v, want an error wrapping sessionlog.ErrNewerVersion", what, err)
	case strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "upgrade panto"):
		t.Errorf("%s: %q, want one line saying to upgrade panto", what, err)
	}
}

func testAppendRefusesNewer(t *testing.T, h Harness) {
	ctx := t.Context()
	s := h.New(t)
	id := "newer-" + agent.NewSessionID()
	log := newerLog(t, id)
	stored := h.Newer(t, s, id, log)
	before := stored()
	if len(before) == 0 {
		t.Fatal("Harness.Newer stored nothing")
	}
	check := func(what string) {
		t.Helper()
		if after := stored(); !bytes.Equal(after, before) {
			t.Errorf("%s changed what is stored of the session: %d bytes, were %d", what, len(after), len(before))
		}
	}
	refusedNewer(t, "AppendMessages", s.AppendMessages(ctx, id, texts("mine", 1)))
	check("a refused AppendMessages")
	// Through another handle too: one that never read the session before
	// (a fresh process) learns the format at the append itself.
	if h.Reopen != nil {
		other := h.Reopen(t, s)
		refusedNewer(t, "AppendMessages through another handle", other.AppendMessages(ctx, id, texts("other", 1)))
		check("a refused AppendMessages through another handle")
	}
	if ls, ok := store.AsLogStore(s); ok {
		// Sync appends a tail it pulled at the checkpoint it planned
		// against: the log's own.
		more := encodeBatch(t, id, false, "a pulled tail")
		_, err := ls.AppendLog(ctx, id, checkpointOf(log), more)
		refusedNewer(t, "AppendLog at the log's checkpoint", err)
		check("a refused AppendLog")

		// A new session whose first batch says a newer format is not
		// created either (a pull of a session a newer panto wrote).
		fresh := "newer-" + agent.NewSessionID()
		_, err = ls.AppendLog(ctx, fresh, store.Checkpoint{}, newerLog(t, fresh))
		refusedNewer(t, "AppendLog of a new session of a newer format", err)
		if _, _, err := ls.ReadLog(ctx, fresh, 0); !errors.Is(err, agent.ErrSessionNotFound) {
			t.Errorf("a refused AppendLog created the session: ReadLog says %v", err)
		}
	}
	_, err := s.Load(ctx, id)
	refusedNewer(t, "Load", err)
}
