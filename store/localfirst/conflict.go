package localfirst

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
)

// keptBoth finishes what the sync engine began when it kept both copies
// of a session (the package doc's step 3): the bucket holds this
// machine's log as e.NewID; the replica gets that copy too (with what was
// appended here since), its e.ID becomes the bucket's, and this process
// goes on in the copy. It reports false when it must be tried again.
func (sh *shipper) keptBoth(b store.LogStore, e replica.Event) bool {
	s := sh.s
	ctx := sh.ctx
	if e.SrcTomb != nil {
		// Deleted here, written to on another machine after: the bucket
		// kept that copy as e.NewID, then took the deletion.
		s.shipped.forget(e.ID)
		s.opts.Notify(fmt.Sprintf("session %s, deleted on this machine, had been written to on another machine: that copy is kept as session %s", e.ID, e.NewID))
		return true
	}
	if err := s.pull(ctx, b, e.NewID); err != nil {
		return sh.conflictFailed(e, err)
	}
	var theirs []byte
	var theirsAt store.Checkpoint
	if e.DstTomb == nil {
		r, cp, err := b.ReadLog(ctx, e.ID, 0)
		if err != nil {
			return sh.conflictFailed(e, err)
		}
		theirs, err = io.ReadAll(r)
		r.Close()
		if err != nil {
			return sh.conflictFailed(e, err)
		}
		theirsAt = cp
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	more, err := s.catchUpCopy(ctx, e.ID, e.NewID)
	if err != nil {
		return sh.conflictFailed(e, err)
	}
	mine, err := head(ctx, s.local, e.ID)
	if err != nil {
		return sh.conflictFailed(e, err)
	}
	if e.DstTomb != nil {
		err = s.local.Delete(ctx, store.Tombstone{ID: e.ID, Deleted: e.DstTomb.Deleted, At: mine})
	} else {
		_, err = s.local.Replace(ctx, e.ID, mine, theirs)
	}
	if err != nil {
		return sh.conflictFailed(e, err)
	}
	s.mu.Lock()
	s.redirect[e.ID] = e.NewID
	s.mu.Unlock()
	if e.DstTomb != nil {
		s.shipped.forget(e.ID)
	} else {
		s.shipped.set(e.ID, theirsAt)
	}
	if more {
		sh.mark(e.NewID)
	}
	if e.DstTomb != nil {
		s.opts.Notify(fmt.Sprintf("session %s was deleted on another machine (on %s) while this one wrote to it: this machine's turns are kept in session %s (forked from it, and where this panto goes on)", e.ID, e.DstTomb.Deleted.Local().Format("2006-01-02 15:04"), e.NewID))
		return true
	}
	s.opts.Notify(fmt.Sprintf("session %s was also changed on another machine since this one last sent to it (while it was offline, or at the same time): this machine's turns are kept in session %s (forked from it, and where this panto goes on); %s holds the other machine's turns", e.ID, e.NewID, e.ID))
	return true
}

func (sh *shipper) conflictFailed(e replica.Event, err error) bool {
	if !sh.s.unreachable(err) && sh.ctx.Err() == nil {
		sh.s.opts.Notify(fmt.Sprintf("session %s was kept twice in %s (as %s), but this machine's copy could not follow: %v", e.ID, sh.s.opts.Name, e.NewID, err))
	}
	return false
}

// catchUpCopy appends to the replica's kept copy newID what was appended
// to session id here after the bytes the copy holds (the copy holds id's
// first bytes, its header rewritten). It reports whether it appended.
func (s *Store) catchUpCopy(ctx context.Context, id, newID string) (bool, error) {
	copyAt, err := head(ctx, s.local, newID)
	if err != nil {
		return false, err
	}
	mine, err := head(ctx, s.local, id)
	if err != nil {
		return false, err
	}
	oldHeader, err := firstLineLength(ctx, s.local, id)
	if err != nil {
		return false, err
	}
	newHeader, err := firstLineLength(ctx, s.local, newID)
	if err != nil {
		return false, err
	}
	covered := copyAt.Length - newHeader + oldHeader
	if covered >= mine.Length {
		return false, nil
	}
	r, _, err := s.local.ReadLog(ctx, id, covered)
	if err != nil {
		return false, err
	}
	defer r.Close()
	rest, err := io.ReadAll(r)
	if err != nil {
		return false, err
	}
	if _, err := s.local.AppendLog(ctx, newID, copyAt, rest); err != nil {
		return false, err
	}
	return true, nil
}

// firstLineLength is the length of the header line of session id's log
// in st, with its newline.
func firstLineLength(ctx context.Context, st store.LogStore, id string) (int64, error) {
	r, _, err := st.ReadLog(ctx, id, 0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("session %s: no header line", id)
		}
		return 0, err
	}
	return int64(len(line)), nil
}
