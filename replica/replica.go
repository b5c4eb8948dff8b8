// Package replica is the sync engine: it makes the sessions of one store
// (the source) present in another (the destination), byte for byte and
// incrementally, through the raw-log vocabulary of package store. Both
// sides may be any store.LogStore: panto-sync push is a copy from the
// local catalog to a bucket, pull the other way, copy any two.
//
// A copy goes in three steps, each its own function:
//
//  1. Plan (plan.go): list both sides (store.LogStore.Logs, a bounded
//     number of requests each) and relate each session's two checkpoints:
//     the same bytes, one side only, one side a prefix of the other, or
//     diverged. Deciding "is a prefix" reads no data where hashes can
//     tell (store.PrefixCheckpoint), and otherwise compares only the bytes
//     after the longest prefix both sides know the hash of.
//  2. Transfer (transfer.go): for each session the source is ahead on,
//     stream its bytes after the destination's end, up to what the
//     source listed when it can read so (store.ReadListed: a bucket's
//     index names the segments, so a session costs about one GET and no
//     probe past its listed end), cut into chunks of
//     whole batches (sessionlog.Batches, bounded memory), each appended
//     with store.LogStore.AppendLog at the checkpoint the destination
//     holds. A destination that moved meanwhile is planned again from
//     what it says it holds.
//  3. Record: flush both stores (store.Flush), so that what was written is
//     listed by other processes, and sum up.
//
// Nothing is ever overwritten: a session that diverged is reported and
// left alone, or with KeepBoth the source's copy is stored as a new
// session whose header links the original (fork.go). Every write is
// conditional on the checkpoint it was planned against, so an interrupted
// copy is safe to run again: it converges, with nothing lost or
// duplicated. docs/DESIGN.md ("Sync") states the rules.
package replica

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
)

// Relation is how a session's copies on the two sides relate.
type Relation int

const (
	// Same: both sides hold the same bytes.
	Same Relation = iota
	// SrcOnly: only the source holds the session.
	SrcOnly
	// DstOnly: only the destination holds it.
	DstOnly
	// SrcAhead: the destination holds a prefix of the source's bytes.
	SrcAhead
	// DstAhead: the source holds a prefix of the destination's bytes.
	DstAhead
	// Diverged: neither holds a prefix of the other.
	Diverged
	// SrcDeleted: the source deleted the session, and the destination's
	// copy (if any) is what was deleted or behind it: the deletion goes to
	// the destination.
	SrcDeleted
	// DstDeleted: the destination deleted it, and the source's copy (if
	// any) is what was deleted or behind it: only a copy the other way
	// carries that deletion.
	DstDeleted
	// DeleteConflict: one side deleted the session and the other wrote to
	// it after the deletion (more bytes than the tombstone covers, or
	// other bytes): both are left alone.
	DeleteConflict
)

var relationNames = map[Relation]string{Same: "same", SrcOnly: "src-only", DstOnly: "dst-only", SrcAhead: "src-ahead", DstAhead: "dst-ahead", Diverged: "diverged",
	SrcDeleted: "src-deleted", DstDeleted: "dst-deleted", DeleteConflict: "delete-conflict"}

func (r Relation) String() string { return relationNames[r] }

// Plan is what planning found of one session.
type Plan struct {
	ID string
	// Src and Dst are the committed bytes of each side (zero when absent).
	Src, Dst store.Checkpoint
	// SrcTomb and DstTomb are each side's tombstone of the session, if it
	// deleted it.
	SrcTomb, DstTomb *store.Tombstone
	Relation         Relation
	// Err is why the session cannot be planned (an id that is not safe
	// to use, a side that could not be read); nothing is done to it.
	Err error
}

// Tail is the number of bytes a copy moves for the plan.
func (p Plan) Tail() int64 {
	switch p.Relation {
	case SrcOnly, SrcAhead:
		return p.Src.Length - p.Dst.Length
	}
	return 0
}

// Kind says what became of one session.
type Kind int

const (
	// Unchanged: both sides held the same bytes.
	Unchanged Kind = iota
	// Created: the session was new to the destination, and copied.
	Created
	// Appended: the source's tail was appended to the destination.
	Appended
	// Skipped: the destination holds the session and is not behind (it is
	// ahead, or alone): only a copy the other way would change it.
	Skipped
	// Divergent: neither side is a prefix of the other; both are left alone.
	Divergent
	// KeptBoth: it diverged, and the source's copy was stored in the
	// destination under NewID (Options.KeepBoth).
	KeptBoth
	// Failed: the session could not be copied; Err says why.
	Failed
	// Refused: the id is not one any store could hold safely.
	Refused
	// Deleted: the source's deletion reached the destination: its copy is
	// gone (or, when it had none, its tombstone recorded).
	Deleted
	// Conflicted: deleted on one side, written to on the other after the
	// deletion; both are left alone (see Options.KeepBoth).
	Conflicted
)

var kindNames = map[Kind]string{Unchanged: "unchanged", Created: "created", Appended: "appended", Skipped: "skipped", Divergent: "diverged", KeptBoth: "kept-both", Failed: "failed", Refused: "refused",
	Deleted: "deleted", Conflicted: "conflict"}

func (k Kind) String() string { return kindNames[k] }

// Event is what became of one session (or, in a dry run, what would).
type Event struct {
	Plan
	Kind Kind
	// Bytes is what was moved (in a dry run: what would be).
	Bytes int64
	// NewID is the session KeptBoth stored, a copy of Plan.ID's source.
	NewID string
	// Err is why it failed.
	Err error
	// Reached, of a copy that failed, is the destination's checkpoint at
	// the end of what it appended (Plan.Dst when it appended nothing): a
	// prefix of the source's log, which a caller that records what the
	// two hold in common (local-first's shipped record) records.
	Reached store.Checkpoint
	// Note is an explanation a person may want (why a session was
	// skipped, or planned again).
	Note   string
	DryRun bool
}

// Options configure a copy.
type Options struct {
	// Concurrency is the number of sessions planned and copied at once
	// (default 32: most sessions are small, and on a link of tens of
	// milliseconds a copy's time is its waves of round trips; 32 halves
	// those of 16, measured in BENCHMARKS.md, while 64 gains little more).
	Concurrency int
	// Select, when set, picks the session ids to copy.
	Select func(id string) bool
	// DryRun plans and reports, and writes nothing.
	DryRun bool
	// KeepBoth stores the source's copy of a diverged session as a new
	// session in the destination, linked to the original. For a session
	// deleted on one side and written to on the other after the deletion,
	// it keeps the surviving copy as a new session (in the destination:
	// the source's survivor is copied there; the destination's is renamed,
	// and the deletion then goes through).
	KeepBoth bool
	// SrcCovered, when set, says whether the destination's tombstone t
	// covers the source's copy of session id at src, in place of
	// t.Covers(src). A tombstone holds the length and hash of what was
	// deleted, so t.Covers takes any shorter copy for a prefix of it; a
	// source that knows which of its bytes the destination held (the
	// local-first shipper's record) tells a copy written to after the
	// deletion from one behind it, so that the copy is kept (a conflict)
	// instead of deleted.
	SrcCovered func(id string, t store.Tombstone, src store.Checkpoint) bool
	// DstCovered is SrcCovered the other way: whether the source's
	// tombstone t covers the destination's copy at dst (a pull, judged
	// by what the puller knows the bucket held of its copy).
	DstCovered func(id string, t store.Tombstone, dst store.Checkpoint) bool
	// ChunkSize bounds one append (default 8 MiB): a longer tail is
	// appended in chunks of whole batches, so that memory stays bounded
	// and no object of a bucket grows without bound.
	ChunkSize int
	// Planned, when set, is told how many sessions and bytes the transfer
	// will move once planning is done (for a progress display).
	Planned func(sessions int, bytes int64)
	// Report, when set, is told of each session's outcome as it happens.
	// Calls are serialized.
	Report func(Event)
}

// covered is how a copy is judged against the other side's tombstone:
// SrcCovered and DstCovered, else the tombstone's own rule.
func (o *Options) covered() coveredBy {
	c := coveredBy{src: o.SrcCovered, dst: o.DstCovered}
	byLength := func(_ string, t store.Tombstone, cp store.Checkpoint) bool { return t.Covers(cp) }
	if c.src == nil {
		c.src = byLength
	}
	if c.dst == nil {
		c.dst = byLength
	}
	return c
}

// coveredBy judges a side's copy of a session against the other side's
// tombstone (Options.SrcCovered, Options.DstCovered).
type coveredBy struct {
	src, dst func(id string, t store.Tombstone, cp store.Checkpoint) bool
}

func (o *Options) defaults() {
	if o.Concurrency < 1 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
}

// DefaultConcurrency is the default Options.Concurrency.
const DefaultConcurrency = 32

// DefaultChunkSize is the default Options.ChunkSize.
const DefaultChunkSize = 8 << 20

// Summary sums up a copy.
type Summary struct {
	Sessions int
	Counts   map[Kind]int
	// Bytes is what was moved (in a dry run: what would be).
	Bytes  int64
	Failed int
	// Diverged counts the sessions left alone because both sides changed
	// them: diverged copies, and deletion conflicts.
	Diverged int
	// FlushErr is why the record step failed: the data is written, but
	// the destination's listings may lag until the next run.
	FlushErr error
	// ListErr is set when a side listed only part of its sessions (a
	// damaged index, agent.ErrIncompleteList): the copy went on with the
	// rest, and the error says how to repair the side.
	ListErr error
	Elapsed time.Duration
}

// Copy plans every session of src and dst and copies what the source is
// ahead on into the destination (the three steps of the package doc). It
// fails only when a side cannot be listed; what becomes of each session
// is in the Summary and the reported Events. When ctx ends, no new
// session is started, and appends under way finish.
func Copy(ctx context.Context, src, dst store.LogStore, opts Options) (Summary, error) {
	start := time.Now()
	opts.defaults()
	plans, err := PlanAll(ctx, src, dst, opts)
	var listErr error
	if errors.Is(err, agent.ErrIncompleteList) {
		listErr, err = err, nil
	}
	if err != nil {
		return Summary{}, err
	}
	var total int64
	for _, p := range plans {
		if p.Err == nil {
			total += p.Tail()
		}
	}
	if opts.Planned != nil {
		opts.Planned(len(plans), total)
	}
	events := Transfer(ctx, src, dst, plans, opts)
	sum := Record(ctx, src, dst, events, opts)
	sum.ListErr = listErr
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// Transfer carries out the plans, concurrently, and returns an event for
// each (a session never started because ctx ended fails as interrupted).
func Transfer(ctx context.Context, src, dst store.LogStore, plans []Plan, opts Options) []Event {
	opts.defaults()
	t := &transfer{src: src, dst: dst, opts: opts, budget: semaphore.NewWeighted(max(maxInFlight, int64(opts.ChunkSize)))}
	events := make([]Event, len(plans))
	var g errgroup.Group
	g.SetLimit(opts.Concurrency)
	for i, p := range plans {
		if ctx.Err() != nil {
			events[i] = failed(p, errInterrupted)
			t.report(events[i])
			continue
		}
		g.Go(func() error {
			events[i] = t.session(ctx, p)
			t.report(events[i])
			return nil
		})
	}
	_ = g.Wait() // sessions fail on their own, never the group
	return events
}

// errInterrupted is the error of a session a cancelled copy never started.
var errInterrupted = errors.New("interrupted before it was copied; run again")

// Record flushes both stores (the destination's index, the source's
// caches) and sums the events up.
func Record(ctx context.Context, src, dst store.LogStore, events []Event, opts Options) Summary {
	sum := Summary{Sessions: len(events), Counts: map[Kind]int{}}
	for _, e := range events {
		sum.Counts[e.Kind]++
		switch e.Kind {
		case Failed, Refused:
			sum.Failed++
		case Divergent, Conflicted:
			sum.Diverged++
		}
		if e.Err == nil {
			sum.Bytes += e.Bytes
		}
	}
	if opts.DryRun {
		return sum
	}
	// The appends are committed; the destination's listing learns of them
	// here. A failure leaves it behind, which the next run repairs.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	sum.FlushErr = errors.Join(store.Flush(fctx, dst), store.Flush(fctx, src))
	return sum
}

// PlanAll lists both sides and plans every selected session, in id order.
// A side that lists only part of its sessions (agent.ErrIncompleteList)
// does not stop it: the plans of what was listed come back with that
// error. A session missing from the destination's listing is safe to copy
// as new: the conditional append finds what the destination holds.
func PlanAll(ctx context.Context, src, dst store.LogStore, opts Options) ([]Plan, error) {
	opts.defaults()
	listed, partial, err := listBoth(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	ids, sides := pairSides(listed, opts.Select)
	plans := make([]Plan, len(ids))
	pl := &planner{src: src, dst: dst, covered: opts.covered()}
	var wg errgroup.Group
	wg.SetLimit(opts.Concurrency)
	for i, id := range ids {
		wg.Go(func() error {
			plans[i] = pl.plan(ctx, id, sides[id][0], sides[id][1])
			return nil
		})
	}
	_ = wg.Wait()
	return plans, partial
}

// listBoth lists the source and the destination at once. partial wraps
// agent.ErrIncompleteList when a listing is incomplete; err is any other
// failure.
func listBoth(ctx context.Context, src, dst store.LogStore) (listed [2]sideListing, partial, err error) {
	var incomplete [2]error
	g, gctx := errgroup.WithContext(ctx)
	for i, side := range []struct {
		s    store.LogStore
		name string
	}{{src, "source"}, {dst, "destination"}} {
		g.Go(func() error {
			var err error
			listed[i], err = list(gctx, side.s)
			if err != nil {
				err = fmt.Errorf("list the %s: %w", side.name, err)
			}
			if errors.Is(err, agent.ErrIncompleteList) {
				incomplete[i], err = err, nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return listed, nil, err
	}
	return listed, errors.Join(incomplete[0], incomplete[1]), nil
}

// pairSides pairs what the two listings hold of each selected session
// (select nil: all of them), source first; ids are the sessions, sorted.
func pairSides(listed [2]sideListing, sel func(id string) bool) (ids []string, sides map[string]*[2]sideOf) {
	sides = map[string]*[2]sideOf{}
	at := func(id string) *[2]sideOf {
		s := sides[id]
		if s == nil {
			s = &[2]sideOf{}
			sides[id] = s
		}
		return s
	}
	for i, l := range listed {
		for k := range l.logs {
			if id := l.logs[k].Info.ID; sel == nil || sel(id) {
				at(id)[i].log = &l.logs[k]
			}
		}
		for k := range l.tombs {
			if id := l.tombs[k].ID; sel == nil || sel(id) {
				at(id)[i].tomb = &l.tombs[k]
			}
		}
	}
	ids = make([]string, 0, len(sides))
	for id := range sides {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, sides
}

// sideListing is what one side lists: its sessions, and the tombstones of
// those it deleted (when it is a store.Deleter).
type sideListing struct {
	logs  []store.Log
	tombs []store.Tombstone
}

// sideOf is what one side holds of one session.
type sideOf struct {
	log  *store.Log
	tomb *store.Tombstone
}

// list lists s's sessions and tombstones (an incomplete listing comes with
// its error, agent.ErrIncompleteList).
// The two listings go out together: on a bucket each is a round trip.
func list(ctx context.Context, s store.LogStore) (sideListing, error) {
	var l sideListing
	var logsErr, tombsErr error
	var wg sync.WaitGroup
	if store.CanDelete(s) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.tombs, tombsErr = store.Tombstones(ctx, s)
		}()
	}
	l.logs, logsErr = s.Logs(ctx)
	wg.Wait()
	for _, err := range []error{logsErr, tombsErr} {
		if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
			return l, err
		}
	}
	return l, errors.Join(logsErr, tombsErr)
}

// transfer carries plans out.
type transfer struct {
	src, dst store.LogStore
	opts     Options
	mu       sync.Mutex // serializes Report
	// budget bounds the chunk bytes held at once by all the sessions
	// being copied, so that many large sessions copied at once take no
	// more memory than a few.
	budget *semaphore.Weighted
}

// maxInFlight is the chunk bytes all sessions of a copy hold at once.
const maxInFlight = 64 << 20

func (t *transfer) report(e Event) {
	if t.opts.Report == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.opts.Report(e)
}

func failed(p Plan, err error) Event { return Event{Plan: p, Kind: Failed, Err: err} }
