package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// planner relates the two sides of each session.
type planner struct {
	src, dst store.LogStore
	covered  coveredBy
}

// plan relates session id's copies on the two sides.
func (pl *planner) plan(ctx context.Context, id string, src, dst sideOf) Plan {
	p := Plan{ID: id, SrcTomb: src.tomb, DstTomb: dst.tomb}
	// Ids come from the other side, maybe a bucket anyone can write to:
	// check them before any path or key is made of them.
	if err := agent.ValidateSessionID(id); err != nil {
		p.Err = fmt.Errorf("%w: it could escape the store", err)
		return p
	}
	for _, side := range []struct {
		log  *store.Log
		cp   *store.Checkpoint
		name string
	}{{src.log, &p.Src, "source"}, {dst.log, &p.Dst, "destination"}} {
		if side.log == nil {
			continue
		}
		*side.cp = side.log.Checkpoint
		if side.log.Err != nil && p.Err == nil {
			p.Err = fmt.Errorf("the %s's copy cannot be read: %w", side.name, side.log.Err)
		}
	}
	if p.Err != nil {
		return p
	}
	if src.tomb != nil || dst.tomb != nil {
		p.Relation = relateDeleted(src.tomb, dst.tomb, p.Src, p.Dst, pl.covered)
		return p
	}
	var err error
	if p.Relation, err = relate(ctx, pl.src, pl.dst, id, p.Src, p.Dst); err != nil {
		p.Err = err
	}
	return p
}

// relateDeleted relates the copies of a session at least one side deleted
// (st and dt its tombstones, s and d what each side still holds of it). A
// tombstone covers what was deleted and any copy behind it; a copy it
// does not cover was written to after the deletion. covered says
// whether a tombstone covers the other side's copy (Options.SrcCovered,
// Options.DstCovered).
func relateDeleted(st, dt *store.Tombstone, s, d store.Checkpoint, covered coveredBy) Relation {
	switch {
	case st != nil && dt != nil:
		// Both deleted it: what is left on either side (a deletion cut
		// short) goes when it is covered.
		if d.Length > 0 && st.Covers(d) {
			return SrcDeleted
		}
		return Same
	case st != nil:
		if d.Length == 0 || covered.dst(st.ID, *st, d) {
			return SrcDeleted
		}
		return DeleteConflict
	default:
		if s.Length == 0 || covered.src(dt.ID, *dt, s) {
			return DstDeleted
		}
		return DeleteConflict
	}
}

// relate relates the source's and the destination's copies of session
// id, at checkpoints s and d.
func relate(ctx context.Context, src, dst store.LogStore, id string, s, d store.Checkpoint) (Relation, error) {
	switch {
	case d.Length == 0 && s.Length == 0:
		return Same, nil
	case d.Length == 0:
		return SrcOnly, nil
	case s.Length == 0:
		return DstOnly, nil
	case s.Length == d.Length:
		if s.SHA256 == d.SHA256 {
			return Same, nil
		}
		return Diverged, nil
	case s.Length < d.Length:
		ok, err := isPrefix(ctx, id, src, s, dst)
		if ok {
			return DstAhead, err
		}
		return Diverged, err
	default:
		ok, err := isPrefix(ctx, id, dst, d, src)
		if ok {
			return SrcAhead, err
		}
		return Diverged, err
	}
}

// isPrefix reports whether the log of session id in store a, whose
// committed bytes are at, is a prefix of its log in store b (known to be
// longer). It reads as little as the stores allow: it looks for the
// longest prefix both stores know the hash of without reading
// (store.PrefixCheckpoint), compares those hashes, and compares bytes
// only from there to at's end. When b can hash any prefix (a local file),
// that prefix is at itself and no byte is compared.
func isPrefix(ctx context.Context, id string, a store.LogStore, at store.Checkpoint, b store.LogStore) (bool, error) {
	n := at.Length
	for {
		cb, err := store.PrefixCheckpoint(ctx, b, id, n)
		if err != nil {
			return false, fmt.Errorf("compare session %s: %w", id, err)
		}
		if cb.Length == at.Length {
			return cb.SHA256 == at.SHA256, nil
		}
		ca, err := store.PrefixCheckpoint(ctx, a, id, cb.Length)
		if err != nil {
			return false, fmt.Errorf("compare session %s: %w", id, err)
		}
		if ca.Length == cb.Length {
			if ca.SHA256 != cb.SHA256 {
				return false, nil
			}
			return sameBytes(ctx, id, a, b, ca.Length, at.Length)
		}
		n = ca.Length // a knows less: look for a shorter common prefix
	}
}

// sameBytes compares the bytes [from, to) of session id in stores a and b.
func sameBytes(ctx context.Context, id string, a, b store.LogStore, from, to int64) (bool, error) {
	ra, _, err := a.ReadLog(ctx, id, from)
	if err != nil {
		return false, fmt.Errorf("compare session %s: %w", id, err)
	}
	defer ra.Close()
	rb, _, err := b.ReadLog(ctx, id, from)
	if err != nil {
		return false, fmt.Errorf("compare session %s: %w", id, err)
	}
	defer rb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for left := to - from; left > 0; {
		k := min(left, int64(len(ba)))
		if _, err := io.ReadFull(ra, ba[:k]); err != nil {
			return false, readErr(id, err)
		}
		if _, err := io.ReadFull(rb, bb[:k]); errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return false, nil // b is shorter than it said: not a prefix of it as it is now
		} else if err != nil {
			return false, readErr(id, err)
		}
		if !bytes.Equal(ba[:k], bb[:k]) {
			return false, nil
		}
		left -= k
	}
	return true, nil
}

func readErr(id string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("the log is shorter than it was listed")
	}
	return fmt.Errorf("compare session %s: %w", id, err)
}
