package main

import (
	"time"

	"github.com/schollz/progressbar/v3"
)

// readProgress shows on a terminal how far a read of every session
// (search, usage) has got: on a new machine's bucket such a read runs
// for many seconds, and a search that finds nothing, or usage, which
// prints at the end, said nothing meanwhile. Nothing shows for a read
// shorter than env.progressAfter; then a bar on stderr, cleared before
// anything is printed on the terminal and when the read is done. A nil
// readProgress (not a terminal, --json) shows nothing.
type readProgress struct {
	e     *env
	what  string
	start time.Time
	bar   *progressbar.ProgressBar
}

// newReadProgress is the progress of command what's read, shown when
// stdout and stderr are the terminal and the output is not JSON: not
// drawn into a file stderr is sent to, nor over a pager reading stdout.
func newReadProgress(e *env, what string, jsonOut bool) *readProgress {
	if !e.stdoutIsTerminal || !e.stderrIsTerminal || jsonOut {
		return nil
	}
	return &readProgress{e: e, what: what, start: time.Now()}
}

// update is archive.Options.Progress.
func (p *readProgress) update(read, total int) {
	if p == nil || read >= total {
		return
	}
	if p.bar == nil {
		if time.Since(p.start) < p.e.progressAfter {
			return
		}
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.e.stderr), progressbar.OptionSetDescription(p.what),
			progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	_ = p.bar.Set(read)
}

// progress is the function archive.Options.Progress takes (nil for a
// nil readProgress).
func (p *readProgress) progress() func(read, total int) {
	if p == nil {
		return nil
	}
	return p.update
}

// clear takes the bar off the terminal's line, before a print; the next
// update draws it again.
func (p *readProgress) clear() {
	if p != nil && p.bar != nil {
		_ = p.bar.Clear()
	}
}

// done takes the bar away for good.
func (p *readProgress) done() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish() // cleared on finish
		p.bar = nil
	}
}
