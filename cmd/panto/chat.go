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

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/anthropicmessages"
	"github.com/panto-dev/panto/agent/extensions"
	"github.com/panto-dev/panto/agent/providererr"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
)

// maxPromptBytes bounds a prompt read from stdin.
const maxPromptBytes = 8 << 20

func chatFlags() []cli.Flag {
	flags := storeFlags(true)
	flags = append(flags, toolFlags()...)
	return append(flags,
		&cli.BoolFlag{Name: "continue", Aliases: []string{"c"}, Usage: "continue the latest session of this project (the git repository, by its origin remote, else the directory)"},
		&cli.BoolFlag{Name: "any", Usage: "with -c: continue the latest session of every project"},
		&cli.StringFlag{Name: "resume", Aliases: []string{"r"}, Usage: "resume the session with this `ID` or unique id prefix; with no ID, on a terminal, pick it from a list"},
		// -r without an id becomes --pick (normalizeArgs).
		&cli.BoolFlag{Name: "pick", Hidden: true},
		&cli.StringFlag{Name: "api-style", Value: string(agent.APIStyleOpenAIChat), Usage: "provider protocol: openai-chat or anthropic-messages", EnvVars: []string{"PANTO_API_STYLE"}},
		&cli.StringFlag{Name: "base-url", Usage: "provider API root (default https://api.openai.com/v1 or https://api.anthropic.com by --api-style)", EnvVars: []string{"PANTO_BASE_URL"}},
		&cli.StringFlag{Name: "model", Usage: fmt.Sprintf("model name (default %s or %s by --api-style)", defaultOpenAIModel, defaultAnthropicModel), EnvVars: []string{"PANTO_MODEL"}},
		&cli.StringFlag{Name: "reasoning", Usage: "reasoning effort: low, medium or high (Anthropic: a thinking budget)", EnvVars: []string{"PANTO_REASONING"}},
		&cli.Int64Flag{Name: "max-tokens", Usage: fmt.Sprintf("output token limit of an answer (default: the server's for openai-chat, %d for anthropic-messages, thinking on top)", anthropicmessages.MaxOutputTokens), EnvVars: []string{"PANTO_MAX_TOKENS"}},
		&cli.DurationFlag{Name: "provider-timeout", Value: defaultProviderTimeout, Usage: "fail a provider request that sends nothing for this positive duration (a streaming answer, however long, keeps it going)", EnvVars: []string{"PANTO_PROVIDER_TIMEOUT"}},
		&cli.StringFlag{Name: "system", Usage: "system prompt `TEXT` (stored in the session; replaces the one in force)", EnvVars: []string{"PANTO_SYSTEM"}},
		&cli.BoolFlag{Name: "allow-shell", Usage: "offer the model the run_shell tool (runs commands as you)", EnvVars: []string{"PANTO_ALLOW_SHELL"}},
		&cli.BoolFlag{Name: "no-session", Usage: "store nothing (same as --store none)"},
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "interactive even when stdin is not a terminal (reads one prompt or /command per line)"},
	)
}

// chatSession is what the one-shot and interactive modes share: the store
// and the agent on the current session.
type chatSession struct {
	e        *env
	store    agent.SessionStore
	spec     store.Spec
	persist  bool
	provider agent.Provider
	tools    agent.ToolSource
	// ext holds the Lua extensions: tools (in tools) and /commands.
	ext    *extensions.Host
	system string
	agent  *agent.Agent
	// project is where panto runs: new sessions record it, -c and the
	// picker look for its sessions first.
	project project.Found
}

// chat is the root command: one-shot with a prompt, interactive without.
func chat(c *cli.Context, e *env) error {
	if err := checkResumeFlags(c, e); err != nil {
		return err
	}
	if err := checkToolTimeout(c, e); err != nil {
		return err
	}
	if d := c.Duration("provider-timeout"); d <= 0 {
		return usageError(c, fmt.Errorf("--provider-timeout %s: want a positive duration, as 30s or 5m", d))
	}
	interactive := c.Bool("interactive") || (c.NArg() == 0 && e.stdinIsTerminal)
	cs, err := openChat(c, e)
	if err != nil {
		return err
	}
	defer closeStore(c.Context, cs.store, e.stderr)
	sess, conv, err := cs.resume(c)
	if err != nil {
		return err
	}
	cfg, explicit := providerFlags(c)
	if sess != nil {
		cfg.inherit(sess.Info, explicit)
	}
	cs.provider, err = newProvider(cfg, e.getenv)
	if sess == nil {
		sess = cs.newSession()
	}
	if err != nil {
		if interactive {
			return err
		}
		// Keep what the user typed: store the prompt, then fail.
		return cs.saveFailedPrompt(c, sess, conv, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	reg := newToolRegistry(c, wd)
	cs.tools = reg
	if err := cs.start(c.Context, sess, conv); err != nil {
		return err
	}
	// The agent exists: extensions fill its registry before the first prompt.
	cs.ext, _ = loadExtensions(c, e, reg, e.stderr)
	defer cs.ext.Close()
	if interactive {
		return cs.repl(c.Context, conv != nil)
	}
	prompt, err := oneShotPrompt(c, e)
	if err != nil {
		return err
	}
	return cs.oneShot(c.Context, prompt)
}

// checkResumeFlags refuses -c, -r and --any where they cannot work.
func checkResumeFlags(c *cli.Context, e *env) error {
	if c.Bool("continue") && (c.String("resume") != "" || c.Bool("pick")) {
		return errors.New("-c and -r both given: use one")
	}
	if c.Bool("any") && !c.Bool("continue") {
		return errors.New("--any goes with -c (panto -c --any continues the latest session of every project)")
	}
	if c.Bool("pick") && !e.stdinIsTerminal {
		return errors.New("-r without an id picks a session on a terminal, and this is not one: pass -r ID (panto sessions lists them)")
	}
	return nil
}

// openChat opens the store the flags name (none with --no-session) and
// finds the project panto runs in.
func openChat(c *cli.Context, e *env) (*chatSession, error) {
	storeSpec := flagValue(c, "store")
	if c.Bool("no-session") {
		storeSpec = "none"
	}
	spec, err := store.ParseSpec(storeSpec)
	if err != nil {
		return nil, err
	}
	opts, err := storeOptions(c, spec)
	if err != nil {
		return nil, err
	}
	persist := spec.Kind != store.KindNone
	var p project.Found
	if persist {
		p = currentProject(e.stderr)
	}
	if c.Bool("continue") && !c.Bool("any") {
		// -c lists the project's latest first: a bucket's Open reads
		// the project's head with the newest commit
		// (backends.Options.PageAhead).
		opts.PageAhead = p.Project
	}
	st, err := backends.OpenSpec(c.Context, spec, opts)
	if err != nil {
		return nil, err
	}
	return &chatSession{e: e, store: st, spec: spec, persist: persist, system: c.String("system"), project: p}, nil
}

// resume finds and loads the session -c, -r ID or the picker (-r) asks
// for; nil for a new session.
func (cs *chatSession) resume(c *cli.Context) (*agent.Session, *agent.Conversation, error) {
	resume := c.String("resume")
	if c.Bool("pick") {
		var err error
		if resume, err = pickSession(c.Context, cs.store, cs.project, cs.e.stderr, nil); err != nil {
			return nil, nil, err
		}
	}
	var sess *agent.Session
	var err error
	switch {
	case resume != "":
		sess, err = resolveSession(c.Context, cs.store, false, resume)
	case c.Bool("continue") && (c.Bool("any") || !cs.persist):
		sess, err = resolveSession(c.Context, cs.store, true, "")
	case c.Bool("continue"):
		sess, err = cs.continueProject(c.Context)
	}
	if sess == nil || err != nil {
		return nil, nil, err
	}
	conv, err := sess.Load(c.Context)
	if err != nil {
		return nil, nil, fmt.Errorf("load session %s: %w", sess.Info.ID, err)
	}
	return sess, conv, nil
}

// continueProject is -c: the latest session of the current project.
func (cs *chatSession) continueProject(ctx context.Context) (*agent.Session, error) {
	sess, err := latestInProject(ctx, cs.store, cs.project)
	if errors.Is(err, agent.ErrSessionNotFound) && offline(cs.store) {
		return nil, fmt.Errorf("continue: no session of project %s: %s", projectName(cs.project.Project, cs.e.getenv("HOME")), notHereOffline)
	}
	if errors.Is(err, agent.ErrSessionNotFound) {
		return nil, fmt.Errorf("continue: no session of project %s in this store yet: start one without -c, or continue the latest of every project with -c --any", projectName(cs.project.Project, cs.e.getenv("HOME")))
	}
	if err != nil {
		return nil, fmt.Errorf("continue: %w", err)
	}
	return sess, nil
}

// newSession is a new session of the store, in the current project.
func (cs *chatSession) newSession() *agent.Session {
	sess := cs.store.Create()
	sess.Info.Project = cs.project.Project
	return sess
}

// start makes the agent on sess and puts --system in force.
func (cs *chatSession) start(ctx context.Context, sess *agent.Session, conv *agent.Conversation) error {
	cs.agent = agent.New(sess, conv, agent.Options{Provider: cs.provider, Tools: cs.tools})
	if cs.system != "" && cs.agent.Conversation().SystemPrompt() != cs.system {
		if err := cs.agent.AddSystemMessage(ctx, cs.system, agent.SystemReplace); err != nil {
			return err
		}
	}
	return nil
}

// oneShotPrompt is the argument, with stdin appended when it is not a
// terminal (`git diff | panto "review"`), or stdin alone.
func oneShotPrompt(c *cli.Context, e *env) (string, error) {
	prompt := strings.Join(c.Args().Slice(), " ")
	if !e.stdinIsTerminal && e.stdin != nil {
		data, err := io.ReadAll(io.LimitReader(e.stdin, maxPromptBytes+1))
		if err != nil {
			return "", fmt.Errorf("read the prompt from stdin: %w", err)
		}
		if len(data) > maxPromptBytes {
			return "", fmt.Errorf("the prompt on stdin is larger than %d MiB", maxPromptBytes>>20)
		}
		if in := strings.TrimRight(string(data), "\n"); strings.TrimSpace(in) != "" {
			if prompt != "" {
				prompt += "\n\n"
			}
			prompt += in
		}
	}
	if strings.TrimSpace(prompt) == "" {
		return "", errors.New("no prompt: give one as an argument or on stdin (or run panto on a terminal for an interactive session)")
	}
	return prompt, nil
}

// oneShot submits the prompt, streams the reply to stdout and reports the
// session on stderr so that it can be resumed.
func (cs *chatSession) oneShot(ctx context.Context, prompt string) error {
	if err := cs.agent.SubmitUserMessage(ctx, prompt); err != nil {
		return err
	}
	// Ctrl-C cancels the step; what was stored stays stored.
	stepCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := newPrinter(cs.e.stdout, cs.e.stderr, false)
	out.rawText = !cs.e.stdoutIsTerminal
	err := cs.agent.RunStep(stepCtx, out)
	out.finish()
	if err != nil {
		return cs.stepError(err)
	}
	if cs.persist {
		id := cs.sessionID()
		fmt.Fprintf(cs.e.stderr, "session %s (resume: panto -r %s)\n", id, shortID(id))
	}
	return nil
}

// sessionID is the session that holds this panto's turns: the agent's,
// or, when a local-first store kept it twice meanwhile (another machine
// wrote to it), the copy that holds this machine's turns and takes this
// panto's next ones (localfirst.Store.Holder). The agent's id sent the
// user to resume the other machine's turns.
func (cs *chatSession) sessionID() string {
	id := cs.agent.Session().Info.ID
	if h, ok := cs.store.(interface{ Holder(string) string }); ok {
		return h.Holder(id)
	}
	return id
}

// saveFailedPrompt stores the one-shot prompt in a session without a
// provider (the provider could not be made), so that nothing typed is
// lost, and returns err saying where the prompt is.
func (cs *chatSession) saveFailedPrompt(c *cli.Context, sess *agent.Session, conv *agent.Conversation, err error) error {
	prompt, perr := oneShotPrompt(c, cs.e)
	if perr != nil {
		return err
	}
	cs.agent = agent.New(sess, conv, agent.Options{})
	if serr := cs.agent.SubmitUserMessage(c.Context, prompt); serr != nil {
		return err
	}
	return cs.stepError(err)
}

// stepError says what a failed step means for the session: the prompt is
// stored, and how to retry; or, for an answer cut off in its tool calls,
// what was not run and how to continue.
func (cs *chatSession) stepError(err error) error {
	var cut *agent.CutShortError
	if errors.As(err, &cut) {
		// Unlike a failure, the answer and its unrun calls are stored.
		err = errors.New(cutShortNotice(cut))
		if !cs.persist {
			return err
		}
		id := shortID(cs.sessionID())
		return fmt.Errorf("%w (stored in session %s; continue with: panto -r %s continue)", err, id, id)
	}
	if errors.Is(err, context.Canceled) {
		err = errors.New("cancelled")
	}
	err = unwrapProvider(err)
	if !cs.persist {
		return err
	}
	if errors.Is(err, agent.ErrSessionDeleted) {
		// Another panto (rm, prune, another machine's) deleted it while
		// this one wrote: the prompt went with it, and -r would only say
		// so.
		return fmt.Errorf("%w, while this panto was writing to it: the answer above is not stored; start a new session, or go on in another one (panto sessions)", err)
	}
	id := shortID(cs.sessionID())
	if msgs := cs.agent.Conversation().Messages; len(msgs) > 0 {
		if _, ok := msgs[len(msgs)-1].Interrupted(); ok {
			return fmt.Errorf("%w (your prompt and the answer so far are saved in session %s; go on with: panto -r %s)", err, id, id)
		}
	}
	return fmt.Errorf("%w (your prompt is saved in session %s; retry with: panto -r %s)", err, id, id)
}

// unwrapProvider returns the provider's own error when there is one: it
// already names the endpoint and says what to fix.
func unwrapProvider(err error) error {
	var pe *providererr.Error
	if errors.As(err, &pe) {
		return pe
	}
	return err
}

// shortID is the prefix of an id shown to people; it resolves uniquely
// in all but enormous catalogs.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
