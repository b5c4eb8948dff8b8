package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/peterh/liner"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/archive"
	"github.com/panto-dev/panto/store"
)

const replHelp = `Type a prompt and press Enter. Commands:
  /compact [INSTRUCTIONS]  summarise the conversation so far; later turns send the summary instead
  /title [TEXT]            name this session (no TEXT: show its title)
  /fork [N]                go on in a new session holding this one's first N messages (default: all)
  /sessions                list the sessions of the store
  /new                     start a new session
  /help                    this help
  /quit                    exit (or Ctrl-D)
Ctrl-C cancels a running reply (the prompt and the answer so far stay stored); at the prompt it clears the line.
Enter alone sends again a prompt left without an answer (the provider failed, or Ctrl-C came first).`

// lineReader reads the REPL's input: liner on a terminal (line editing,
// history), plain lines otherwise.
type lineReader interface {
	// Prompt returns the next line; io.EOF at the end of input,
	// liner.ErrPromptAborted on Ctrl-C.
	Prompt(prompt string) (string, error)
	AppendHistory(line string)
	Close() error
}

type plainReader struct{ sc *bufio.Scanner }

func (r *plainReader) Prompt(string) (string, error) {
	if r.sc.Scan() {
		return r.sc.Text(), nil
	}
	if err := r.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}
func (r *plainReader) AppendHistory(string) {}
func (r *plainReader) Close() error         { return nil }

// linerReader is liner with its history kept in a file.
type linerReader struct {
	*liner.State
	historyFile string
}

func newLinerReader(getenv func(string) string) *linerReader {
	l := liner.NewLiner()
	l.SetCtrlCAborts(true)
	r := &linerReader{State: l, historyFile: historyPath(getenv)}
	if r.historyFile != "" {
		if f, err := os.Open(r.historyFile); err == nil {
			_, _ = l.ReadHistory(f)
			f.Close()
		}
	}
	return r
}

func (r *linerReader) Close() error {
	if r.historyFile != "" {
		if err := os.MkdirAll(filepath.Dir(r.historyFile), 0o700); err == nil {
			if f, err := os.OpenFile(r.historyFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, _ = r.State.WriteHistory(f)
				f.Close()
			}
		}
	}
	return r.State.Close()
}

// historyPath is $XDG_STATE_HOME/panto/history, else
// ~/.local/state/panto/history.
func historyPath(getenv func(string) string) string {
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "panto", "history")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "panto", "history")
}

// repl runs the interactive mode until /quit or the end of input.
func (cs *chatSession) repl(ctx context.Context, resumed bool) error {
	e := cs.e
	var in lineReader
	if e.stdinIsTerminal {
		in = newLinerReader(e.getenv)
	} else {
		in = &plainReader{sc: bufio.NewScanner(e.stdin)}
		in.(*plainReader).sc.Buffer(make([]byte, 64<<10), maxPromptBytes)
	}
	defer in.Close()

	cs.banner(resumed)
	for {
		line, err := in.Prompt("> ")
		switch {
		case errors.Is(err, liner.ErrPromptAborted):
			fmt.Fprintln(e.stdout, "(Ctrl-D or /quit to exit)")
			continue
		case errors.Is(err, io.EOF):
			fmt.Fprintln(e.stdout)
			return nil
		case err != nil:
			return fmt.Errorf("read input: %w", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			// Enter alone sends again a prompt that has no answer (the
			// provider failed, or Ctrl-C came before any text).
			if cs.unanswered() {
				cs.report(cs.step(ctx))
			}
			continue
		}
		in.AppendHistory(line)
		if strings.HasPrefix(line, "/") {
			quit, err := cs.command(ctx, line)
			if err != nil {
				fmt.Fprintf(e.stderr, "error: %s\n", oneLine(err.Error()))
			}
			if quit {
				return nil
			}
			continue
		}
		cs.report(cs.turn(ctx, line))
	}
}

// report prints a turn's error, and how to send the prompt again when it
// is left without an answer.
func (cs *chatSession) report(err error) {
	if err == nil {
		return
	}
	fmt.Fprintf(cs.e.stderr, "error: %s\n", oneLine(err.Error()))
	if cs.unanswered() {
		fmt.Fprintln(cs.e.stderr, "(Enter sends the prompt again)")
	}
}

// unanswered reports whether the conversation ends with a prompt (or tool
// results) the model has not answered: a step that failed or was
// cancelled before any text, here or in the run that stored it.
func (cs *chatSession) unanswered() bool {
	if cs.agent == nil {
		return false
	}
	msgs := cs.agent.Conversation().Context()
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1]
	return last.Role == agent.RoleUser && !last.IsCompactionSummary()
}

// banner introduces the session; a resumed one shows its last exchange.
func (cs *chatSession) banner(resumed bool) {
	e := cs.e
	id := cs.provider.Identity()
	where := "not stored (--no-session)"
	if cs.persist {
		where = "session " + cs.agent.Session().Info.ID
	}
	fmt.Fprintf(e.stdout, "panto · %s · %s %s at %s · /help for commands\n", where, id.APIStyle, id.Model, id.BaseURL)
	if !resumed {
		return
	}
	if last := lastExchange(cs.agent.Conversation().Messages); len(last) > 0 {
		fmt.Fprintln(e.stdout, "Last exchange:")
		writeTranscript(e.stdout, last, 0)
		fmt.Fprintln(e.stdout)
	}
	if cs.unanswered() {
		fmt.Fprintln(e.stdout, "The last prompt has no answer: press Enter to send it again, or type another.")
	}
}

// turn submits one prompt and runs the step.
func (cs *chatSession) turn(ctx context.Context, prompt string) error {
	if err := cs.agent.SubmitUserMessage(ctx, prompt); err != nil {
		return deletedInTurn(err)
	}
	return cs.step(ctx)
}

// step runs the step that answers the conversation; Ctrl-C cancels it.
func (cs *chatSession) step(ctx context.Context) error {
	stepCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	out := newPrinter(cs.e.stdout, cs.e.stderr, true)
	err := cs.agent.RunStep(stepCtx, out)
	out.finish()
	if err != nil && stepCtx.Err() != nil && ctx.Err() == nil {
		return errors.New(cancelNotice(err, cs.agent.Conversation().Messages))
	}
	var cut *agent.CutShortError
	if errors.As(err, &cut) {
		return errors.New(cutShortNotice(cut))
	}
	if err != nil {
		return deletedInTurn(unwrapProvider(err))
	}
	return nil
}

// cancelNotice says what a step cancelled by Ctrl-C left stored: the
// prompt, and the answer as far as it had streamed, but not a tool call
// stopped before its result (nor the answer that made it).
func cancelNotice(err error, msgs []agent.Message) string {
	var stopped *agent.ToolStoppedError
	if errors.As(err, &stopped) {
		return fmt.Sprintf("cancelled: %s was stopped, and the answer that called it is not stored (what came before it is)", stopped.Tool)
	}
	if n := len(msgs); n > 0 {
		if _, ok := msgs[n-1].Interrupted(); ok {
			return "cancelled: the answer so far is stored"
		}
	}
	return "cancelled: the prompt is stored"
}

// deletedInTurn says what to do when the session was deleted under the
// interactive mode (another panto's rm): nothing more can be stored in
// it.
func deletedInTurn(err error) error {
	if errors.Is(err, agent.ErrSessionDeleted) {
		return fmt.Errorf("%w, while this panto was in it: nothing more is stored in it; /new starts a session, /sessions lists the others", err)
	}
	return err
}

// command runs a /command and reports whether to quit.
func (cs *chatSession) command(ctx context.Context, line string) (quit bool, err error) {
	e := cs.e
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/quit", "/exit", "/q":
		return true, nil
	case "/help", "/?":
		fmt.Fprintln(e.stdout, replHelp)
		if help := cs.extensionHelp(); help != "" {
			fmt.Fprintln(e.stdout, help)
		}
	case "/new":
		if err := cs.start(ctx, cs.newSession(), nil); err != nil {
			return false, err
		}
		if cs.persist {
			fmt.Fprintf(e.stdout, "new session %s\n", cs.agent.Session().Info.ID)
		} else {
			fmt.Fprintln(e.stdout, "new conversation (not stored)")
		}
	case "/title":
		return false, cs.title(ctx, arg)
	case "/fork":
		return false, cs.fork(ctx, arg)
	case "/sessions":
		list, err := cs.store.List(ctx)
		if err != nil {
			return false, fmt.Errorf("list sessions: %w", err)
		}
		writeSessionTable(e.stdout, list, cs.sessionID())
	case "/compact":
		if len(cs.agent.Conversation().Context()) == 0 {
			fmt.Fprintln(e.stdout, "nothing to compact yet")
			return false, nil
		}
		stepCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
		if err := cs.agent.Compact(stepCtx, arg, agent.NopReceiver{}); err != nil {
			var cut *agent.CutShortError
			if errors.As(err, &cut) {
				return false, errors.New(cutShortNotice(cut))
			}
			return false, unwrapProvider(err)
		}
		msgs := cs.agent.Conversation().Messages
		fmt.Fprintf(e.stdout, "compacted: later turns start from this summary\n%s\n", screenText(strings.TrimSpace(msgs[len(msgs)-1].Text())))
	default:
		if handled, err := cs.extensionCommand(ctx, name, arg); handled {
			return false, err
		}
		return false, fmt.Errorf("unknown command %s: /help lists them", name)
	}
	return false, nil
}

// title sets the session's title, or shows it.
func (cs *chatSession) title(ctx context.Context, arg string) error {
	info := cs.agent.Session().Info
	if arg == "" {
		if info.Title == "" {
			fmt.Fprintln(cs.e.stdout, "no title yet: /title TEXT names this session")
		} else {
			fmt.Fprintf(cs.e.stdout, "title: %s\n", screenText(info.Title))
		}
		return nil
	}
	if !cs.persist {
		return errors.New("/title: nothing is stored (--no-session), so there is nothing to name")
	}
	if err := cs.agent.SetTitle(ctx, cleanTitle(arg)); err != nil {
		return fmt.Errorf("/title: %w", err)
	}
	fmt.Fprintf(cs.e.stdout, "title: %s\n", screenText(cs.agent.Session().Info.Title))
	return nil
}

// fork goes on in a fork of the current session (archive.Fork), its first
// N messages.
func (cs *chatSession) fork(ctx context.Context, arg string) error {
	ls, ok := store.AsLogStore(cs.store)
	if !ok || !cs.persist {
		return errors.New("/fork: nothing is stored (--no-session), so there is nothing to fork")
	}
	at := 0
	if arg != "" {
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return fmt.Errorf("/fork %s: give a number of messages, 1 or more (/fork alone takes them all)", arg)
		}
		at = n
	}
	parent := cs.sessionID()
	if len(cs.agent.Conversation().Messages) == 0 {
		return errors.New("/fork: this session holds no message yet")
	}
	sess, err := archive.Fork(ctx, ls, parent, at, time.Now())
	if err != nil {
		return err
	}
	conv, err := sess.Load(ctx)
	if err != nil {
		return fmt.Errorf("/fork: load the new session %s: %w", sess.Info.ID, err)
	}
	if err := cs.start(ctx, sess, conv); err != nil {
		return err
	}
	fmt.Fprintf(cs.e.stdout, "forked: now in session %s, the first %s of %s\n", sess.Info.ID, plural(sess.Info.ForkedAt, "message"), shortID(parent))
	return nil
}
