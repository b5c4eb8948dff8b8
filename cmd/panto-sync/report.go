package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store/objstore"
)

// direction is how a command names the two sides of a copy and what it
// did to a session: push copies the local catalog (the source) to the
// remote, pull the other way, copy between any SRC and DST.
type direction struct {
	cmd        string // push, pull, copy
	done       string // what the command did to a session it moved: pushed
	src, dst   string // the sides in text: local, remote
	other      string // the command that goes the other way, or ""
	newAction  string // the actions, as status and --json name them
	tailAction string
	dstNew     string
	dstTail    string
	// the deletions: the source's, which this command carries, and the
	// destination's, which only the command the other way carries
	deleteAction, dstDelete string
	// local: --json says local_length and remote_length (push and pull),
	// not src_length and dst_length.
	localSrc, localDst bool
}

var (
	pushDirection = direction{cmd: "push", done: "pushed", src: "local", dst: "remote", other: "pull",
		newAction: "push-new", tailAction: "push-tail", dstNew: "pull-new", dstTail: "pull-tail",
		deleteAction: "push-delete", dstDelete: "pull-delete", localSrc: true}
	pullDirection = direction{cmd: "pull", done: "pulled", src: "remote", dst: "local", other: "push",
		newAction: "pull-new", tailAction: "pull-tail", dstNew: "push-new", dstTail: "push-tail",
		deleteAction: "pull-delete", dstDelete: "push-delete", localDst: true}
	copyDirection = direction{cmd: "copy", done: "copied", src: "source", dst: "destination",
		newAction: "copy-new", tailAction: "copy-tail", dstNew: "dst-only", dstTail: "dst-ahead",
		deleteAction: "copy-delete", dstDelete: "dst-deleted"}
)

// action names a plan's relation from the command's point of view.
func (d direction) action(r replica.Relation) string {
	return map[replica.Relation]string{
		replica.Same: "same", replica.SrcOnly: d.newAction, replica.SrcAhead: d.tailAction,
		replica.DstOnly: d.dstNew, replica.DstAhead: d.dstTail, replica.Diverged: "diverged",
		replica.SrcDeleted: d.deleteAction, replica.DstDeleted: d.dstDelete, replica.DeleteConflict: "delete-conflict",
	}[r]
}

// deletedAt is when the side that deleted p's session deleted it.
func deletedAt(p replica.Plan) *time.Time {
	switch {
	case p.SrcTomb != nil:
		return &p.SrcTomb.Deleted
	case p.DstTomb != nil:
		return &p.DstTomb.Deleted
	}
	return nil
}

// conflictText says what a deletion conflict is, in the command's words.
func (d direction) conflictText(p replica.Plan) string {
	deleter, writer, tomb, have := d.src, d.dst, p.SrcTomb, p.Dst.Length
	if tomb == nil {
		deleter, writer, tomb, have = d.dst, d.src, p.DstTomb, p.Src.Length
	}
	deleted := fmt.Sprintf("deleted in the %s on %s at %d B", deleter, tomb.Deleted.Local().Format("2006-01-02 15:04"), tomb.At.Length)
	if have < tomb.At.Length {
		// Shorter, yet not behind the deletion: the record of where the
		// two agreed says this copy has bytes the deleting side never
		// held (agreed.go).
		return fmt.Sprintf("%s, and the %s holds %d B with a turn the %s never had", deleted, writer, have, deleter)
	}
	return fmt.Sprintf("%s, and the %s holds %d B written after that", deleted, writer, have)
}

// Event is one thing that happened to one session, as --json prints it.
// Its field names are what scripts read: TestJSONFieldNames holds them.
type Event struct {
	// Event says what happened: pushed, pulled, copied, deleted,
	// unchanged, skipped, diverged, conflict, kept-both, failed, refused;
	// status for status; with --dry-run, would-push, would-pull,
	// would-copy, would-delete, would-keep-both.
	Event  string `json:"event"`
	ID     string `json:"id"`
	Action string `json:"action,omitempty"`
	// The committed bytes each side held before the command: local and
	// remote for push, pull and status; source and destination for copy.
	LocalLength  *int64 `json:"local_length,omitempty"`
	RemoteLength *int64 `json:"remote_length,omitempty"`
	SrcLength    *int64 `json:"src_length,omitempty"`
	DstLength    *int64 `json:"dst_length,omitempty"`
	// Bytes is what was (or would be) transferred.
	Bytes int64 `json:"bytes"`
	// DeletedAt is when the side that deleted the session did.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// NewID is the session keep-both made, a copy of ForkedFrom.
	NewID      string `json:"new_id,omitempty"`
	ForkedFrom string `json:"forked_from,omitempty"`
	Error      string `json:"error,omitempty"`
	Note       string `json:"note,omitempty"`
	// Text is the line printed without --json.
	Text string `json:"-"`
	// err is the failure: a permission refusal is said once (reporter).
	err error
}

// Summary is the last object --json prints.
type Summary struct {
	Event    string         `json:"event"` // "summary"
	Command  string         `json:"command"`
	DryRun   bool           `json:"dry_run"`
	Sessions int            `json:"sessions"`
	Counts   map[string]int `json:"counts"`
	Bytes    int64          `json:"bytes"`
	Seconds  float64        `json:"seconds"`
	Failed   int            `json:"failed"`
	Diverged int            `json:"diverged"`
	ExitCode int            `json:"exit_code"`
	// UnchangedSince: neither side changed since the run of this time,
	// which found nothing to do, so neither was listed (unchanged.go).
	UnchangedSince *time.Time `json:"unchanged_since,omitempty"`
	Text           string     `json:"-"`
}

// reporter prints events and the summary: text lines, or JSON objects,
// with a progress display on a terminal.
type reporter struct {
	d      direction
	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
	json   bool
	quiet  bool
	dryRun bool
	bar    *progressbar.ProgressBar
	// show: draw a progress display once planning says what to move
	show  bool
	done  int
	total int
	// bytes done and to do, for the progress display
	doneBytes, totalBytes int64
	counts                map[string]int
	// refusal is the first failure for want of a permission: every other
	// session would be refused the same, so it is said once, on stderr,
	// with the grant that would let the command through.
	refusal error
}

func newReporter(o *options, d direction) *reporter {
	return &reporter{d: d, out: o.Stdout, errOut: o.Stderr, json: o.JSON, quiet: o.Quiet, dryRun: o.DryRun, show: o.Progress && !o.DryRun, counts: map[string]int{}}
}

// planned starts the progress display: sessions and bytes done, the rate
// and an ETA.
func (r *reporter) planned(sessions int, bytes int64) {
	if !r.show || bytes == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total, r.totalBytes = sessions, bytes
	r.bar = progressbar.NewOptions64(bytes,
		progressbar.OptionSetWriter(r.out),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetDescription(r.describe()),
	)
	_ = r.bar.RenderBlank()
}

func (r *reporter) describe() string {
	return fmt.Sprintf("%d/%d sessions, %s of %s", r.done, r.total, humanBytes(r.doneBytes), humanBytes(r.totalBytes))
}

// event reports what became of one session of a push, pull or copy.
func (r *reporter) event(e replica.Event) {
	// Counted, not described, when it is not shown: a no-op sync of
	// 100,000 sessions would otherwise format 100,000 lines nobody
	// reads (0.4 s).
	name := r.d.eventName(e)
	r.mu.Lock()
	silent := e.Err == nil && !r.shows(name)
	if silent {
		r.counts[name]++
	}
	r.mu.Unlock()
	if !silent {
		r.print(r.describeEvent(e))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		r.done++
		r.doneBytes += e.Bytes
		r.bar.Describe(r.describe())
		_ = r.bar.Add64(e.Bytes)
	}
}

// describeEvent is e as the command says it: the event of its kind
// (eventNames), its text (eventTexts) and the lengths of both sides.
func (r *reporter) describeEvent(e replica.Event) Event {
	d := r.d
	out := Event{ID: e.ID, Action: d.action(e.Relation), Bytes: e.Bytes, Note: e.Note, DeletedAt: deletedAt(e.Plan)}
	src, dst := e.Src.Length, e.Dst.Length
	switch {
	case d.localSrc:
		out.LocalLength, out.RemoteLength = &src, &dst
	case d.localDst:
		out.LocalLength, out.RemoteLength = &dst, &src
	default:
		out.SrcLength, out.DstLength = &src, &dst
	}
	if e.Err != nil {
		out.Error, out.err = e.Err.Error(), e.Err
	}
	out.Event = d.eventName(e)
	if text, ok := eventTexts[e.Kind]; ok {
		out.Text = text(d, e)
	} else {
		out.Text = fmt.Sprintf("failed    %s: %v", e.ID, e.Err)
	}
	if e.Kind == replica.KeptBoth {
		out.NewID, out.ForkedFrom = e.NewID, e.ID
	}
	// A conflict's text says in the command's words (local, remote)
	// what its note says in the engine's (source, destination).
	if e.Note != "" && out.Text != "" && e.Kind != replica.Skipped && e.Kind != replica.Conflicted {
		out.Text += " (" + e.Note + ")"
	}
	return out
}

// eventNames are the event each kind of replica.Event is reported as:
// when done, and with --dry-run. The copies are named by the command
// (direction.done, would-<cmd>); any other kind is "failed".
var eventNames = map[replica.Kind]struct{ done, dryRun string }{
	replica.Unchanged:  {"unchanged", "unchanged"},
	replica.Deleted:    {"deleted", "would-delete"},
	replica.Conflicted: {"conflict", "conflict"},
	replica.Skipped:    {"skipped", "skipped"},
	replica.Divergent:  {"diverged", "diverged"},
	replica.KeptBoth:   {"kept-both", "would-keep-both"},
	replica.Refused:    {"refused", "refused"},
}

// eventName is the event e is reported as.
func (d direction) eventName(e replica.Event) string {
	names, ok := eventNames[e.Kind]
	switch {
	case e.Kind == replica.Created || e.Kind == replica.Appended:
		names.done, names.dryRun = d.done, "would-"+d.cmd
	case !ok:
		return "failed"
	}
	if e.DryRun {
		return names.dryRun
	}
	return names.done
}

// eventTexts say each kind of replica.Event in a line of text (an
// unchanged session says nothing); any other kind failed.
var eventTexts = map[replica.Kind]func(d direction, e replica.Event) string{
	replica.Unchanged:  func(direction, replica.Event) string { return "" },
	replica.Created:    direction.copiedText,
	replica.Appended:   direction.copiedText,
	replica.Deleted:    direction.deletedText,
	replica.Conflicted: direction.conflictedText,
	replica.Skipped:    direction.skippedText,
	replica.Divergent:  direction.divergedText,
	replica.KeptBoth:   direction.keptBothText,
	replica.Refused: func(_ direction, e replica.Event) string {
		return fmt.Sprintf("refused   %s: %v", e.ID, e.Err)
	},
}

// copiedText says what a copy of a tail did (or would do).
func (d direction) copiedText(e replica.Event) string {
	dst := e.Dst.Length
	if e.DryRun {
		return fmt.Sprintf("would %s %s  +%s (%s %d → %d B)", d.cmd, e.ID, humanBytes(e.Bytes), d.dst, dst, dst+e.Bytes)
	}
	return fmt.Sprintf("%-9s %s  +%s (%s %d → %d B)", d.done, e.ID, humanBytes(e.Bytes), d.dst, dst, dst+e.Bytes)
}

// deletedText says what carrying a deletion did (or would do).
func (d direction) deletedText(e replica.Event) string {
	what := fmt.Sprintf("deleted   %s in the %s", e.ID, d.dst)
	switch {
	case e.DryRun:
		what = fmt.Sprintf("would delete %s in the %s", e.ID, d.dst)
	case e.Dst.Length == 0:
		what = fmt.Sprintf("deleted   %s: the %s holds no copy; recorded the tombstone there", e.ID, d.dst)
	}
	return fmt.Sprintf("%s (deleted in the %s on %s)", what, d.src, e.SrcTomb.Deleted.Local().Format("2006-01-02 15:04"))
}

func (d direction) conflictedText(e replica.Event) string {
	return fmt.Sprintf("conflict  %s: %s; left both untouched (re-run with --on-diverge=keep-both to keep the surviving copy as a new session)", e.ID, d.conflictText(e.Plan))
}

// skippedText says why the destination's copy was left alone, and the
// command that would change it.
func (d direction) skippedText(e replica.Event) string {
	why := fmt.Sprintf("the %s is ahead by %s", d.dst, humanBytes(e.Dst.Length-e.Src.Length))
	switch e.Relation {
	case replica.DstOnly:
		why = "only the " + d.dst + " holds it"
	case replica.DstDeleted:
		why = fmt.Sprintf("deleted in the %s on %s", d.dst, e.DstTomb.Deleted.Local().Format("2006-01-02 15:04"))
		if d.other != "" {
			why += "; run " + d.other + " to delete the " + d.src + " copy"
		}
	}
	if d.other != "" && e.Relation != replica.DstDeleted {
		why += "; run " + d.other
	}
	return fmt.Sprintf("skipped   %s: %s", e.ID, why)
}

func (d direction) divergedText(e replica.Event) string {
	return fmt.Sprintf("diverged  %s: %s %d B and %s %d B, neither is a prefix of the other; left both untouched (re-run with --on-diverge=keep-both to keep both)", e.ID, d.src, e.Src.Length, d.dst, e.Dst.Length)
}

// keptBothText says what keep-both did (or would do) with a divergence
// or a deletion conflict.
func (d direction) keptBothText(e replica.Event) string {
	src, dst := e.Src.Length, e.Dst.Length
	switch {
	case e.Relation == replica.DeleteConflict:
		return d.keptSurvivorText(e)
	case e.DryRun:
		return fmt.Sprintf("would keep both %s: diverged (%s %d B, %s %d B); would store the %s copy as new session %s", e.ID, d.src, src, d.dst, dst, d.src, e.NewID)
	case e.Bytes == 0:
		return fmt.Sprintf("kept both %s: diverged (%s %d B, %s %d B); already kept as %s session %s", e.ID, d.src, src, d.dst, dst, d.dst, e.NewID)
	}
	return fmt.Sprintf("kept both %s: diverged (%s %d B, %s %d B); stored the %s copy as new %s session %s (forked_from %s); %s on both sides is untouched", e.ID, d.src, src, d.dst, dst, d.src, d.dst, e.NewID, e.ID, e.ID)
}

// print prints e. Quiet prints only failures and divergences; the text
// form leaves out unchanged sessions, and under a progress display prints
// only what needs attention.
// shows reports whether an event named name (without an error) is
// printed, as print decides. The caller holds r.mu.
func (r *reporter) shows(name string) bool {
	loud := name == "failed" || name == "refused" || name == "diverged" || name == "conflict"
	if r.json || loud {
		return !r.quiet || loud
	}
	return !r.quiet && name != "unchanged" && (r.bar == nil || name == "kept-both" || name == "skipped")
}

func (r *reporter) print(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[e.Event]++
	if errors.Is(e.err, objstore.ErrPermission) {
		if r.refusal != nil && !r.json {
			return // said once, with the summary
		}
		r.refusal = e.err
	}
	loud := e.Event == "failed" || e.Event == "refused" || e.Event == "diverged" || e.Event == "conflict"
	if r.json {
		if r.quiet && !loud {
			return
		}
		b, _ := json.Marshal(e)
		fmt.Fprintf(r.out, "%s\n", b)
		return
	}
	if (r.quiet && !loud) || e.Event == "unchanged" || e.Text == "" {
		return
	}
	if r.bar != nil && !loud && e.Event != "kept-both" && e.Event != "skipped" {
		return // the display counts the sessions done; print what needs attention
	}
	if r.bar != nil {
		_ = r.bar.Clear()
	}
	fmt.Fprintln(r.out, e.Text)
	if r.bar != nil {
		_ = r.bar.RenderBlank()
	}
}

// summary ends the progress display, prints the summary of a copy and
// returns the exit code: 1 if any session failed (or the record step
// did), else 3 if any diverged (and was not kept), else 0.
func (r *reporter) summary(sum replica.Summary) Summary {
	return r.summarize(sum, nil)
}

// unchanged prints the summary of a run that listed neither side, as the
// run of rec, which found nothing to do, left it (unchanged.go).
func (r *reporter) unchanged(rec noopRecord, elapsed time.Duration) Summary {
	r.mu.Lock()
	for name, n := range rec.Counts {
		r.counts[name] = n
	}
	r.mu.Unlock()
	at := rec.At.UTC()
	return r.summarize(replica.Summary{Sessions: rec.Sessions, Elapsed: elapsed}, &at)
}

// summarize is summary, for a run that listed both sides (since nil) or
// neither.
func (r *reporter) summarize(sum replica.Summary, since *time.Time) Summary {
	r.stopProgress()
	s := Summary{Command: r.d.cmd, DryRun: r.dryRun, Sessions: sum.Sessions, Counts: r.counts, Bytes: sum.Bytes,
		Seconds: sum.Elapsed.Seconds(), Failed: sum.Failed, Diverged: sum.Diverged, UnchangedSince: since}
	if sum.FlushErr != nil {
		s.Failed++
		fmt.Fprintf(r.errOut, "panto-sync: %s: the data is copied but the %s has not recorded it (a bucket's index, a directory's sync); run again to complete it\n", oneLine(sum.FlushErr.Error()), r.d.dst)
	}
	if sum.ListErr != nil {
		s.Failed++
		fmt.Fprintf(r.errOut, "panto-sync: %s\n", oneLine(sum.ListErr.Error()))
	}
	switch {
	case s.Failed > 0:
		s.ExitCode = exitError
	case s.Diverged > 0:
		s.ExitCode = exitDiverged
	}
	verb := r.d.done
	if r.dryRun {
		verb = "would " + r.d.cmd
	}
	moved := r.counts[r.d.done] + r.counts["would-"+r.d.cmd]
	s.Text = fmt.Sprintf("%s: %d sessions, %d %s (%s), %d unchanged", r.d.cmd, s.Sessions, moved, verb, humanBytes(s.Bytes), r.counts["unchanged"])
	if n := r.counts["skipped"]; n > 0 {
		s.Text += fmt.Sprintf(", %d skipped", n)
	}
	if n := r.counts["deleted"] + r.counts["would-delete"]; n > 0 {
		s.Text += fmt.Sprintf(", %d %s", n, map[bool]string{false: "deleted", true: "would delete"}[r.dryRun])
	}
	if n := r.counts["kept-both"] + r.counts["would-keep-both"]; n > 0 {
		s.Text += fmt.Sprintf(", %d kept both", n)
	}
	conflicts := r.counts["conflict"]
	s.Text += fmt.Sprintf(", %d diverged", s.Diverged-conflicts)
	if conflicts > 0 {
		s.Text += fmt.Sprintf(", %d deletion conflicts", conflicts)
	}
	s.Text += fmt.Sprintf(", %d failed in %.2fs", s.Failed, s.Seconds)
	if since != nil {
		s.Text += fmt.Sprintf(" (neither side changed since the %s of %s, which found nothing to do; --full compares every session)", r.d.cmd, since.Format(time.RFC3339))
	}
	switch s.ExitCode {
	case exitError:
		s.Text += "; fix the failures above and re-run"
	case exitDiverged:
		s.Text += "; see the sessions above (--on-diverge=keep-both keeps both copies, or the surviving copy of a deleted session)"
	}
	r.printSummary(s)
	return s
}

// keptSurvivorText says what keep-both did with a deletion conflict.
func (d direction) keptSurvivorText(e replica.Event) string {
	survivor := d.dst
	if e.DstTomb != nil {
		survivor = d.src
	}
	switch {
	case e.DryRun:
		return fmt.Sprintf("would keep both %s: %s; would store the %s copy as new session %s", e.ID, d.conflictText(e.Plan), survivor, e.NewID)
	case e.DstTomb != nil:
		other := "a copy the other way"
		if d.other != "" {
			other = "the next " + d.other + " --on-diverge=keep-both"
		}
		return fmt.Sprintf("kept both %s: %s; stored the %s copy as new %s session %s (forked_from %s); %s renames the %s copy to it, and the deletion stands", e.ID, d.conflictText(e.Plan), survivor, d.dst, e.NewID, e.ID, other, d.src)
	}
	return fmt.Sprintf("kept both %s: %s; stored the %s copy as new session %s (forked_from %s), then the deletion went through", e.ID, d.conflictText(e.Plan), survivor, e.NewID, e.ID)
}

func (r *reporter) stopProgress() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		_ = r.bar.Finish()
		_ = r.bar.Clear()
		r.bar = nil
	}
}

// printSummary prints s: the last JSON object, or one line of text.
func (r *reporter) printSummary(s Summary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Event = "summary"
	if r.refusal != nil {
		fmt.Fprintf(r.errOut, "panto-sync: %s\n", oneLine(r.refusal.Error()))
	}
	if r.json {
		b, _ := json.Marshal(s)
		fmt.Fprintf(r.out, "%s\n", b)
		return
	}
	if r.quiet || s.Text == "" {
		return
	}
	fmt.Fprintln(r.out, s.Text)
}

// humanBytes formats n bytes for people.
func humanBytes(n int64) string {
	const unit = 1000
	if n < 0 {
		return "-" + humanBytes(-n)
	}
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
