package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// panto import --watch keeps importing the agents' logs as they write
// them: the directories are watched (inotify, kqueue or the platform's
// equivalent, recursively, as Claude Code makes a directory per project
// and Codex one per day), the logs written to are gathered for a moment
// and imported as a batch, and the store is flushed after each, so that
// a bucket's index lists what was imported at once. A log whose import
// failed (a bucket that did not answer) is tried again later, so no turn
// the agent wrote waits for the agent to write another.
const (
	// importQuiet is how long the logs written to are gathered after
	// the last write: an agent writes a turn as several appends.
	importQuiet = time.Second
	// importMaxDelay bounds the gathering while an agent writes on and
	// on (a long answer streamed to its log).
	importMaxDelay = 10 * time.Second
	// importRetry is how long a log whose import failed waits before it
	// is tried again, when nothing writes to it meanwhile.
	importRetry = 15 * time.Second
	// importPace paces a log whose import is costly (a session of
	// hundreds of megabytes, converted whole at every turn: importer's
	// package doc): after an import that took longer than
	// importPaceFrom, the log waits importPace times as long before it
	// is imported again, so that the watch takes at most a quarter of a
	// core, and the turns written meanwhile go as one batch.
	importPace     = 3
	importPaceFrom = 250 * time.Millisecond
	// rootRescan is how often a directory that is not there yet (an
	// agent not used yet on this machine) is looked for, besides the
	// watch of the directory it would appear in.
	rootRescan = 30 * time.Second
)

// awaitBucket opens the store of panto import --watch again every
// importRetry while its bucket does not answer (err): a watch started
// with the machine, as a user service, may come up before the network.
// Stopped meanwhile (Ctrl-C, SIGTERM), it returns no store and no error.
func awaitBucket(c *cli.Context, e *env, err error) (store.LogStore, error) {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for objstore.IsUnreachable(err) {
		fmt.Fprintf(e.stderr, "panto import: the bucket does not answer (%s); trying again in %s\n", oneLine(err.Error()), importRetry)
		select {
		case <-ctx.Done():
			return nil, errStopped
		case <-time.After(importRetry):
		}
		var st store.LogStore
		if st, err = openBulkLogStore(c); err == nil {
			return st, nil
		}
	}
	return nil, err
}

// errStopped: the user stopped panto import --watch before it began.
var errStopped = errors.New("stopped")

// watchRoot is a directory (or log) watched for one agent's logs ("":
// recognised from each file).
type watchRoot struct {
	path  string
	agent importer.Agent
}

// watchRoots are the directories an import of paths (the agents' own
// when none) reads, spelled as the import spells them (a relative PATH
// stays relative), so that a log's events name it as the first
// import's did.
func watchRoots(paths []string, from importer.Agent, getenv func(string) string) []watchRoot {
	var roots []watchRoot
	if len(paths) > 0 {
		for _, p := range paths {
			roots = append(roots, watchRoot{path: filepath.Clean(p), agent: from})
		}
		return roots
	}
	agents := importer.Agents
	if from != "" {
		agents = []importer.Agent{from}
	}
	for _, a := range agents {
		for _, dir := range importer.DefaultDirs(a, getenv) {
			roots = append(roots, watchRoot{path: dir, agent: a})
		}
	}
	return roots
}

// importWatcher is the state of panto import --watch.
type importWatcher struct {
	e     *env
	job   *importJob
	roots []watchRoot

	fsw *fsnotify.Watcher
	// watched are the roots being watched; the others are looked for
	// when a directory is made in the nearest of their parents that is
	// there (watched for it), and every rescan (rootRescan when 0).
	watched map[string]bool
	rescan  time.Duration
	// dirty are the logs written to since the last batch, by path, with
	// the root that holds them; failed those whose import failed, tried
	// again importRetry later.
	dirty  map[string]watchRoot
	failed map[string]bool
	// paced are the logs that wait, after a costly import, until the
	// time given before they are imported again: pace(how long the
	// import took) after it (nil: paceAfter).
	paced map[string]time.Time
	pace  func(took time.Duration) time.Duration
	// unflushed says that the last flush failed: it is tried again as a
	// failed import is.
	unflushed bool
}

// start watches the roots that are there.
func (w *importWatcher) start() error {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("import --watch: %w", err)
	}
	w.fsw, w.watched, w.dirty, w.failed = fsw, map[string]bool{}, map[string]watchRoot{}, map[string]bool{}
	for _, r := range w.roots {
		if err := w.watchRoot(r, false); err != nil {
			fsw.Close()
			return fmt.Errorf("import --watch: %w", err)
		}
	}
	return nil
}

func (w *importWatcher) close() { w.fsw.Close() }

// run watches until ctx ends or the user stops it (Ctrl-C, SIGTERM),
// which is not a failure: the imports begun are finished, and a second
// signal kills. What was written while the first import ran is
// imported at once (it was watched).
func (w *importWatcher) run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	fsw := w.fsw
	var names []string
	for _, r := range w.roots {
		names = append(names, r.path)
	}
	fmt.Fprintf(w.e.stderr, "panto import: watching %s for new turns (Ctrl-C to stop)\n", strings.Join(names, ", "))
	releaseMemory() // the first import's

	var gather <-chan time.Time // fires once the writes are quiet
	var firstDirty time.Time
	var retry <-chan time.Time // fires when a failed import is due again
	var pace <-chan time.Time  // fires when the first paced log is due
	var paceAt time.Time
	every := w.rescan
	if every == 0 {
		every = rootRescan
	}
	rescan := time.NewTicker(every)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			if len(w.dirty) > 0 {
				// Paced logs' turns go to the store before the watch
				// ends (a second signal kills).
				w.paced = nil
				w.importDirty(context.WithoutCancel(ctx))
			}
			return nil
		case <-pace:
			pace, paceAt = nil, time.Time{}
			w.importDirty(ctx)
		case ev, ok := <-fsw.Events:
			if !ok {
				return nil
			}
			if w.event(ev) {
				if firstDirty.IsZero() {
					firstDirty = time.Now()
				}
				wait := min(importQuiet, importMaxDelay-time.Since(firstDirty))
				gather = time.After(max(wait, 0))
			}
		case err, ok := <-fsw.Errors:
			if !ok {
				return nil
			}
			// Events were lost (the kernel's queue overflowed): every
			// log is read again, which imports what changed.
			fmt.Fprintf(w.e.stderr, "panto import: warning: %s; reading every log again\n", oneLine(err.Error()))
			for _, r := range w.roots {
				w.markAll(r)
			}
			gather = time.After(importQuiet)
		case <-gather:
			gather, firstDirty = nil, time.Time{}
			w.importDirty(ctx)
		case <-retry:
			retry = nil
			for path := range w.failed {
				if _, ok := w.dirty[path]; !ok {
					w.dirty[path] = w.rootOf(path)
				}
			}
			if len(w.dirty) > 0 {
				w.importDirty(ctx)
			} else if w.unflushed {
				w.flush(ctx)
			}
		case <-rescan.C:
			for _, r := range w.roots {
				if !w.watched[r.path] {
					if err := w.watchRoot(r, true); err != nil {
						fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
					}
				}
			}
			if len(w.dirty) > 0 {
				w.importDirty(ctx)
			}
		}
		if at, ok := w.nextPaced(); ok && (pace == nil || at.Before(paceAt)) {
			pace, paceAt = time.After(time.Until(at)), at
		}
		if due := len(w.failed) > 0 || w.unflushed; due && retry == nil {
			retry = time.After(importRetry)
		} else if !due {
			retry = nil
		}
	}
}

// watchRoot watches r's directory and those below it, once it is there;
// found says that it appeared while watching, so its logs are imported.
func (w *importWatcher) watchRoot(r watchRoot, found bool) error {
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The agent makes it at its first run: the nearest parent that
		// is there is watched for it (looked for every rescan too).
		for below, dir := r.path, filepath.Dir(r.path); below != dir; below, dir = dir, filepath.Dir(dir) {
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || w.fsw.Add(dir) != nil {
				continue // not there, or gone since (being removed)
			}
			if _, err := os.Stat(below); err == nil {
				return w.watchRoot(r, found) // made before the watch began
			}
			return nil
		}
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		// A log given by its path: its directory is watched, and the
		// events of the other files in it are passed over (rootOf).
		if err := w.fsw.Add(filepath.Dir(r.path)); err != nil {
			return fmt.Errorf("watch %s: %w", r.path, err)
		}
		w.watched[r.path] = true
		return nil
	}
	if err := w.addTree(r.path); err != nil {
		return err
	}
	w.watched[r.path] = true
	if found {
		w.markAll(r)
	}
	return nil
}

// addTree watches dir and every directory below it (dir followed when
// it is a symbolic link, as import reads it).
func (w *importWatcher) addTree(dir string) error {
	return importer.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			return err
		}
		if d.IsDir() {
			if err := w.fsw.Add(p); err != nil {
				return fmt.Errorf("watch %s: %w", p, err)
			}
		}
		return nil
	})
}

// markAll marks every log under r as written to.
func (w *importWatcher) markAll(r watchRoot) {
	srcs, err := importer.Find(r.path, r.agent, true)
	if err != nil {
		fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
		return
	}
	for _, s := range srcs {
		w.dirty[s.Path] = r
	}
}

// event takes one file event; it reports whether a log is now waiting
// to be imported.
func (w *importWatcher) event(ev fsnotify.Event) bool {
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		// A root removed or moved away (an agent's directory cleared)
		// is watched for again, as one not there yet is: the agent
		// makes it again at its next run. A log removed or renamed
		// stays imported.
		// So is a root whose parent, watched for it, goes.
		for _, r := range w.roots {
			if r.path == ev.Name || !w.watched[r.path] && strings.HasPrefix(r.path, ev.Name+string(filepath.Separator)) {
				delete(w.watched, r.path)
				if err := w.watchRoot(r, true); err != nil {
					fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
				}
			}
		}
	}
	if !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
		return false
	}
	r := w.rootOf(ev.Name)
	if r.path == "" || !w.watched[r.path] {
		return w.rootMade(ev)
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
			// A new project's or day's directory: watched from now on,
			// and what was written in it before the watch began is read.
			if err := w.addTree(ev.Name); err != nil {
				fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
			}
			before := len(w.dirty)
			w.markAll(watchRoot{path: ev.Name, agent: r.agent})
			return len(w.dirty) > before
		}
	}
	if !strings.HasSuffix(ev.Name, ".jsonl") && !strings.HasSuffix(ev.Name, ".jsonl.zst") {
		return false
	}
	w.dirty[ev.Name] = r
	return true
}

// rootMade takes the event of a directory made on the way to a root not
// there yet: the root is watched once it is there (and what is in it
// read), or its nearest parent that is there now; it reports whether a
// log is now waiting to be imported.
func (w *importWatcher) rootMade(ev fsnotify.Event) bool {
	if !ev.Has(fsnotify.Create) {
		return false
	}
	before := len(w.dirty)
	for _, r := range w.roots {
		if !w.watched[r.path] && (r.path == ev.Name || strings.HasPrefix(r.path, ev.Name+string(filepath.Separator))) {
			if err := w.watchRoot(r, true); err != nil {
				fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
			}
		}
	}
	return len(w.dirty) > before
}

// rootOf is the watched root that holds path (zero: none).
func (w *importWatcher) rootOf(path string) watchRoot {
	for _, r := range w.roots {
		if path == r.path || strings.HasPrefix(path, r.path+string(filepath.Separator)) {
			return r
		}
		if r.path == "." && !filepath.IsAbs(path) && !strings.HasPrefix(path, "..") {
			return r // the current directory: its files are named without "./"
		}
	}
	return watchRoot{}
}

// importDirty imports the logs written to, prints what each came to, and
// flushes the store so that its listing (a bucket's index) has them.
func (w *importWatcher) importDirty(ctx context.Context) {
	paths := make([]string, 0, len(w.dirty))
	for p := range w.dirty {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var sources []importer.Source
	now := time.Now()
	for _, p := range paths {
		r := w.dirty[p]
		if now.Before(w.paced[p]) {
			continue // stays dirty until it is due
		}
		delete(w.dirty, p)
		delete(w.paced, p)
		if strings.HasSuffix(p, ".zst") {
			if _, err := os.Stat(strings.TrimSuffix(p, ".zst")); err == nil {
				continue // Codex reads the plain log beside it, and so does import
			}
		}
		sources = append(sources, importer.Source{Path: p, Agent: r.agent})
	}
	if len(sources) == 0 {
		return
	}
	_, events, err := w.job.batch(ctx, w.e.stdout, nil, sources)
	if err != nil {
		fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
	}
	done := time.Now()
	costly := false
	for _, ev := range events {
		if ev.Action == "failed" {
			w.failed[ev.Source] = true
		} else {
			delete(w.failed, ev.Source)
		}
		pace := paceAfter
		if w.pace != nil {
			pace = w.pace
		}
		if wait := pace(ev.took); wait > 0 {
			if w.paced == nil {
				w.paced = map[string]time.Time{}
			}
			w.paced[ev.Source] = done.Add(wait)
			costly = true
		}
	}
	w.flush(ctx)
	if costly {
		releaseMemory()
	}
}

// releaseMemory gives the memory a costly import used back to the
// system: the watch runs for days, and would otherwise hold a large
// log's conversion (several times its size) until the runtime's
// scavenger returns it, minutes later.
func releaseMemory() { debug.FreeOSMemory() }

// paceAfter is how long a log whose import took took waits before it is
// imported again (importPace).
func paceAfter(took time.Duration) time.Duration {
	if took <= importPaceFrom {
		return 0
	}
	return importPace * took
}

// nextPaced returns when the first paced log that is dirty is due.
func (w *importWatcher) nextPaced() (time.Time, bool) {
	var first time.Time
	for p := range w.dirty {
		if at, ok := w.paced[p]; ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// flush brings the store's listing up to date with what was imported;
// a bucket that does not answer is told, and the next flush tries again.
func (w *importWatcher) flush(ctx context.Context) {
	err := store.Flush(ctx, w.job.st)
	w.unflushed = err != nil
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(w.e.stderr, "panto import: warning: %s\n", oneLine(err.Error()))
	}
}
