// Command panto-sync mirrors a local panto session catalog (a directory
// of <id>.jsonl files, store/fsjsonl) to an S3-compatible bucket
// (store/objstore) and back, and copies sessions between any two stores.
//
//	push    DIR -> bucket        (replica.Copy, the local catalog the source)
//	pull    bucket -> DIR        (replica.Copy, the bucket the source)
//	copy    SRC -> DST           (any two stores)
//	status  what push and pull would do (replica.PlanAll)
//	ls, verify, repair, compact  one store
//	keygen  a new bucket key file (internal/seal), for an encrypted bucket
//	watch   DIR <-> bucket, until stopped: pushes on file events, pulls
//	        when the bucket's index changed (watch.go)
//
// The engine is package replica; this command keeps the flags, the
// output and the exit codes: main.go dispatches, each command lives in its
// own file, sync.go opens the two sides, report.go says what happened.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/internal/cliargs"
	"github.com/panto-dev/panto/internal/gcpace"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitDiverged = 3
)

// heapHeadroom is how far past what is live the heap may grow before the
// collector works harder (gcpace.Govern): what a sync holds for its
// transfers at once (8 MiB chunks, 64 MiB in all; a bucket reader's
// read-ahead), with room to spare. Left to its default, the collector lets
// the heap double past what is live, which for a 1 GB session's transfer
// made the peak twice what it needed.
const heapHeadroom = 192 << 20

func main() {
	gcpace.Govern(context.Background(), heapHeadroom, false) // for the life of the process
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { // the first signal stops new work; a second one kills
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	// The handler stays until exit: a Ctrl-C after the work is done (its
	// summary printed) must not turn a success into death by signal.
	stopProfile()
	os.Exit(code)
}

// stopProfile ends a CPU profile started by a -tags pprof build (pprof.go).
var stopProfile = func() {}

// exitCode carries a command's exit code out of urfave/cli; its message,
// if any, has been printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// run runs the command line args and returns the exit code. Errors are
// printed as one line on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "panto-sync",
		Usage:     "push and pull panto sessions between a local catalog and an S3 bucket",
		UsageText: "panto-sync COMMAND [flags] s3://BUCKET[/PREFIX]\npanto-sync copy [flags] SRC DST",
		Description: `Sessions are mirrored incrementally: only bytes appended since the other side's
copy move. A session changed on both sides is reported as diverged and left alone
(exit 3) unless --on-diverge=keep-both is given.

Credentials and region come from the standard AWS environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE, ...); the endpoint from --endpoint
or AWS_ENDPOINT_URL_S3. An encrypted bucket takes its key with --key-file FILE or
PANTO_KEY_FILE (panto-sync keygen FILE makes one).

Exit status: 0 all done, 1 an error (one line on stderr says what to fix),
3 a session diverged.`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Commands: []*cli.Command{
			pushCommand(), pullCommand(), copyCommand(), statusCommand(), lsCommand(), verifyCommand(), repairCommand(), compactCommand(), keygenCommand(), watchCommand(),
		},
		ExitErrHandler: func(*cli.Context, error) {}, // run maps errors to exit codes
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError(c, err.Error())
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = app.OnUsageError
	}
	err := app.RunContext(ctx, cliargs.Reorder(app, args)) // flags after the bucket too: status s3://b --json
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	}
	fmt.Fprintf(stderr, "panto-sync: %s\n", oneLine(err.Error()))
	return exitError
}

// oneLine folds a multi-line error into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
