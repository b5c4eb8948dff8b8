// Command scale measures what each routine operation of panto and
// panto-sync asks of a bucket as the archive grows (issue 21): for each
// size it seeds a bucket with that many sessions, then runs the real
// binaries against it with the request trace on (-v: one line per HTTP
// request, objstore.WithTrace) and sums each command's requests and bytes,
// with its wall time. It prints markdown tables. bench/scale.sh starts
// the MinIO, builds the binaries and runs it:
//
//	bench/scale.sh --sizes 1000,10000,100000
//
// The operations, in this order, on each size's bucket:
//
//   - seed: panto-sync push of a generated catalog (sessions of a few KB,
//     in several projects, in the real line format) to a new bucket;
//   - panto sessions, first in a fresh home and again, --all, and --all
//     --limit 0 (every session: the catalog);
//   - panto show PREFIX: resolve a session by an 8-character id prefix
//     (and read it: show prints it), one in the middle of the catalog
//     and the newest (which `panto sessions` shows);
//   - panto -c PROMPT: open, latest, and one turn against a fake provider,
//     written to the bucket itself (--direct); "sent beyond segments" is
//     what the turn sends that is not its segments (the index, manifests);
//   - panto-sync pull twice and push twice, the second of each measured
//     (a no-op: nothing changed);
//   - panto-sync push after one message was appended to 1% of the
//     sessions (--grow-rounds times, one after another: the runs of the
//     index merge past 4 and fold into its partitions past an eighth of
//     it), then panto sessions --all --limit 0 (every session) in
//     the home that listed before it (a cached catalog catching up with
//     a bulk write);
//   - with --turns N, N one-turn panto PROMPT runs, each a new session:
//     their sum (an exit's share of the index's merges and folds) and
//     the costliest, then panto show PREFIX again (a resolve beside the
//     runs they left);
//   - panto-sync pull into an empty directory (a full pull), and rclone
//     copy of the same bucket into another, for the time ratio; they take
//     turns --pull-rounds times, and the fastest of each is reported.
//
// It names no object of the bucket's format except that a segment's key
// holds a /seg/ element, so it measures any format the code writes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/internal/testkit/benchprovider"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

// options are the command's flags.
type options struct {
	endpoint     string
	work         string
	panto        string
	pantoSync    string
	rclone       string
	sizes        []int
	projects     int
	sessionBytes int
	concurrency  int
	verifyUpTo   int
	pullRounds   int
	growRounds   int
	turns        int
	continued    int
	keep         bool
	seed         uint64
	timeout      time.Duration
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(2)
	}
	if err := run(context.Background(), opts, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %s\n", strings.Join(strings.Fields(err.Error()), " "))
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var o options
	sizes := fs.String("sizes", "1000,10000", "comma-separated numbers of sessions, one bucket each, run one after another")
	fs.StringVar(&o.endpoint, "endpoint", "", "S3 endpoint of the MinIO to measure on (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY reach it)")
	fs.StringVar(&o.work, "work", "", "a scratch directory for the catalogs, homes and logs")
	fs.StringVar(&o.panto, "panto", "panto", "the panto binary")
	fs.StringVar(&o.pantoSync, "panto-sync", "panto-sync", "the panto-sync binary")
	fs.StringVar(&o.rclone, "rclone", "rclone", "the rclone binary, for the full pull's baseline (empty: none)")
	fs.IntVar(&o.projects, "projects", 20, "projects the sessions are spread over")
	fs.IntVar(&o.sessionBytes, "session-bytes", 1500, "a session's log grows past a log-normal target around this (a median of about 2.7 KB at 1500)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "panto-sync --concurrency, and rclone's --transfers")
	fs.IntVar(&o.verifyUpTo, "verify-up-to", 1000, "run panto-sync verify on each seeded bucket of at most this many sessions")
	fs.IntVar(&o.growRounds, "grow-rounds", 1, "times 1% of the sessions grow and are pushed, one after another (the runs' merges and folds show past 4 and about 12)")
	fs.IntVar(&o.turns, "turns", 0, "after the pushes, this many one-turn panto PROMPT runs, each a new session, one after another: what an exit costs the index over many (its runs' merges and folds), summed and the costliest")
	fs.IntVar(&o.continued, "continue-turns", 0, "after the pushes (and --turns), this many panto -c PROMPT runs, one after another, each a turn of the same session: what a turn of a session that grows long costs (its manifests, compactions and commits), spread")
	fs.BoolVar(&o.keep, "keep", false, "keep each size's catalogs, homes and logs (every command's request trace, in <work>/<size>/logs) instead of removing them")
	fs.IntVar(&o.pullRounds, "pull-rounds", 2, "full pulls and rclone copies, taking turns; the fastest of each is reported (0: none, for a quick run of the other operations)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the catalog")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound on each command")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: scale --endpoint URL --work DIR [--sizes 1000,10000,100000] [flags]\n\nUsually run by bench/scale.sh, which starts MinIO and builds the binaries.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.endpoint == "" || o.work == "" {
		return o, errors.New("give --endpoint URL and --work DIR (bench/scale.sh does)")
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return o, fmt.Errorf("--sizes %q: want numbers of sessions of at least 2, e.g. 1000,10000", *sizes)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.projects < 1 || o.sessionBytes < 1 || o.concurrency < 1 || o.pullRounds < 0 || o.growRounds < 1 || o.turns < 0 || o.continued < 0 {
		return o, errors.New("--projects, --session-bytes, --concurrency and --grow-rounds must be positive, --pull-rounds, --turns and --continue-turns not negative")
	}
	return o, nil
}

// result is one measured command.
type result struct {
	op   string
	t    tally
	wall time.Duration
}

// sizeRun is everything measured at one size.
type sizeRun struct {
	size             int
	catalogBytes     int64
	medianBytes      int
	generate, seed   time.Duration
	results          []result
	fullPull, rclone time.Duration
	// turns is what each of the many turns (--turns) sent beyond its
	// segments, and of it to the partitions (a fold's step).
	turns []turnCost
	// continued is the same of each turn of one session (--continue-turns).
	continued []turnCost
}

// turnCost is what one run of the many turns sent beyond its segments,
// of that to the index's partitions, and by kind of object.
type turnCost struct {
	beyond, partitions int64
	byKind             map[string]int64
}

func run(ctx context.Context, o options, out io.Writer) error {
	providerURL, stop, err := benchprovider.Start()
	if err != nil {
		return err
	}
	defer stop()
	client, err := s3Client(ctx, o.endpoint)
	if err != nil {
		return err
	}
	var runs []sizeRun
	for _, n := range o.sizes {
		r, err := runSize(ctx, o, client, providerURL, n)
		if err != nil {
			return fmt.Errorf("%d sessions: %w", n, err)
		}
		runs = append(runs, r)
		// What was measured so far, before the slow removal of the
		// size's catalogs (which the next size does not need).
		fmt.Fprintf(os.Stderr, "%s scale: %d sessions measured:\n", time.Now().Format("15:04:05"), n)
		printTables(os.Stderr, o, []sizeRun{r})
		if !o.keep {
			_ = os.RemoveAll(filepath.Join(o.work, strconv.Itoa(n)))
		}
	}
	printTables(out, o, runs)
	return nil
}

// bench runs the commands of one size.
type bench struct {
	o           options
	size        int
	bucket      string
	dir         string // this size's scratch directory
	home        string // HOME and XDG directories of the panto runs
	projectDir  string // where panto runs: the newest session's project
	providerURL string
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s scale: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func runSize(ctx context.Context, o options, client *s3.Client, providerURL string, n int) (sizeRun, error) {
	b := &bench{o: o, size: n, bucket: fmt.Sprintf("scale-%d", n), dir: filepath.Join(o.work, strconv.Itoa(n)), providerURL: providerURL}
	b.home = filepath.Join(b.dir, "home")
	b.projectDir = filepath.Join(b.dir, "project")
	r := sizeRun{size: n}

	progress("%d: generating the catalog", n)
	start := time.Now()
	cat, err := writeCatalog(filepath.Join(b.dir, "catalog"), n, o.projects, o.sessionBytes, o.seed)
	if err != nil {
		return r, err
	}
	r.generate, r.catalogBytes, r.medianBytes = time.Since(start), cat.bytes, cat.medianBytes
	if err := makeProjectDir(b.projectDir, cat.project.Remote); err != nil {
		return r, err
	}
	if err := os.MkdirAll(b.home, 0o755); err != nil {
		return r, err
	}
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.bucket)}); err != nil {
		return r, fmt.Errorf("create bucket %s: %w", b.bucket, err)
	}

	progress("%d: seeding (%d bytes of logs)", n, cat.bytes)
	seed, err := b.sync(ctx, "seed: panto-sync push of the catalog to an empty bucket", "push", cat.dir)
	if err != nil {
		return r, err
	}
	r.seed = seed.wall
	r.results = append(r.results, seed)
	progress("%d: seeded in %.1f s (%d requests)", n, seed.wall.Seconds(), seed.t.requests)
	if n <= o.verifyUpTo {
		if _, err := b.run(ctx, "verify", "", false, b.o.pantoSync, "verify", "--quiet", "--endpoint", o.endpoint, b.url()); err != nil {
			return r, fmt.Errorf("the seeded bucket does not verify: %w", err)
		}
	}

	prefix := cat.someID[:8]
	for _, c := range []struct {
		op   string
		args []string
	}{
		{"panto sessions (first run in a new home)", []string{"sessions"}},
		{"panto sessions (again)", []string{"sessions"}},
		{"panto sessions --all", []string{"sessions", "--all"}},
		{"panto sessions --all --limit 0 (every session: the catalog)", []string{"sessions", "--all", "--limit", "0"}},
		{"panto show PREFIX (resolve an 8-char id prefix, read the session)", []string{"show", prefix}},
		{"panto show PREFIX of the newest session (one `panto sessions` shows)", []string{"show", cat.newestID[:8]}},
		{"panto -c PROMPT (open, latest, one turn)", []string{"-c", "--api-style", "openai-chat", "--base-url", b.providerURL, "--model", "bench-model", "one more thing, please"}},
	} {
		progress("%d: %s", n, c.op)
		res, err := b.panto(ctx, c.op, c.args...)
		if err != nil {
			return r, err
		}
		r.results = append(r.results, res)
	}
	// Another machine's first page after the turn: its commits leave the
	// newest one most likely stored against a base (15 in 16), which
	// the page of a project does not read (WithPageAhead).
	home := b.home
	b.home = filepath.Join(b.dir, "home-after-turn")
	progress("%d: panto sessions on another machine after the turn", n)
	after, err := b.panto(ctx, "panto sessions on another machine after that turn (a new home; the newest commit most likely stored against a base)", "sessions")
	b.home = home
	if err != nil {
		return r, err
	}
	r.results = append(r.results, after)

	// The first pull fetches the turn; the second has nothing to do, and
	// the pushes neither.
	for _, c := range []struct{ op, cmd string }{
		{"", "pull"}, {"panto-sync pull, nothing changed", "pull"},
		{"", "push"}, {"panto-sync push, nothing changed", "push"},
	} {
		progress("%d: %s", n, c.cmd)
		res, err := b.sync(ctx, c.op, c.cmd, cat.dir)
		if err != nil {
			return r, err
		}
		if c.op != "" {
			r.results = append(r.results, res)
		}
	}

	var res result
	for round := 1; round <= o.growRounds; round++ {
		grown, grownBytes, err := sessiongen.New(o.seed+uint64(round)).AppendSome(cat.dir, 0.01)
		if err != nil {
			return r, fmt.Errorf("grow 1%% of the sessions: %w", err)
		}
		op := fmt.Sprintf("panto-sync push after 1%% grew (%d sessions, %d bytes of logs)", grown, grownBytes)
		if o.growRounds > 1 {
			op = fmt.Sprintf("panto-sync push after 1%% grew, round %d (%d sessions, %d bytes of logs)", round, grown, grownBytes)
		}
		progress("%d: push after %d sessions grew (%d bytes), round %d", n, grown, grownBytes, round)
		if res, err = b.sync(ctx, op, "push", cat.dir); err != nil {
			return r, err
		}
		r.results = append(r.results, res)
	}
	// Another machine's cached catalog (panto's home, which listed
	// every session before) catching up with the pushes.
	res, err = b.panto(ctx, "panto sessions --all --limit 0 after that push (every session; catalog cached before it)", "sessions", "--all", "--limit", "0")
	if err != nil {
		return r, err
	}
	r.results = append(r.results, res)
	if o.turns > 0 {
		label := fmt.Sprintf("%d panto PROMPT runs in a row, each a new session, one turn", o.turns)
		turns, costs, err := b.manyTurns(ctx, o.turns, label)
		if err != nil {
			return r, err
		}
		r.results = append(r.results, turns...)
		r.turns = costs
		// The runs the turns left (a fold or merges under way) are what
		// a resolve of an older session reads beside its partition.
		res, err := b.panto(ctx, "panto show PREFIX after those runs (the same session: its partition and the runs they left)", "show", prefix)
		if err != nil {
			return r, err
		}
		r.results = append(r.results, res)
	}
	if o.continued > 0 {
		label := fmt.Sprintf("%d panto -c PROMPT runs in a row, each a turn of the same session", o.continued)
		turns, costs, err := b.manyTurns(ctx, o.continued, label, "-c")
		if err != nil {
			return r, err
		}
		r.results = append(r.results, turns...)
		r.continued = costs
	}

	// The full pull and rclone take turns, each into a new empty
	// directory; the best of each is kept, as the machine is shared.
	for round := 1; round <= o.pullRounds; round++ {
		progress("%d: full pull into an empty directory (round %d)", n, round)
		res, err := b.sync(ctx, "panto-sync pull into an empty directory", "pull", filepath.Join(b.dir, fmt.Sprint("pulled-", round)))
		if err != nil {
			return r, err
		}
		if r.fullPull == 0 || res.wall < r.fullPull {
			if r.fullPull != 0 {
				r.results = r.results[:len(r.results)-1]
			}
			r.fullPull = res.wall
			r.results = append(r.results, res)
		}
		if o.rclone == "" {
			continue
		}
		progress("%d: rclone copy into an empty directory (round %d)", n, round)
		took, err := b.rcloneCopy(ctx, filepath.Join(b.dir, fmt.Sprint("rclone-", round)))
		if err != nil {
			return r, err
		}
		if r.rclone == 0 || took < r.rclone {
			r.rclone = took
		}
	}
	return r, nil
}

// manyTurns runs n one-turn panto PROMPT processes one after another,
// with flags before the prompt (none: each a new session; -c: each a
// turn of the project's latest, one session growing): every exit folds
// its session's entry into a run, and some merge runs or fold them, so
// what one turn costs the index is their sum divided by n. It returns
// the sum and the turn that sent the most beyond its segments, labelled
// what, and what each sent.
func (b *bench) manyTurns(ctx context.Context, n int, what string, flags ...string) ([]result, []turnCost, error) {
	sum := result{op: what + ": together", t: tally{byMethod: map[string]int{}}}
	var worst result
	var costs []turnCost
	for i := range n {
		if i%50 == 0 {
			progress("%d: turn %d of %d", b.size, i+1, n)
		}
		args := append([]string{"--api-style", "openai-chat", "--base-url", b.providerURL, "--model", "bench-model"}, flags...)
		res, err := b.panto(ctx, "turn", append(args, fmt.Sprintf("a new question, number %d", i))...)
		if err != nil {
			return nil, nil, err
		}
		costs = append(costs, turnCost{beyond: res.t.sent - res.t.sentSegments, partitions: res.t.sentPartitions, byKind: res.t.sentByKind})
		sum.t.add(res.t)
		sum.wall += res.wall
		if i == 0 || res.t.sent-res.t.sentSegments > worst.t.sent-worst.t.sentSegments {
			worst = res
		}
	}
	worst.op = fmt.Sprintf("the costliest of those %d runs (most sent beyond segments)", n)
	return []result{sum, worst}, costs, nil
}

func (b *bench) url() string { return "s3://" + b.bucket }

// panto runs panto with args against the bucket, in the project, written
// to the bucket itself (PANTO_DIRECT), traced.
func (b *bench) panto(ctx context.Context, op string, args ...string) (result, error) {
	full := append([]string{b.o.panto, "--store", b.url(), "--endpoint", b.o.endpoint}, args...)
	return b.run(ctx, op, b.projectDir, true, full...)
}

// sync runs panto-sync push or pull of dir against the bucket, traced.
func (b *bench) sync(ctx context.Context, op, cmd, dir string) (result, error) {
	return b.run(ctx, op, "", true, b.o.pantoSync, cmd, "--quiet", "--concurrency", strconv.Itoa(b.o.concurrency),
		"--dir", dir, "--endpoint", b.o.endpoint, b.url())
}

// run runs a command with the trace on (when traced) and sums its trace.
// Its stderr is kept in the size's logs/ directory, and quoted when it
// fails.
func (b *bench) run(ctx context.Context, op, dir string, traced bool, argv ...string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	logs := filepath.Join(b.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return result{}, err
	}
	logPath := filepath.Join(logs, fmt.Sprintf("%d-%s.log", time.Now().UnixNano(), filepath.Base(argv[0])))
	logFile, err := os.Create(logPath)
	if err != nil {
		return result{}, err
	}
	defer logFile.Close()
	var stdout countingWriter
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = b.env(traced)
	cmd.Stdout = &stdout
	cmd.Stderr = logFile
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, tail(logPath))
	}
	if _, err := logFile.Seek(0, io.SeekStart); err != nil {
		return result{}, err
	}
	t, err := readTally(logFile)
	if err != nil {
		return result{}, fmt.Errorf("%s: read its trace: %w", op, err)
	}
	if op != "" && filepath.Base(argv[0]) == filepath.Base(b.o.panto) && stdout == 0 {
		return result{}, fmt.Errorf("%s printed nothing: it did not do its work (%s)", op, tail(logPath))
	}
	if traced && t.requests == 0 {
		return result{}, fmt.Errorf("%s: no request in its trace (%s): is -v still one line per request?", op, logPath)
	}
	return result{op: op, t: t, wall: wall}, nil
}

// env is the commands' environment: this process's, with panto's home in
// the size's directory (nothing of the user's: no config, no replica, no
// cache), writes direct to the bucket, and the trace on or off.
func (b *bench) env(traced bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PANTO_") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "HOME=") ||
			strings.HasPrefix(kv, "OPENAI_") || strings.HasPrefix(kv, "ANTHROPIC_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+b.home,
		"XDG_DATA_HOME="+filepath.Join(b.home, ".local/share"),
		"XDG_CACHE_HOME="+filepath.Join(b.home, ".cache"),
		"XDG_CONFIG_HOME="+filepath.Join(b.home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(b.home, ".local/state"),
		"PANTO_DIRECT=1", "PANTO_API_KEY=bench-key")
	if traced {
		env = append(env, "PANTO_TRACE=1")
	}
	return env
}

// rcloneCopy times rclone copying the whole bucket into dir: the
// baseline of the full pull (as bench/sync.sh runs rclone, without the
// CA bundle the AWS tools may be given).
func (b *bench) rcloneCopy(ctx context.Context, dir string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.o.rclone, "copy", ":s3:"+b.bucket, dir,
		"--transfers", strconv.Itoa(b.o.concurrency), "--checkers", "16", "-q")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") && !strings.HasPrefix(kv, "RCLONE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "RCLONE_S3_PROVIDER=Minio", "RCLONE_S3_ENDPOINT="+b.o.endpoint,
		"RCLONE_S3_ACCESS_KEY_ID="+os.Getenv("AWS_ACCESS_KEY_ID"), "RCLONE_S3_SECRET_ACCESS_KEY="+os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"RCLONE_S3_REGION=us-east-1", "RCLONE_S3_ENV_AUTH=false")
	start := time.Now()
	if outErr, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("rclone copy: %w: %s", err, strings.TrimSpace(string(outErr)))
	}
	return time.Since(start), nil
}

// countingWriter counts what a command printed, which is discarded: a
// panto command that printed nothing did not list, show or answer.
type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// tail is the last lines of a command's log, for its error.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var kept []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !strings.Contains(l, "msg=s3") {
			kept = append(kept, l)
		}
	}
	if len(kept) > 5 {
		kept = kept[len(kept)-5:]
	}
	return strings.Join(kept, " | ")
}

// s3Client reaches the endpoint with the AWS environment's credentials,
// to create the buckets.
func s3Client(ctx context.Context, endpoint string) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	}), nil
}
