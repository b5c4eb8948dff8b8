// Package store is the vocabulary of session stores beyond
// agent.SessionStore: what sync (package replica) and the commands need
// of a store to copy its sessions byte for byte, and the helpers that
// ask for it. It also parses the store specs users write (spec.go);
// store/backends opens them.
//
// A session's log is the same bytes in every store (internal/sessionlog),
// so two stores compare sessions by checkpoints (a length and the sha256
// of that prefix) and copy them as raw bytes. The vocabulary is shaped
// like io/fs: a small required interface, LogStore, and optional ones a
// store implements when it can do better than the fallback, each with a
// helper. Only the helpers type-assert, so callers never do:
//
//	LogStore       raw logs: list, read, append             (AsLogStore)
//	Checkpointer   prefix hashes the store knows cheaply    (PrefixCheckpoint, Head, Checkpoints)
//	ListedReader   a read up to what the listing vouched for (ReadListed; else ReadLog)
//	PrefixHasher   the hash of any prefix, at a read's cost (PrefixCheckpoint)
//	Verifier       a deep check of one session              (Verify)
//	Compacter      fewer objects for one session            (Compact)
//	Flusher        background writes made durable/visible   (Flush)
//	Closer         the last flush, before the process exits (Close; else Flush)
//	Deleter        deletions that sync carries (tombstones) (CanDelete, Delete, Tombstones)
//	IndexRepairer  a listing checked against the data       (CheckIndex, RepairIndex)
//	ChangeTokener  "did anything change?" in one request    (ChangeToken)
//	ListingTokener the state a listing will show, unlisted  (ListingToken)
//	NewestLister   the newest sessions, without listing all (ListNewest, ListNewestIn; not through Unwrap)
//	Unwrapper      a store that wraps another               (every helper but the ListNewests looks through it)
//
// A store that wraps another (a cache, a local-first copy) says so with
// Unwrap, as errors.Unwrap and restic's AsBackend do: each helper looks
// for its interface on the store, then on what it wraps, and so on down.
// A wrapper that changes what an optional call means implements it
// itself.
//
// A helper with no fallback says so with an error wrapping
// errors.ErrUnsupported.
//
// store/fsjsonl and store/objstore implement LogStore; store/storetest's
// RunLogStore is the conformance suite of this vocabulary. docs/DESIGN.md
// ("Sync") says how replica uses it.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Checkpoint names a prefix of a session's log: its length in bytes and
// the hex sha256 of those bytes. The zero Checkpoint is the empty log.
type Checkpoint struct {
	Length int64
	SHA256 string
}

func (c Checkpoint) String() string {
	if c.Length == 0 {
		return "empty"
	}
	return fmt.Sprintf("%d bytes (sha256 %.12s)", c.Length, c.SHA256)
}

// Log is what a LogStore lists of one session: its summary and the
// checkpoint of its committed bytes.
type Log struct {
	Info agent.SessionInfo
	Checkpoint
	// Err is set when the session is there but cannot be read as a log
	// (a malformed line, a header of another session); Info and
	// Checkpoint hold what could be read. Sync reports it and leaves the
	// session alone.
	Err error
}

// LogStore is a session store whose logs can be listed, read and
// appended as raw bytes: what sync needs of each side.
type LogStore interface {
	agent.SessionStore
	// Logs lists every session with committed bytes, in a number of
	// requests that does not grow with the number of sessions. A store
	// that lists from a summary written after the data (objstore's index)
	// may show a session behind what it holds, never ahead of it. When
	// part of that summary cannot be read, Logs returns what it could list
	// with an error wrapping agent.ErrIncompleteList.
	Logs(ctx context.Context) ([]Log, error)
	// ReadLog returns the committed bytes of session id from offset from
	// to the end of the log as it was committed when ReadLog was called,
	// and the checkpoint at that end. Every byte the reader returns has
	// been checked against the store's own hashes. The caller closes the
	// reader. A session with no committed bytes is agent.ErrSessionNotFound.
	ReadLog(ctx context.Context, id string, from int64) (io.ReadCloser, Checkpoint, error)
	// AppendLog appends data, whole committed lines of the line format
	// (beginning with the header line when at is the empty log), if and
	// only if the log holds exactly at; it returns the checkpoint after
	// data. Otherwise it fails with a *ChangedError (errors.Is ErrChanged)
	// saying what the log holds, and writes nothing: also when the log
	// holds data after at already (an earlier run's append), so that the
	// caller learns it wrote nothing. A write whose answer was lost within
	// the call (a retried request) is its own, and succeeds. data is not
	// retained after the call.
	AppendLog(ctx context.Context, id string, at Checkpoint, data []byte) (Checkpoint, error)
}

// ErrChanged: a session's log is not at the checkpoint a conditional
// append expected (another writer appended, or the copies diverged).
var ErrChanged = errors.New("session log changed")

// ChangedError is the error of an AppendLog whose log was not at the
// expected checkpoint.
type ChangedError struct {
	ID string
	// Want is the checkpoint the append expected, Have what the log holds.
	Want, Have Checkpoint
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("session %s: %v: it holds %v, expected %v", e.ID, ErrChanged, e.Have, e.Want)
}

// Is makes errors.Is(err, ErrChanged) true.
func (e *ChangedError) Is(target error) bool { return target == ErrChanged }

// Unwrapper is a store that wraps another (a cache in front of a bucket,
// a local-first copy): the helpers of this package look through it for
// the optional interfaces the wrapper does not implement itself.
type Unwrapper interface {
	// Unwrap returns the store this one wraps.
	Unwrap() agent.SessionStore
}

// as returns the first store in the chain s, s.Unwrap(), ... that
// implements T: the one place that type-asserts a store's abilities.
func as[T any](s agent.SessionStore) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(Unwrapper)
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var none T
	return none, false
}

// AsLogStore returns s, or the store it wraps, as a LogStore: what the
// callers that read and copy sessions as raw bytes need. A store that
// keeps nothing (null) is not one.
func AsLogStore(s agent.SessionStore) (LogStore, bool) {
	return as[LogStore](s)
}

// Checkpointer is a LogStore that knows the prefix hashes of a log at some
// lengths without reading it (objstore: at every segment boundary).
type Checkpointer interface {
	// Checkpoints returns the checkpoints of session id's log it knows,
	// ascending by length, the last one at its committed end.
	Checkpoints(ctx context.Context, id string) ([]Checkpoint, error)
}

// PrefixHasher is a LogStore that can hash any prefix of a log, at the
// cost of reading it (fsjsonl).
type PrefixHasher interface {
	// PrefixSHA256 returns the hex sha256 of the first n committed bytes
	// of session id's log.
	PrefixSHA256(ctx context.Context, id string, n int64) (string, error)
}

// PrefixCheckpoint returns the longest prefix of session id's log, at most
// n bytes long, whose sha256 s can tell without reading more of the log
// than the prefix itself: n itself from a PrefixHasher, else the longest
// of a Checkpointer's checkpoints up to n, else the empty log.
func PrefixCheckpoint(ctx context.Context, s LogStore, id string, n int64) (Checkpoint, error) {
	if n <= 0 {
		return Checkpoint{}, nil
	}
	if h, ok := as[PrefixHasher](s); ok {
		sum, err := h.PrefixSHA256(ctx, id, n)
		if err != nil {
			return Checkpoint{}, err
		}
		return Checkpoint{Length: n, SHA256: sum}, nil
	}
	c, ok := as[Checkpointer](s)
	if !ok {
		return Checkpoint{}, nil
	}
	cps, err := c.Checkpoints(ctx, id)
	if err != nil {
		return Checkpoint{}, err
	}
	var best Checkpoint
	for _, cp := range cps {
		if cp.Length <= n && cp.Length > best.Length {
			best = cp
		}
	}
	return best, nil
}

// Flusher is a store that finishes some writes in the background (the
// object store's manifest and index checkpoints).
type Flusher interface {
	// Flush waits for the background writes and reports those that
	// failed. Appends are durable without it; it makes them visible to
	// the listings of other processes.
	Flush(ctx context.Context) error
}

// Flush flushes s if it is a Flusher. A process that is done with s
// calls Close instead.
func Flush(ctx context.Context, s agent.SessionStore) error {
	if f, ok := as[Flusher](s); ok {
		return f.Flush(ctx)
	}
	return nil
}

// Closer is a store that has work to finish before the process exits.
type Closer interface {
	// Close flushes what is in the background (Flusher) and reports what
	// it could not. The store is not used after it.
	Close(ctx context.Context) error
}

// Close closes s: with its Close when it has one, else by flushing it.
// Every process that opened a store closes it, so that what it wrote in
// the background reaches the listings of the others.
func Close(ctx context.Context, s agent.SessionStore) error {
	if c, ok := as[Closer](s); ok {
		return c.Close(ctx)
	}
	return Flush(ctx, s)
}

// ListedReader is a LogStore whose listing vouches for where each
// session's bytes are (objstore: the index entry names the segments up
// to its end), so that it can read a session up to the checkpoint Logs
// gave without first finding where the log ends now.
type ListedReader interface {
	// ReadListed is ReadLog up to listed, a checkpoint this store's
	// last Logs gave for session id: it returns a reader of the
	// committed bytes from offset from up to the end of listed, and
	// listed; or, when it cannot read as listed, what ReadLog returns.
	ReadListed(ctx context.Context, id string, from int64, listed Checkpoint) (io.ReadCloser, Checkpoint, error)
}

// ReadListed reads session id of s from offset from, for a copy planned
// from s's listing, which gave it listed: up to listed when s is a
// ListedReader (a bulk copy then mirrors the listing, and a session
// appended since comes as listed, a prefix the next copy completes),
// else to the end of the log as it is now (ReadLog). Either way the
// returned checkpoint is the end of what the reader returns.
//
// Unlike the other helpers it does not look through a wrapper: a
// wrapper's ReadLog serves the wrapper's own copy, and its listing is
// its own, so only a store that is itself a ListedReader reads as
// listed.
func ReadListed(ctx context.Context, s LogStore, id string, from int64, listed Checkpoint) (io.ReadCloser, Checkpoint, error) {
	if r, ok := s.(ListedReader); ok {
		return r.ReadListed(ctx, id, from, listed)
	}
	return s.ReadLog(ctx, id, from)
}

// Verifier is a store with a deeper check of a session than reading it
// back (objstore: every segment against its manifest and index entry).
type Verifier interface {
	Verify(ctx context.Context, id string) error
}

// Verify checks session id of s: with the store's own Verify when it has
// one, else by reading the whole log back and decoding every line. The
// error names the object or file:line at fault.
func Verify(ctx context.Context, s LogStore, id string) error {
	if v, ok := as[Verifier](s); ok {
		return v.Verify(ctx, id)
	}
	r, end, err := s.ReadLog(ctx, id, 0)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = sessionlog.Check(id, id, r, end.Length, end.SHA256)
	return err
}

// Tombstone is what remains of a deleted session: when it was deleted and
// the checkpoint of its log then. It holds no content (a length and a
// hash), and it is what sync carries so that a deletion reaches every
// copy and nothing brings the session back.
type Tombstone struct {
	ID      string
	Deleted time.Time
	At      Checkpoint
}

// Covers reports whether t covers a copy of its session at cp: the bytes
// that were deleted, or a copy behind them (shorter). A copy longer than
// what was deleted, or as long with other bytes, was written to after the
// deletion: deleting it would lose what was added.
func (t Tombstone) Covers(cp Checkpoint) bool {
	return cp.Length < t.At.Length || cp == t.At
}

// CoversHeld is Covers for a copy whose holder knows whether the side
// that deleted the session held all of it (held). That side's log only
// grew, so what it held is a prefix of what it deleted; a shorter copy
// with bytes it never held was written to after (or while) it was
// deleted, and is not covered, though Covers, which knows lengths alone,
// would take it for one behind the deletion.
func (t Tombstone) CoversHeld(cp Checkpoint, held bool) bool {
	return cp.Length == 0 || cp == t.At || (held && t.Covers(cp))
}

// TombstoneRetention is how long a store lists a tombstone. Sync carries a
// deletion to every copy it meets within that time; after it, a catalog
// forgets the tombstone, and a bucket keeps only a content-free marker
// object that refuses to let the id be written again (docs/DESIGN.md,
// "Deleting sessions").
const TombstoneRetention = 90 * 24 * time.Hour

// Deleter is a store that deletes sessions and keeps their tombstones.
type Deleter interface {
	// Delete removes the content of session t.ID and leaves tombstone t,
	// if t covers the log the store holds (t.Covers); otherwise it fails
	// with a *ChangedError saying what it holds, and touches nothing. A
	// store that does not hold the session records the tombstone alone
	// (so that no copy can come back later). Deleting a deleted session
	// changes nothing. The session's appends and reads fail with an
	// agent.DeletedError from then on.
	Delete(ctx context.Context, t Tombstone) error
	// Tombstones lists the tombstones younger than TombstoneRetention, in
	// a bounded number of requests.
	Tombstones(ctx context.Context) ([]Tombstone, error)
}

// CanDelete reports whether s deletes sessions (is, or wraps, a Deleter).
func CanDelete(s agent.SessionStore) bool {
	_, ok := as[Deleter](s)
	return ok
}

// Delete deletes session t.ID from s, leaving tombstone t (Deleter.Delete).
// A store that cannot delete fails with an error wrapping
// errors.ErrUnsupported.
func Delete(ctx context.Context, s agent.SessionStore, t Tombstone) error {
	d, ok := as[Deleter](s)
	if !ok {
		return fmt.Errorf("delete session %s: the store cannot delete sessions: %w", t.ID, errors.ErrUnsupported)
	}
	return d.Delete(ctx, t)
}

// ChangeTokener is a store that tells cheaply whether the sessions it
// lists may have changed: a token that differs from the last one whenever
// they may have (a change it reports may be none; none it misses). A
// process that polls an idle store (panto-sync watch) pulls only when the
// token moved.
type ChangeTokener interface {
	ChangeToken(ctx context.Context) (string, error)
}

// ChangeToken returns s's change token (ChangeTokener). A store with no
// cheap token returns "" and an error wrapping errors.ErrUnsupported: its
// caller must look at the whole listing.
func ChangeToken(ctx context.Context, s agent.SessionStore) (string, error) {
	ct, ok := as[ChangeTokener](s)
	if !ok {
		return "", fmt.Errorf("change token: %w", errors.ErrUnsupported)
	}
	return ct.ChangeToken(ctx)
}

// ListingTokener is a store that names, without listing, the state of
// the sessions its listings show: a token taken before a listing names
// that listing's state or an older one, and two equal tokens name one
// state. A sync that took both sides' tokens before a run that found
// nothing to do knows, when it finds the same two again, that it has
// nothing to do, and lists neither side (panto-sync push and pull: a
// listing of 100,000 sessions decodes caches of tens of megabytes).
type ListingTokener interface {
	ListingToken(ctx context.Context) (string, error)
}

// ListingToken returns s's listing token (ListingTokener); "" when s has
// none or cannot name its state now.
func ListingToken(ctx context.Context, s agent.SessionStore) (string, error) {
	lt, ok := as[ListingTokener](s)
	if !ok {
		return "", nil
	}
	return lt.ListingToken(ctx)
}

// NewestLister is a store that lists its newest sessions for less than
// its whole listing costs (objstore: the newest commit of its index log,
// and a project's head).
type NewestLister interface {
	// ListNewest returns up to limit sessions that keep accepts (nil:
	// all), newest first; limit <= 0: every one.
	ListNewest(ctx context.Context, limit int, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error)
	// ListNewestIn is ListNewest of the sessions of project p
	// (agent.Project.Holds; the zero Project: every project's).
	ListNewestIn(ctx context.Context, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error)
}

// ListNewestIn returns up to limit sessions of project p (agent.Project.Holds;
// the zero Project: of every project) that keep accepts (nil: all),
// newest first; limit <= 0: every one. A NewestLister that keeps
// projects apart reads only p's (objstore: its head); any other store
// lists as ListNewest does.
func ListNewestIn(ctx context.Context, s agent.SessionStore, limit int, p agent.Project, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	if nl, ok := s.(NewestLister); ok {
		return nl.ListNewestIn(ctx, limit, p, keep)
	}
	if p == (agent.Project{}) {
		return ListNewest(ctx, s, limit, keep)
	}
	return ListNewest(ctx, s, limit, func(info agent.SessionInfo) bool {
		return p.Holds(info.Project) && (keep == nil || keep(info))
	})
}

// ListNewest returns up to limit sessions of s that keep accepts (nil:
// all), newest first (NewestLister); limit <= 0: every one. A store
// without a cheaper way lists all and filters. As List, it may return
// sessions with an error wrapping agent.ErrIncompleteList.
func ListNewest(ctx context.Context, s agent.SessionStore, limit int, keep func(agent.SessionInfo) bool) ([]agent.SessionInfo, error) {
	if nl, ok := s.(NewestLister); ok {
		return nl.ListNewest(ctx, limit, keep)
	}
	// Not through Unwrap: a wrapper lists what it wraps and more (the
	// local-first store: its replica and the bucket), so its own List
	// is the listing.
	all, err := s.List(ctx)
	if all == nil {
		return nil, err
	}
	out := make([]agent.SessionInfo, 0, len(all))
	for _, info := range all {
		if keep == nil || keep(info) {
			out = append(out, info)
		}
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, err
}

// Tombstones lists the tombstones of s (Deleter.Tombstones); a store that
// cannot delete has none.
func Tombstones(ctx context.Context, s agent.SessionStore) ([]Tombstone, error) {
	d, ok := as[Deleter](s)
	if !ok {
		return nil, nil
	}
	return d.Tombstones(ctx)
}

// Head returns the checkpoint of session id's committed log: from a
// Checkpointer's list, which costs no read of the log, else from the
// checkpoint a ReadLog reports (its reader is closed unread).
func Head(ctx context.Context, s LogStore, id string) (Checkpoint, error) {
	if c, ok := as[Checkpointer](s); ok {
		cps, err := c.Checkpoints(ctx, id)
		if err != nil {
			return Checkpoint{}, err
		}
		if len(cps) == 0 {
			return Checkpoint{}, agent.NotFoundError(id)
		}
		return cps[len(cps)-1], nil
	}
	r, cp, err := s.ReadLog(ctx, id, 0)
	if err != nil {
		return Checkpoint{}, err
	}
	r.Close()
	return cp, nil
}

// Checkpoints returns the checkpoints of session id's log that s knows
// without reading it (Checkpointer), one per object of the log: a store
// that keeps a log in one file knows none, and fails with an error
// wrapping errors.ErrUnsupported.
func Checkpoints(ctx context.Context, s agent.SessionStore, id string) ([]Checkpoint, error) {
	c, ok := as[Checkpointer](s)
	if !ok {
		return nil, fmt.Errorf("checkpoints of session %s: the store knows none without reading the log: %w", id, errors.ErrUnsupported)
	}
	return c.Checkpoints(ctx, id)
}

// Compacter is a store that can rewrite a session's log as fewer objects
// without changing its bytes.
type Compacter interface {
	Compact(ctx context.Context, id string) error
}

// Compact compacts session id if s can; it reports whether it could.
func Compact(ctx context.Context, s agent.SessionStore, id string) (bool, error) {
	c, ok := as[Compacter](s)
	if !ok {
		return false, nil
	}
	return true, c.Compact(ctx, id)
}

// IndexRepairer is a store whose listing is a summary written after the
// data (objstore's index), which can be checked against the data and
// rebuilt from it. Both calls find the sessions by listing the store's
// objects, which no routine call does.
type IndexRepairer interface {
	// CheckIndex compares the listing with the sessions the store holds.
	CheckIndex(ctx context.Context) (IndexReport, error)
	// RepairIndex rebuilds what CheckIndex finds wrong, and reports what it
	// found. It is safe to run while others write.
	RepairIndex(ctx context.Context) (IndexReport, error)
}

// errNoIndex is the error of CheckIndex and RepairIndex on a store whose
// listing needs no repair (a directory's summary cache rebuilds itself).
var errNoIndex = fmt.Errorf("the store has no index to check: %w", errors.ErrUnsupported)

// CheckIndex compares the listing of s with the sessions it holds
// (IndexRepairer.CheckIndex). A store without such a listing fails with an
// error wrapping errors.ErrUnsupported.
func CheckIndex(ctx context.Context, s agent.SessionStore) (IndexReport, error) {
	r, ok := as[IndexRepairer](s)
	if !ok {
		return IndexReport{}, errNoIndex
	}
	return r.CheckIndex(ctx)
}

// RepairIndex rebuilds what CheckIndex finds wrong in the listing of s
// (IndexRepairer.RepairIndex). A store without such a listing fails with
// an error wrapping errors.ErrUnsupported.
func RepairIndex(ctx context.Context, s agent.SessionStore) (IndexReport, error) {
	r, ok := as[IndexRepairer](s)
	if !ok {
		return IndexReport{}, errNoIndex
	}
	return r.RepairIndex(ctx)
}

// IndexReport is what CheckIndex or RepairIndex found.
type IndexReport struct {
	// Sessions are the sessions the store holds (readable or not), sorted.
	Sessions []string
	// Unindexed are sessions the listing lacks; Stale those it shows at
	// another checkpoint than they hold; Orphans listed sessions that do
	// not exist; Damaged the parts of the listing that do not decode.
	Unindexed, Stale, Orphans, Damaged []string
	// Recent are sessions the listing's newest page (objstore's index log)
	// misses, or shows though deleted or absent.
	Recent []string
	// Heads are the projects' newest pages (objstore's project heads, by
	// name) that miss a session, or show one absent or further than it
	// is.
	Heads []string
	// Unreadable are sessions whose own objects could not be read (the
	// error says which object); they are neither indexed nor dropped.
	Unreadable map[string]error
	// Rebuilt are the parts of the listing RepairIndex wrote.
	Rebuilt []string
	// Removed are the objects of the listing RepairIndex deleted because
	// nothing reads them (objstore: run pages no commit names, which a
	// write that failed after them left, once a day old). They do not
	// make the listing unclean.
	Removed []string
	// Unnamed are the objects of the listing that nothing reads, as the
	// check found them (objstore: run pages no commit names, left by a
	// write or a deletion cut short after them; a day old, RepairIndex
	// and a day's first full reading delete them). They may hold the
	// summary of a session deleted since, and do not make the listing
	// unclean.
	Unnamed []string
}

// Clean reports whether the listing and the sessions agree.
func (r IndexReport) Clean() bool {
	return len(r.Unindexed)+len(r.Stale)+len(r.Orphans)+len(r.Damaged)+len(r.Recent)+len(r.Heads) == 0
}
