// Package localfirst is the local-first bucket store: what panto opens
// for --store s3://... unless told --direct. It wraps a replica, a
// catalog directory of this machine (store/fsjsonl), and the bucket's
// store (store/objstore), so that panto never waits for the network nor
// loses a prompt to it. docs/DESIGN.md, "The local-first store", is the
// design; in short:
//
// # Protocol
//
//  1. Every write (messages, titles, forks, deletions) goes to the
//     replica first, and returns when it is there: durable at the fsync,
//     as with the directory store. The session is then marked to ship.
//  2. A background shipper sends each marked session to the bucket with
//     the sync engine (package replica: Relate and Transfer), one session
//     at a time, in log order: every append is store.LogStore.AppendLog at
//     the checkpoint the bucket is believed to hold, which the bucket
//     refuses (store.ChangedError) when its log is elsewhere; the session
//     is then related again from what the bucket holds. While the bucket
//     does not answer (objstore.IsUnreachable) the shipper retries with
//     backoff, up to a minute apart.
//  3. When the bucket's log diverged from the replica's (another machine
//     appended while this one was offline), the shipper keeps both, as
//     panto-sync's --on-diverge=keep-both does: this machine's log goes
//     to the bucket as a new session linked to the original
//     (replica.KeptID); the replica gets that copy too, the original's
//     log in the replica is replaced by the bucket's (fsjsonl.Replace),
//     later appends of this process go to the copy, and the user is told
//     which session holds what.
//  4. Reads (List, Latest, Resolve, Load) ask the bucket with a short
//     timeout and bring the replica's copy of what they read up to date
//     (a pull of the sessions read, not of the whole bucket); when it
//     does not answer they go on from the replica and say so once.
//  5. Close waits a bounded time for the shipper, then says in one line
//     what is still to send. Whatever is left is found by the catch-up
//     of the next local-first store that reaches the bucket: at each
//     connection the shipper plans what the shipped record says the
//     bucket lacks and sends it; once a day it plans the whole replica
//     against the bucket (replica.PlanAll), which also carries the
//     bucket's deletions to the replica (shipper.catchUp).
//
// # Invariants
//
//   - Nothing acknowledged is lost: an append is acknowledged once it is
//     in the replica, and the replica is only ever appended to, except by
//     step 3, which first makes its bytes another session, in the replica
//     and in the bucket.
//   - The bucket is never overwritten: every write is conditional.
//   - The shipper's record of what the bucket holds of a session (the
//     shipped file, .panto-shipped.json in the replica) is always a
//     prefix of the replica's log; it may lag behind the bucket, which
//     only costs a refused append and a new plan.
//   - Processes on one machine share the replica: fsjsonl's locks order
//     their appends into one log, so their shippers send the same bytes
//     and never make a session diverge from itself.
//
// # Cost
//
// A shipped append is one conditional PUT when the shipper knows where
// the bucket's log is (it does after its first send of the session),
// else the checkpoint read of store.Head first. A read is the bucket's
// listing (as with --direct) plus, for a session whose replica is behind,
// the segments it lacks.
package localfirst

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// Options configure Open.
type Options struct {
	// Dir is the replica's directory (see Dir).
	Dir string
	// Name is the bucket's URL, s3://BUCKET[/PREFIX], named in messages.
	Name string
	// OpenBucket opens the bucket's store. It is called in the background
	// until it succeeds, or fails with an error that is not unreachable.
	OpenBucket func(ctx context.Context) (store.LogStore, error)
	// Unreachable reports whether an error of the bucket means it gave
	// no answer (objstore.IsUnreachable); any other error is reported.
	Unreachable func(error) bool
	// ReadTimeout bounds how long Open and each read wait for the bucket
	// before going on from the replica (default 2s).
	ReadTimeout time.Duration
	// ListTimeout bounds a listing or a resolve of a bucket that answered
	// Open (default 30s): a listing the index's newest commit cannot
	// answer reads every index partition, a resolve a partition and the
	// session's objects, more than one round trip, and a slow one is not
	// an unreachable bucket.
	ListTimeout time.Duration
	// Answers, when set, counts the bucket's answers so far (each
	// response that arrived: objstore.WithOnAnswer). A listing, resolve or
	// pull the bucket has answered nothing of in ReadTimeout is then given
	// up as unreachable (a bucket that stopped answering after Open),
	// while one it answers runs to ListTimeout (waitOnBucket); and the
	// reads that follow, until it answers again, go to the replica
	// without waiting. nil: each waits ListTimeout.
	Answers func() int64
	// CloseTimeout bounds how long Close waits for the shipper (default 5s).
	CloseTimeout time.Duration
	// ShipConcurrency is how many sessions the shipper sends at once
	// (default 4: a chat's few, beside its requests to the provider); a
	// command that writes many, such as panto rm and prune, whose
	// deletions are 7 round trips each, asks for more.
	ShipConcurrency int
	// MaxBackoff bounds the wait between two attempts to reach a bucket
	// that does not answer (default 30s).
	MaxBackoff time.Duration
	// WriteRefused, when set, says whether the open bucket refuses this
	// machine's writes (credentials that may only read): such a write is
	// refused at once, before anything is written, instead of kept here
	// for a bucket that will never take it. nil: the bucket is not open,
	// or takes writes.
	WriteRefused func() error
	// Notify, when set, is told in one line what the user should know:
	// the bucket is unreachable, a session was kept twice, a session
	// could not be sent.
	Notify func(string)
}

func (o *Options) defaults() {
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 2 * time.Second
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 30 * time.Second
	}
	if o.ShipConcurrency <= 0 {
		o.ShipConcurrency = 4
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Notify == nil {
		o.Notify = func(string) {}
	}
	if o.Unreachable == nil {
		o.Unreachable = func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
	}
}

// Store is the local-first store. It is safe for concurrent use.
type Store struct {
	opts    Options
	local   *fsjsonl.Store
	conn    *connector
	ship    *shipper
	shipped *shippedFile

	// appendMu: appends hold it shared; a conflict's resolution holds it
	// alone while it swaps the replica's log (conflict.go).
	appendMu sync.RWMutex

	mu sync.Mutex
	// redirect sends this process's appends to a session that was kept
	// twice to the copy that holds this machine's log.
	redirect map[string]string
	// toldOffline: the unreachable notice was given.
	toldOffline bool
	// offlineAt is when a read (or Open) last found the bucket not
	// answering: while the bucket is not open, or is and has answered
	// nothing since (Options.Answers), the reads of the next offlineFor go
	// straight to the replica, so that one command pays the wait once.
	offlineAt time.Time
	// answersAtOffline is Options.Answers at offlineAt.
	answersAtOffline int64
	// view is the bucket's listing as the last read of it found it.
	view bucketView
}

// bucketView is the checkpoint of each session the bucket listed, and
// when: a read of session id in the viewFor after a listing takes the
// bucket's checkpoint from it instead of asking again (pull.go), so that
// panto -c costs the listing alone, which the bucket's Open reads anyway
// (objstore.WithOpenSnapshot). Each read it answers keeps it standing
// for another viewFor: a command reading the sessions it listed one
// after another (panto search and usage, for many seconds) reads each
// as listed, in one read of its bytes, not by asking the bucket for its
// end first (a read of the whole session when no manifest is stored)
// and reading it again.
type bucketView struct {
	at   time.Time // when it was listed or last answered a read
	logs map[string]store.Checkpoint
}

// viewFor is how long a listing of the bucket stands for what it holds
// after it was made or last answered a read: one command's reads (as
// objstore's open snapshot).
const viewFor = 2 * time.Second

// offlineFor is how long a read that found the bucket not answering
// spares the next ones the wait.
const offlineFor = 30 * time.Second

var (
	_ store.LogStore        = (*Store)(nil)
	_ store.Deleter         = (*Store)(nil)
	_ store.Closer          = (*Store)(nil)
	_ store.Flusher         = (*Store)(nil)
	_ store.Unwrapper       = (*Store)(nil)
	_ agent.SessionStore    = (*Store)(nil)
	_ agent.ProjectRecorder = (*Store)(nil)
)

// Open opens the replica and starts reaching the bucket in the
// background. It waits at most ReadTimeout for the bucket's first answer:
// an error that is not unreachable (rejected credentials, a missing
// bucket, a server without conditional writes, another key) fails Open
// before anything is written; a bucket that does not answer in time does
// not.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.defaults()
	if opts.OpenBucket == nil {
		return nil, errors.New("local-first store: no bucket to open")
	}
	local, err := fsjsonl.Open(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local-first store %s: replica: %w", opts.Name, err)
	}
	s := &Store{opts: opts, local: local, redirect: map[string]string{}, shipped: openShipped(opts.Dir)}
	s.conn = newConnector(opts)
	wait, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
	defer cancel()
	reached, err := s.conn.firstAnswer(wait)
	if err != nil {
		s.conn.stop()
		return nil, fmt.Errorf("store %s: %w", opts.Name, err)
	}
	if !reached {
		// Open waited its one short timeout (or was refused at once): the
		// reads that follow go straight to the replica rather than wait
		// again, and the first of them tells the user.
		s.offlineAt = time.Now()
	}
	s.ship = newShipper(s)
	return s, nil
}

// Unwrap returns the replica: what the helpers of package store find on
// this store is this machine's copy (it is a store.PrefixHasher).
func (s *Store) Unwrap() agent.SessionStore { return s.local }

// Replica returns the replica's store.
func (s *Store) Replica() *fsjsonl.Store { return s.local }

// Create mints a handle on a new session (no I/O).
func (s *Store) Create() *agent.Session {
	return &agent.Session{Info: agent.SessionInfo{ID: agent.NewSessionID()}, Store: s}
}

// AppendMessages appends msgs to the replica's session id (or to the copy
// that holds this machine's log, once the session was kept twice) and
// marks it to ship. It never waits for the bucket.
func (s *Store) AppendMessages(ctx context.Context, id string, msgs []agent.PersistentMessage) error {
	return s.AppendMessagesIn(ctx, agent.Project{}, id, msgs)
}

// AppendMessagesIn is AppendMessages whose first append records project
// in the session's header (agent.ProjectRecorder), as the replica does.
func (s *Store) AppendMessagesIn(ctx context.Context, project agent.Project, id string, msgs []agent.PersistentMessage) error {
	if err := s.refuseWrite(); err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	s.appendMu.RLock()
	defer s.appendMu.RUnlock()
	id = s.target(id)
	if err := s.local.AppendMessagesIn(ctx, project, id, msgs); err != nil {
		return err
	}
	s.ship.mark(id)
	return nil
}

// refuseWrite is the bucket's refusal of every write (Options.WriteRefused)
// when it is open and takes none.
func (s *Store) refuseWrite() error {
	if s.opts.WriteRefused == nil {
		return nil
	}
	return s.opts.WriteRefused()
}

// AppendLog appends raw lines to the replica (store.LogStore.AppendLog)
// and marks the session to ship.
func (s *Store) AppendLog(ctx context.Context, id string, at store.Checkpoint, data []byte) (store.Checkpoint, error) {
	if err := s.refuseWrite(); err != nil {
		return store.Checkpoint{}, fmt.Errorf("append to session %s: %w", id, err)
	}
	s.appendMu.RLock()
	defer s.appendMu.RUnlock()
	cp, err := s.local.AppendLog(ctx, id, at, data)
	if err == nil {
		s.ship.mark(id)
	}
	return cp, err
}

// Holder returns the session that holds what this process appends to
// session id: id, or the copy that holds this machine's log once id was
// kept twice (conflict.go), which is the one to resume.
func (s *Store) Holder(id string) string { return s.target(id) }

// target is where this process appends what it appends to session id.
func (s *Store) target(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if to, ok := s.redirect[id]; ok {
		return to
	}
	return id
}

// List lists the bucket's sessions and the replica's, merged (the longer
// copy of a session wins: the replica may hold appends not yet shipped,
// the bucket another machine's). Offline it lists the replica.
//
// A session the replica deleted is not listed from the bucket either: the
// bucket lists it until the shipper sends the deletion (or keeps a copy
// written elsewhere after it as a new session), and `panto rm` offline,
// then `panto -c` once the bucket answered again, listed the deleted
// session and failed on it, the prompt unsaved. The replica's tombstones
// are read by name (fsjsonl's Tombstoned: one directory read).
func (s *Store) List(ctx context.Context) ([]agent.SessionInfo, error) {
	local, remote, online, err := listBoth(ctx, s, s.local.List, func(ctx context.Context, b store.LogStore) ([]agent.SessionInfo, error) {
		// The bucket's logs rather than its sessions: the same reading of
		// its index, and the checkpoints the reads that follow use.
		logs, err := s.bucketLogs(ctx, b)
		infos := make([]agent.SessionInfo, len(logs))
		for i, l := range logs {
			infos[i] = l.Info
		}
		return infos, err
	})
	if !online {
		return local, err
	}
	remote = without(remote, s.local.Tombstoned(), infoID) // deleted here: on its way
	if err == nil {
		local = without(local, s.deletedElsewhere(ctx, unlisted(local, remote, infoID)), infoID)
	}
	return merge(local, remote), err
}

// listBoth lists the replica (local) and, online, the bucket (remote,
// bounded by waitOnBucket: the bucket answered Open). online is false when only the replica was
// listed: the bucket is not open, or did not answer (the user is told
// once). A listing that is only incomplete (agent.ErrIncompleteList) is
// kept and its error joined to err; any other failure is err alone.
func listBoth[T any](ctx context.Context, s *Store, local func(context.Context) ([]T, error), remote func(context.Context, store.LogStore) ([]T, error)) (mine, theirs []T, online bool, err error) {
	mine, err = local(ctx)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return nil, nil, false, err
	}
	partial := err
	b := s.online(ctx)
	if b == nil {
		return mine, nil, false, partial
	}
	rctx, cancel := s.waitOnBucket(ctx)
	defer cancel()
	theirs, err = remote(rctx, b)
	if s.gaveUp(rctx, err) {
		s.tellOffline(ctx)
		return mine, nil, false, partial
	}
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return nil, nil, false, fmt.Errorf("list %s: %w", s.opts.Name, err)
	}
	return mine, theirs, true, errors.Join(partial, err)
}

// bucketLogs lists the bucket's logs and keeps their checkpoints as the
// view of the next viewFor.
func (s *Store) bucketLogs(ctx context.Context, b store.LogStore) ([]store.Log, error) {
	at := time.Now()
	logs, err := b.Logs(ctx)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return logs, err
	}
	v := bucketView{at: at, logs: make(map[string]store.Checkpoint, len(logs))}
	for _, l := range logs {
		if l.Err == nil {
			v.logs[l.Info.ID] = l.Checkpoint
		}
	}
	s.mu.Lock()
	s.view = v
	s.mu.Unlock()
	return logs, err
}

// listed is the bucket's checkpoint of session id as the view found it,
// while the view stands (bucketView), which this read keeps standing;
// false when there is none, or it did not list the session (its index
// may not know a session yet: ask it).
func (s *Store) listed(id string) (store.Checkpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.view.logs == nil || time.Since(s.view.at) > viewFor {
		return store.Checkpoint{}, false
	}
	cp, ok := s.view.logs[id]
	if ok {
		s.view.at = time.Now()
	}
	return cp, ok
}

// merge merges two listings, newest first; of a session in both, the
// copy with more messages (then the later one) wins.
func merge(a, b []agent.SessionInfo) []agent.SessionInfo {
	byID := make(map[string]agent.SessionInfo, len(a)+len(b))
	for _, l := range [][]agent.SessionInfo{a, b} {
		for _, info := range l {
			have, ok := byID[info.ID]
			if !ok || info.MessageCount > have.MessageCount || (info.MessageCount == have.MessageCount && info.Modified.After(have.Modified)) {
				byID[info.ID] = info
			}
		}
	}
	out := make([]agent.SessionInfo, 0, len(byID))
	for _, info := range byID {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Modified.Equal(out[j].Modified) {
			return out[i].Modified.After(out[j].Modified)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Latest returns the most recently modified session of the merged
// listing (ListNewest), its replica brought up to date.
func (s *Store) Latest(ctx context.Context) (*agent.Session, error) {
	list, err := s.ListNewest(ctx, 1, nil)
	if len(list) == 0 {
		if err != nil {
			return nil, err
		}
		return nil, agent.NotFoundError("")
	}
	return s.handle(ctx, list[0].ID, &list[0])
}

// Resolve finds idOrPrefix in the bucket and the replica; a prefix that
// names different sessions in the two is ambiguous.
func (s *Store) Resolve(ctx context.Context, idOrPrefix string) (*agent.Session, error) {
	local, lerr := s.local.Resolve(ctx, idOrPrefix)
	var gone *agent.DeletedError
	if lerr != nil && (!errors.Is(lerr, agent.ErrSessionNotFound) || errors.As(lerr, &gone)) {
		return nil, lerr // deleted here, or a catalog that cannot be read
	}
	var remote *agent.Session
	consulted := false
	if b := s.online(ctx); b != nil {
		// The bucket answered Open: a resolve that reads a partition,
		// then the session's own objects, is bounded as a listing is.
		rctx, cancel := s.waitOnBucket(ctx)
		defer cancel()
		r, err := s.bucketResolve(rctx, b, idOrPrefix)
		noAnswer := s.gaveUp(rctx, err)
		consulted = !noAnswer
		switch {
		case noAnswer:
			s.tellOffline(ctx)
		case errors.As(err, &gone):
			if local != nil && local.Info.ID == gone.ID {
				// Another machine deleted it: the deletion comes here
				// too, unless this copy was written to since.
				if mine, herr := head(ctx, s.local, gone.ID); herr == nil {
					_ = s.carryDeletion(ctx, gone.ID, gone, mine)
				}
			}
			return nil, err
		case err != nil && !errors.Is(err, agent.ErrSessionNotFound):
			return nil, err // a bucket that answers wrongly
		default:
			remote = r
		}
	}
	switch {
	case local == nil && remote == nil && !consulted:
		return nil, fmt.Errorf("%w (the bucket did not answer: only this machine's copy of %s was searched)", lerr, s.opts.Name)
	case local == nil && remote == nil:
		return nil, lerr
	case local != nil && remote != nil && local.Info.ID != remote.Info.ID:
		return nil, agent.AmbiguousError(idOrPrefix, []string{local.Info.ID, remote.Info.ID})
	case local != nil:
		return s.handle(ctx, local.Info.ID, nil)
	}
	return s.handle(ctx, remote.Info.ID, &remote.Info)
}

// logResolver is a bucket that resolves a session with the checkpoint
// its index holds of it (objstore), as a listing gives it.
type logResolver interface {
	ResolveLog(ctx context.Context, idOrPrefix string) (store.Log, error)
}

// bucketResolve resolves idOrPrefix in bucket b. When b says the
// session's checkpoint too, it joins the view (as a listing's do), so
// that bringing the session over, now and for the command's next read,
// asks the bucket nothing before the read of its bytes: `panto -r
// PREFIX` and `panto show PREFIX` cost the resolve and that read.
func (s *Store) bucketResolve(ctx context.Context, b store.LogStore, idOrPrefix string) (*agent.Session, error) {
	lr, ok := b.(logResolver)
	if !ok {
		return b.Resolve(ctx, idOrPrefix)
	}
	at := time.Now()
	l, err := lr.ResolveLog(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.view.logs == nil || time.Since(s.view.at) > viewFor {
		s.view = bucketView{at: at, logs: map[string]store.Checkpoint{}}
	}
	s.view.logs[l.Info.ID] = l.Checkpoint
	s.mu.Unlock()
	return &agent.Session{Info: l.Info, Store: b}, nil
}

// handle brings the replica's copy of session id up to date and returns
// a handle on it.
// listed is how the bucket listed it (nil: it did not), which the handle
// keeps when the replica could not get a copy of it.
func (s *Store) handle(ctx context.Context, id string, listed *agent.SessionInfo) (*agent.Session, error) {
	s.refresh(ctx, id)
	info, err := s.localInfo(ctx, id)
	if errors.Is(err, agent.ErrSessionNotFound) {
		// The refresh may have carried a deletion the bucket's listing
		// did not show yet.
		if t, terr := s.tombstone(ctx, id); terr == nil && t != nil {
			return nil, &agent.DeletedError{ID: id, Deleted: t.Deleted, Length: t.At.Length, SHA256: t.At.SHA256}
		}
		if listed != nil {
			// Listed, and no log to copy (a deletion cut short): what
			// is done to it goes through the replica to the bucket.
			return &agent.Session{Info: *listed, Store: s}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return &agent.Session{Info: info, Store: s}, nil
}

// localInfo is the replica's summary of session id.
func (s *Store) localInfo(ctx context.Context, id string) (agent.SessionInfo, error) {
	sess, err := s.local.Resolve(ctx, id)
	if err != nil {
		return agent.SessionInfo{}, err
	}
	return sess.Info, nil
}

// Load brings the replica's copy of session id up to date, then loads it.
func (s *Store) Load(ctx context.Context, id string) (*agent.Conversation, error) {
	s.refresh(ctx, id)
	return s.local.Load(ctx, id)
}

// Logs lists the replica's sessions and, online, those only the bucket
// holds (which ReadLog brings into the replica). Of a session both hold,
// the bucket's entry when its log is the longer (another machine went
// on with it: ReadLog brings that over, and the entry says when it was
// modified, its messages and title as they are there), else the
// replica's. With the replica's, panto usage --since 30d left out a
// session another machine continued today from one this machine last
// read months ago, and search matched its title of then.
func (s *Store) Logs(ctx context.Context) ([]store.Log, error) {
	local, remote, online, err := listBoth(ctx, s, s.local.Logs, s.bucketLogs)
	if !online {
		return local, err
	}
	remote = without(remote, s.local.Tombstoned(), logID) // deleted here (List)
	if err == nil {
		local = without(local, s.deletedElsewhere(ctx, unlisted(local, remote, logID)), logID)
	}
	at := make(map[string]int, len(local))
	for i, l := range local {
		at[l.Info.ID] = i
	}
	for _, l := range remote {
		i, ok := at[l.Info.ID]
		switch {
		case !ok:
			local = append(local, l)
		case l.Err == nil && l.Length > local[i].Length:
			local[i] = l
		}
	}
	return local, err
}

// ReadLog brings the replica's copy of session id up to date, then reads
// it.
func (s *Store) ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, store.Checkpoint, error) {
	s.refresh(ctx, id)
	return s.local.ReadLog(ctx, id, from)
}

// Delete deletes session t.ID in the replica, leaving tombstone t, and
// marks the deletion to ship (sync's rules then carry it to the bucket).
func (s *Store) Delete(ctx context.Context, t store.Tombstone) error {
	if err := s.refuseWrite(); err != nil {
		return fmt.Errorf("delete session %s: %w", t.ID, err)
	}
	s.appendMu.RLock()
	defer s.appendMu.RUnlock()
	if err := s.local.Delete(ctx, t); err != nil {
		return err
	}
	s.ship.mark(t.ID)
	return nil
}

// Tombstones lists the replica's tombstones.
func (s *Store) Tombstones(ctx context.Context) ([]store.Tombstone, error) {
	return s.local.Tombstones(ctx)
}

// Flush makes the replica's summaries durable and gives the shipper a
// nudge; it does not wait for the bucket (Close does, a bounded time).
func (s *Store) Flush(ctx context.Context) error {
	s.ship.kick()
	return s.local.Flush(ctx)
}

// Close waits at most CloseTimeout (or ctx) for the shipper to send what
// is marked, closes the bucket's store as far as it answers, and reports
// in one line what is still to send: the catch-up of the next
// local-first store that reaches the bucket sends it.
func (s *Store) Close(ctx context.Context) error {
	wait, cancel := context.WithTimeout(ctx, s.opts.CloseTimeout)
	defer cancel()
	s.ship.drain(wait)
	s.ship.stop()
	var errs []error
	if b := s.conn.current(); b != nil {
		done := make(chan error, 1)
		go func() { done <- store.Close(wait, b) }()
		select {
		case err := <-done:
			if err != nil && !s.unreachable(err) {
				errs = append(errs, fmt.Errorf("close %s: %w", s.opts.Name, err))
			}
		case <-wait.Done():
		}
	}
	s.conn.stop()
	s.shipped.save()
	if err := s.local.Flush(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, err)
	}
	if n, err := s.pending(context.WithoutCancel(ctx)); err == nil && n.messages+n.deletions > 0 {
		errs = append(errs, fmt.Errorf("%s not yet sent to %s: kept on this machine (%s); the next panto run that reaches the bucket sends them", n, s.opts.Name, s.opts.Dir))
	}
	return errors.Join(errs...)
}

// online returns the bucket's store when it is open, waiting for a
// connection under way at most ReadTimeout; nil (and the unreachable
// notice, once) when it is not there.
func (s *Store) online(ctx context.Context) store.LogStore {
	if b := s.conn.current(); b != nil {
		if s.silent() {
			s.tellOffline(ctx)
			return nil
		}
		return b // open: each read bounds its own wait
	}
	s.mu.Lock()
	recent := !s.offlineAt.IsZero() && time.Since(s.offlineAt) < offlineFor
	s.mu.Unlock()
	if recent {
		s.tellOffline(ctx)
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
	defer cancel()
	b := s.conn.wait(wait)
	if b == nil {
		s.tellOffline(ctx)
	}
	return b
}

// Offline reports whether a read of the last offlineFor (or Open) found
// the bucket not answering, and it is still not open: the reads went to
// the replica alone, and a session it lacks may be in the bucket. A
// command that found none says so, rather than that the store holds
// none.
func (s *Store) Offline() bool {
	if s.conn.current() != nil {
		return s.silent()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.offlineAt.IsZero() && time.Since(s.offlineAt) < offlineFor
}

// unreachable reports whether err means the bucket gave no answer.
func (s *Store) unreachable(err error) bool {
	return err != nil && (s.opts.Unreachable(err) || errors.Is(err, context.DeadlineExceeded))
}

// errBucketSilent: the bucket answered nothing of a wait on it in
// ReadTimeout (waitOnBucket).
var errBucketSilent = errors.New("the bucket answered nothing")

// waitOnBucket bounds a wait on the open bucket (a listing, a resolve, a
// pull): ListTimeout in all, so that a slow bucket is not taken for a
// silent one; and, when the bucket's answers are counted
// (Options.Answers), ReadTimeout for its first answer. A bucket that has
// answered nothing since the wait began, in the time Open waits for its
// first answer, stopped answering (it accepts connections and says
// nothing, or the link went dead): the wait ends, errBucketSilent its
// context's cause, where it held a /sessions in a chat, or panto
// sessions, for ListTimeout and a stall before it listed the replica.
// Once it answered it is there: a listing that reads many index
// partitions over a slow link runs to ListTimeout, and a connection that
// stalls after fails by the bucket store's idle timeout.
func (s *Store) waitOnBucket(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, s.opts.ListTimeout)
	if s.opts.Answers == nil {
		return ctx, cancelTimeout
	}
	ctx, cancel := context.WithCancelCause(ctx)
	before := s.opts.Answers()
	watchdog := time.AfterFunc(s.opts.ReadTimeout, func() {
		if s.opts.Answers() == before {
			cancel(errBucketSilent)
		}
	})
	return ctx, func() {
		watchdog.Stop()
		cancel(nil)
		cancelTimeout()
	}
}

// gaveUp reports whether err, of a wait on the bucket under ctx
// (waitOnBucket), means the bucket gave no answer.
func (s *Store) gaveUp(ctx context.Context, err error) bool {
	return s.unreachable(err) || (err != nil && errors.Is(context.Cause(ctx), errBucketSilent))
}

// silent reports whether a read of the last offlineFor found the open
// bucket not answering and it has answered nothing since: the reads go
// to the replica without waiting on it again.
func (s *Store) silent() bool {
	if s.opts.Answers == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.offlineAt.IsZero() && time.Since(s.offlineAt) < offlineFor && s.opts.Answers() == s.answersAtOffline
}

// tellOffline records that a read found the bucket not answering, and
// gives the unreachable notice, once per Store.
func (s *Store) tellOffline(ctx context.Context) {
	s.mu.Lock()
	told := s.toldOffline
	s.toldOffline = true
	s.offlineAt = time.Now()
	if s.opts.Answers != nil {
		s.answersAtOffline = s.opts.Answers()
	}
	s.mu.Unlock()
	if told {
		return
	}
	msg := "bucket unreachable: working from this machine's copy"
	if n, err := s.pending(ctx); err == nil && n.messages+n.deletions > 0 {
		msg += fmt.Sprintf("; %s will be sent when it is back", n)
	}
	s.opts.Notify(msg)
}
