// Command panto-sync mirrors a local panto session catalog (a directory
// of <id>.jsonl files, store/fsjsonl) to an S3-compatible bucket
// (store/objstore) and back.
//
// A session's bytes are the same on both sides, so sync is a matter of
// lengths and prefix hashes: when one side's committed bytes are a prefix
// of the other's, the missing tail moves (one new segment up, one append
// down); when neither is, the session diverged and is reported, never
// overwritten. Deciding needs no download: the remote index gives each
// session's length and hash, segment checkpoints give the remote's prefix
// hashes, and a local state file (DIR/.panto-sync/) remembers each file's
// size, mtime and hash so an unchanged file is not read again. An
// unchanged catalog therefore costs the index reads and nothing else.
//
// Every write is conditional (the remote appends only at the length and
// hash it was planned against; the local store appends only at the
// committed length it was planned against), so an interrupted run is
// safe to re-run: it converges, with nothing lost or duplicated.
//
// A divergence is never resolved by overwriting. --on-diverge=keep-both
// copies "the other side" under a fresh id (agent.NewSessionID) whose
// header carries forked_from: push stores the local copy as a new remote
// session, pull the remote copy as a new local file; the state file
// records the copy so that a re-run does not make another. The original
// id stays diverged on the two sides until someone deletes one copy.
//
// The bucket's index may lag a session whose append was interrupted after
// its segment committed (kill -9 between the segment PUT and the index
// update). Push notices (its conditional append reports the remote moved,
// or the state says it already stored these bytes, and the session's
// checkpoints confirm it) and counts the session unchanged; pull reads
// past a lagging length. A session the index does not list at all stays
// invisible to pull until its next append updates the index: objstore has
// no call that rewrites an index entry on its own.
//
// main.go only dispatches; each command lives in its own file: the
// planner (plan.go), the engine that carries plans out (engine.go), the
// local side (local.go), the state file (state.go), the remote adapter
// (remote.go, stores.go), output (report.go).
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
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitDiverged = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { // the first signal stops new work; a second one kills
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
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
		UsageText: "panto-sync COMMAND [flags] s3://BUCKET[/PREFIX]",
		Description: `Sessions are mirrored incrementally: only bytes appended since the other side's
copy move. A session changed on both sides is reported as diverged and left alone
(exit 3) unless --on-diverge=keep-both is given.

Credentials and region come from the standard AWS environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE, ...); the endpoint from --endpoint
or AWS_ENDPOINT_URL_S3.

Exit status: 0 all done, 1 an error (one line on stderr says what to fix),
3 a session diverged.`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Commands: []*cli.Command{
			pushCommand(), pullCommand(), statusCommand(), lsCommand(), verifyCommand(), compactCommand(),
		},
		ExitErrHandler: func(*cli.Context, error) {}, // run maps errors to exit codes
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError(c, err.Error())
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = app.OnUsageError
	}
	err := app.RunContext(ctx, args)
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
