package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// replans bounds how often one session is planned again because the
// destination moved while it was copied.
const replans = 3

// session carries out the plan of one session and says what came of it.
func (t *transfer) session(ctx context.Context, p Plan) Event {
	if p.Err != nil {
		if errors.Is(p.Err, agent.ErrInvalidSessionID) {
			return Event{Plan: p, Kind: Refused, Err: p.Err}
		}
		return failed(p, p.Err)
	}
	var moved int64
	note := ""
	for attempt := 0; ; attempt++ {
		if e, done := t.withoutTail(ctx, p, moved, note); done {
			return e
		}
		kind := Appended
		if p.Dst.Length == 0 {
			kind = Created
		}
		if t.opts.DryRun {
			return Event{Plan: p, Kind: kind, Bytes: p.Tail(), DryRun: true}
		}
		n, end, reached, err := t.copyTailBudgeted(ctx, p)
		moved += n
		if err != nil && attempt+1 < replans {
			next, why, again, rerr := t.replan(ctx, p, err)
			if rerr != nil {
				return failed(next, rerr)
			}
			if again {
				p = next
				if why != "" {
					note = why
				}
				continue
			}
		}
		if err != nil {
			e := failed(p, err)
			e.Bytes, e.Reached = moved, reached
			return e
		}
		p.Src = end
		return Event{Plan: p, Kind: kind, Bytes: moved, Note: note}
	}
}

// withoutTail returns the event of plan p when its relation copies no
// tail (a deletion, a copy already there, one to leave alone), and done;
// moved and note are what earlier attempts at it did and said.
func (t *transfer) withoutTail(ctx context.Context, p Plan, moved int64, note string) (e Event, done bool) {
	switch p.Relation {
	case SrcDeleted, DstDeleted, DeleteConflict:
		e := t.deletion(ctx, p)
		e.Bytes += moved
		return e, true
	case Same:
		return Event{Plan: p, Kind: Unchanged, Bytes: moved, Note: note}, true
	case DstOnly:
		return Event{Plan: p, Kind: Skipped, Bytes: moved, Note: "only the destination holds it"}, true
	case DstAhead:
		return Event{Plan: p, Kind: Skipped, Bytes: moved, Note: fmt.Sprintf("the destination is ahead by %d bytes", p.Dst.Length-p.Src.Length)}, true
	case Diverged:
		if t.opts.KeepBoth {
			return t.keepBoth(ctx, p), true
		}
		return Event{Plan: p, Kind: Divergent, Bytes: moved, Note: note}, true
	}
	return Event{}, false
}

// replan is plan p made again after copying its tail failed with err
// because the destination is not what it listed: again reports whether
// err was that, note (if any) says what changed. An error planning again
// fails the session (with the plan as far as it got).
func (t *transfer) replan(ctx context.Context, p Plan, err error) (next Plan, note string, again bool, rerr error) {
	var gone *agent.DeletedError
	if errors.As(err, &gone) {
		// The destination deleted it and did not list the tombstone (a
		// listing that lagged, or a deletion older than the retention).
		p.DstTomb = &store.Tombstone{ID: p.ID, Deleted: gone.Deleted, At: store.Checkpoint{Length: gone.Length, SHA256: gone.SHA256}}
		p.Dst, p.Relation = store.Checkpoint{}, relateDeleted(nil, p.DstTomb, p.Src, store.Checkpoint{}, t.opts.covered())
		return p, "", true, nil
	}
	var changed *store.ChangedError
	if errors.As(err, &changed) {
		// The destination moved since it was listed (another writer, or a
		// listing that lagged behind it): plan again from what it says it
		// holds.
		p.Dst = changed.Have
		if p.Relation, rerr = relate(ctx, t.src, t.dst, p.ID, p.Src, p.Dst); rerr != nil {
			return p, "", false, rerr
		}
		return p, fmt.Sprintf("the destination held %v, not what it listed; planned again", changed.Have), true, nil
	}
	return p, "", false, nil
}

// copyTailBudgeted is copyTail within the copy's memory budget: a session
// takes as much of it as its chunks hold at most.
func (t *transfer) copyTailBudgeted(ctx context.Context, p Plan) (int64, store.Checkpoint, store.Checkpoint, error) {
	weight := min(max(p.Tail(), 64<<10), int64(t.opts.ChunkSize))
	if err := t.budget.Acquire(ctx, weight); err != nil {
		return 0, store.Checkpoint{}, p.Dst, fmt.Errorf("interrupted before it was copied; run again: %w", err)
	}
	defer t.budget.Release(weight)
	return t.copyTail(ctx, p)
}

// copyTail appends the source's bytes after the destination's end (p.Dst)
// to the destination, in chunks of whole batches, each at the checkpoint
// the previous one left. The source is read up to what it listed (p.Src)
// when it can read so (store.ReadListed: a bucket's index names the
// segments up to there, so no request looks past them), else to its end
// now. It returns the bytes moved and the source's checkpoint at the end
// of what it read, and the destination's at the end of what it appended
// (which, on a failure, is a prefix of the source's log). Once a chunk is
// being appended it is appended even if ctx ends meanwhile; no chunk
// starts after that.
func (t *transfer) copyTail(ctx context.Context, p Plan) (n int64, end, at store.Checkpoint, err error) {
	r, end, err := store.ReadListed(ctx, t.src, p.ID, p.Dst.Length, p.Src)
	if err != nil {
		return 0, store.Checkpoint{}, p.Dst, fmt.Errorf("read the source: %w", err)
	}
	defer r.Close()
	n, at, err = t.appendStream(ctx, p.ID, p.Dst, r)
	if err != nil {
		return n, end, at, err
	}
	if at != end {
		return n, end, at, fmt.Errorf("the destination is at %v after the copy, the source at %v", at, end)
	}
	return n, end, at, nil
}

// appendStream appends what r holds (whole committed lines) to session id
// of the destination, which holds at, chunk after chunk. It returns the
// bytes appended and the destination's checkpoint after the last chunk it
// appended, whatever stopped it.
func (t *transfer) appendStream(ctx context.Context, id string, at store.Checkpoint, r io.Reader) (int64, store.Checkpoint, error) {
	batches := sessionlog.NewBatches(r, "session "+id, t.opts.ChunkSize)
	var moved int64
	for {
		chunk, err := batches.Next()
		if errors.Is(err, io.EOF) {
			// Whole, though ctx may have ended while the last chunk
			// was appended: a copy said interrupted then left its
			// caller (local-first) taking what it had copied for its
			// own, still to send.
			return moved, at, nil
		}
		if cerr := ctx.Err(); cerr != nil && moved > 0 {
			return moved, at, fmt.Errorf("interrupted after %d bytes; run again to copy the rest: %w", moved, cerr)
		}
		if err != nil {
			return moved, at, fmt.Errorf("read the source: %w", err)
		}
		next, err := t.dst.AppendLog(context.WithoutCancel(ctx), id, at, chunk)
		if err != nil {
			return moved, at, err
		}
		at = next
		moved += int64(len(chunk))
	}
}

// keepBoth stores the source's copy of a diverged session in the
// destination as a new session (forkID), whose header links the original;
// neither copy of the original is touched.
func (t *transfer) keepBoth(ctx context.Context, p Plan) Event {
	newID := forkID(p.ID, p.Src.SHA256, p.Dst.SHA256)
	e := Event{Plan: p, Kind: KeptBoth, NewID: newID}
	n, note, err := t.copyAs(ctx, t.src, p.ID, newID, p.Src)
	e.Bytes, e.Note, e.DryRun = n, note, t.opts.DryRun
	if err != nil {
		f := failed(p, fmt.Errorf("keep both: %w", err))
		f.Bytes = n
		return f
	}
	return e
}

// copyAs copies session id of from (whose log is at cp) into the
// destination as session newID, its header rewritten to link id. A copy
// made by an earlier run (the same id, since the callers derive it from
// the copies' hashes) is found and, if that run was cut short, completed.
// In a dry run it says how much it would move.
func (t *transfer) copyAs(ctx context.Context, from store.LogStore, id, newID string, cp store.Checkpoint) (int64, string, error) {
	n, note, err := t.copyAsOnce(ctx, from, id, newID, cp)
	if errors.Is(err, store.ErrChanged) {
		// Another writer stored newID meanwhile: the same copy when it is
		// this copy made elsewhere (the same fork, pulled and pushed back
		// in this run), which the second attempt finds and checks.
		m, again, err := t.copyAsOnce(ctx, from, id, newID, cp)
		return n + m, again, err
	}
	return n, note, err
}

func (t *transfer) copyAsOnce(ctx context.Context, from store.LogStore, id, newID string, cp store.Checkpoint) (int64, string, error) {
	have, err := checkpointOf(ctx, t.dst, newID)
	if err != nil {
		return 0, "", err
	}
	if t.opts.DryRun {
		return max(cp.Length-have.Length, 0), "", nil
	}
	r, end, err := from.ReadLog(ctx, id, 0)
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", id, err)
	}
	defer r.Close()
	fork, grew, err := forkReader(r, newID, id)
	if err != nil {
		return 0, "", err
	}
	note := ""
	if have.Length > 0 {
		// What an earlier run copied must be the start of this copy.
		if err := skipPrefix(fork, have); err != nil {
			return 0, "", fmt.Errorf("the destination's %s is not a copy of this session: %w", newID, err)
		}
		note = "already kept"
	}
	n, at, err := t.appendStream(ctx, newID, have, fork)
	if err == nil && at.Length != end.Length+grew {
		err = fmt.Errorf("the copy %s holds %d bytes, want %d", newID, at.Length, end.Length+grew)
	}
	if err != nil {
		return n, note, fmt.Errorf("store the copy as %s: %w", newID, err)
	}
	if n > 0 && have.Length > 0 {
		note = "completed the copy an earlier run began"
	}
	return n, note, nil
}

// deletion carries out the plan of a session one side deleted.
func (t *transfer) deletion(ctx context.Context, p Plan) Event {
	switch p.Relation {
	case DstDeleted:
		if p.Src.Length == 0 {
			return Event{Plan: p, Kind: Unchanged}
		}
		return Event{Plan: p, Kind: Skipped, Note: "deleted in the destination on " + p.DstTomb.Deleted.Local().Format("2006-01-02 15:04")}
	case DeleteConflict:
		if t.opts.KeepBoth {
			return t.keepSurvivor(ctx, p)
		}
		return Event{Plan: p, Kind: Conflicted, Note: conflictNote(p)}
	}
	// SrcDeleted: the deletion goes to the destination.
	if !store.CanDelete(t.dst) {
		return failed(p, errCannotDelete)
	}
	if t.opts.DryRun {
		return Event{Plan: p, Kind: Deleted, DryRun: true}
	}
	err := store.Delete(ctx, t.dst, *p.SrcTomb)
	var changed *store.ChangedError
	if errors.As(err, &changed) {
		// The destination was written to since it was listed: after the
		// deletion, so this is a conflict now.
		p.Dst, p.Relation = changed.Have, relateDeleted(p.SrcTomb, p.DstTomb, p.Src, changed.Have, t.opts.covered())
		if p.Relation == DeleteConflict {
			return t.deletion(ctx, p)
		}
		err = store.Delete(ctx, t.dst, *p.SrcTomb)
	}
	if err != nil {
		return failed(p, fmt.Errorf("delete: %w", err))
	}
	return Event{Plan: p, Kind: Deleted}
}

// keepSurvivor resolves a deletion conflict with KeepBoth: the copy
// written after the deletion becomes a new session (in the destination),
// whose header links the deleted one. A survivor in the destination is
// renamed there (copied, then the deletion goes through); one in the
// source is copied to the destination, and the copy the other way
// renames it on its side. Both ways derive the same new id, so the two
// copies are one session.
func (t *transfer) keepSurvivor(ctx context.Context, p Plan) Event {
	var from store.LogStore
	var cp store.Checkpoint
	var tomb *store.Tombstone
	if p.SrcTomb != nil { // the survivor is the destination's
		from, cp, tomb = t.dst, p.Dst, p.SrcTomb
	} else {
		from, cp, tomb = t.src, p.Src, p.DstTomb
	}
	newID := forkID(p.ID, cp.SHA256, tomb.At.SHA256)
	n, note, err := t.copyAs(ctx, from, p.ID, newID, cp)
	e := Event{Plan: p, Kind: KeptBoth, NewID: newID, Bytes: n, Note: note, DryRun: t.opts.DryRun}
	if err == nil && p.SrcTomb != nil && !t.opts.DryRun {
		// Saved: now the deletion goes through, of what is there.
		if !store.CanDelete(t.dst) {
			err = errCannotDelete
		} else {
			err = store.Delete(ctx, t.dst, store.Tombstone{ID: p.ID, Deleted: tomb.Deleted, At: cp})
		}
	}
	if err != nil {
		f := failed(p, fmt.Errorf("keep the survivor: %w", err))
		f.Bytes = n
		return f
	}
	return e
}

// errCannotDelete: a deletion is to go to a destination that cannot
// delete (a store without store.Deleter).
var errCannotDelete = errors.New("the destination cannot delete sessions")

func conflictNote(p Plan) string {
	deleter, writer, tomb, have := "source", "destination", p.SrcTomb, p.Dst.Length
	if tomb == nil {
		deleter, writer, tomb, have = "destination", "source", p.DstTomb, p.Src.Length
	}
	written := "written to in the " + writer + " after"
	if have < tomb.At.Length {
		// Shorter, yet judged not behind the deletion (Options.SrcCovered,
		// DstCovered): it holds bytes the deleting side never had.
		written = "the " + writer + "'s copy holds bytes the " + deleter + " never had"
	}
	return fmt.Sprintf("deleted in the %s on %s at %d bytes, %s (%d bytes)", deleter, tomb.Deleted.Local().Format("2006-01-02 15:04"), tomb.At.Length, written, have)
}

// checkpointOf returns the checkpoint of session id in s, the empty one
// when s does not hold it.
func checkpointOf(ctx context.Context, s store.LogStore, id string) (store.Checkpoint, error) {
	cp, err := store.Head(ctx, s, id)
	if errors.Is(err, agent.ErrSessionNotFound) {
		return store.Checkpoint{}, nil
	}
	return cp, err
}

// skipPrefix reads cp.Length bytes of r and checks that they hash to
// cp.SHA256.
func skipPrefix(r io.Reader, cp store.Checkpoint) error {
	h := sha256.New()
	if _, err := io.CopyN(h, r, cp.Length); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != cp.SHA256 {
		return fmt.Errorf("its first %d bytes hash to %.12s, not %.12s", cp.Length, got, cp.SHA256)
	}
	return nil
}
