package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
)

func rmCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "delete sessions, leaving a tombstone that sync carries",
		UsageText: "panto rm [--yes] [--json] ID|PREFIX...",
		Description: `Deletes each session named by its id or a unique prefix of it: its content goes
(the file, or every object of it in a bucket), and a tombstone stays that holds
no content, only the id, when it was deleted and the length and sha256 of the
log then. panto-sync carries the tombstone, so the deletion reaches every copy
and no push or pull brings the session back.

On a terminal, rm shows what will go and asks once; elsewhere it needs --yes.
A session deleted already is reported, not an error. Several sessions are
deleted at once (sixteen), each printed as its deletion ends; --json lists
them in the order given. If one fails, the others under way finish, and the
error names the first failure.

Examples:
   panto rm 3f9a                   delete one session, after asking
   panto rm --yes 3f9a 71c0        delete two, without asking
   panto rm --store s3://my-bucket/panto --yes --json 3f9a`,
		Flags: append(storeFlags(false),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "delete without asking"},
			&cli.BoolFlag{Name: "json", Usage: "print what was deleted as JSON"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return errors.New("rm: name the sessions to delete: panto rm ID|PREFIX... (see panto sessions)")
			}
			st, err := openDeleter(c, "rm")
			if err != nil {
				return err
			}
			// The background writes of the deletions (objstore's index)
			// finish before panto exits, so that others stop listing them.
			defer closeStore(c.Context, st, e.stderr)
			report := newRemovalReport(c, e)
			targets, err := rmTargets(c, st, report)
			if err != nil {
				return err
			}
			return report.finish(removeSessions(c.Context, e, c, st, targets, report))
		},
	}
}

// rmTargets resolves rm's arguments to the sessions to delete, each once,
// several at once (a resolve is a round trip or two on a bucket). A
// session deleted already is deleted again, and reported. The first
// argument that names nothing fails the command, before anything live is
// deleted.
func rmTargets(c *cli.Context, st store.LogStore, report *removalReport) ([]agent.SessionInfo, error) {
	args := c.Args().Slice()
	found := make([]rmTarget, len(args))
	g := new(errgroup.Group)
	g.SetLimit(concurrentRemovals)
	for i, arg := range args {
		g.Go(func() error { found[i] = resolveTarget(c.Context, st, arg); return nil })
	}
	_ = g.Wait()
	var targets []agent.SessionInfo
	seen := map[string]bool{}
	for _, t := range found {
		switch {
		case t.err != nil:
			return nil, t.err
		case seen[t.info.ID]:
		case t.already != nil:
			seen[t.info.ID] = true
			report.expect(t.info.ID)
			report.add(*t.already)
		default:
			seen[t.info.ID] = true
			report.expect(t.info.ID)
			targets = append(targets, t.info)
		}
	}
	return targets, nil
}

// rmTarget is what one of rm's arguments resolved to: a live session, one
// deleted already (and deleted again), or an error.
type rmTarget struct {
	info    agent.SessionInfo
	already *removal
	err     error
}

// resolveTarget resolves arg; a session it names that was deleted already
// is deleted again, which finishes a removal cut short (a killed rm) and
// changes nothing otherwise.
func resolveTarget(ctx context.Context, st store.LogStore, arg string) rmTarget {
	s, err := st.Resolve(ctx, arg)
	var dead *agent.DeletedError
	switch {
	case errors.As(err, &dead):
		t := store.Tombstone{ID: dead.ID, Deleted: dead.Deleted, At: store.Checkpoint{Length: dead.Length, SHA256: dead.SHA256}}
		if err := store.Delete(ctx, st, t); err != nil {
			return rmTarget{err: fmt.Errorf("rm %s: %w", arg, err)}
		}
		return rmTarget{info: agent.SessionInfo{ID: dead.ID}, already: &removal{ID: dead.ID, Deleted: dead.Deleted, Length: dead.Length, SHA256: dead.SHA256, Already: true}}
	case err != nil:
		return rmTarget{err: fmt.Errorf("rm %s: %w", arg, err)}
	}
	return rmTarget{info: s.Info}
}

// openDeleter opens the store the flags name, if it can delete sessions
// (a store.LogStore that store.CanDelete).
func openDeleter(c *cli.Context, cmd string) (store.LogStore, error) {
	spec, opts, err := flaggedStore(c)
	if err != nil {
		return nil, err
	}
	// A deletion is asked for so that the bucket loses the session's
	// text: its Close waits longer than a chat's for the shipper to send
	// it (within closeStore's bound), and says so if it still could not.
	opts.CloseTimeout = deleteCloseTimeout
	// And sends them as many at once as it deletes them.
	opts.ShipConcurrency = concurrentRemovals
	st, err := backends.OpenSpec(c.Context, spec, opts)
	if err != nil {
		return nil, err
	}
	ls, ok := store.AsLogStore(st)
	switch {
	case spec.Kind == store.KindNone:
		return nil, fmt.Errorf("%s: --store none keeps no sessions, so there is nothing to delete; name the store that holds them", cmd)
	case !ok || !store.CanDelete(st):
		return nil, fmt.Errorf("%s: the %s store cannot delete sessions", cmd, spec.Kind)
	}
	return ls, nil
}

// deleteCloseTimeout is how long rm and prune wait at exit for a
// local-first store to send their deletions to the bucket.
const deleteCloseTimeout = 25 * time.Second

// removal is what rm and prune report of one session (--json).
type removal struct {
	ID      string    `json:"id"`
	Deleted time.Time `json:"deleted"`
	Length  int64     `json:"length"`
	SHA256  string    `json:"sha256,omitempty"`
	// Already: the session had been deleted before this run, on Deleted.
	Already         bool   `json:"already_deleted,omitempty"`
	Messages        int    `json:"messages,omitempty"`
	Title           string `json:"title,omitempty"`
	LastUserMessage string `json:"last_user_message,omitempty"`
}

// removeSessions asks once (unless --yes), then deletes targets in order,
// reporting each as it goes. It stops at the first error.
func removeSessions(ctx context.Context, e *env, c *cli.Context, d store.LogStore, targets []agent.SessionInfo, report *removalReport) error {
	if len(targets) == 0 {
		return nil
	}
	if err := confirmRemoval(e, c, targets); err != nil {
		return err
	}
	// A deletion is 7 round trips one after another (the commit
	// point, seg/0's tombstone, the sweep, the index's burial and purge:
	// docs/DESIGN.md, "Deleting sessions"), so a prune of hundreds of
	// sessions, one at a time, would take minutes on a real link. Several
	// go at once, as a sync's do (replica.Options.Concurrency); the
	// bucket Store's index writes of those under way share commits. Each
	// is reported as it ends, so a long prune shows its progress; a
	// failure stops those not started, and the others finish.
	for _, info := range targets {
		report.expect(info.ID)
	}
	var failed atomic.Bool
	var mu sync.Mutex
	errs := make([]error, len(targets))
	g := new(errgroup.Group)
	g.SetLimit(concurrentRemovals)
	for i, info := range targets {
		if failed.Load() {
			break
		}
		g.Go(func() error {
			r, err := removeSession(ctx, d, info, e.now())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = err
				failed.Store(true)
				return nil
			}
			report.add(r)
			return nil
		})
	}
	_ = g.Wait()
	return firstOf(errs)
}

// concurrentRemovals is how many deletions rm and prune run at once.
const concurrentRemovals = 16

// firstOf returns the first error of errs, saying how many more failed.
func firstOf(errs []error) error {
	var first error
	more := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		default:
			more++
		}
	}
	if more > 0 {
		return fmt.Errorf("%w (and %d more failed: run it again)", first, more)
	}
	return first
}

// removeSession deletes one session at the checkpoint it holds now.
func removeSession(ctx context.Context, d store.LogStore, info agent.SessionInfo, now time.Time) (removal, error) {
	id := info.ID
	at, err := store.Head(ctx, d, id)
	if err != nil && !errors.Is(err, agent.ErrSessionNotFound) {
		return removal{}, fmt.Errorf("rm %s: %w", shortID(id), err)
	}
	t := store.Tombstone{ID: id, Deleted: now.UTC().Truncate(time.Second), At: at}
	if err := store.Delete(ctx, d, t); err != nil {
		if errors.Is(err, store.ErrChanged) {
			return removal{}, fmt.Errorf("rm %s: the session was written to while it was being deleted (is a panto still running in it?); nothing was deleted, run rm again: %w", shortID(id), err)
		}
		return removal{}, fmt.Errorf("rm %s: %w", shortID(id), err)
	}
	return removal{ID: id, Deleted: t.Deleted, Length: at.Length, SHA256: at.SHA256, Messages: info.MessageCount, Title: info.Title, LastUserMessage: info.LastUserMessage}, nil
}

// confirmRemoval shows targets and asks once on a terminal; off a terminal
// it refuses without --yes, since nobody can answer.
func confirmRemoval(e *env, c *cli.Context, targets []agent.SessionInfo) error {
	if c.Bool("yes") {
		return nil
	}
	noun := "session"
	if len(targets) > 1 {
		noun = "sessions"
	}
	if !e.stdinIsTerminal {
		return fmt.Errorf("%s: %d %s to delete; stdin is not a terminal to confirm on, so add --yes", c.Command.Name, len(targets), noun)
	}
	writeAllSessions(e.stderr, targets, e.getenv("HOME"))
	fmt.Fprintf(e.stderr, "Delete %d %s? Their content goes for good; a tombstone stays. [y/N] ", len(targets), noun)
	if !answeredYes(e.stdin) {
		return fmt.Errorf("%s: nothing deleted", c.Command.Name)
	}
	return nil
}

// answeredYes reads one line and reports whether it says yes.
func answeredYes(r io.Reader) bool {
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// removalReport prints what rm and prune deleted: a line per session as
// it goes (a long prune shows its progress), or with --json one array at
// the end.
type removalReport struct {
	e     *env
	json  bool
	rs    []removal
	order map[string]int // by id: its place in rs once sorted (expect)
}

func newRemovalReport(c *cli.Context, e *env) *removalReport {
	return &removalReport{e: e, json: c.Bool("json"), rs: []removal{}, order: map[string]int{}}
}

func (p *removalReport) add(r removal) {
	p.rs = append(p.rs, r)
	switch {
	case p.json:
	case r.Already:
		fmt.Fprintf(p.e.stdout, "%s was deleted already, on %s\n", shortID(r.ID), r.Deleted.Local().Format("2006-01-02 15:04"))
	default:
		fmt.Fprintf(p.e.stdout, "deleted %s (%d messages) %s\n", shortID(r.ID), r.Messages, clip(headline(agent.SessionInfo{Title: r.Title, LastUserMessage: r.LastUserMessage}), 60))
	}
}

// expect gives session id its place in --json's array: the order rm's
// arguments named it, or prune listed it, whatever order the deletions
// that run at once end in.
func (p *removalReport) expect(id string) {
	if _, ok := p.order[id]; !ok {
		p.order[id] = len(p.order)
	}
}

// finish prints the JSON, then returns err, so that a failure part way
// still says what went.
func (p *removalReport) finish(err error) error {
	if p.json {
		slices.SortStableFunc(p.rs, func(a, b removal) int { return p.order[a.ID] - p.order[b.ID] })
		if jerr := writeJSON(p.e.stdout, p.rs); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}
