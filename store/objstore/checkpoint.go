package objstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/internal/manifest"
)

// This file writes the checkpoints — a session's manifest and its index
// entry — after its segments commit. An append returns at its commit
// point (the segment PUT) and leaves the checkpoint to a background
// writer, one per session at a time, which coalesces the appends that
// commit while it writes. What readers see:
//
//   - Load, ReadLog and Checkpoints, in any process, see a returned append
//     at once: they probe for segments past the manifest (§P4).
//   - List, Latest, Resolve and Logs of this Store first wait for its
//     pending checkpoints (Flush), so a Store always lists its own appends.
//   - Another Store lists a returned append once its checkpoint lands, a
//     round trip later, or after the writer's Flush. A session's first
//     append waits for its index entry, so a session is never unlisted
//     because its writer died just after the append returned; a later
//     append whose checkpoint died with its writer leaves the session
//     listed with its previous summary until the next append or push.

// checkpointTimeout bounds one round of a background checkpoint, which no
// caller's context ends.
const checkpointTimeout = 2 * time.Minute

// checkpointLinger is how long a checkpoint waits after the append that
// called for it, unless an append waits for it (a session's first) or a
// Flush, a listing or a read of this Store asks for it: the appends of a
// burst (a turn's tool calls) take one commit, and writers appending at
// once (a team) send their segments before their checkpoints compete
// with them. Other processes list an append that much later.
const checkpointLinger = 250 * time.Millisecond

// scheduleCheckpoint marks session id as needing a checkpoint and makes
// sure a writer is on it; urgent: the caller waits for it (no linger).
// The returned channel is closed when the writer is done with everything
// scheduled so far.
func (s *Store) scheduleCheckpoint(ctx context.Context, id string, st *sessionState, urgent bool) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !st.flushing {
		s.startCheckpointLocked(ctx, id, st)
	}
	st.dirty = true
	st.urgent = st.urgent || urgent
	return st.flushed
}

// lingerCutLocked is closed by the next settle: the lingering
// checkpoints go at once. Callers hold s.mu.
func (s *Store) lingerCutLocked() <-chan struct{} {
	if s.cut == nil {
		s.cut = make(chan struct{})
	}
	return s.cut
}

// linger waits checkpointLinger, or until cut is closed.
func linger(ctx context.Context, cut <-chan struct{}) {
	t := time.NewTimer(checkpointLinger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cut:
	case <-ctx.Done():
	}
}

// startCheckpointLocked starts a checkpointLoop for the session. Callers
// hold s.mu.
func (s *Store) startCheckpointLocked(ctx context.Context, id string, st *sessionState) {
	st.dirty = true
	st.flushing = true
	st.flushed = make(chan struct{})
	if s.busy == 0 {
		s.idle = make(chan struct{})
	}
	s.busy++
	go s.checkpointLoop(context.WithoutCancel(ctx), id, st)
}

// checkpointLoop writes the checkpoints of session id until no append is
// waiting for one, then compacts the session if it has too many segments.
func (s *Store) checkpointLoop(ctx context.Context, id string, st *sessionState) {
	for {
		s.mu.Lock()
		if !st.dirty {
			st.flushing = false
			close(st.flushed)
			if s.busy--; s.busy == 0 {
				close(s.idle)
			}
			s.mu.Unlock()
			return
		}
		// Under s.mu with the settle that would cut it: a settle before
		// this made the round urgent, one after closes cut.
		var cut <-chan struct{}
		if !st.urgent {
			cut = s.lingerCutLocked()
		}
		st.urgent = false
		s.mu.Unlock()
		if cut != nil && s.unfoldedIndex() {
			linger(ctx, cut)
		}
		// What was appended until now is this round's: the checkpoint
		// reads the state after this. Cleared before the linger, the
		// appends it waited for called for a second round, which
		// committed the same entry again: a round trip more at every
		// exit of a turn of more than one message.
		s.mu.Lock()
		st.dirty, st.urgent = false, false
		s.mu.Unlock()

		// Each round gets its own deadline: a session appended to
		// without pause keeps its loop running for as long.
		rctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
		err := s.checkpoint(rctx, id, st)
		if err == nil && s.compactThreshold > 0 {
			err = s.compactIfDue(rctx, id, st)
		}
		cancel()
		s.mu.Lock()
		st.ckErr = err
		s.mu.Unlock()
	}
}

// compactIfDue compacts the session when it has more segments than the
// threshold. The appends are committed: a failure is retried by the next
// checkpoint, and is reported by Flush, but for a server that answers it
// is busy (a cluster missing a node answers SlowDownWrite for seconds):
// a compaction is the writer's own housekeeping, so it waits for the
// next checkpoint rather than fail one that was written.
func (s *Store) compactIfDue(ctx context.Context, id string, st *sessionState) error {
	if err := st.mu.lock(ctx); err != nil {
		return err
	}
	defer st.mu.unlock()
	if !s.compactionDue(st) {
		return nil
	}
	if err := s.compactLocked(ctx, id, st, mergeTieredRuns); err != nil && !errors.Is(err, errThrottled) {
		return err
	}
	return nil
}

// compactionDue reports whether the session st describes has more
// segments than the threshold, not all of them large. Callers hold
// st.mu.
func (s *Store) compactionDue(st *sessionState) bool {
	return s.compactThreshold > 0 && len(st.m.Segments) > s.compactThreshold && len(mergeTieredRuns(st.m.Segments, mergeMax)) > 0
}

// Flush waits for the Store's background checkpoints, retries those that
// failed, writes the index entries deferred by WithDeferredIndex, and
// reports what still fails. Appends are durable without it; it makes them
// visible to the list, resolve and latest of other Stores (another
// process), so call it before exiting.
func (s *Store) Flush(ctx context.Context) error {
	shardErr := s.settle(ctx)
	if ctx.Err() != nil {
		return fmt.Errorf("flush checkpoints: %w", ctx.Err())
	}
	s.mu.Lock()
	var failed []string
	for id, st := range s.sessions {
		if st.ckErr != nil {
			failed = append(failed, id)
		}
	}
	slices.Sort(failed)
	var errs []error
	if len(failed) > 0 {
		// One line however many failed (a bucket gone away fails them
		// all): the count, and the first one's reason.
		first := s.sessions[failed[0]].ckErr
		more := ""
		if len(failed) > 1 {
			more = fmt.Sprintf(" and %d other sessions", len(failed)-1)
		}
		errs = append(errs, fmt.Errorf("checkpoint of session %s%s not written (the messages are stored; the next append or push writes it): %w", failed[0], more, first))
	}
	s.mu.Unlock()
	if shardErr != nil {
		errs = append(errs, fmt.Errorf("index not written (the sessions are stored; the next append or push writes it): %w", shardErr))
	}
	return errors.Join(errs...)
}

// settle retries the failed checkpoints, waits until none is being
// written, and writes the index entries still queued (deferred, or left
// by a failed shard write). Reads of the index call it so that a Store
// sees its own appends, and go on with whatever the index holds when a
// write fails again; it returns the shard writes' errors.
func (s *Store) settle(ctx context.Context) error {
	s.mu.Lock()
	// No checkpoint lingers past a settle: those lingering go now, those
	// about to linger do not.
	if s.cut != nil {
		close(s.cut)
		s.cut = nil
	}
	for _, st := range s.sessions {
		if st.dirty {
			st.urgent = true
		}
	}
	for id, st := range s.sessions {
		if st.ckErr != nil && !st.flushing {
			s.startCheckpointLocked(ctx, id, st)
		}
	}
	s.mu.Unlock()
	if err := s.waitIdle(ctx); err != nil {
		return err
	}
	var queued []string
	s.mu.Lock()
	for name, sh := range s.shards {
		sh.mu.Lock()
		if len(sh.pending) > 0 || len(sh.buried) > 0 {
			queued = append(queued, name)
		}
		sh.mu.Unlock()
	}
	s.mu.Unlock()
	if len(queued) > 0 {
		// A sync that writes the index, of a prefix whose writers kept
		// no project heads, gives it them from the catalog it read.
		if err := s.adoptHeads(ctx); err != nil {
			return err
		}
		// And the dir filter, when the index log lacks one.
		if err := s.adoptDirFilter(ctx); err != nil {
			return err
		}
		// And past manifest.WideAfter sessions, partitions of three
		// characters (widen.go), before this write's go anywhere. A
		// damaged partition holds the move back until repair.
		if err := s.widenIndex(ctx, queued); err != nil && !errors.Is(err, ErrIndexDamaged) {
			return err
		}
	}
	if s.unfoldedIndex() {
		// A few deferred entries (a sync round's) are committed
		// unfolded rather than written to their partitions.
		few := func(n int) bool { return n <= unfoldedBatch }
		// More (a sync's) go to a run, not every partition; past the
		// fold limit (a first push) to the partitions, as the run would
		// be folded at once.
		bulk := func(n int) bool { return n > unfoldedBatch && n <= s.runFoldLimit() }
		if taken := s.takeQueued(queued, few); len(taken) > 0 {
			queued = nil
			if err := s.commitUnfolded(ctx, slices.Collect(maps.Values(taken))...); err != nil {
				return err
			}
		} else if taken := s.takeQueued(queued, bulk); len(taken) > 0 {
			queued = nil
			if err := s.commitRun(ctx, taken); err != nil {
				return err
			}
		}
	}
	// Deletions' tombstones go to the index log before their partitions
	// (finishDelete).
	logErr := s.writeLog(ctx)
	// Each shard on its own: one that cannot be written (a damaged one,
	// say) must not cancel the others.
	errs := make([]error, len(queued))
	var wg sync.WaitGroup
	for i, name := range queued {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.writeShard(ctx, name)
		}()
	}
	wg.Wait()
	// One commit of the index log for every shard written, then one
	// purge of the runs for every deletion they buried.
	err := errors.Join(append(errs, logErr, s.writeLog(ctx))...)
	err = errors.Join(err, s.purgeBuried(ctx))
	if len(queued) > 0 && err == nil && s.catchUpKept(ctx) {
		// The commit omits what a bulk write (a first push) put in the
		// partitions, which this Store holds (keepOmitted): cached now,
		// the next run does not read the partitions back.
		s.saveKeptCatalog()
	}
	return err
}

// queuedCount is how many entries wait for the partitions names.
func (s *Store) queuedCount(names []string) int {
	n := 0
	for _, name := range names {
		st := s.shardState(name)
		st.mu.Lock()
		n += len(st.pending)
		st.mu.Unlock()
	}
	return n
}

// takeQueued takes every entry queued for the partitions names when no
// deletion is queued with them (which must reach its partition) and
// fits accepts how many there are; else it takes nothing. A few (at
// most unfoldedBatch, a sync round's) are committed unfolded, more go
// to a run (runs.go).
func (s *Store) takeQueued(names []string, fits func(count int) bool) map[string]manifest.IndexEntry {
	count := 0
	for _, name := range names {
		st := s.shardState(name)
		st.mu.Lock()
		count += len(st.pending)
		deleting := len(st.buried) > 0 || st.purge
		st.mu.Unlock()
		if deleting {
			return nil
		}
	}
	if count == 0 || !fits(count) {
		return nil
	}
	taken := map[string]manifest.IndexEntry{}
	for _, name := range names {
		st := s.shardState(name)
		st.mu.Lock()
		if len(st.buried) == 0 && !st.purge {
			maps.Copy(taken, st.pending)
			st.pending = nil
		}
		st.mu.Unlock()
	}
	return taken
}

// waitIdle waits until no checkpoint is being written.
func (s *Store) waitIdle(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	busy := s.busy
	s.mu.Unlock()
	if busy == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkpoint writes the manifest and the index entry of the session, in
// parallel, from a snapshot of what this Store knows of it; appends go on
// meanwhile (the next round writes what they add).
//
// A session whose log is its first segment alone, with no manifest
// stored, gets no manifest: readers find the segment by probing from
// seg/0 and check it against the index entry (see needsManifest).
func (s *Store) checkpoint(ctx context.Context, id string, st *sessionState) error {
	if err := st.mu.lock(ctx); err != nil {
		return err
	}
	need := s.needsManifest(st)
	if need && st.partial > 0 {
		// Resumed from the index: the manifest to write lists every
		// segment, so read the stored one (and probe past it) first.
		if err := s.refresh(ctx, id, st); err != nil {
			st.mu.unlock()
			return err
		}
		need = s.needsManifest(st)
	}
	// A compaction due writes the manifest itself: it goes beside the
	// index entry, where it followed the checkpoint (a turn that
	// compacts took two round trips more at its exit). The entry is
	// this snapshot's, as it was when the compaction came after it: a
	// reader goes from the manifest stored, whichever it reads.
	compact := st.partial == 0 && s.compactionDue(st)
	if compact {
		need = false
	}
	m, etag, entry, whole := st.m.Clone(), st.etag, st.entry(), st.partial == 0
	st.mu.unlock()
	if need && whole && entry.Resume.HashState != "" {
		// The entry goes beside the manifest that lists every segment:
		// it says so, as the manifest will be stored once both are.
		// Said after it, as a later round did, it took a commit more;
		// said before, a reader took the session for one without a
		// manifest, read it by probing, and its own manifest write was
		// refused. If this write loses a race, a reader reads the
		// stored manifest and probes after it, as for any tail.
		entry.Resume.Stored, entry.Resume.Tail = len(m.Segments), ""
	}
	index := func() error { return s.updateIndex(ctx, entry) }
	if s.deferIndex {
		index = func() error { s.queueIndex(entry); return nil }
	}
	var g errgroup.Group
	g.Go(index)
	if need {
		g.Go(func() error { return s.writeManifest(ctx, id, st, m, etag) })
	}
	if compact {
		g.Go(func() error { return s.compactIfDue(ctx, id, st) })
	}
	return g.Wait()
}

// writeManifest stores m, the snapshot of st whose stored manifest had
// ETag etag, with If-Match on it (If-None-Match when none was stored). A
// lost race falls back to putManifest under st.mu.
func (s *Store) writeManifest(ctx context.Context, id string, st *sessionState, m *manifest.Manifest, etag string) error {
	data, err := s.codec.EncodeManifest(s.sessionKey(id, "manifest.json"), m)
	if err != nil {
		return err
	}
	newEtag, err := s.put(ctx, s.sessionKey(id, "manifest.json"), data, putCond{ifMatch: etag, ifNoneMatch: etag == ""}, "application/json")
	if err == nil {
		if err := st.mu.lock(ctx); err != nil {
			return err
		}
		// st.m extends m (appends only add segments), so the stored
		// manifest is now the one st.m extends — unless st was re-read
		// meanwhile, which knows its own ETag.
		if st.etag == etag {
			st.etag, st.stored = newEtag, len(m.Segments)
		}
		st.mu.unlock()
		return nil
	}
	if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
		return err
	}
	if err := st.mu.lock(ctx); err != nil {
		return err
	}
	defer st.mu.unlock()
	if st.etag != etag {
		return s.putManifest(ctx, id, st, false) // st was re-read meanwhile
	}
	return s.putManifest(ctx, id, st, true)
}

// extendsManifest reports whether m lists every segment remote lists, as
// it lists them, and more or as many: m can replace remote.
func extendsManifest(m, remote *manifest.Manifest) bool {
	return len(remote.Segments) <= len(m.Segments) && slices.Equal(remote.Segments, m.Segments[:len(remote.Segments)])
}

// needsManifest reports whether the checkpoint of st must write the
// manifest: once manifestEvery segments were appended after the stored
// one, the first segment of a log not counting (a log that is one segment
// needs no manifest). The segments after the manifest are found by
// probing and checked against the index entry (catchUpFrom). Callers hold
// st.mu.
func (s *Store) needsManifest(st *sessionState) bool {
	past := st.segments() - st.stored
	if st.stored == 0 {
		past--
	}
	return past >= s.manifestEvery
}

// putManifest stores st.m with If-Match on st.etag (If-None-Match when no
// manifest is known). On a lost race it adopts the stored manifest, catches
// it up by probing and, if that still lacks segments, writes it again.
// Callers hold st.mu.
func (s *Store) putManifest(ctx context.Context, id string, st *sessionState, refused bool) error {
	key := s.sessionKey(id, "manifest.json")
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !refused {
			data, err := s.codec.EncodeManifest(key, st.m)
			if err != nil {
				return err
			}
			cond := putCond{ifMatch: st.etag, ifNoneMatch: st.etag == ""}
			etag, err := s.put(ctx, key, data, cond, "application/json")
			if err == nil {
				st.etag, st.stored = etag, len(st.m.Segments)
				return nil
			}
			if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
				return err
			}
		}
		refused = false
		remote, retag, err := s.readManifestFolded(ctx, id)
		if err != nil {
			return err
		}
		stored := len(remote.Segments)
		if extendsManifest(st.m, remote) {
			// The stored manifest lists a prefix of what st knows (a
			// reading resumed from an index entry written beside it,
			// which did not know it was stored, took it for none): st
			// goes on from it, with its pending deletes, and is written
			// over it at once. Probing after it would read again, one
			// after another, segments st has.
			st.m.Pending = remote.Pending
			st.etag, st.stored, st.fresh = retag, stored, s.now()
			continue
		}
		probed, err := s.catchUp(ctx, remote, 0, nil)
		if err != nil {
			return err
		}
		st.m, st.etag, st.stored, st.fresh = remote, retag, stored, s.now()
		if len(probed) == 0 {
			return nil // the stored manifest already covers everything
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("manifest of session %s: too many concurrent updates", id)
}
