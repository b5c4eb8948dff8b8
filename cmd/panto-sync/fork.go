package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/panto-dev/panto/internal/sessionlog"
)

// forkHeader is a session header with a link to the session it was
// copied from. Readers of the format ignore fields they do not know, so
// the link survives every store without changing the codec.
type forkHeader struct {
	Type       string    `json:"type"`
	Version    int       `json:"version"`
	ID         string    `json:"id"`
	Created    time.Time `json:"created"`
	ForkedFrom string    `json:"forked_from"`
	More       int       `json:"more,omitempty"`
}

// forkLog returns log (whole committed lines) as session newID: the
// header line is rewritten with the new id and a forked_from link to the
// original; every other line is kept byte for byte.
func forkLog(log []byte, newID, from string) ([]byte, error) {
	i := bytes.IndexByte(log, '\n')
	if i < 0 {
		return nil, fmt.Errorf("fork session %s: no header line", from)
	}
	var h sessionlog.Header
	if err := json.Unmarshal(log[:i], &h); err != nil || h.Type != sessionlog.TypeSession {
		return nil, fmt.Errorf("fork session %s: the first line is not a session header", from)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(forkHeader{Type: h.Type, Version: h.Version, ID: newID, Created: h.Created, ForkedFrom: from, More: h.More}); err != nil {
		return nil, fmt.Errorf("fork session %s: %w", from, err)
	}
	buf.Write(log[i+1:])
	out := buf.Bytes()
	l, err := sessionlog.Parse(newID+".jsonl", out)
	if err != nil {
		return nil, fmt.Errorf("fork session %s: %w", from, err)
	}
	if l == nil || l.Header.ID != newID || l.Committed != len(out) {
		return nil, fmt.Errorf("fork session %s: the copy does not read back as session %s", from, newID)
	}
	return out, nil
}
