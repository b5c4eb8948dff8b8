// Command panto is a terminal LLM agent whose conversations are durable
// session logs, on disk or in a bucket.
//
//	panto [flags] [PROMPT]      one-shot, or interactive with no PROMPT on a terminal
//	panto -c [--any]            continue this project's latest session (--any: of all)
//	panto -r                    pick a session to resume from a list (on a terminal)
//	panto sessions [--all] [--json]   this project's sessions (--all: every one), newest first
//	panto show ID [--json]      a session's transcript
//	panto title ID TEXT         name a session
//	panto fork ID [--at N]      a new session from a session's first N messages
//	panto export ID [--format md|html|json] [-o FILE]
//	panto search QUERY [--json] every session's messages, searched
//	panto usage [--by model|project|day] [--since DUR]   tokens per model, project or day
//	panto rm ID...              delete sessions, leaving tombstones
//	panto prune --older-than 90d   delete the sessions idle that long
//	panto import [--from AGENT] [PATH...]   Claude Code, Codex and pi sessions
//	panto extensions [--json]   the Lua extensions loaded, and what failed
//
// main.go only wires the commands; each lives in its own file (chat.go,
// repl.go, picker.go, sessions.go, show.go, title.go, fork.go, export.go,
// search.go, usage.go, rm.go, prune.go, import.go, extensions.go), with the
// flags shared between them in options.go and what they share about
// projects in project.go. The reading of many sessions is package archive's.
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
	"time"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/internal/cliargs"
)

// env is the process's outside world, passed down instead of read from
// globals, so that tests and commands share nothing.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdinIsTerminal says whether stdin is an interactive terminal,
	// stdoutIsTerminal whether stdout is one (search marks its matches),
	// stderrIsTerminal whether stderr is (search's and usage's progress).
	stdinIsTerminal, stdoutIsTerminal, stderrIsTerminal bool
	// now is the clock (prune's cutoff, a tombstone's time).
	now func() time.Time
	// progressAfter is how long search's and usage's read runs before a
	// terminal is shown its progress (readProgress).
	progressAfter time.Duration
}

func main() {
	// A reader that stops early (panto sessions | head -1, panto "..." |
	// head) ends the printing, not panto: a write to the closed pipe fails
	// (stdoutWriter) instead of killing panto before it closed the store,
	// which then shipped nothing and flushed nothing, and, in a one-shot,
	// lost the rest of the turn, paid for. SIGPIPE is caught, not
	// ignored: an ignored signal stays ignored in the processes panto
	// starts (run_shell's commands, git), where `cmd | head` would then
	// go on writing into a closed pipe; Go gives a caught one back its
	// default in a child.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	e := &env{stdin: os.Stdin, stdout: &stdoutWriter{w: os.Stdout}, stderr: os.Stderr, getenv: os.Getenv, stdinIsTerminal: isTerminal(os.Stdin), stdoutIsTerminal: isTerminal(os.Stdout), stderrIsTerminal: isTerminal(os.Stderr), now: time.Now, progressAfter: time.Second}
	os.Exit(run(context.Background(), e, os.Args))
}

// run runs the command line args and returns the exit status. An error is
// printed as one line.
func run(ctx context.Context, e *env, args []string) int {
	app := newApp(e)
	if err := app.RunContext(ctx, normalizeArgs(app, args)); err != nil {
		if errors.Is(err, errStdoutClosed) {
			return 0 // the reader asked for no more (stdoutWriter)
		}
		fmt.Fprintf(e.stderr, "panto: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

func newApp(e *env) *cli.App {
	app := &cli.App{
		Name:      "panto",
		Usage:     "a terminal LLM agent whose conversations are durable session logs",
		UsageText: "panto [flags] [PROMPT]\npanto -r [ID]\npanto COMMAND [flags] ARGS (see panto COMMAND --help)",
		Description: `With a PROMPT (or a prompt on stdin), panto answers once and exits; with neither, on
a terminal, it starts an interactive session. Every message is stored as it is
added, so a session can be resumed later (-c, -r ID), also on another machine
when the store is a bucket. Each session records its project: the git repository
panto runs in (by its origin remote, so every clone of it is one project), else
the directory.

Examples:
   panto "summarise README.md"                 one-shot, new session
   git diff | panto "review this diff"         prompt from the argument, input on stdin
   panto                                       interactive
   panto -c                                    continue this project's latest session
   panto -c --any                              continue the latest session of any project
   panto -r 3f9a "and now the tests"           resume a session by id prefix
   panto -r                                    pick the session to resume (this project's first)
   panto --store s3://my-bucket/panto          sessions in a bucket (AWS env for credentials)
   panto --store s3://my-bucket/panto --key-file ~/.config/panto/bucket.key   an encrypted bucket
   panto --api-style anthropic-messages --model claude-sonnet-4-5 --reasoning medium
   panto --base-url http://localhost:11434/v1 --model llama3.2   a local OpenAI-compatible server
   panto --allow-write "fix the typo in README.md"   let the model write and edit files under this directory
   panto --extension ./wordcount.lua           add a Lua extension's tools and /commands (panto extensions lists them)

The API key comes from PANTO_API_KEY, else OPENAI_API_KEY or ANTHROPIC_API_KEY
by --api-style; it is never stored or printed. A bucket's key file (--key-file or
PANTO_KEY_FILE; panto-sync keygen makes one) encrypts every session in it: a prefix
first opened with a key is created encrypted, and opens with that key only.`,
		Flags:  chatFlags(),
		Action: func(c *cli.Context) error { return chat(c, e) },
		Commands: []*cli.Command{
			sessionsCommand(e), showCommand(e), titleCommand(e), forkCommand(e),
			exportCommand(e), searchCommand(e), usageCommand(e), rmCommand(e), pruneCommand(e),
			importCommand(e),
			extensionsCommand(e),
		},
		Writer:                 e.stdout,
		ErrWriter:              e.stderr,
		HideHelpCommand:        true,
		UseShortOptionHandling: true,
		ExitErrHandler:         func(*cli.Context, error) {}, // run prints errors
		// A mistake on the command line is one line, as every error is,
		// not the cli package's "Incorrect Usage" and the whole help.
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError(c, err)
		},
	}
	onUsageError(app.Commands, app.OnUsageError)
	return app
}

// onUsageError sets f as the usage error handler of commands and of
// theirs.
func onUsageError(commands []*cli.Command, f cli.OnUsageErrorFunc) {
	for _, c := range commands {
		c.OnUsageError = f
		onUsageError(c.Subcommands, f)
	}
}

// usageError is a command-line mistake: what is wrong, then where help
// is.
func usageError(c *cli.Context, err error) error {
	name := "panto"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name = c.Command.HelpName
	}
	return fmt.Errorf("%s; see `%s --help`", strings.TrimSuffix(err.Error(), "."), name)
}

// oneLine folds an error message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// normalizeArgs prepares the command line for the cli package, which
// stops reading flags at the first argument and wants a value for every
// string flag:
//   - a bare -r (--resume) among the root flags, with no id after it,
//     becomes --pick: panto -r opens the session picker;
//   - a subcommand's flags may come after its arguments (panto search
//     QUERY --json): they are moved before them. After "--" nothing is a
//     flag.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	for len(rest) > 0 {
		a := rest[0]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		rest = rest[1:]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if (name == "r" || name == "resume") && !hasValue && (len(rest) == 0 || strings.HasPrefix(rest[0], "-")) {
			out = append(out, "--pick")
			continue
		}
		out = append(out, a)
		if !hasValue && cliargs.TakesValue(app.Flags, name) && len(rest) > 0 {
			out, rest = append(out, rest[0]), rest[1:]
		}
	}
	if len(rest) == 0 {
		return out
	}
	cmd := app.Command(rest[0])
	if cmd == nil {
		return append(out, rest...) // a prompt
	}
	return append(append(out, rest[0]), cliargs.FlagsFirst(cmd, rest[1:])...)
}
