// Command panto is a terminal LLM agent whose conversations are durable
// session logs, on disk or in a bucket.
//
//	panto [flags] [PROMPT]   one-shot, or interactive with no PROMPT on a terminal
//	panto sessions [--json]  the sessions of the store, newest first
//	panto show ID [--json]   a session's transcript
//	panto rm ID...           delete sessions, leaving tombstones
//	panto prune --older-than 90d   delete the sessions idle that long
//
// main.go only wires the commands; each lives in its own file (chat.go,
// repl.go, sessions.go, show.go, rm.go, prune.go), with the flags shared
// between them in options.go.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// env is the process's outside world, passed down instead of read from
// globals, so that tests and commands share nothing.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdinIsTerminal says whether stdin is an interactive terminal.
	stdinIsTerminal bool
	// now is the clock (prune's cutoff, a tombstone's time).
	now func() time.Time
}

func main() {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, stdinIsTerminal: isTerminal(os.Stdin), now: time.Now}
	os.Exit(run(context.Background(), e, os.Args))
}

// run runs the command line args and returns the exit status. An error is
// printed as one line.
func run(ctx context.Context, e *env, args []string) int {
	app := newApp(e)
	if err := app.RunContext(ctx, args); err != nil {
		fmt.Fprintf(e.stderr, "panto: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

func newApp(e *env) *cli.App {
	return &cli.App{
		Name:      "panto",
		Usage:     "a terminal LLM agent whose conversations are durable session logs",
		UsageText: "panto [flags] [PROMPT]\npanto sessions [--json]\npanto show ID [--json]\npanto rm ID|PREFIX... [--yes]\npanto prune --older-than DURATION [--dry-run]",
		Description: `With a PROMPT (or a prompt on stdin), panto answers once and exits; with neither, on
a terminal, it starts an interactive session. Every message is stored as it is
added, so a session can be resumed later (-c, -r ID), also on another machine
when the store is a bucket.

Examples:
   panto "summarise README.md"                 one-shot, new session
   git diff | panto "review this diff"         prompt from the argument, input on stdin
   panto                                       interactive
   panto -c                                    continue the latest session
   panto -r 3f9a "and now the tests"           resume a session by id prefix
   panto --store s3://my-bucket/panto          sessions in a bucket (AWS env for credentials)
   panto --api-style anthropic-messages --model claude-sonnet-4-5 --reasoning medium
   panto --base-url http://localhost:11434/v1 --model llama3.2   a local OpenAI-compatible server

The API key comes from PANTO_API_KEY, else OPENAI_API_KEY or ANTHROPIC_API_KEY
by --api-style; it is never stored or printed.`,
		Flags:                  chatFlags(),
		Action:                 func(c *cli.Context) error { return chat(c, e) },
		Commands:               []*cli.Command{sessionsCommand(e), showCommand(e), rmCommand(e), pruneCommand(e)},
		Writer:                 e.stdout,
		ErrWriter:              e.stderr,
		HideHelpCommand:        true,
		UseShortOptionHandling: true,
		ExitErrHandler:         func(*cli.Context, error) {}, // run prints errors
	}
}

// oneLine folds an error message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
