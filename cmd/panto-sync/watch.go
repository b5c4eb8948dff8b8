package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// defaultPoll is watch's idle poll of the bucket: one LIST request each
// (objstore.ChangeToken), so 2 requests a minute.
const defaultPoll = 30 * time.Second

// pushDelay gathers the file events of one append (a write, its fsync,
// the summary cache) into one push.
const pushDelay = 200 * time.Millisecond

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "keep a local catalog and a bucket mirrored both ways, until stopped",
		ArgsUsage: "s3://BUCKET[/PREFIX]",
		Description: `watch pushes every change of the local catalog (an append, a title, a new session, a
deletion) to the bucket within a second of it (the directory is watched with inotify,
kqueue or the platform's equivalent), and pulls the bucket's changes: it polls the
bucket with one LIST request every --poll (2 requests a minute by default, when nothing
changes), and copies only when the bucket's index changed. Deletions travel as push and
pull carry them. A session changed on both sides is kept twice (--on-diverge=keep-both,
always). While the bucket does not answer, watch says so once and retries with backoff;
the catalog's changes are pushed when it is back. SIGINT or SIGTERM stops it cleanly:
a copy under way finishes its appends. Without --dir, watch also sends what panto's
local-first replica of the bucket kept on this machine: at start, and whenever the
bucket answers again after an outage.

Examples:
   panto-sync watch s3://my-bucket/panto
   panto-sync watch --dir ~/sessions --poll 1m --endpoint http://127.0.0.1:9000 s3://sessions
   panto-sync watch --json s3://my-bucket/panto | jq -c 'select(.event != "watching")'`,
		Flags: append([]cli.Flag{dirFlag(),
			&cli.DurationFlag{Name: "poll", Value: defaultPoll, Usage: "how often to ask the bucket whether it changed (one LIST request)"},
		}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			o, err := parseOptions(c)
			if err != nil {
				return err
			}
			bucket, err := bucketArg(c, o)
			if err != nil {
				return err
			}
			if c.Duration("poll") < time.Second {
				return usageError(c, "--poll must be at least 1s")
			}
			w := &watcher{o: o, url: bucket, poll: c.Duration("poll"), leftovers: !c.IsSet("dir")}
			return w.run(c.Context)
		},
	}
}

// watcher is one run of watch.
type watcher struct {
	o    *options
	url  string
	poll time.Duration

	local  store.LogStore
	bucket store.LogStore
	push   *reporter
	pull   *reporter

	// leftovers: watch also sends what panto's local-first replica of the
	// bucket kept (without --dir): at start, and whenever the bucket
	// answers again after an outage.
	leftovers bool

	mu      sync.Mutex
	offline bool // the unreachable notice was given and not yet ended
	// leftoversDue: the replica's leftovers are to be sent.
	leftoversDue bool
	// agreed is the record of where the catalog's copies and the
	// bucket's last agreed (agreed.go), read at start and written after
	// each round.
	agreed *agreements
}

// watchEvent is watch's own --json object (the copies' events are push's
// and pull's).
type watchEvent struct {
	Event  string `json:"event"` // watching, unreachable, reachable, stopped
	Dir    string `json:"dir,omitempty"`
	Bucket string `json:"bucket,omitempty"`
	Poll   string `json:"poll,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (w *watcher) say(e watchEvent, text string) {
	if w.o.JSON {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w.o.Stdout, "%s\n", b)
		return
	}
	if !w.o.Quiet || e.Event == "unreachable" {
		fmt.Fprintln(w.o.Stdout, text)
	}
}

func (w *watcher) run(ctx context.Context) error {
	local, err := fsjsonl.Open(w.o.Dir)
	if err != nil {
		return err
	}
	w.local = local
	w.agreed = loadAgreements(agreementsPath(end{spec: w.o.Dir}, w.o.end(w.url, w.o.Endpoint)))
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.o.Dir, err)
	}
	defer fsw.Close()
	if err := fsw.Add(w.o.Dir); err != nil {
		return fmt.Errorf("watch %s: %w", w.o.Dir, err)
	}
	// A deletion of a session the catalog holds removes its file, which
	// the directory's events show; the tombstone of one it never held is
	// only in here (when the directory exists yet: the next push finds it
	// anyway).
	_ = fsw.Add(filepath.Join(w.o.Dir, fsjsonl.TombstoneDir))
	if w.bucket, err = w.openBucket(ctx); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = store.Close(cctx, w.bucket)
		_ = store.Close(cctx, w.local)
	}()
	w.push, w.pull = newReporter(w.o, pushDirection), newReporter(w.o, pullDirection)
	w.leftoversDue = w.leftovers
	w.say(watchEvent{Event: "watching", Dir: w.o.Dir, Bucket: w.url, Poll: w.poll.String()},
		fmt.Sprintf("watching %s and %s (polling every %s); stop with Ctrl-C", w.o.Dir, w.url, w.poll))
	w.loop(ctx, fsw)
	w.say(watchEvent{Event: "stopped"}, "stopped")
	return nil
}

// openBucket opens the bucket, waiting while it does not answer; an
// answer that is an error (credentials, a missing bucket) ends watch.
func (w *watcher) openBucket(ctx context.Context) (store.LogStore, error) {
	for attempt := 0; ; attempt++ {
		b, err := w.o.end(w.url, w.o.Endpoint).openFresh(ctx, "bucket")
		if err == nil {
			w.reachable()
			return b, nil
		}
		if !objstore.IsUnreachable(err) || ctx.Err() != nil {
			return nil, err
		}
		w.unreachable(err)
		if !sleep(ctx, retryDelay(attempt)) {
			return nil, ctx.Err()
		}
	}
}

// loop pushes after local changes and pulls after the bucket's, until ctx
// ends. A first round does both.
func (w *watcher) loop(ctx context.Context, fsw *fsnotify.Watcher) {
	pushDue, pullDue := true, true
	lastToken := ""
	var pushAt <-chan time.Time
	pollTick := time.NewTicker(w.poll)
	defer pollTick.Stop()
	failures := 0
	var retry <-chan time.Time
	for {
		if pullDue || pushDue {
			ok := true
			if pullDue {
				tok, err := w.token(ctx)
				switch {
				case err != nil:
					ok = false
				case tok != lastToken || lastToken == "":
					if ok = w.copy(ctx, w.bucket, w.local, w.pull); ok {
						lastToken = tok
					}
				}
				pullDue = !ok
			}
			if ok && pushDue {
				ok = w.copy(ctx, w.local, w.bucket, w.push)
				pushDue = !ok
			}
			if ok && w.takeLeftovers() {
				_, err := sendLeftovers(ctx, w.o, w.o.end(w.url, w.o.Endpoint), w.bucket, w.push)
				// The bucket is open for bulk work: its index learns of
				// what was sent at a flush, which push's copy makes after
				// the leftovers and watch's only at its next copy, when
				// the catalog or the bucket changes; until then another
				// machine did not list what was sent.
				if ferr := store.Flush(ctx, w.bucket); ferr != nil {
					w.failed(ferr)
					err = errors.Join(err, ferr)
				}
				if err != nil {
					w.mu.Lock()
					w.leftoversDue = true
					w.mu.Unlock()
				}
			}
			if ctx.Err() != nil {
				return
			}
			if ok {
				failures = 0
				retry = nil
			} else {
				retry = time.After(retryDelay(failures))
				failures++
			}
		}
		select {
		case <-ctx.Done():
			return
		case ev, open := <-fsw.Events:
			if !open {
				return
			}
			if isCatalogChange(ev) && pushAt == nil {
				pushAt = time.After(pushDelay)
			}
		case err := <-fsw.Errors:
			// An overflow loses events, not changes: push everything.
			if err != nil {
				pushDue = true
			}
		case <-pushAt:
			pushAt, pushDue = nil, true
		case <-pollTick.C:
			pullDue = true
		case <-retry:
			retry = nil
			pullDue = pullDue || lastToken == ""
		}
	}
}

// token asks the bucket whether it changed: "" with no cheap way to
// tell (a store without a change token, or credentials that may not list
// the index), which makes every poll a pull.
func (w *watcher) token(ctx context.Context) (string, error) {
	tok, err := store.ChangeToken(ctx, w.bucket)
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, objstore.ErrPermission) {
		return "", nil
	}
	if err != nil {
		w.failed(err)
		return "", err
	}
	w.reachable()
	return tok, nil
}

// copy runs one push or pull (replica.Copy, keep-both), reporting what
// changed; it reports false when it must be run again (the bucket did not
// answer, or a session failed).
func (w *watcher) copy(ctx context.Context, src, dst store.LogStore, rep *reporter) bool {
	opts := replica.Options{
		Concurrency: w.o.Concurrency,
		Select:      w.o.selected,
		KeepBoth:    true,
		Report: func(e replica.Event) {
			w.agreed.note(e)
			switch e.Kind {
			case replica.Unchanged, replica.Skipped:
				return // every session, every round: only changes are news
			}
			rep.event(e)
		},
	}
	// Either side's copy is judged against the other's tombstone by
	// where the two were last seen to agree, whichever way it copies.
	opts.SrcCovered, opts.DstCovered = w.agreed.covered, w.agreed.covered
	sum, err := replica.Copy(ctx, src, dst, opts)
	w.agreed.save()
	if err != nil {
		w.failed(err)
		return false
	}
	w.reachable()
	return sum.Failed == 0
}

// failed reports an error of a round: an unreachable bucket once until it
// answers again, anything else every time.
func (w *watcher) failed(err error) {
	if objstore.IsUnreachable(err) {
		w.unreachable(err)
		return
	}
	w.say(watchEvent{Event: "error", Error: oneLine(err.Error())}, "panto-sync watch: "+oneLine(err.Error()))
}

func (w *watcher) unreachable(err error) {
	w.mu.Lock()
	told := w.offline
	w.offline = true
	w.mu.Unlock()
	if !told {
		w.say(watchEvent{Event: "unreachable", Error: oneLine(err.Error())},
			fmt.Sprintf("bucket unreachable, retrying; local changes will be pushed when it is back (%s)", oneLine(err.Error())))
	}
}

// takeLeftovers reports whether the replica's leftovers are to be sent
// now, and clears it.
func (w *watcher) takeLeftovers() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	due := w.leftoversDue
	w.leftoversDue = false
	return due
}

func (w *watcher) reachable() {
	w.mu.Lock()
	was := w.offline
	w.offline = false
	if was {
		w.leftoversDue = w.leftovers
	}
	w.mu.Unlock()
	if was {
		w.say(watchEvent{Event: "reachable"}, "bucket reachable again")
	}
}

// isCatalogChange reports whether a file event is a change to sync: a
// session file or a deletion's tombstone, not the summary cache or a
// temporary file.
func isCatalogChange(ev fsnotify.Event) bool {
	name := ev.Name[strings.LastIndexAny(ev.Name, `/\`)+1:]
	if strings.HasPrefix(name, ".panto-tmp") || name == fsjsonl.IndexFile || name == fsjsonl.LegacyIndexFile {
		return false
	}
	return strings.HasSuffix(name, fsjsonl.Ext) || strings.HasSuffix(name, ".json") && strings.Contains(ev.Name, fsjsonl.TombstoneDir)
}

// retryDelay is the wait after the n-th failed round: from 1 s, doubling,
// up to the default poll.
func retryDelay(n int) time.Duration {
	d := time.Second
	for i := 0; i < n && d < defaultPoll; i++ {
		d *= 2
	}
	return min(d, defaultPoll)
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
