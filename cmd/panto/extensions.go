package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/extensions"
	"github.com/panto-dev/panto/agent/tools"
)

// toolFlags are the flags of the tools on offer: the built-in ones the
// user allows, and the extensions loaded.
func toolFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "allow-write", Usage: "offer the model the write_file and edit_file tools (they change files under the working directory only)", EnvVars: []string{"PANTO_ALLOW_WRITE"}},
		&cli.StringSliceFlag{Name: "extension", Usage: "also load the Lua extension `FILE` (repeatable; the *.lua of $XDG_CONFIG_HOME/panto/extensions load always)"},
		&cli.DurationFlag{Name: "tool-timeout", Value: extensions.DefaultTimeout, Usage: "stop an extension's tool or /command (or a file's loading) that runs longer than this positive duration (the model is told)", EnvVars: []string{"PANTO_TOOL_TIMEOUT"}},
	}
}

// checkToolTimeout refuses a --tool-timeout that is not positive, as a
// mistake on the command line: every extension runs bounded (the timeout
// is what stops a file or a tool that loops for ever, the model told),
// so 0 has no "no limit" to mean, and extensions.New would take it as
// its default, 2 minutes, which no one typing 0 asked for.
func checkToolTimeout(c *cli.Context, e *env) error {
	d := c.Duration("tool-timeout")
	if d > 0 {
		return nil
	}
	from := ""
	if v := e.getenv("PANTO_TOOL_TIMEOUT"); v != "" {
		from = fmt.Sprintf(" (PANTO_TOOL_TIMEOUT is %q)", v)
	}
	return usageError(c, fmt.Errorf("--tool-timeout %s%s: want a positive duration, as 30s or 5m", d, from))
}

// builtinOrigin names the built-in tools in the registry and in warnings.
const builtinOrigin = "built-in"

// replCommands are the REPL's own commands (repl.go), which no extension
// may take.
var replCommands = []string{"quit", "exit", "q", "help", "new", "title", "fork", "sessions", "compact"}

// newToolRegistry is the registry of the built-in tools the flags allow,
// every built-in name reserved.
func newToolRegistry(c *cli.Context, dir string) *agent.ToolRegistry {
	builtin := tools.New(tools.Options{Dir: dir, AllowShell: c.Bool("allow-shell"), AllowWrite: c.Bool("allow-write")})
	reg := agent.NewToolRegistry()
	reg.Reserve(builtinOrigin, builtin, tools.Names()...)
	reg.Add(builtinOrigin, builtin)
	return reg
}

// loadExtensions loads the extension directory's files and --extension's
// into a host and registers their tools in reg; each failure is a
// warning line on w, and panto goes on without what failed.
func loadExtensions(c *cli.Context, e *env, reg *agent.ToolRegistry, w io.Writer) (*extensions.Host, string) {
	dir := extensions.Dir(e.getenv)
	files, err := extensions.Discover(dir)
	if err != nil {
		fmt.Fprintf(w, "panto: warning: %s\n", oneLine(err.Error()))
	}
	files = append(files, c.StringSlice("extension")...)
	host := extensions.New(extensions.Options{Timeout: c.Duration("tool-timeout"), Log: e.stderr})
	var failures []extensions.Failure
	failures = append(failures, host.Load(c.Context, files...)...)
	failures = append(failures, host.Register(reg)...)
	failures = append(failures, host.ReserveCommands(replCommands...)...)
	for _, f := range failures {
		fmt.Fprintf(w, "panto: warning: extension %s\n", f)
	}
	return host, dir
}

// extensionCommand runs /name if an extension defines it; handled is
// false when none does. Ctrl-C and --tool-timeout stop it.
func (cs *chatSession) extensionCommand(ctx context.Context, name, arg string) (handled bool, err error) {
	if cs.ext == nil {
		return false, nil
	}
	name = strings.TrimPrefix(name, "/")
	cmdCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	view := extensions.SessionView{Info: cs.agent.Session().Info, Messages: cs.agent.Conversation().Messages}
	out, err := cs.ext.RunCommand(cmdCtx, name, arg, view)
	if errors.Is(err, extensions.ErrNoCommand) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("/%s: %w", name, err)
	}
	if out != "" {
		fmt.Fprintln(cs.e.stdout, strings.TrimRight(out, "\n"))
	}
	return true, nil
}

// extensionHelp lists the extensions' commands for /help.
func (cs *chatSession) extensionHelp() string {
	if cs.ext == nil || len(cs.ext.Commands()) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Commands of extensions:\n")
	for _, it := range cs.ext.Commands() {
		fmt.Fprintf(&b, "  /%-23s %s\n", it.Name, it.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}

func extensionsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "extensions",
		Usage:     "list the Lua extensions that load, what they define, and what failed",
		UsageText: "panto extensions [--extension FILE]... [--json]",
		Description: `Loads the extensions as panto does at start (every *.lua of
$XDG_CONFIG_HOME/panto/extensions, else ~/.config/panto/extensions, then each
--extension FILE) and lists the tools and /commands they define, with their
file, then every file that failed to load and every name refused (one line each:
file:line: error). Exits 1 when anything failed, so that it can check an
extension before use.

Examples:
   panto extensions
   panto extensions --extension ./wordcount.lua
   panto extensions --json | jq '.failed'`,
		Flags: append(toolFlags(),
			&cli.BoolFlag{Name: "json", Usage: `print {"dir", "loaded": [{"name", "kind", "description", "file"}], "failed": [{"file", "line", "kind", "name", "error"}]}`},
		),
		Action: func(c *cli.Context) error {
			if err := checkToolTimeout(c, e); err != nil {
				return err
			}
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("working directory: %w", err)
			}
			host, dir := loadExtensions(c, e, newToolRegistry(c, wd), io.Discard)
			defer host.Close()
			loaded, failed := host.Loaded(), host.Failures()
			if c.Bool("json") {
				if loaded == nil {
					loaded = []extensions.Item{}
				}
				if failed == nil {
					failed = []extensions.Failure{}
				}
				if err := writeJSON(e.stdout, map[string]any{"dir": dir, "loaded": loaded, "failed": failed}); err != nil {
					return err
				}
			} else {
				writeExtensions(e.stdout, dir, loaded, failed)
			}
			if len(failed) > 0 {
				return fmt.Errorf("%s (listed above)", plural(len(failed), "extension failure"))
			}
			return nil
		},
	}
}

func writeExtensions(w io.Writer, dir string, loaded []extensions.Item, failed []extensions.Failure) {
	if len(loaded) == 0 && len(failed) == 0 {
		fmt.Fprintf(w, "no extensions: put *.lua files in %s, or pass --extension FILE\n", dir)
		return
	}
	if len(loaded) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tFILE\tDESCRIPTION")
		for _, it := range loaded {
			name := it.Name
			if it.Kind == extensions.KindCommand {
				name = "/" + name
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, it.Kind, it.File, clip(it.Description, 60))
		}
		tw.Flush()
	}
	if len(failed) > 0 {
		if len(loaded) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Failed:")
		for _, f := range failed {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
}
