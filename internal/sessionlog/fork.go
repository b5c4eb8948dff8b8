package sessionlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/panto-dev/panto/agent"
)

// ErrForkPoint: a fork would end between an assistant message's tool
// calls and the results that answer them, which no provider accepts.
var ErrForkPoint = errors.New("cannot fork there")

// Fork reads the committed log of a session (from its header on) and
// returns a new log, session newID created at created, holding the
// first at messages of it (all of them when at is 0) as one batch: a
// header whose forked_from and forked_at link it to its parent (and
// that keeps its project), then
// each message line with its own time, endpoint, usage, stop reason and
// metadata. It returns the number of messages the fork holds. name is
// used in errors.
//
// A fork is one batch so that a reader sees all of it or none of it.
// Each line is decoded and written again (its "more" changes), so a
// field this panto does not know is not carried over. The parent is only
// read. A fork may not end with an assistant message that calls tools:
// their results are the next message, and a provider refuses calls
// without results (ErrForkPoint, saying where to fork instead).
func Fork(parent io.Reader, name, newID string, at int, created time.Time) ([]byte, int, error) {
	if at < 0 {
		return nil, 0, fmt.Errorf("fork %s at %d: %w: give a number of messages, 1 or more", name, at, ErrForkPoint)
	}
	d := Decoder{Name: name}
	var entries []entry
	var lastTools bool // the last entry kept calls tools
	done := errors.New("enough")
	err := ReadLines(parent, func(line []byte, last bool) error {
		if last {
			return nil // not committed
		}
		e, ok, err := d.DecodeEntry(line)
		if err != nil || !ok {
			return err
		}
		if at > 0 && len(entries) == at {
			return done
		}
		entries = append(entries, entryOf(agent.PersistentMessage{Message: e.Message, Identity: e.Identity}, e.TS))
		lastTools = len(e.Message.ToolUses()) > 0
		return nil
	})
	if err != nil && !errors.Is(err, done) {
		return nil, 0, err
	}
	if d.Header == nil {
		return nil, 0, fmt.Errorf("fork %s: %w: no header", name, ErrMalformed)
	}
	n := len(entries)
	switch {
	case n == 0:
		return nil, 0, fmt.Errorf("fork %s: %w: the session holds no message", name, ErrForkPoint)
	case at > n:
		noun := "messages"
		if n == 1 {
			noun = "message"
		}
		return nil, 0, fmt.Errorf("fork %s at %d: %w: the session holds %d %s", name, at, ErrForkPoint, n, noun)
	case lastTools && errors.Is(err, done):
		return nil, 0, fmt.Errorf("fork %s at %d: %w: message %d calls tools whose results are message %d; fork at %d", name, n, ErrForkPoint, n, n+1, n+1)
	}
	var buf bytes.Buffer
	h := Header{Type: TypeSession, Version: Version, ID: newID, Created: created.UTC(), ForkedFrom: d.Header.ID, ForkedAt: n, Project: d.Header.Project, More: n}
	if err := writeLine(&buf, h); err != nil {
		return nil, 0, fmt.Errorf("fork %s: %w", name, err)
	}
	for i := range entries {
		entries[i].More = n - 1 - i
		if err := writeLine(&buf, entries[i]); err != nil {
			return nil, 0, fmt.Errorf("fork %s: message %d: %w", name, i+1, err)
		}
	}
	return buf.Bytes(), n, nil
}
