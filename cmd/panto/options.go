package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/anthropicmessages"
	"github.com/panto-dev/panto/agent/openaichat"
	"github.com/panto-dev/panto/agent/stall"
	"github.com/panto-dev/panto/archive"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
)

// Default models of each API style.
const (
	defaultOpenAIModel    = "gpt-5.2"
	defaultAnthropicModel = "claude-sonnet-4-5"
)

// defaultProviderTimeout is how long a provider request may go without a
// byte (--provider-timeout): as Codex's stream idle timeout, long enough
// for a reasoning model's silent thinking, short enough that a wedged
// server fails a script's run.
const defaultProviderTimeout = 5 * time.Minute

// providerRetries bounds the SDKs' retries, so that a failing provider
// surfaces in seconds, not minutes.
const providerRetries = 1

// storeFlags are accepted by every command, before and after its name.
func storeFlags(withEnv bool) []cli.Flag {
	env := func(name string) []string {
		if withEnv {
			return []string{name}
		}
		return nil
	}
	return []cli.Flag{
		&cli.StringFlag{Name: "store", Usage: "where sessions live: a directory, file://DIR, s3://BUCKET[/PREFIX] or none (default: $XDG_DATA_HOME/panto/sessions)", EnvVars: env("PANTO_STORE")},
		&cli.StringFlag{Name: "endpoint", Usage: "S3 endpoint URL of an s3:// store, e.g. http://127.0.0.1:9000 (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)", EnvVars: env("PANTO_ENDPOINT")},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log every request to an S3 store on stderr: method, key, status, bytes, milliseconds", EnvVars: []string{"PANTO_TRACE"}},
		&cli.BoolFlag{Name: "direct", Usage: "with an s3:// store, write to the bucket itself and wait for it (default: local-first, each write acknowledged once it is on this machine's disk and sent to the bucket in the background)", EnvVars: []string{"PANTO_DIRECT"}},
		&cli.StringFlag{Name: "key-file", Usage: "the bucket key `FILE` of an s3:// store (panto-sync keygen makes one): an encrypted prefix needs the key it was created with, and a new prefix opened with one is created encrypted; a directory ignores it", EnvVars: env("PANTO_KEY_FILE")},
	}
}

// storeOptions are the backend options the flags give for the store of
// spec: the endpoint, the request trace of -v (or PANTO_TRACE=1) before or
// after a subcommand, and the key of --key-file (or PANTO_KEY_FILE) for a
// bucket (the local catalog is never encrypted).
func storeOptions(c *cli.Context, spec store.Spec) (backends.Options, error) {
	verbose := false
	for _, cc := range c.Lineage() {
		verbose = verbose || cc.Bool("verbose")
	}
	var trace *slog.Logger
	if verbose {
		trace = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	}
	var key *seal.Key
	if path := flagValue(c, "key-file"); path != "" && spec.Kind == store.KindS3 {
		var err error
		if key, err = seal.LoadKeyFile(path); err != nil {
			return backends.Options{}, fmt.Errorf("%w: give the file panto-sync keygen wrote (--key-file, PANTO_KEY_FILE)", err)
		}
	}
	direct := false
	for _, cc := range c.Lineage() {
		direct = direct || cc.Bool("direct")
	}
	notify := func(msg string) { fmt.Fprintf(c.App.ErrWriter, "panto: %s\n", oneLine(msg)) }
	// Every command lists or resolves right after opening the store.
	// The bucket's index catalog is kept between runs, shared with
	// panto-sync: a listing the newest commit cannot answer reads what
	// changed since the last run, not every partition.
	return backends.Options{Endpoint: flagValue(c, "endpoint"), Trace: trace, Snapshot: true, Key: key,
		LocalFirst: spec.Kind == store.KindS3 && !direct, Notify: notify, IndexCache: store.DefaultIndexCacheDir(),
		Reading: c.Command != nil && readingCommands[c.Command.Name], ResolveAhead: resolvedFirst(c)}, nil
}

// resolvingCommands are the commands whose first argument is the id or
// id prefix of the session they resolve first.
var resolvingCommands = map[string]bool{"show": true, "export": true, "fork": true, "title": true}

// resolvedFirst is what the command resolves right after opening the
// store: the session a command that takes one names (every argument of
// rm), the session a chat resumes (-r). A bucket lists the sessions under
// them with Open's requests (backends.Options.ResolveAhead).
func resolvedFirst(c *cli.Context) []string {
	switch {
	case c.Command != nil && c.Command.Name == "rm":
		return c.Args().Slice()
	case c.Command != nil && resolvingCommands[c.Command.Name] && c.NArg() > 0:
		return []string{c.Args().First()}
	}
	if id := flagValue(c, "resume"); id != "" {
		return []string{id}
	}
	return nil
}

// readingCommands are the commands that only read the store: their Open
// sends no conditional-write probe (backends.Options.Reading), so a
// listing costs the same few requests on the day's first run as after.
var readingCommands = map[string]bool{"sessions": true, "show": true, "search": true, "export": true, "usage": true}

// flagValue returns the value of a flag given to this command or to the
// command line before it (the nearest wins), so that --store works before
// and after a subcommand.
func flagValue(c *cli.Context, name string) string {
	for _, cc := range c.Lineage() {
		if cc.Command != nil && hasFlag(cc, name) && cc.IsSet(name) {
			return cc.String(name)
		}
		if cc.Command == nil && cc.App != nil && cc.IsSet(name) {
			return cc.String(name)
		}
	}
	return ""
}

func hasFlag(c *cli.Context, name string) bool {
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// closeStore closes the store as the command ends (store.Close: objstore
// writes its catalog checkpoints after an append returns), so that other
// processes list what this one wrote. Every command that opens a store
// defers it. The messages are stored already: a failure is a warning on
// one line, not an error.
//
// Ctrl-C or SIGTERM meanwhile ends the wait, not panto: a local-first
// store then says what it did not send, and how it will be, as at the end
// of its wait. Killed by the signal, panto said nothing of what it left.
func closeStore(ctx context.Context, st agent.SessionStore, w io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := store.Close(ctx, st); err != nil {
		fmt.Fprintf(w, "panto: warning: %s\n", oneLine(err.Error()))
	}
}

// flaggedStore is the spec of the store the flags name, and the options to
// open it with.
func flaggedStore(c *cli.Context) (store.Spec, backends.Options, error) {
	spec, err := store.ParseSpec(flagValue(c, "store"))
	if err != nil {
		return store.Spec{}, backends.Options{}, err
	}
	opts, err := storeOptions(c, spec)
	return spec, opts, err
}

// openStore opens the store the flags name. The command closes it
// (closeStore) when it is done.
func openStore(c *cli.Context, adjust ...func(*backends.Options)) (agent.SessionStore, store.Spec, error) {
	spec, opts, err := flaggedStore(c)
	if err != nil {
		return nil, spec, err
	}
	for _, fn := range adjust {
		fn(&opts)
	}
	st, err := backends.OpenSpec(c.Context, spec, opts)
	if err != nil {
		return nil, spec, err
	}
	return st, spec, nil
}

// providerConfig is the endpoint a chat talks to.
type providerConfig struct {
	Style     agent.APIStyle
	BaseURL   string
	Model     string
	Reasoning agent.ReasoningEffort
	// MaxTokens is not part of the endpoint's identity, so a resumed
	// session does not inherit it (0: the provider's default).
	MaxTokens int64
	// Timeout is how long a request may go without a byte (stall).
	Timeout time.Duration
}

// providerFlags reads the provider flags; explicit reports which were
// given (on the command line or in the environment).
func providerFlags(c *cli.Context) (cfg providerConfig, explicit map[string]bool) {
	explicit = map[string]bool{}
	for _, n := range []string{"api-style", "base-url", "model", "reasoning"} {
		explicit[n] = c.IsSet(n)
	}
	cfg = providerConfig{
		Style:     agent.APIStyle(c.String("api-style")),
		BaseURL:   c.String("base-url"),
		Model:     c.String("model"),
		Reasoning: agent.ReasoningEffort(c.String("reasoning")),
		MaxTokens: c.Int64("max-tokens"),
		Timeout:   c.Duration("provider-timeout"),
	}
	return cfg, explicit
}

// inherit fills what the user did not set from the endpoint a resumed
// session last talked to, so that `panto -c` continues where it was.
func (cfg *providerConfig) inherit(info agent.SessionInfo, explicit map[string]bool) {
	if info.APIStyle == "" {
		return
	}
	if !explicit["api-style"] {
		cfg.Style = info.APIStyle
	}
	if cfg.Style != info.APIStyle {
		return
	}
	if !explicit["base-url"] {
		cfg.BaseURL = info.BaseURL
	}
	if !explicit["model"] {
		cfg.Model = info.Model
	}
	if !explicit["reasoning"] {
		cfg.Reasoning = info.Reasoning
	}
}

// keyVars are the environment variables the key of a style comes from, in
// order.
func keyVars(style agent.APIStyle) []string {
	if style == agent.APIStyleAnthropicMessages {
		return []string{"PANTO_API_KEY", "ANTHROPIC_API_KEY"}
	}
	return []string{"PANTO_API_KEY", "OPENAI_API_KEY"}
}

// newProvider builds the provider of cfg with the key from the
// environment. The default endpoints need a key; a custom --base-url may
// not (local servers).
func newProvider(cfg providerConfig, getenv func(string) string) (agent.Provider, error) {
	vars := keyVars(cfg.Style)
	var key string
	for _, v := range vars {
		if key = strings.TrimSpace(getenv(v)); key != "" {
			break
		}
	}
	hint := strings.Join(vars, " / ")
	switch cfg.Reasoning {
	case agent.ReasoningDefault, agent.ReasoningLow, agent.ReasoningMedium, agent.ReasoningHigh:
	default:
		return nil, fmt.Errorf("--reasoning %q: want low, medium or high", cfg.Reasoning)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("--max-tokens %d: want a positive number of tokens", cfg.MaxTokens)
	}
	switch cfg.Style {
	case agent.APIStyleOpenAIChat:
		if cfg.Model == "" {
			cfg.Model = defaultOpenAIModel
		}
		if key == "" && isDefault(cfg.BaseURL, openaichat.DefaultBaseURL) {
			return nil, fmt.Errorf("no API key for %s: set %s (or point --base-url at a server that needs none)", openaichat.DefaultBaseURL, strings.Join(vars, " or "))
		}
		return openaichat.New(openaichat.Config{BaseURL: cfg.BaseURL, APIKey: key, KeyVars: hint, Model: cfg.Model, Reasoning: cfg.Reasoning, MaxTokens: cfg.MaxTokens, MaxRetries: providerRetries, HTTPClient: stall.Client(cfg.Timeout)})
	case agent.APIStyleAnthropicMessages:
		if cfg.Model == "" {
			cfg.Model = defaultAnthropicModel
		}
		if key == "" && isDefault(cfg.BaseURL, anthropicmessages.DefaultBaseURL) {
			return nil, fmt.Errorf("no API key for %s: set %s (or point --base-url at a server that needs none)", anthropicmessages.DefaultBaseURL, strings.Join(vars, " or "))
		}
		return anthropicmessages.New(anthropicmessages.Config{BaseURL: cfg.BaseURL, APIKey: key, KeyVars: hint, Model: cfg.Model, Reasoning: cfg.Reasoning, MaxTokens: cfg.MaxTokens, MaxRetries: providerRetries, HTTPClient: stall.Client(cfg.Timeout)})
	}
	return nil, fmt.Errorf("--api-style %q: want %s or %s", cfg.Style, agent.APIStyleOpenAIChat, agent.APIStyleAnthropicMessages)
}

func isDefault(baseURL, def string) bool {
	b := strings.TrimRight(baseURL, "/")
	return b == "" || b == def
}

// resolveSession finds the session -c or -r asks for.
func resolveSession(ctx context.Context, st agent.SessionStore, latest bool, id string) (*agent.Session, error) {
	switch {
	case id != "":
		s, err := st.Resolve(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", id, err)
		}
		return s, nil
	case latest:
		s, err := st.Latest(ctx)
		if errors.Is(err, agent.ErrSessionNotFound) && offline(st) {
			return nil, errors.New("continue: " + notHereOffline)
		}
		if errors.Is(err, agent.ErrSessionNotFound) {
			return nil, errors.New("continue: there is no session yet in this store; start one without -c")
		}
		if err != nil {
			return nil, fmt.Errorf("continue: %w", err)
		}
		return s, nil
	}
	return nil, nil
}

// notHereOffline is what -c says when a local-first store found no
// session while its bucket did not answer: the bucket may hold it, and a
// session started without -c would not go on from it.
const notHereOffline = "none on this machine, and the bucket did not answer: run it again once the bucket answers (or start a new session without -c)"

// offline reports whether st is a local-first store whose reads went to
// this machine's copy alone, the bucket not answering
// (localfirst.Store.Offline).
func offline(st agent.SessionStore) bool {
	o, ok := st.(interface{ Offline() bool })
	return ok && o.Offline()
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// openLogStore opens the store the flags name as a store.LogStore
// (backends.OpenLogSpec): what the commands that read sessions as logs
// (fork, export, search, usage) need; none keeps nothing to read.
func openLogStore(c *cli.Context) (store.LogStore, error) {
	return openLogStoreWith(c, nil)
}

// openBulkLogStore is openLogStore for a batch that writes many sessions
// and compares what it writes with what the store holds (import): a
// bucket is opened as itself, never local-first (a replica of some of
// its sessions would misinform the comparison), and as a bulk writer
// (backends.Options.Bulk), as panto-sync opens it: the index entries of
// its appends are written together at exit, a directory's files synced
// together, instead of a commit of the index (or an fsync) per session
// written. Cut short before its exit, a session it wrote is listed again
// once the next run's append of it is refused (the bucket's refusal
// catches the index up).
func openBulkLogStore(c *cli.Context) (store.LogStore, error) {
	return openLogStoreWith(c, func(o *backends.Options) { o.LocalFirst, o.Bulk = false, true })
}

func openLogStoreWith(c *cli.Context, adjust func(*backends.Options)) (store.LogStore, error) {
	spec, opts, err := flaggedStore(c)
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(&opts)
	}
	ls, err := backends.OpenLogSpec(c.Context, spec, opts)
	if errors.Is(err, backends.ErrNoLogs) {
		return nil, errors.New("the store is none, which keeps no sessions: give --store DIR or s3://BUCKET[/PREFIX]")
	}
	return ls, err
}

// bucketReads is how many sessions search and usage read at once from a
// bucket: its reads wait on the network, not on the cores, and a new
// machine's search of a year of sessions reads every one (at a 60 ms
// round trip, 8,000 sessions took 65 s eight at a time, 16 s
// thirty-two at a time). The bucket store keeps 32 readers within
// 256 MiB, panto-sync's copy as many. A directory's reads keep the
// archive's default, which keeps the cores busy.
const bucketReads = 32

// archiveOptions are the options of search's and usage's reads of the
// store the flags name.
func archiveOptions(c *cli.Context) archive.Options {
	if spec, err := store.ParseSpec(flagValue(c, "store")); err == nil && spec.Kind == store.KindS3 {
		return archive.Options{Parallel: bucketReads}
	}
	return archive.Options{}
}

// resolveID resolves the command's first argument, an id or id prefix.
func resolveID(c *cli.Context, st agent.SessionStore, what string) (*agent.Session, error) {
	if c.NArg() < 1 {
		return nil, fmt.Errorf("%s: give a session id or id prefix (panto sessions lists them)", what)
	}
	sess, err := st.Resolve(c.Context, c.Args().First())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return sess, nil
}
