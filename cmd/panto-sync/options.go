package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
)

// Diverge policies.
const (
	divergeFail     = "fail"
	divergeKeepBoth = "keep-both"
)

// options are the flags common to the commands, parsed.
type options struct {
	Dir         string
	Endpoint    string
	Stall       time.Duration
	JSON        bool
	Quiet       bool
	DryRun      bool
	Concurrency int
	Include     []string
	Exclude     []string
	OnDiverge   string
	Args        []string
	Stdout      io.Writer
	Stderr      io.Writer
	// Progress: draw a progress display (stdout is a terminal, and
	// neither --json nor --quiet).
	Progress bool
	// Trace logs every S3 request (-v, PANTO_TRACE=1); nil: none.
	Trace *slog.Logger
	// KeyFile is the key file of the bucket (--key-file, PANTO_KEY_FILE);
	// "": none.
	KeyFile string
}

// dirFlag is --dir, whose default is the directory panto itself uses:
// $PANTO_STORE when that names a directory, else store.DefaultDir.
func dirFlag() cli.Flag {
	def, _ := store.DefaultDir()
	if spec, err := store.ParseSpec(os.Getenv("PANTO_STORE")); err == nil && spec.Kind == store.KindDir {
		def = spec.Dir
	}
	return &cli.StringFlag{Name: "dir", Value: def, Usage: "the local session catalog `DIR` (default: panto's, $PANTO_STORE when a directory, else $XDG_DATA_HOME/panto/sessions)"}
}

func endpointFlag() cli.Flag {
	return &cli.StringFlag{Name: "endpoint", Usage: "S3 endpoint `URL` (e.g. http://127.0.0.1:9000 for MinIO); default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS", EnvVars: []string{"PANTO_ENDPOINT"}}
}

func stallFlag() cli.Flag {
	return &cli.DurationFlag{Name: "stall-timeout", Value: 30 * time.Second, Usage: "fail (and retry) an S3 request whose connection moves no byte for `DURATION`", EnvVars: []string{"PANTO_S3_STALL_TIMEOUT"}}
}

// commonFlags are the output and selection flags of every command.
func commonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object per event, then a summary object"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only failures and divergences"},
		&cli.IntFlag{Name: "concurrency", Aliases: []string{"j"}, Value: replica.DefaultConcurrency, Usage: "sessions transferred at once"},
		&cli.StringSliceFlag{Name: "include", Usage: "only session ids matching `GLOB` (repeatable)"},
		&cli.StringSliceFlag{Name: "exclude", Usage: "skip session ids matching `GLOB` (repeatable)"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log every S3 request on stderr: method, key, status, bytes, milliseconds", EnvVars: []string{"PANTO_TRACE"}},
	}
}

func remoteFlags() []cli.Flag {
	return append([]cli.Flag{endpointFlag(), stallFlag(), keyFileFlag()}, commonFlags()...)
}

// keyFileFlag is --key-file: the key of an encrypted bucket, and the key
// a new prefix is created encrypted with.
func keyFileFlag() cli.Flag {
	return &cli.StringFlag{Name: "key-file", Usage: "the bucket key `FILE` (panto-sync keygen makes one): an encrypted prefix needs the key it was created with, and a new prefix opened with one is created encrypted; a directory is never encrypted", EnvVars: []string{"PANTO_KEY_FILE"}}
}

func dryRunFlag() cli.Flag {
	return &cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "say what would be done; change nothing"}
}

func onDivergeFlag(other string) cli.Flag {
	return &cli.StringFlag{Name: "on-diverge", Value: divergeFail, Usage: "when a session diverged: `POLICY` fail (report it, touch neither side, exit 3) or keep-both (store the " + other + " copy as a new session linked to the original); also for a session deleted on one side and written to on the other"}
}

// parseOptions reads the common flags of c; its arguments are left in
// Args.
func parseOptions(c *cli.Context) (*options, error) {
	o := &options{
		Dir:         c.String("dir"),
		Endpoint:    c.String("endpoint"),
		Stall:       c.Duration("stall-timeout"),
		JSON:        c.Bool("json"),
		Quiet:       c.Bool("quiet"),
		DryRun:      c.Bool("dry-run"),
		Concurrency: c.Int("concurrency"),
		Include:     c.StringSlice("include"),
		Exclude:     c.StringSlice("exclude"),
		OnDiverge:   c.String("on-diverge"),
		Args:        c.Args().Slice(),
		Stdout:      c.App.Writer,
		Stderr:      c.App.ErrWriter,
		KeyFile:     c.String("key-file"),
	}
	if c.Bool("verbose") {
		o.Trace = slog.New(slog.NewTextHandler(o.Stderr, nil))
	}
	if o.Concurrency < 1 {
		return nil, usageError(c, "--concurrency must be at least 1")
	}
	if o.OnDiverge != "" && o.OnDiverge != divergeFail && o.OnDiverge != divergeKeepBoth {
		return nil, usageError(c, fmt.Sprintf("--on-diverge %q: use fail or keep-both", o.OnDiverge))
	}
	for _, g := range append(append([]string{}, o.Include...), o.Exclude...) {
		if _, err := path.Match(g, ""); err != nil {
			return nil, usageError(c, fmt.Sprintf("bad glob %q: %v", g, err))
		}
	}
	if f, ok := o.Stdout.(*os.File); ok && !o.JSON && !o.Quiet && term.IsTerminal(int(f.Fd())) {
		o.Progress = true
	}
	return o, nil
}

// bucketArg takes the one s3:// argument of a push, pull or status, and
// refuses any other.
func bucketArg(c *cli.Context, o *options) (string, error) {
	if len(o.Args) == 0 {
		return "", usageError(c, "missing the bucket: give s3://BUCKET[/PREFIX]")
	}
	spec, err := store.ParseSpec(o.Args[0])
	if err != nil || spec.Kind != store.KindS3 {
		return "", usageError(c, fmt.Sprintf("%q is not a bucket: give s3://BUCKET[/PREFIX]", o.Args[0]))
	}
	if len(o.Args) > 1 {
		return "", usageError(c, fmt.Sprintf("unexpected argument %q (filter sessions with --include GLOB)", o.Args[1]))
	}
	if o.Dir == "" {
		return "", usageError(c, "no session directory: pass --dir DIR or set HOME")
	}
	return spec.URL, nil
}

// selected reports whether id passes --include and --exclude.
func (o *options) selected(id string) bool {
	if len(o.Include) > 0 {
		in := false
		for _, g := range o.Include {
			if ok, _ := path.Match(g, id); ok {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	for _, g := range o.Exclude {
		if ok, _ := path.Match(g, id); ok {
			return false
		}
	}
	return true
}

// usageError is a command-line mistake: one line, then where help is.
func usageError(c *cli.Context, msg string) error {
	name := "panto-sync"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name += " " + c.Command.Name
	}
	return fmt.Errorf("%s; see `%s --help`", strings.TrimSuffix(msg, "."), name)
}
