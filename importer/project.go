package importer

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// WithProject returns c with its header's project set to p: what panto
// would have recorded had it run where the agent did, which cmd/panto
// finds on the importing machine's disk (the work tree that holds the
// directory the log names, and its remote), so that the session is its
// project's on every machine and at every path. c's own bytes stay among
// the forms an earlier import may have stored. A conversion with no
// lines, or p already its project, is c.
func (c *Conversion) WithProject(p agent.Project) (*Conversion, error) {
	if len(c.Log) == 0 || p == c.Project {
		return c, nil
	}
	log, err := withHeaderProject(c.Log, p)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", c.ID, err)
	}
	out := *c
	out.Log, out.Project = log, p
	out.others = append([][]byte{c.Log}, c.others...)
	if earlier := c.earlier; earlier != nil {
		out.earlier = func() []*Conversion {
			var with []*Conversion
			for _, e := range earlier() {
				if w, err := e.WithProject(p); err == nil {
					with = append(with, w)
				}
			}
			return with
		}
	}
	return &out, nil
}

// forms are the bytes a store may hold a prefix of for c: Log first,
// then the forms of earlier imports (others).
func (c *Conversion) forms() [][]byte { return append([][]byte{c.Log}, c.others...) }

// earlierForms are the forms of c as earlier pantos converted its log,
// where they differ from c's (nil: none).
func (c *Conversion) earlierForms() [][]byte {
	if c.earlier == nil {
		return nil
	}
	var forms [][]byte
	for _, e := range c.earlier() {
		forms = append(forms, e.forms()...)
	}
	return forms
}

// withHeaderProject is log with its header (its first line) recording
// project p, the lines after it as they are.
func withHeaderProject(log []byte, p agent.Project) ([]byte, error) {
	return rewriteHeader(log, func(h *sessionlog.Header) { h.Project = p })
}

// rewriteHeader is log with its header (its first line) changed by
// change, the lines after it as they are.
func rewriteHeader(log []byte, change func(*sessionlog.Header)) ([]byte, error) {
	line, body, ok := bytes.Cut(log, []byte{'\n'})
	if !ok {
		return nil, fmt.Errorf("%w: a log without a whole header line", ErrMalformed)
	}
	var h sessionlog.Header
	if err := json.Unmarshal(line, &h); err != nil || h.Type != sessionlog.TypeSession {
		return nil, fmt.Errorf("%w: its first line is not a session header", ErrMalformed)
	}
	change(&h)
	header, err := sessionlog.EncodeHeader(h)
	if err != nil {
		return nil, err
	}
	return append(header, body...), nil
}

// underStoredHeader is log under header, the first line a store holds of
// the session, when the two headers differ in their project alone (an
// import elsewhere, or before, found another), so that the import grows
// what is stored; nil otherwise.
func underStoredHeader(log, header []byte) []byte {
	line, ok := bytes.CutSuffix(header, []byte{'\n'})
	if !ok {
		return nil // not a whole line
	}
	var stored sessionlog.Header
	if err := json.Unmarshal(line, &stored); err != nil || stored.Type != sessionlog.TypeSession {
		return nil
	}
	candidate, err := withHeaderProject(log, stored.Project)
	if err != nil || !bytes.HasPrefix(candidate, header) {
		return nil
	}
	return candidate
}
