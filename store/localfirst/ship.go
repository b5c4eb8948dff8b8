package localfirst

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
)

// shipper sends the replica's marked sessions to the bucket in the
// background (the package doc's step 2), and catches up at each
// connection (step 5).
type shipper struct {
	s      *Store
	kickCh chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	dirty map[string]bool
	busy  bool          // a round is under way
	idle  chan struct{} // closed when the catch-up is done, dirty is empty and no round runs
	// idleOpen: idle is not closed yet.
	idleOpen bool
	// rounds counts the rounds begun; failedAt is the number of the last
	// one that found the bucket not answering (1-based, 0: none).
	rounds, failedAt, lastDone int
	// caughtUp: the catch-up of this connection is done.
	caughtUp bool
	// failing: sessions whose last send failed with an answer (not
	// unreachable), told once each.
	failing map[string]bool
	// report, when set, is told of every session a round sent
	// (SendLeftovers).
	report func(replica.Event)
}

func newShipper(s *Store) *shipper {
	ctx, cancel := context.WithCancel(context.Background())
	sh := &shipper{s: s, kickCh: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		dirty: map[string]bool{}, idle: make(chan struct{}), idleOpen: true, failing: map[string]bool{}}
	go sh.run()
	return sh
}

// mark marks session id to ship and wakes the shipper.
func (sh *shipper) mark(id string) {
	sh.mu.Lock()
	if !sh.idleOpen {
		sh.idle, sh.idleOpen = make(chan struct{}), true
	}
	sh.dirty[id] = true
	sh.mu.Unlock()
	sh.kick()
}

func (sh *shipper) kick() {
	select {
	case sh.kickCh <- struct{}{}:
	default:
	}
}

// drain waits until nothing is marked and no round runs, or ctx ends,
// or the bucket is found not to answer: then waiting longer would only
// hold the user back. A bucket not open after ReadTimeout of this wait
// is that too: one that accepts connections and never answers held
// every command, `panto sessions` with nothing to send included, for the
// whole CloseTimeout after Open's ReadTimeout (an attempt to open it
// times out at openAttemptTimeout); one that answers again by then, as
// it comes back, is waited for.
func (sh *shipper) drain(ctx context.Context) {
	start := time.Now()
	sh.kick()
	sh.mu.Lock()
	idle, rounds := sh.idle, sh.rounds
	sh.mu.Unlock()
	attempts := sh.s.conn.attempts()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-idle:
			return
		case <-sh.done: // it gave up: the bucket answered with an error
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if sh.failedSince(rounds) || sh.s.conn.failedSince(attempts) {
				return
			}
			if sh.s.conn.current() == nil && time.Since(start) >= sh.s.opts.ReadTimeout {
				return
			}
		}
	}
}

// stop ends the shipper. A send under way is not waited for: its append
// is conditional, and the next shipper finds whether it landed.
func (sh *shipper) stop() { sh.cancel() }

func (sh *shipper) run() {
	defer close(sh.done)
	select {
	case <-sh.s.conn.ready():
	case <-sh.ctx.Done():
		return
	}
	b := sh.s.conn.current()
	if b == nil {
		if err := sh.s.conn.failure(); err != nil {
			sh.s.opts.Notify(fmt.Sprintf("cannot send to %s: %v", sh.s.opts.Name, err))
		}
		return
	}
	attempt := 0
	for {
		ok := sh.round(b)
		wait := time.Duration(0)
		if !ok {
			wait = backoff(attempt, sh.s.opts.MaxBackoff)
			attempt++
		} else {
			attempt = 0
		}
		if wait == 0 && sh.pendingWork() {
			continue
		}
		var timer <-chan time.Time
		if wait > 0 {
			timer = time.After(wait)
		}
		select {
		case <-sh.ctx.Done():
			return
		case <-sh.kickCh:
		case <-timer:
		}
	}
}

// failedSince reports whether a round begun after the first n found the
// bucket not answering, and none has reached it since.
func (sh *shipper) failedSince(n int) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.failedAt > n && sh.failedAt == sh.lastDone
}

// pendingWork reports whether sessions are marked.
func (sh *shipper) pendingWork() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.dirty) > 0
}

// round catches up (once per connection) and sends the marked sessions.
// It reports false when the bucket did not answer (the sessions stay
// marked, and the caller backs off).
func (sh *shipper) round(b store.LogStore) bool {
	sh.mu.Lock()
	sh.busy = true
	sh.rounds++
	round := sh.rounds
	ids := make([]string, 0, len(sh.dirty))
	for id := range sh.dirty {
		ids = append(ids, id)
	}
	sh.dirty = map[string]bool{}
	caughtUp := sh.caughtUp
	sh.mu.Unlock()
	sort.Strings(ids)

	var plans []replica.Plan
	reached := true
	if !caughtUp {
		marked := make(map[string]bool, len(ids))
		for _, id := range ids {
			marked[id] = true
		}
		// The marked sessions are planned below, from their latest state.
		all, err := sh.catchUp(b, marked)
		if sh.s.unreachable(err) || sh.ctx.Err() != nil {
			reached = false
		} else {
			plans = append(plans, all...)
			sh.mu.Lock()
			sh.caughtUp = true
			sh.mu.Unlock()
		}
	}
	if reached {
		marked, err := sh.planEach(b, ids)
		plans = append(plans, marked...)
		reached = err == nil
	}
	var retry []string
	if reached {
		events := replica.Transfer(sh.ctx, sh.s.local, b, plans, replica.Options{KeepBoth: true, Concurrency: sh.s.opts.ShipConcurrency, SrcCovered: sh.s.srcCovered})
		for _, e := range events {
			if sh.report != nil {
				sh.report(e)
			}
			if !sh.record(b, e) {
				retry = append(retry, e.ID)
				if sh.s.unreachable(e.Err) {
					// The bucket stopped answering after the plans (made
					// from the record, without a request): Close waits no
					// longer for it, as for a plan that found it so.
					reached = false
				}
			}
		}
		sh.s.shipped.saveSoon()
	} else {
		retry = ids
	}
	sh.mu.Lock()
	for _, id := range retry {
		sh.dirty[id] = true
	}
	sh.busy = false
	if !reached {
		sh.failedAt = round
	}
	sh.lastDone = round
	if len(sh.dirty) == 0 && sh.caughtUp && sh.idleOpen {
		close(sh.idle)
		sh.idleOpen = false
	}
	sh.mu.Unlock()
	return reached && len(retry) == 0
}

// A catch-up that plans the whole replica against the bucket
// (replica.PlanAll) lists the bucket's whole index: a catalog that grows
// with the archive (4.3 MB to keep and decode at 20,000 sessions, 0.2 s
// of every panto run), although the replica holds only what this machine
// wrote and read. So it is done once a day (fullCatchUpEvery), for what
// only it finds: a deletion the bucket made of a session the replica
// holds, and a bucket that lost what the record says it holds. Between
// them a catch-up plans only what the shipped record says the bucket
// lacks, a session at a time (no request when the record holds a prefix
// of the replica's log, else a checkpoint read); past catchUpHeads of
// those, one listing of the bucket costs less, and the catch-up is a
// full one.
const (
	fullCatchUpEvery = 24 * time.Hour
	catchUpHeads     = 64
)

// catchUp plans what the replica holds and the bucket lacks (the
// package doc's step 5), but the marked sessions, which the round plans
// from their latest state.
func (sh *shipper) catchUp(b store.LogStore, marked map[string]bool) ([]replica.Plan, error) {
	s := sh.s
	now := time.Now()
	w, err := s.unshipped(sh.ctx)
	if err == nil && w.held == 0 {
		s.shipped.fullDone(now) // nothing here to plan, nor to delete
		return nil, nil
	}
	if ids := w.ids(); err == nil && len(ids) <= catchUpHeads && !s.shipped.fullDue(now) {
		ids = slices.DeleteFunc(ids, func(id string) bool { return marked[id] })
		return sh.planEach(b, ids)
	}
	all, err := replica.PlanAll(sh.ctx, s.local, b, replica.Options{Select: func(id string) bool { return !marked[id] }, SrcCovered: s.srcCovered})
	if err == nil {
		s.shipped.fullDone(now)
	}
	return all, err
}

// planEach plans the sessions ids in turn (plan); a session whose plan
// failed with an answer carries the error in its Plan. It stops at the
// first that finds the bucket not answering, and returns that error with
// the plans made before it.
func (sh *shipper) planEach(b store.LogStore, ids []string) ([]replica.Plan, error) {
	plans := make([]replica.Plan, 0, len(ids))
	if len(ids) == 0 {
		return plans, nil
	}
	// The replica's tombstones, read once for the round: a prune's
	// hundreds of deletions would each read them all.
	tombs, err := sh.s.local.Tombstones(sh.ctx)
	if err != nil {
		return plans, err
	}
	deleted := make(map[string]*store.Tombstone, len(tombs))
	for _, t := range tombs {
		deleted[t.ID] = &t
	}
	for _, id := range ids {
		p, err := sh.plan(b, id, deleted[id])
		if sh.s.unreachable(err) {
			return plans, err
		}
		if err != nil {
			p.Err = err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// plan plans session id, which the replica deleted when tomb is not nil:
// from the shipped record when the bucket was seen to hold a prefix of
// the replica's log (no request), else from the bucket's checkpoint of it
// (store.Head) related to the replica's.
func (sh *shipper) plan(b store.LogStore, id string, tomb *store.Tombstone) (replica.Plan, error) {
	ctx := sh.ctx
	p := replica.Plan{ID: id}
	var err error
	if tomb == nil {
		if p.Src, err = head(ctx, sh.s.local, id); err != nil {
			return p, err
		}
		if cp, ok := sh.s.shipped.get(id); ok && cp.Length <= p.Src.Length && cp.Length > 0 {
			p.Dst, p.Relation = cp, replica.SrcAhead
			if cp == p.Src {
				p.Relation = replica.Same
			}
			return p, nil
		}
	}
	if cp, ok := sh.s.listed(id); ok && tomb != nil {
		// A deletion of a session the bucket listed or resolved in the
		// view's two seconds (panto rm resolved it a moment ago): that
		// checkpoint will do, since the bucket's Delete checks the
		// tombstone against the log before its commit point, and says
		// when the log moved on.
		p.Dst, p.SrcTomb = cp, tomb
		p.Relation = sh.s.relateDeleted(p)
		return p, nil
	}
	p.Dst, err = head(ctx, b, id)
	var gone *agent.DeletedError
	if errors.As(err, &gone) {
		// The bucket deleted it: sync's rules decide (a copy written after
		// the deletion is kept as a new session).
		p.Dst, p.DstTomb = store.Checkpoint{}, &store.Tombstone{ID: id, Deleted: gone.Deleted, At: store.Checkpoint{Length: gone.Length, SHA256: gone.SHA256}}
		err = nil
	}
	if err != nil {
		return p, err
	}
	if tomb != nil || p.DstTomb != nil {
		p.SrcTomb = tomb
		p.Relation = sh.s.relateDeleted(p)
		return p, nil
	}
	p.Relation, err = replica.Relate(ctx, sh.s.local, b, id, p.Src, p.Dst)
	return p, err
}

// relateDeleted is sync's relation of a session one side deleted
// (replica's plan.go): a tombstone covers what was deleted and any copy
// behind it (of the replica's copy, srcCovered says which); a copy it
// does not cover was written to after.
func (s *Store) relateDeleted(p replica.Plan) replica.Relation {
	switch {
	case p.SrcTomb != nil && p.DstTomb != nil:
		return replica.Same
	case p.SrcTomb != nil:
		if p.Dst.Length == 0 || p.SrcTomb.Covers(p.Dst) {
			return replica.SrcDeleted
		}
		return replica.DeleteConflict
	default:
		if s.srcCovered(p.ID, *p.DstTomb, p.Src) {
			return replica.DstDeleted
		}
		return replica.DeleteConflict
	}
}

// tombstone is the replica's tombstone of session id, if it deleted it.
func (s *Store) tombstone(ctx context.Context, id string) (*store.Tombstone, error) {
	tombs, err := s.local.Tombstones(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tombs {
		if t.ID == id {
			return &t, nil
		}
	}
	return nil, nil
}

// head is the checkpoint of session id in s, the empty one when s does
// not hold it. A session s deleted is an *agent.DeletedError (which is
// also ErrSessionNotFound): its tombstone decides what becomes of the
// other side's copy.
func head(ctx context.Context, s store.LogStore, id string) (store.Checkpoint, error) {
	cp, err := store.Head(ctx, s, id)
	var gone *agent.DeletedError
	if errors.Is(err, agent.ErrSessionNotFound) && !errors.As(err, &gone) {
		return store.Checkpoint{}, nil
	}
	return cp, err
}

// srcCovered says whether t, the bucket's tombstone of session id,
// covers the replica's copy at mine (replica.Options.SrcCovered): the
// deletion then comes here too; otherwise the copy was written to after
// it, and is kept as a new session. A tombstone says the length and
// hash of what was deleted, and the bucket's log only grows, so what the
// shipped record says the bucket held of the replica's log is a prefix
// of what was deleted. A copy shorter than what was deleted is covered
// only when the bucket held all of it: bytes it never acknowledged are
// this machine's turns, written while another deleted the session (or
// offline), which a deletion by length alone would lose. A copy with no
// record (one whose send failed, a record lost) is kept too: a copy of a
// deleted session kept twice is the lesser harm.
func (s *Store) srcCovered(id string, t store.Tombstone, mine store.Checkpoint) bool {
	sent, ok := s.shipped.get(id)
	return t.CoversHeld(mine, ok && sent == mine)
}

// record learns from what became of one session; it reports false when
// the session must be sent again.
func (sh *shipper) record(b store.LogStore, e replica.Event) bool {
	s := sh.s
	switch e.Kind {
	case replica.Created, replica.Appended, replica.Unchanged:
		switch {
		case e.SrcTomb != nil:
			// Deleted here and in the bucket (Same): nothing is left to
			// send. Kept, the record counted the deletion as unsent at
			// every Close, for good.
			s.shipped.forget(e.ID)
		case e.Plan.Src.Length > 0:
			s.shipped.set(e.ID, e.Plan.Src)
		}
	case replica.Skipped:
		switch e.Relation {
		case replica.DstAhead:
			s.shipped.set(e.ID, e.Plan.Src) // the replica is a prefix of the bucket's log
		case replica.DstDeleted:
			// Deleted in the bucket, and the replica holds no more than
			// was deleted: the deletion comes here too, of the copy as
			// judged (an append since is refused it, and shipped).
			t := *e.DstTomb
			if e.Plan.Src.Length > 0 {
				t.At = e.Plan.Src
			}
			if err := s.local.Delete(sh.ctx, t); err != nil && !errors.Is(err, store.ErrChanged) {
				s.opts.Notify(fmt.Sprintf("session %s was deleted in %s, but not on this machine: %v", e.ID, s.opts.Name, err))
			}
			s.shipped.forget(e.ID)
		}
	case replica.Deleted:
		s.shipped.forget(e.ID)
	case replica.KeptBoth:
		return sh.keptBoth(b, e)
	case replica.Failed, replica.Refused:
		if s.unreachable(e.Err) || sh.ctx.Err() != nil {
			// No answer (or Close stopped it): the bucket holds what the
			// record says, or more, when an append landed unanswered,
			// which the next conditional append finds. Forgotten, the
			// record counted the whole session as unsent (at Close, and
			// in the next run's notice), and a deletion no more.
			return false
		}
		s.shipped.forget(e.ID) // plan it from the bucket next time
		sh.mu.Lock()
		told := sh.failing[e.ID]
		sh.failing[e.ID] = true
		sh.mu.Unlock()
		if !told {
			s.opts.Notify(fmt.Sprintf("cannot send session %s to %s (kept on this machine): %v", e.ID, s.opts.Name, e.Err))
		}
		return false
	}
	return true
}
