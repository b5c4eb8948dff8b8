package importer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// Action is what an import did (or, dry, would do) with one session.
type Action string

const (
	// ActionNew: the session was not in the store and was written.
	ActionNew Action = "new"
	// ActionAppended: the source grew; its new messages were appended.
	ActionAppended Action = "appended"
	// ActionUnchanged: the store holds the whole conversion already (or
	// more: the session was continued in panto).
	ActionUnchanged Action = "unchanged"
	// ActionWaiting: no message of the source is complete yet.
	ActionWaiting Action = "waiting"
	// ActionDiverged: the store holds other bytes than the conversion
	// (the source changed below what was imported); left alone.
	ActionDiverged Action = "diverged"
	// ActionDeleted: the session was imported, then deleted (panto rm);
	// its tombstone keeps it from coming back.
	ActionDeleted Action = "deleted"
	// ActionReplaced: the session diverged, and its new conversion was
	// written as a new session that replaces it (Import, with Replace).
	ActionReplaced Action = "replaced"
)

// ErrDiverged: the stored session is not a prefix of the conversion.
var ErrDiverged = errors.New("the stored session differs from its source")

// Outcome is what Apply did.
type Outcome struct {
	Action Action
	// Appended is the number of messages written (or, dry, to write).
	Appended int
	// Err says why for ActionDiverged.
	Err error
	// At is the stored checkpoint after a write (zero when nothing was
	// written).
	At store.Checkpoint
	// ID is the session the outcome is of: the conversion's, or the
	// replacement's that took its place (Import).
	ID string
	// Replaced, for ActionReplaced, is the diverged session; Kept says
	// that it was kept beside its replacement (continued in panto), and
	// Deleted is the tombstone it was deleted with otherwise (nil: dry).
	Replaced string
	Kept     bool
	Deleted  *store.Tombstone
	// Earlier says that the stored session is an earlier panto's
	// conversion of the source, and grew (or stayed) in that form; an
	// import with Replace replaces it by the new conversion instead.
	Earlier bool

	// held is the stored checkpoint a divergence was found at, gone the
	// checkpoint a tombstone refused an append at (its hash "": unknown).
	held, gone store.Checkpoint
}

// Apply brings the store's copy of c up to date: it writes the whole
// conversion when the store lacks the session, appends what follows the
// stored log when that is a prefix of the conversion, and reports a
// divergence otherwise. stored is the checkpoint the store's listing
// showed (the zero checkpoint: none); a listing behind the store is
// corrected from the append's ChangedError. With dry set it writes
// nothing and says what it would do. The result is decided on hashes:
// the stored bytes are read only when the store holds more than the
// conversion.
func Apply(ctx context.Context, st store.LogStore, c *Conversion, stored store.Checkpoint, dry bool) (Outcome, error) {
	if len(c.Log) == 0 {
		return Outcome{Action: ActionWaiting}, nil
	}
	for attempt := 0; ; attempt++ {
		out, log, err := decide(ctx, st, c, stored)
		out.ID = c.ID
		if out.Action == ActionDiverged {
			out.held = stored
		}
		if err != nil || out.Action == ActionUnchanged || out.Action == ActionDiverged || dry {
			return out, err
		}
		at := stored
		_, err = st.AppendLog(ctx, c.ID, at, log[at.Length:])
		var changed *store.ChangedError
		if errors.As(err, &changed) && attempt == 0 {
			stored = changed.Have // the listing was behind: decide again on what is there
			continue
		}
		if errors.Is(err, agent.ErrSessionDeleted) {
			out := Outcome{Action: ActionDeleted, ID: c.ID}
			if d := (*agent.DeletedError)(nil); errors.As(err, &d) {
				out.gone = store.Checkpoint{Length: d.Length, SHA256: d.SHA256}
			}
			return out, nil
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("import session %s: %w", c.ID, err)
		}
		out.At = store.Checkpoint{Length: int64(len(log)), SHA256: hashOf(log)}
		return out, nil
	}
}

// decide compares the stored checkpoint with the conversion, and says
// which form of it the store holds a prefix of: Log, one of the forms of
// an earlier import (Conversion.others), or, when neither matches, Log
// under the header the store holds when that differs in its project
// alone (one read of the stored log), then any of them with titles
// between its batches (afterTitles, one more read), and last the forms
// of an earlier panto's conversion (Conversion.earlier). A session is so
// appended to under the header its first import wrote, on whichever
// machine, since a header never changes.
func decide(ctx context.Context, st store.LogStore, c *Conversion, stored store.Checkpoint) (Outcome, []byte, error) {
	if stored.Length == 0 {
		return Outcome{Action: ActionNew, Appended: c.Messages}, c.Log, nil
	}
	out, log, err := match(ctx, st, c.ID, c.forms(), stored)
	if err != nil || log != nil {
		return out, log, err
	}
	header, err := storedHeader(ctx, st, c.ID)
	if err != nil {
		return Outcome{}, nil, err
	}
	forms := c.forms()
	if under := underStoredHeader(c.Log, header); under != nil {
		if out, log, err := match(ctx, st, c.ID, [][]byte{under}, stored); err != nil || log != nil {
			return out, log, err
		}
		forms = append(forms, under)
	}
	out, log, err = afterTitles(ctx, st, c.ID, forms, stored)
	if err != nil || out.Action != ActionDiverged {
		return out, log, err
	}
	// An earlier panto's conversion, the session growing in that form.
	if earlier := c.earlierForms(); len(earlier) > 0 {
		eout, elog, err := match(ctx, st, c.ID, earlier, stored)
		if err == nil && elog == nil {
			eout, elog, err = afterTitles(ctx, st, c.ID, earlier, stored)
		}
		if err != nil {
			return Outcome{}, nil, err
		}
		if eout.Action != ActionDiverged {
			eout.Earlier = true
			return eout, elog, nil
		}
	}
	return out, log, nil
}

// afterTitles decides for a session named in panto after its import
// (panto title, /title, while the agent went on writing its log): its
// stored log is a form of the conversion with title entries between its
// batches, and what the conversion holds past them is appended, so that
// naming an imported session does not end its import. Anything else (a
// turn continued in panto, other bytes) is a divergence. It reads the
// stored log.
func afterTitles(ctx context.Context, st store.LogStore, id string, forms [][]byte, stored store.Checkpoint) (Outcome, []byte, error) {
	r, _, err := st.ReadLog(ctx, id, 0)
	if err != nil {
		return Outcome{}, nil, fmt.Errorf("read session %s: %w", id, err)
	}
	defer r.Close()
	have := make([]byte, stored.Length)
	if _, err := io.ReadFull(r, have); err != nil {
		return Outcome{}, nil, fmt.Errorf("read session %s: %w", id, err)
	}
	for _, form := range forms {
		if rest, ok := pastTitles(have, form); ok {
			log := append(have, rest...)
			if len(rest) == 0 {
				return Outcome{Action: ActionUnchanged}, log, nil
			}
			return Outcome{Action: ActionAppended, Appended: countMessages(rest)}, log, nil
		}
	}
	return Outcome{Action: ActionDiverged, Err: fmt.Errorf("session %s: %w (it holds %v): an earlier panto converted the source otherwise, the source changed below what was imported, or the session was continued in panto", id, ErrDiverged, stored)}, nil, nil
}

// pastTitles returns what of log follows have, when have is the start of
// log, whole batches, with one or more title entries between them; when
// have holds the whole of log and more (continued in panto), nothing.
func pastTitles(have, log []byte) ([]byte, bool) {
	at, titles := 0, 0
	for len(have) > 0 && at < len(log) {
		n := bytes.IndexByte(have, '\n') + 1
		if n == 0 {
			return nil, false
		}
		line := have[:n]
		switch {
		case bytes.HasPrefix(log[at:], line):
			at += n
		case isTitleLine(line):
			titles++
		default:
			return nil, false
		}
		have = have[n:]
	}
	if n, err := sessionlog.CommittedLength("", log[:at]); titles == 0 || err != nil || n != at {
		return nil, false
	}
	return log[at:], true
}

// isTitleLine reports whether line is a title entry (agent.TitleMessage)
// as panto writes it: a batch of its own.
func isTitleLine(line []byte) bool {
	var l struct {
		Type     string                     `json:"type"`
		Role     agent.Role                 `json:"role"`
		Content  []json.RawMessage          `json:"content"`
		Metadata map[string]json.RawMessage `json:"metadata"`
		More     int                        `json:"more"`
	}
	if json.Unmarshal(line, &l) != nil {
		return false
	}
	_, title := l.Metadata[agent.MetadataTitle]
	return l.Type == sessionlog.TypeMessage && l.Role == agent.RoleSystem && len(l.Content) == 0 && len(l.Metadata) == 1 && title && l.More == 0
}

// match returns the first of forms whose prefix the store holds (nil:
// none), and what importing it comes to: its checkpoint's hash decides,
// and the stored log is read only when it is longer than a form (a
// session continued in panto after its import).
func match(ctx context.Context, st store.LogStore, id string, forms [][]byte, stored store.Checkpoint) (Outcome, []byte, error) {
	var longer [][]byte
	for _, log := range forms {
		n := int64(len(log))
		switch {
		case stored.Length <= n && stored.SHA256 == hashOf(log[:stored.Length]):
			if stored.Length == n {
				return Outcome{Action: ActionUnchanged}, log, nil
			}
			return Outcome{Action: ActionAppended, Appended: countMessages(log[stored.Length:])}, log, nil
		case stored.Length > n:
			longer = append(longer, log)
		}
	}
	if len(longer) == 0 {
		return Outcome{}, nil, nil
	}
	same, err := storedStartsWith(ctx, st, id, longer)
	if err != nil || same == nil {
		return Outcome{}, nil, err
	}
	return Outcome{Action: ActionUnchanged}, same, nil
}

// storedStartsWith returns the first of forms that session id's stored
// log begins with (nil: none), reading it once.
func storedStartsWith(ctx context.Context, st store.LogStore, id string, forms [][]byte) ([]byte, error) {
	longest := 0
	for _, f := range forms {
		longest = max(longest, len(f))
	}
	r, _, err := st.ReadLog(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	defer r.Close()
	got := make([]byte, longest)
	n, err := io.ReadFull(r, got)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	for _, f := range forms {
		if bytes.HasPrefix(got[:n], f) {
			return f, nil
		}
	}
	return nil, nil
}

// storedHeader reads the first line of session id's stored log (nil
// when it has none whole).
func storedHeader(ctx context.Context, st store.LogStore, id string) ([]byte, error) {
	r, _, err := st.ReadLog(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	defer r.Close()
	line, err := bufio.NewReaderSize(r, 4096).ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	return line, nil
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// countMessages counts the message lines of whole batches (no header).
func countMessages(data []byte) int {
	n := bytes.Count(data, []byte{'\n'})
	if bytes.HasPrefix(data, []byte(`{"type":"session"`)) {
		n--
	}
	return n
}
