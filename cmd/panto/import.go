package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/importrecord"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

func importCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "import the sessions of Claude Code, Codex and pi into the store",
		UsageText: "panto import [--store SPEC] [--from claude-code|codex|pi] [--replace-diverged] [--dry-run | --watch] [--json] [PATH...]",
		Description: `Converts other agents' session logs into panto sessions: each foreign session becomes
one panto session (its id derived from the agent's own id, so every import names the
same one), which panto -r resumes with any provider. Without PATH, each agent's own
location is read: ~/.claude/projects (CLAUDE_CONFIG_DIR), ~/.codex/sessions and
archived_sessions (CODEX_HOME), ~/.pi/agent/sessions (PI_CODING_AGENT_DIR). A PATH is
a log or a directory searched for *.jsonl and *.jsonl.zst; --from names the agent,
else the format is recognised from each file.

A session's project is what panto would have recorded had it run where the agent
did: the git work tree that holds the log's directory on this machine, with its remote,
so that panto sessions and panto -c in any clone list and continue it; where that
directory is not a work tree here, the log's own (Codex records the remote, Claude Code
and pi the directory alone).

Importing again changes nothing; a log that grew has its new messages appended to the
same session, so import can run on a timer. A log unchanged since it was imported (its
size, times and inode as ~/.cache/panto/import/record.jsonl recorded them, and its
session as that import left it in the store) is not read again. A session whose stored
bytes are not the start of its new conversion (an earlier panto converted it otherwise,
or its source changed below what was imported) is reported as diverged, and its stored
copy left as it is; one an earlier panto imported, whose conversion this panto reads
more of (a Codex compaction's kept messages, prompts of images from disk), goes on in
that form and is counted in the summary. --replace-diverged writes the new conversion as
a new session that replaces it and deletes the old copy, as panto rm would (one
continued in panto is kept beside its replacement), and replaces those of an earlier
panto's form too; later imports of the log go to the replacement, without the flag. A
file with a malformed line is refused (file:line) and nothing of it written. A response
still being written, or tool calls without their results yet, wait for the next import.
The command fails when a file was refused or a session diverged, after importing
everything else. Eight files are imported at once; what each came to is printed in the
files' order.

--watch goes on after the import: each turn an agent writes is imported within a few
seconds (the directories are watched, new project and day directories too; a log that
failed to import, a bucket not answering, is tried again 15 s later, and a bucket that
does not answer at the start is waited for), and the store's listing is brought up to
date after each, so panto sessions, search and -c on any machine have it. A log whose
import takes long (hundreds of megabytes) waits three times as long before the next; a
diverged session is reported once while it stays so. It runs until stopped (Ctrl-C,
SIGTERM), and exits 0 then; as a systemd user service or a launchd agent it keeps the
archive of every agent current.

Examples:
   panto import                                    every agent's sessions, into the default store
   panto import --from codex                       Codex's only
   panto import --dry-run                          what would be imported or appended
   panto import --replace-diverged                 replace the diverged sessions by their new conversion
   panto import --watch --store s3://team/panto    import every turn of every agent as it is written
   panto import ~/.claude/projects/-home-me-src-app   one project's Claude Code sessions
   panto import --store s3://archive/agents --key-file ~/.config/panto/bucket.key
   panto import --json | jq -r 'select(.action=="new") | .id'`,
		Flags: append(storeFlags(false),
			&cli.StringFlag{Name: "from", Usage: "the agent whose logs to import: claude-code, codex or pi (default: all, recognised from each file)"},
			&cli.BoolFlag{Name: "replace-diverged", Usage: "write a diverged session's new conversion as a new session replacing it, and delete the old copy (kept when continued in panto)"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "say what would be imported, appended or replaced, and write nothing"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "after importing, keep importing each turn the agents write, within seconds, until stopped (Ctrl-C)"},
			&cli.BoolFlag{Name: "json", Usage: `print one object per session: {"source", "agent", "foreign_id", "id", "action", "messages", "appended", "replaced", "kept", "held", "earlier_conversion", "error"}`},
		),
		Action: func(c *cli.Context) error { return runImport(c, e) },
	}
}

// importEvent is what the import did with one source file, as --json
// prints it.
type importEvent struct {
	Source    string `json:"source"`
	Agent     string `json:"agent,omitempty"`
	ForeignID string `json:"foreign_id,omitempty"`
	ID        string `json:"id,omitempty"`
	// Action is new, appended, unchanged, waiting, diverged, replaced,
	// deleted, refused (a malformed line) or skipped (not a log of these
	// agents).
	Action string `json:"action"`
	// Messages is the number of messages of the conversion, Appended
	// those written now (or, dry, to write).
	Messages int `json:"messages"`
	Appended int `json:"appended"`
	// Replaced is the diverged session a replaced session (ID) took the
	// place of; Kept says that it was kept (continued in panto), not
	// deleted.
	Replaced string `json:"replaced,omitempty"`
	Kept     bool   `json:"kept,omitempty"`
	// Held says that messages read wait for later lines of the source (a
	// response in progress, tool calls without results yet).
	Held bool `json:"held,omitempty"`
	// Earlier says that the stored session is an earlier panto's
	// conversion of the source, and grows in that form (--replace-diverged
	// replaces it by this panto's).
	Earlier bool   `json:"earlier_conversion,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Error   string `json:"error,omitempty"`

	// took is how long the import of the source took (--watch paces a
	// log by it).
	took time.Duration
}

func runImport(c *cli.Context, e *env) error {
	var from importer.Agent
	if c.IsSet("from") {
		a, err := importer.ParseAgent(c.String("from"))
		if err != nil {
			return fmt.Errorf("import: --from: %w", err)
		}
		from = a
	}
	sources, err := importSources(c.Args().Slice(), from, e.getenv)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	st, err := openBulkLogStore(c)
	if c.Bool("watch") && objstore.IsUnreachable(err) {
		st, err = awaitBucket(c, e, err)
		if errors.Is(err, errStopped) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	defer closeStore(c.Context, st, e.stderr)
	stored, err := storedCheckpoints(c.Context, st)
	if err != nil {
		return fmt.Errorf("import: list the store: %w", err)
	}
	jsonOut, opts := c.Bool("json"), importer.Options{Dry: c.Bool("dry-run"), Replace: c.Bool("replace-diverged")}
	dry := opts.Dry
	if c.Bool("watch") && dry {
		return errors.New("import: --watch imports as the agents write: leave out --dry-run")
	}
	var bar *progressbar.ProgressBar
	if e.stdoutIsTerminal && !jsonOut && len(sources) > 1 {
		bar = progressbar.NewOptions(len(sources), progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription("import"), progressbar.OptionClearOnFinish())
	}
	job := &importJob{st: st, stored: stored, projects: newProjectFinder(), rollouts: newRolloutFinder(c.Args().Slice(), e.getenv),
		record: importrecord.Load(importrecord.Path(e.getenv)), opts: opts, jsonOut: jsonOut}
	var watch *importWatcher
	if c.Bool("watch") {
		// Watched before the import reads the logs, so that nothing the
		// agents write meanwhile is missed.
		watch = &importWatcher{e: e, job: job, roots: watchRoots(c.Args().Slice(), from, e.getenv)}
		if !jsonOut {
			job.told = map[string]string{}
		}
		if err := watch.start(); err != nil {
			return err
		}
		defer watch.close()
	}
	// Ctrl-C or SIGTERM (a service stopped) during a long first import
	// stops it between sources: what was written is closed out, its
	// index entries flushed with the store, so every machine lists it.
	// A second one kills.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	counts, events, err := job.batch(ctx, e.stdout, bar, sources)
	stopped := ctx.Err() != nil && len(events) < len(sources)
	stop()
	if err != nil {
		return err
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if !jsonOut {
		printImportSummary(e.stdout, counts, len(events), dry)
	}
	if stopped {
		if watch != nil {
			fmt.Fprintf(e.stderr, "panto import: stopped after %s of %d\n", plural(len(events), "file"), len(sources))
			return nil
		}
		return fmt.Errorf("import: stopped after %s of %d: panto import again imports the rest", plural(len(events), "file"), len(sources))
	}
	if watch != nil {
		watch.flush(c.Context)
		return watch.run(c.Context)
	}
	var failed []string
	if n := counts["refused"]; n > 0 {
		failed = append(failed, plural(n, "file")+" refused (see above): fix or move the refused files")
	}
	if m := counts["diverged"]; m > 0 {
		failed = append(failed, plural(m, "session")+" diverged (see above): a diverged session's stored copy (converted otherwise, or from a source that changed since) is left as it is; panto import --replace-diverged writes its new conversion as a new session and deletes the old copy (keeps it when it was continued in panto)")
	}
	if len(failed) > 0 {
		return fmt.Errorf("import: %s", strings.Join(failed, "; "))
	}
	return nil
}

// importJob is what the imports of one panto import (the first, and each
// batch of --watch) share: the store and what it holds, and how the logs
// are read and the outcomes printed.
type importJob struct {
	st       store.LogStore
	stored   *storedLogs
	projects *projectFinder
	rollouts *rolloutFinder
	// record spares a read to the logs unchanged since the last import
	// (nil: every log is read).
	record  *importrecord.Record
	opts    importer.Options
	jsonOut bool
	// told, when not nil (a watch's text), holds the divergence each
	// source was last reported with, which is not printed again while
	// it stays the same: a session continued both in panto and in its
	// agent diverges at every turn the agent writes.
	told map[string]string
}

// toldBefore reports whether ev is a divergence its source was last
// reported with, and notes what is reported now.
func (j *importJob) toldBefore(ev importEvent) bool {
	if j.told == nil {
		return false
	}
	if ev.Action != string(importer.ActionDiverged) {
		delete(j.told, ev.Source)
		return false
	}
	said := ev.ID + " " + ev.Error
	if j.told[ev.Source] == said {
		return true
	}
	j.told[ev.Source] = said
	return false
}

// batch imports sources, several at once, and prints what each came to
// in the sources' order as soon as those before it are; it returns how
// many came to each action (and "earlier"), and the events. Once ctx is
// done no source is begun, and those begun are finished (an append is
// not cut in the middle): the events are then those of the sources
// begun, the first ones. What the record learned is saved at the end.
func (j *importJob) batch(ctx context.Context, w io.Writer, bar *progressbar.ProgressBar, sources []importer.Source) (map[string]int, []importEvent, error) {
	j.stored.newBatch()
	// Best effort: what is not saved costs the next import a read.
	defer func() { _ = j.record.Save() }()
	counts := map[string]int{}
	// A new session is a PUT or two on a bucket, so the first import of
	// a long history, one source after another, waits a round trip per
	// session: several go at once.
	events := make([]*importEvent, len(sources))
	printed := 0
	var mu sync.Mutex
	var printErr error
	g := new(errgroup.Group)
	g.SetLimit(concurrentImports)
	begun := 0
	for i, src := range sources {
		if ctx.Err() != nil {
			break
		}
		begun++
		g.Go(func() error {
			began := time.Now()
			ev := j.one(context.WithoutCancel(ctx), i, src)
			ev.took = time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			events[i] = &ev
			for ; printed < len(events) && events[printed] != nil; printed++ {
				ev := events[printed]
				counts[ev.Action]++
				if ev.Earlier {
					counts["earlier"]++
				}
				if bar != nil {
					_ = bar.Add(1)
				}
				if j.toldBefore(*ev) {
					continue
				}
				if err := printImportEvent(w, bar, *ev, j.jsonOut); err != nil && printErr == nil {
					printErr = err
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	out := make([]importEvent, begun)
	for i, ev := range events[:begun] {
		out[i] = *ev
	}
	return counts, out, printErr
}

// importSources lists the logs to import: those under paths, or under
// the default locations of agent from (every agent's when from is "").
func importSources(paths []string, from importer.Agent, getenv func(string) string) ([]importer.Source, error) {
	var out []importer.Source
	if len(paths) > 0 {
		for _, p := range paths {
			srcs, err := importer.Find(p, from, false)
			if err != nil {
				return nil, err
			}
			out = append(out, srcs...)
		}
		return out, nil
	}
	agents := importer.Agents
	if from != "" {
		agents = []importer.Agent{from}
	}
	for _, a := range agents {
		for _, dir := range importer.DefaultDirs(a, getenv) {
			srcs, err := importer.Find(dir, a, true)
			if err != nil {
				return nil, err
			}
			out = append(out, srcs...)
		}
	}
	return out, nil
}

// concurrentImports is how many sources panto import converts and
// writes at once.
const concurrentImports = 8

// storedLogs are the checkpoints of the store's sessions as the import
// knows them, for the sources imported at once. Two sources of one
// session (an agent's archived copy of a log beside the log) are
// imported one after the other, in the sources' order, each deciding
// from what the one before wrote, as an import of one source at a time
// would (claim).
type storedLogs struct {
	mu sync.Mutex
	at map[string]store.Checkpoint
	// deleted holds the checkpoints of the store's tombstones.
	deleted map[string]store.Checkpoint
	// turn is the next source to claim its session; claimed signals
	// each claim; last, by session, is closed when the import of the
	// last source that claimed it is done.
	turn    int
	claimed *sync.Cond
	last    map[string]chan struct{}
}

// claim waits for the sources before source turn to claim theirs, then
// claims session id for it ("": it has none) and waits for the import
// of the source before it that claimed id. The returned function ends
// the claim, once the source's import is done. A source claims after
// its conversion, so the sources' reading and converting go at once,
// and only those of one session wait for each other.
func (s *storedLogs) claim(turn int, id string) (done func()) {
	mine := make(chan struct{})
	s.mu.Lock()
	for s.turn != turn {
		s.claimed.Wait()
	}
	var prev chan struct{}
	if id != "" {
		prev = s.last[id]
		s.last[id] = mine
	}
	s.turn++
	s.claimed.Broadcast()
	s.mu.Unlock()
	if prev != nil {
		<-prev
	}
	return func() { close(mine) }
}

// newBatch starts the claims of a new batch of sources, numbered from 0.
func (s *storedLogs) newBatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turn, s.last = 0, map[string]chan struct{}{}
}

// Checkpoint and Deleted make storedLogs an importer.Listing.
func (s *storedLogs) Checkpoint(id string) store.Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[id]
}

func (s *storedLogs) Deleted(id string) (store.Checkpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.deleted[id]
	return at, ok
}

// record notes what an import wrote, for another source of the same
// session.
func (s *storedLogs) record(out importer.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out.At.Length > 0 {
		s.at[out.ID] = out.At
	}
	if t := out.Deleted; t != nil {
		delete(s.at, t.ID)
		s.deleted[t.ID] = t.At
	}
}

// storedCheckpoints lists the store's sessions and tombstones; a listing
// that misses some is used as it is (an append to a session it missed
// learns what the store holds from the append's answer, a tombstone
// past its retention from the append's refusal).
func storedCheckpoints(ctx context.Context, st store.LogStore) (*storedLogs, error) {
	logs, err := st.Logs(ctx)
	if err != nil && !errors.Is(err, agent.ErrIncompleteList) {
		return nil, err
	}
	tombs, err := store.Tombstones(ctx, st)
	if err != nil {
		return nil, err
	}
	out := &storedLogs{at: make(map[string]store.Checkpoint, len(logs)), deleted: make(map[string]store.Checkpoint, len(tombs)), last: map[string]chan struct{}{}}
	for _, t := range tombs {
		out.deleted[t.ID] = t.At
	}
	out.claimed = sync.NewCond(&out.mu)
	for _, l := range logs {
		out.at[l.Info.ID] = l.Checkpoint
	}
	return out, nil
}

// one converts one source and brings its session in the store up to
// date. A source the record vouches for is not read: it is unchanged.
func (j *importJob) one(ctx context.Context, turn int, src importer.Source) importEvent {
	file, known := j.record.File(src.Path) // before the read: see importrecord.File
	if e, ok := j.record.Lookup(file, string(src.Agent)); ok {
		// Claimed as its conversion would be, so that it is decided
		// after the sources of its session before it, which may have
		// changed the session.
		if e.Outcome != "" {
			// Skipped or waiting: its bytes decide, and are as they were.
			j.stored.claim(turn, "")()
			return importEvent{Source: src.Path, Agent: e.Agent, ForeignID: e.ForeignID, ID: e.ID, Action: e.Outcome, Error: e.Reason, Messages: e.Messages, Held: e.Held, DryRun: j.opts.Dry}
		}
		defer j.stored.claim(turn, e.ID)()
		if e.Holds(j.stored.Checkpoint(e.ID)) {
			return importEvent{Source: src.Path, Agent: e.Agent, ForeignID: e.ForeignID, ID: e.ID, Action: string(importer.ActionUnchanged), Messages: e.Messages, Held: e.Held, DryRun: j.opts.Dry}
		}
		ev, conv := j.convert(src)
		if conv == nil {
			j.note(file, known, ev)
			return ev
		}
		return j.apply(ctx, ev, conv, file, known)
	}
	ev, conv := j.convert(src)
	if conv == nil {
		j.stored.claim(turn, "")()
		j.note(file, known, ev)
		return ev
	}
	// A replacement is written under its replaced session's claim: only
	// the sources of that session reach it.
	defer j.stored.claim(turn, conv.ID)()
	return j.apply(ctx, ev, conv, file, known)
}

// convert reads and converts src, and finds its project on this machine;
// a nil conversion comes with the event that says why there is none.
func (j *importJob) convert(src importer.Source) (importEvent, *importer.Conversion) {
	ev, conv := convertSource(src, j.rollouts, j.opts.Dry)
	if conv == nil {
		return ev, nil
	}
	conv, err := conv.WithProject(j.projects.find(conv.Project))
	if err != nil {
		ev.Action, ev.Error = "refused", err.Error()
		return ev, nil
	}
	return ev, conv
}

// apply brings conv's session in the store up to date, and notes in the
// record what the store holds of it now (file is its source's, as read
// when known).
func (j *importJob) apply(ctx context.Context, ev importEvent, conv *importer.Conversion, file importrecord.File, known bool) importEvent {
	out, err := importer.Import(ctx, j.st, conv, j.stored, j.opts)
	if err != nil {
		ev.Action, ev.Error = "failed", err.Error()
		return ev
	}
	ev.Action, ev.Appended, ev.Replaced, ev.Kept, ev.Earlier = string(out.Action), out.Appended, out.Replaced, out.Kept, out.Earlier
	if out.ID != "" {
		ev.ID = out.ID
	}
	if out.Err != nil {
		ev.Error = out.Err.Error()
	}
	j.stored.record(out) // for another source of the same session
	if ev.ID == conv.ID {
		j.note(file, known, ev)
	}
	return ev
}

// note records what the import of the log file (known: as read) came
// to, when the store now holds exactly its conversion, or more: new,
// appended, or unchanged in the form this panto converts it to (not an
// earlier panto's form, a divergence, or a dry run's guess); or when the
// log's bytes alone decided it: skipped, waiting.
func (j *importJob) note(file importrecord.File, known bool, ev importEvent) {
	if !known || ev.DryRun {
		return
	}
	e := importrecord.Entry{Agent: ev.Agent, ForeignID: ev.ForeignID, ID: ev.ID, Messages: ev.Messages, Held: ev.Held}
	switch importer.Action(ev.Action) {
	case importer.ActionNew, importer.ActionAppended, importer.ActionUnchanged:
		if ev.Earlier || ev.Error != "" {
			return
		}
		at := j.stored.Checkpoint(ev.ID)
		e.Length, e.SHA256 = at.Length, at.SHA256
	case importer.ActionWaiting:
		e.Outcome = importrecord.OutcomeWaiting
	case "skipped":
		e.Outcome, e.Reason = importrecord.OutcomeSkipped, ev.Error
	default:
		return
	}
	j.record.Note(file, e)
}

// convertSource reads and converts one source; a nil conversion comes
// with the event that says why there is none (refused, skipped).
func convertSource(src importer.Source, rollouts *rolloutFinder, dry bool) (importEvent, *importer.Conversion) {
	ev := importEvent{Source: src.Path, Agent: string(src.Agent), DryRun: dry}
	data, err := importer.ReadSource(src.Path)
	if err != nil {
		ev.Action, ev.Error = "refused", err.Error()
		return ev, nil
	}
	detected, known := importer.Detect(data)
	if src.Agent != "" && known && detected != src.Agent {
		ev.Action, ev.Error = "refused", fmt.Sprintf("a %s log, not %s: leave out --from, or give it the right agent", detected, src.Agent)
		return ev, nil
	}
	if src.Agent == "" {
		a, ok := detected, known
		if !ok {
			ev.Action, ev.Error = "skipped", "not a log of Claude Code, Codex or pi (or no complete line yet)"
			return ev, nil
		}
		src.Agent, ev.Agent = a, string(a)
	}
	conv, err := importer.ConvertLinked(src.Agent, src.Path, data, rollouts.log)
	if err != nil {
		ev.Action, ev.Error = "refused", err.Error()
		return ev, nil
	}
	ev.ForeignID, ev.ID, ev.Messages, ev.Held = conv.ForeignID, conv.ID, conv.Messages, conv.Stats.Held
	if conv.ExportOf != "" {
		ev.Action, ev.Error = "skipped", fmt.Sprintf("exported from panto session %s, and not gone on with since", shortID(conv.ExportOf))
		return ev, nil
	}
	return ev, conv
}

// printImportEvent prints ev: as a JSON line, or (for what changed or
// needs attention) one line of text.
func printImportEvent(w io.Writer, bar *progressbar.ProgressBar, ev importEvent, jsonOut bool) error {
	if jsonOut {
		return writeJSONLine(w, ev)
	}
	var text string
	would := map[bool]string{true: "would ", false: ""}[ev.DryRun]
	switch ev.Action {
	case "new":
		text = fmt.Sprintf("%s%s %s: %s from %s %s", would, map[bool]string{true: "import", false: "imported"}[ev.DryRun], shortID(ev.ID), plural(ev.Messages, "message"), ev.Agent, ev.Source)
	case "appended":
		text = fmt.Sprintf("%s%s %s to %s from %s", would, map[bool]string{true: "append", false: "appended"}[ev.DryRun], plural(ev.Appended, "message"), shortID(ev.ID), ev.Source)
	case "diverged":
		text = fmt.Sprintf("diverged %s (%s): %s; its stored copy is left as it is", shortID(ev.ID), ev.Source, ev.Error)
	case "replaced":
		old := map[bool]string{true: "deleted", false: "kept: it was continued in panto"}[!ev.Kept]
		if ev.DryRun && !ev.Kept {
			old = "to delete"
		}
		text = fmt.Sprintf("%s%s %s by %s: %s from %s %s (%s %s)", would, map[bool]string{true: "replace", false: "replaced"}[ev.DryRun], shortID(ev.Replaced), shortID(ev.ID), plural(ev.Messages, "message"), ev.Agent, ev.Source, shortID(ev.Replaced), old)
	case "refused", "failed":
		text = fmt.Sprintf("%s %s: %s", ev.Action, ev.Source, ev.Error)
		if strings.HasPrefix(ev.Error, ev.Source+":") { // a malformed line: file:line
			text = fmt.Sprintf("%s %s", ev.Action, ev.Error)
		}
	default:
		return nil // unchanged, waiting, deleted, skipped: counted in the summary
	}
	if bar != nil {
		_ = bar.Clear()
	}
	_, err := fmt.Fprintln(w, strings.Join(strings.Fields(text), " "))
	return err
}

func printImportSummary(w io.Writer, counts map[string]int, files int, dry bool) {
	parts := []string{fmt.Sprintf("import: %s", plural(files, "file"))}
	for _, a := range []string{"new", "appended", "replaced", "unchanged", "waiting", "deleted", "diverged", "refused", "failed", "skipped"} {
		if n := counts[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, a))
		}
	}
	if dry {
		parts = append(parts, "(dry run: nothing written)")
	}
	fmt.Fprintln(w, strings.Join(parts, ", "))
	if n := counts["earlier"]; n > 0 {
		fmt.Fprintf(w, "%s as an earlier panto converted %s (this one reads more of the source): panto import --replace-diverged converts %s anew\n",
			map[bool]string{true: "1 session goes on", false: fmt.Sprintf("%d sessions go on", n)}[n == 1],
			map[bool]string{true: "it", false: "them"}[n == 1], map[bool]string{true: "it", false: "them"}[n == 1])
	}
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// projectFinder finds the project of an imported session on this
// machine's disk, once per directory: what panto would have recorded had
// it run where the agent did.
type projectFinder struct {
	mu    sync.Mutex
	found map[agent.Project]agent.Project
}

func newProjectFinder() *projectFinder {
	return &projectFinder{found: map[agent.Project]agent.Project{}}
}

// find returns logged, the project an imported log records (its
// directory, and the remote when the agent recorded one), as the git
// work tree that holds that directory here says it: its remote, root and
// path, so that the session is its project's on every machine and at
// every path (agent.Project.Key), as panto's own are. The log's own is
// kept when the directory is not here, is in no git work tree, or is in
// one whose remote is not the one the log records (another repository
// at that path now). A remote through an SSH host alias is named by its
// host (project.Find), and a log that records the alias's spelling (as
// Codex records the remote git was given) is the work tree's all the same.
func (f *projectFinder) find(logged agent.Project) agent.Project {
	if logged.Dir == "" {
		return logged
	}
	f.mu.Lock()
	p, ok := f.found[logged]
	f.mu.Unlock()
	if ok {
		return p
	}
	p = logged
	if fi, err := os.Stat(logged.Dir); err == nil && fi.IsDir() {
		if here, err := project.Find(logged.Dir); err == nil && here.Root != "" && (logged.Remote == "" || here.Remote == logged.Remote || here.Spelled.Remote == logged.Remote) {
			p = here.Project
		}
	}
	f.mu.Lock()
	f.found[logged] = p
	f.mu.Unlock()
	return p
}

// rolloutFinder finds a Codex rollout by its session id, for a fork
// whose parent's lines the conversion copies (importer.ConvertLinked):
// under Codex's own directories and the paths imported, walked once, and
// again when an id is not found (a parent written since), at most every
// few seconds.
type rolloutFinder struct {
	roots  []string
	mu     sync.Mutex
	paths  map[string]string
	walked time.Time
}

func newRolloutFinder(paths []string, getenv func(string) string) *rolloutFinder {
	return &rolloutFinder{roots: append(importer.DefaultDirs(importer.Codex, getenv), paths...)}
}

// rolloutRewalk is how long a walk answers for an id it did not find.
const rolloutRewalk = 5 * time.Second

// log reads the rollout of Codex session id.
func (f *rolloutFinder) log(id string) ([]byte, bool) {
	f.mu.Lock()
	path, ok := f.paths[id]
	if !ok && time.Since(f.walked) > rolloutRewalk {
		f.walk()
		path, ok = f.paths[id]
	}
	f.mu.Unlock()
	if !ok {
		return nil, false
	}
	data, err := importer.ReadSource(path)
	return data, err == nil
}

// walk lists the rollouts under the roots by the id their names end in
// (rollout-<time>-<id>.jsonl).
func (f *rolloutFinder) walk() {
	f.paths, f.walked = map[string]string{}, time.Now()
	for _, root := range f.roots {
		if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
			root = filepath.Dir(root)
		}
		srcs, err := importer.Find(root, importer.Codex, true)
		if err != nil {
			continue
		}
		for _, s := range srcs {
			name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(s.Path), ".zst"), ".jsonl")
			if len(name) > 36 && strings.HasPrefix(name, "rollout-") {
				if _, have := f.paths[name[len(name)-36:]]; !have {
					f.paths[name[len(name)-36:]] = s.Path
				}
			}
		}
	}
}
