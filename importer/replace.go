package importer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// A session diverges when a later panto converts its source otherwise
// than the one that imported it (a corrected conversion), or the source
// changed below what was imported. Its stored copy is left as it is, and
// each import says so, until one with Replace writes the new conversion
// as a new session, its replacement, and deletes the diverged one as
// panto rm would: its tombstone is at the checkpoint the import found.
// The replacement's id is derived from the diverged id and that
// checkpoint (ReplacementID), so every later import, on any machine,
// finds it from the tombstone (or from the stored copy, kept), and
// brings it up to date as it would the session itself; no flag is needed
// any more. A deleted id whose derived replacement is not in the store
// was deleted by its user: it stays deleted, and so does a replacement
// its user deleted. A stored copy continued in panto (continuedInPanto)
// is kept beside its replacement: the user decides.

// Listing is what an import knows of the store before it writes: the
// checkpoints its listing showed, and its tombstones.
type Listing interface {
	// Checkpoint is session id's listed checkpoint (zero: not listed).
	Checkpoint(id string) store.Checkpoint
	// Deleted is the checkpoint session id's tombstone holds, if listed.
	Deleted(id string) (store.Checkpoint, bool)
}

// Options are Import's.
type Options struct {
	// Dry writes nothing and says what would be done.
	Dry bool
	// Replace writes the new conversion of a diverged session as its
	// replacement.
	Replace bool
}

// maxReplacements bounds the chain of replacements an import follows (a
// source converted otherwise by that many pantos in turn).
const maxReplacements = 16

// ReplacementID is the id of the session that replaces session id, found
// diverged at checkpoint held: derived from both, so that any machine
// importing the same log after the same history derives the same id. It
// looks like any other id (32 hex digits).
func ReplacementID(id string, held store.Checkpoint) string {
	sum := sha256.Sum256([]byte("panto import replaced\x00" + id + "\x00" + held.SHA256))
	return hex.EncodeToString(sum[:16])
}

// Import brings the store's copy of c up to date as Apply does, and
// follows a replacement: where c's session diverged, or was deleted, and
// the store holds the replacement derived from it, c is applied to the
// replacement instead. A divergence with no replacement is replaced when
// opts.Replace is set, else reported.
func Import(ctx context.Context, st store.LogStore, c *Conversion, known Listing, opts Options) (Outcome, error) {
	for range maxReplacements {
		out, next, err := importOnce(ctx, st, c, known, opts)
		if err != nil || next == nil {
			return out, err
		}
		c = next
	}
	return Outcome{}, fmt.Errorf("import session %s: more than %d replacements", c.ID, maxReplacements)
}

// importOnce applies c to its session, and returns the replacement to
// apply it to instead, if there is one.
func importOnce(ctx context.Context, st store.LogStore, c *Conversion, known Listing, opts Options) (Outcome, *Conversion, error) {
	stored := known.Checkpoint(c.ID)
	if at, deleted := known.Deleted(c.ID); deleted && stored.Length == 0 {
		return follow(c, known, at)
	}
	applied := c
	if opts.Replace && c.earlier != nil {
		// A session an earlier panto converted otherwise is replaced by
		// the new conversion, as a diverged one is, instead of growing
		// in its earlier form.
		now := *c
		now.earlier = nil
		applied = &now
	}
	out, err := Apply(ctx, st, applied, stored, opts.Dry)
	if err != nil {
		return out, nil, err
	}
	switch out.Action {
	case ActionDeleted:
		return follow(c, known, out.gone)
	case ActionDiverged:
		next, err := c.replacement(out.held, nil)
		if err != nil {
			return Outcome{}, nil, err
		}
		if exists(known, next.ID) {
			return Outcome{}, next, nil
		}
		if opts.Replace {
			out, err := replace(ctx, st, c, known, opts)
			return out, nil, err
		}
	}
	return out, nil, nil
}

// follow decides for session c.ID, deleted at checkpoint at: the
// replacement derived from at, when the store has it, else deleted.
func follow(c *Conversion, known Listing, at store.Checkpoint) (Outcome, *Conversion, error) {
	deleted := Outcome{Action: ActionDeleted, ID: c.ID}
	if at.SHA256 == "" {
		return deleted, nil, nil
	}
	next, err := c.replacement(at, nil)
	if err != nil || !exists(known, next.ID) {
		return deleted, nil, err
	}
	return Outcome{}, next, nil
}

func exists(known Listing, id string) bool {
	_, deleted := known.Deleted(id)
	return deleted || known.Checkpoint(id).Length > 0
}

// replace writes the replacement of c's diverged session, and deletes
// that session unless it was continued in panto.
func replace(ctx context.Context, st store.LogStore, c *Conversion, known Listing, opts Options) (Outcome, error) {
	// The listing may be behind the store: what is read is replaced.
	have, held, err := readStored(ctx, st, c.ID)
	if err != nil {
		return Outcome{}, err
	}
	// The replacement takes the diverged copy's project, whichever
	// machine replaces it, as an import appends under the stored header.
	var p *agent.Project
	var h sessionlog.Header
	if line, _, ok := bytes.Cut(have, []byte{'\n'}); ok && json.Unmarshal(line, &h) == nil {
		p = &h.Project
	}
	next, err := c.replacement(held, p)
	if err != nil {
		return Outcome{}, err
	}
	kept := continuedInPanto(have, c.Log)
	written, err := Apply(ctx, st, next, known.Checkpoint(next.ID), opts.Dry)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Action: ActionReplaced, ID: next.ID, Replaced: c.ID, Kept: kept, Appended: written.Appended, At: written.At}
	switch written.Action {
	case ActionDiverged, ActionDeleted:
		// Another import made it, with other bytes, or its user deleted it
		// since: the diverged copy stays.
		return Outcome{Action: ActionDiverged, ID: c.ID, Err: fmt.Errorf("session %s: %w; its replacement %s is %s", c.ID, ErrDiverged, next.ID, written.Action)}, nil
	case ActionUnchanged:
		out.Appended = 0
	case ActionAppended, ActionNew:
	}
	if opts.Dry || kept {
		return out, nil
	}
	t := store.Tombstone{ID: c.ID, Deleted: time.Now().UTC().Truncate(time.Second), At: held}
	if err := store.Delete(ctx, st, t); err != nil {
		if errors.Is(err, store.ErrChanged) {
			// Written to since it was read: what was written is the user's.
			out.Kept = true
			return out, nil
		}
		return Outcome{}, fmt.Errorf("delete session %s, replaced by %s: %w", c.ID, next.ID, err)
	}
	out.Deleted = &t
	return out, nil
}

// readStored reads session id's committed log, and its checkpoint.
func readStored(ctx context.Context, st store.LogStore, id string) ([]byte, store.Checkpoint, error) {
	r, end, err := st.ReadLog(ctx, id, 0)
	if err != nil {
		return nil, end, fmt.Errorf("read session %s: %w", id, err)
	}
	defer r.Close()
	have := make([]byte, end.Length)
	if _, err := io.ReadFull(r, have); err != nil {
		return nil, end, fmt.Errorf("read session %s: %w", id, err)
	}
	return have, end, nil
}

// continuedInPanto reports whether the stored log have holds what panto
// wrote to the session after an import, rather than an earlier
// conversion of the source that log converts. An imported message
// carries its source's time, which a conversion of the same source,
// however it differs, gives its messages too; panto's own turns and
// titles carry the time they were written, to the nanosecond. So have
// was continued in panto when it ends in messages whose times log has
// none of, or holds a title log has no time of. An earlier conversion
// may hold messages a later one leaves out (a subagent's lines in its
// session's log), but the source's messages follow them; one that ends
// in such messages is taken for continued, and kept: a wrong guess that
// way costs a session listed twice, the other way the user's turns.
func continuedInPanto(have, log []byte) bool {
	times := map[string]bool{}
	eachMessage(log, func(line []byte, ts string) { times[ts] = true })
	tail, titled := false, false
	eachMessage(have, func(line []byte, ts string) {
		known := times[ts]
		tail = !known
		if !known && isTitleLine(line) {
			titled = true
		}
	})
	return tail || titled
}

// eachMessage calls f with each message line of log and its raw time.
func eachMessage(log []byte, f func(line []byte, ts string)) {
	for len(log) > 0 {
		line, rest, _ := bytes.Cut(log, []byte{'\n'})
		log = rest
		var l struct {
			Type string          `json:"type"`
			TS   json.RawMessage `json:"ts"`
		}
		if json.Unmarshal(line, &l) == nil && l.Type == sessionlog.TypeMessage {
			f(line, string(l.TS))
		}
	}
}

// replacement is c as the replacement of its session found diverged at
// held: its id derived from both, its header naming the session it
// replaces, and with project p when given (else c's, with its others).
func (c *Conversion) replacement(held store.Checkpoint, p *agent.Project) (*Conversion, error) {
	id := ReplacementID(c.ID, held)
	rewrite := func(log []byte) ([]byte, error) {
		return rewriteHeader(log, func(h *sessionlog.Header) {
			h.ID, h.Replaces = id, c.ID
			if p != nil {
				h.Project = *p
			}
		})
	}
	out := *c
	out.ID, out.others, out.earlier = id, nil, nil
	forms := c.forms()
	if p != nil {
		forms = forms[:1]
	}
	for i, form := range forms {
		if len(form) == 0 {
			continue // nothing complete yet: Apply waits
		}
		log, err := rewrite(form)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", c.ID, err)
		}
		if i == 0 {
			out.Log = log
		} else {
			out.others = append(out.others, log)
		}
	}
	if p != nil {
		out.Project = *p
	}
	return &out, nil
}
