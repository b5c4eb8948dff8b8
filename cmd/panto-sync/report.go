package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Event is one thing that happened to one session, as --json prints it.
type Event struct {
	// Event says what happened: pushed, pulled, unchanged, skipped,
	// diverged, kept-both, failed, refused; status for status; with
	// --dry-run, would-push, would-pull, would-keep-both.
	Event  string `json:"event"`
	ID     string `json:"id"`
	Action Action `json:"action,omitempty"`
	// LocalLength and RemoteLength are the committed bytes each side held
	// before the command.
	LocalLength  int64 `json:"local_length"`
	RemoteLength int64 `json:"remote_length"`
	// Bytes is what was (or would be) transferred.
	Bytes int64 `json:"bytes"`
	// NewID is the session keep-both made, a copy of ForkedFrom.
	NewID      string `json:"new_id,omitempty"`
	ForkedFrom string `json:"forked_from,omitempty"`
	Error      string `json:"error,omitempty"`
	Note       string `json:"note,omitempty"`
	// Text is the line printed without --json.
	Text string `json:"-"`
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
	Text     string         `json:"-"`
}

// reporter prints events and the summary: text lines, or JSON objects,
// with a progress display on a terminal.
type reporter struct {
	mu    sync.Mutex
	out   io.Writer
	json  bool
	quiet bool
	bar   *progressbar.ProgressBar
	done  int
	total int
	// bytes done and to do, for the progress display
	doneBytes, totalBytes int64
}

func newReporter(o *options) *reporter {
	return &reporter{out: o.Stdout, json: o.JSON, quiet: o.Quiet}
}

// startProgress shows sessions and bytes done, the rate and an ETA.
func (r *reporter) startProgress(sessions int, bytes int64) {
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

// progress counts one session done after moving n bytes.
func (r *reporter) progress(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar == nil {
		return
	}
	r.done++
	r.doneBytes += n
	r.bar.Describe(r.describe())
	_ = r.bar.Add64(n)
}

func (r *reporter) describe() string {
	return fmt.Sprintf("%d/%d sessions, %s of %s", r.done, r.total, humanBytes(r.doneBytes), humanBytes(r.totalBytes))
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

// event prints e. Quiet prints only failures and divergences; the text
// form leaves out unchanged sessions, and under a progress display prints
// only what needs attention.
func (r *reporter) event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	loud := e.Event == "failed" || e.Event == "refused" || e.Event == "diverged"
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

// summary prints s: the last JSON object, or one line of text.
func (r *reporter) summary(s Summary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Event = "summary"
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
