// Package cmdtest builds the commands under test for the end-to-end tests
// of cmd/panto and cmd/panto-sync, and watches what they print for the
// race detector's reports.
//
// Under `go test -race` (make test, CI) the commands are built with the
// race detector too, so that their own goroutines — panto's background
// checkpoint flush, panto-sync's worker pool — run under it, not only
// the test process's. A race in a command is reported on its stderr
// ("WARNING: DATA RACE") and makes it exit 66; Stderr turns the report
// into a test failure even when the test kills the command or does not
// look at its exit status.
//
// Shapes check a command's --json output by field names and JSON types,
// as a script reads it.
package cmdtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Build builds the main packages pkgs (as go build names them, relative
// to the current directory) into the directory dir, with -race when this
// test binary runs under the race detector.
func Build(ctx context.Context, dir string, pkgs ...string) error {
	args := []string{"build"}
	if Race {
		args = append(args, "-race")
	}
	args = append(append(args, "-o", strings.TrimSuffix(dir, "/")+"/"), pkgs...)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// raceMarker starts every report of the race detector.
const raceMarker = "WARNING: DATA RACE"

// Stderr returns a writer for a command's stderr that forwards to w (nil:
// nowhere) and, when t ends, fails it if the command reported a data
// race. name names the command in the failure.
func Stderr(t testing.TB, name string, w io.Writer) io.Writer {
	t.Helper()
	wr := &watch{w: w}
	t.Cleanup(func() {
		if report := wr.report(); report != "" {
			t.Errorf("%s reported a data race:\n%s", name, report)
		}
	})
	return wr
}

// watch keeps what a command writes to stderr, up to the first race
// report and the lines after it.
type watch struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

// keep bounds what a watch holds: a report is a few KB.
const keep = 1 << 20

func (wr *watch) Write(p []byte) (int, error) {
	wr.mu.Lock()
	if wr.buf.Len() < keep {
		wr.buf.Write(p[:min(len(p), keep-wr.buf.Len())])
	}
	wr.mu.Unlock()
	if wr.w != nil {
		return wr.w.Write(p)
	}
	return len(p), nil
}

func (wr *watch) report() string {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return RaceReport(wr.buf.String())
}

// RaceReport returns the race reports in a command's stderr (from the
// first one on), or "" when there is none.
func RaceReport(stderr string) string {
	if i := strings.Index(stderr, raceMarker); i >= 0 {
		return stderr[i:]
	}
	return ""
}
