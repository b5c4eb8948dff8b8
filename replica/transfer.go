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
		switch p.Relation {
		case Same:
			return Event{Plan: p, Kind: Unchanged, Bytes: moved, Note: note}
		case DstOnly:
			return Event{Plan: p, Kind: Skipped, Bytes: moved, Note: "only the destination holds it"}
		case DstAhead:
			return Event{Plan: p, Kind: Skipped, Bytes: moved, Note: fmt.Sprintf("the destination is ahead by %d bytes", p.Dst.Length-p.Src.Length)}
		case Diverged:
			if t.opts.KeepBoth {
				return t.keepBoth(ctx, p)
			}
			return Event{Plan: p, Kind: Divergent, Bytes: moved, Note: note}
		}
		kind := Appended
		if p.Dst.Length == 0 {
			kind = Created
		}
		if t.opts.DryRun {
			return Event{Plan: p, Kind: kind, Bytes: p.Tail(), DryRun: true}
		}
		n, end, err := t.copyTailBudgeted(ctx, p)
		moved += n
		var changed *store.ChangedError
		if errors.As(err, &changed) && attempt+1 < replans {
			// The destination moved since it was listed (another writer,
			// or a listing that lagged behind it): plan again from what it
			// says it holds.
			p.Dst = changed.Have
			if p.Relation, err = relate(ctx, t.src, t.dst, p.ID, p.Src, p.Dst); err != nil {
				return failed(p, err)
			}
			note = fmt.Sprintf("the destination held %v, not what it listed; planned again", changed.Have)
			continue
		}
		if err != nil {
			e := failed(p, err)
			e.Bytes = moved
			return e
		}
		p.Src = end
		return Event{Plan: p, Kind: kind, Bytes: moved, Note: note}
	}
}

// copyTailBudgeted is copyTail within the copy's memory budget: a session
// takes as much of it as its chunks hold at most.
func (t *transfer) copyTailBudgeted(ctx context.Context, p Plan) (int64, store.Checkpoint, error) {
	weight := min(max(p.Tail(), 64<<10), int64(t.opts.ChunkSize))
	if err := t.budget.Acquire(ctx, weight); err != nil {
		return 0, store.Checkpoint{}, fmt.Errorf("interrupted before it was copied; run again: %w", err)
	}
	defer t.budget.Release(weight)
	return t.copyTail(ctx, p)
}

// copyTail appends the source's bytes after the destination's end (p.Dst)
// to the destination, in chunks of whole batches, each at the checkpoint
// the previous one left. It returns the bytes moved and the source's
// checkpoint at the end of what it read. Once a chunk is being appended it
// is appended even if ctx ends meanwhile; no chunk starts after that.
func (t *transfer) copyTail(ctx context.Context, p Plan) (int64, store.Checkpoint, error) {
	r, end, err := t.src.ReadLog(ctx, p.ID, p.Dst.Length)
	if err != nil {
		return 0, store.Checkpoint{}, fmt.Errorf("read the source: %w", err)
	}
	defer r.Close()
	n, at, err := t.appendStream(ctx, p.ID, p.Dst, r)
	if err != nil {
		return n, end, err
	}
	if at != end {
		return n, end, fmt.Errorf("the destination is at %v after the copy, the source at %v", at, end)
	}
	return n, end, nil
}

// appendStream appends what r holds (whole committed lines) to session id
// of the destination, which holds at, chunk after chunk.
func (t *transfer) appendStream(ctx context.Context, id string, at store.Checkpoint, r io.Reader) (int64, store.Checkpoint, error) {
	batches := sessionlog.NewBatches(r, "session "+id, t.opts.ChunkSize)
	var moved int64
	for {
		if err := ctx.Err(); err != nil && moved > 0 {
			return moved, at, fmt.Errorf("interrupted after %d bytes; run again to copy the rest: %w", moved, err)
		}
		chunk, err := batches.Next()
		if errors.Is(err, io.EOF) {
			return moved, at, nil
		}
		if err != nil {
			return moved, at, fmt.Errorf("read the source: %w", err)
		}
		if at, err = t.dst.AppendLog(context.WithoutCancel(ctx), id, at, chunk); err != nil {
			return moved, at, err
		}
		moved += int64(len(chunk))
	}
}

// keepBoth stores the source's copy of a diverged session in the
// destination as a new session (forkID), whose header links the original;
// neither copy of the original is touched. A copy made by an earlier run
// (the same id, since it derives from the two copies' hashes) is found
// and, if that run was cut short, completed.
func (t *transfer) keepBoth(ctx context.Context, p Plan) Event {
	newID := forkID(p.ID, p.Src.SHA256, p.Dst.SHA256)
	e := Event{Plan: p, Kind: KeptBoth, NewID: newID}
	have, err := checkpointOf(ctx, t.dst, newID)
	if err != nil {
		return failed(p, fmt.Errorf("keep both: %w", err))
	}
	if t.opts.DryRun {
		e.Bytes, e.DryRun = max(p.Src.Length-have.Length, 0), true
		return e
	}
	r, end, err := t.src.ReadLog(ctx, p.ID, 0)
	if err != nil {
		return failed(p, fmt.Errorf("keep both: read the source: %w", err))
	}
	defer r.Close()
	fork, grew, err := forkReader(r, newID, p.ID)
	if err != nil {
		return failed(p, fmt.Errorf("keep both: %w", err))
	}
	if have.Length > 0 {
		// What an earlier run copied must be the start of this copy.
		if err := skipPrefix(fork, have); err != nil {
			return failed(p, fmt.Errorf("keep both: the destination's %s is not a copy of this session: %w", newID, err))
		}
		e.Note = "already kept"
	}
	n, at, err := t.appendStream(ctx, newID, have, fork)
	e.Bytes = n
	if err == nil && at.Length != end.Length+grew {
		err = fmt.Errorf("the copy %s holds %d bytes, want %d", newID, at.Length, end.Length+grew)
	}
	if err != nil {
		f := failed(p, fmt.Errorf("keep both: store the copy as %s: %w", newID, err))
		f.Bytes = n
		return f
	}
	if n > 0 && have.Length > 0 {
		e.Note = "completed the copy an earlier run began"
	}
	return e
}

// checkpointOf returns the checkpoint of session id in s, the empty one
// when s does not hold it.
func checkpointOf(ctx context.Context, s store.LogStore, id string) (store.Checkpoint, error) {
	r, end, err := s.ReadLog(ctx, id, 0)
	if errors.Is(err, agent.ErrSessionNotFound) {
		return store.Checkpoint{}, nil
	}
	if err != nil {
		return store.Checkpoint{}, err
	}
	r.Close()
	return end, nil
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
