// Command wan measures panto-sync and panto on a bucket over simulated
// networks, side by side with rclone and aws s3 sync: one MinIO on
// loopback, reached through a TCP proxy of its own (link.go) that delays
// each direction by half a round trip and limits the rate all
// connections share (toxiproxy, which internal/testkit/faultnet runs for the
// fault tests, limits each connection alone, which would hand a tool
// with 16 connections 16 times the bandwidth). Profiles:
// loopback (no proxy delay), 20 ms round trip at 100 Mbit/s, 60 ms round
// trip at 50 Mbit/s.
//
//	go run ./bench/wan                               # 300 sessions, every profile, 3 rounds
//	go run ./bench/wan -sessions 5000 -profiles loopback -rounds 1
//	go run ./bench/wan -rounds 1 -ops pull -tools panto,rclone
//
// For each catalog and profile it runs, per tool and round (each round on
// new buckets, the tools taking turns in another order): full push,
// no-op push, full pull into an empty directory, no-op pull, incremental
// push (one message appended to 10% of the sessions), incremental pull,
// and copy bucket to bucket; it prints the medians, the ratio of panto's
// time to rclone's, and panto's requests (counted from its request
// trace, PANTO_TRACE=1). Then, for panto on a bucket: a bare PutObject,
// the first append of a session and a steady append, `panto -c` up to its
// first provider request, `panto sessions`, `panto show PREFIX` and
// `panto rm` (of sessions of one message, then of the session of 60
// segments, then of 40 sessions in one command) and `panto import` of 40
// Claude Code logs, with their round trips
// (time over the profile's round trip, less the loopback time; and the
// 60 ms profile's time less the 20 ms one's, over 40 ms, in which process
// start and CPU cancel out).
//
// -ops localfirst measures the local-first store's targets (issue 22;
// localfirst.go): the prompt's durability with the link up, frozen and
// down, panto -c's round trips, the shipping lag, and watch.
//
// Needs: a minio binary ($PANTO_MINIO, PATH or $(go env GOPATH)/bin);
// rclone and aws (awscli) when they are among -tools. rclone runs without
// AWS_CA_BUNDLE, which Debian's build refuses.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
	"github.com/panto-dev/panto/store/objstore"
)

// profile is a simulated network: a round trip and a rate each way.
type profile struct {
	name string
	rtt  time.Duration
	kbps int64 // KB/s each way; 0: unlimited
}

var profiles = []profile{
	{"loopback", 0, 0},
	{"20ms", 20 * time.Millisecond, 100_000 / 8},
	{"60ms", 60 * time.Millisecond, 50_000 / 8},
}

const (
	accessKey = "panto-bench"
	secretKey = "panto-bench-secret"
	region    = "us-east-1"
)

type bench struct {
	work      string
	minioAddr string
	pantoSync string
	panto     string
	rounds    int
	tools     []string
	ops       []string
	bucketN   int
	// lfParts are the localfirst measurements to make (none: all).
	lfParts []string
	// concurrency is panto-sync's --concurrency, 0 for its default.
	concurrency int
}

func main() {
	sessionsFlag := flag.String("sessions", "300", "catalog sizes, comma-separated (11 MB per 300 sessions)")
	profilesFlag := flag.String("profiles", "loopback,20ms,60ms", "network profiles, comma-separated")
	rounds := flag.Int("rounds", 3, "rounds per operation (the median is reported)")
	toolsFlag := flag.String("tools", "panto,rclone,aws", "tools to compare")
	opsFlag := flag.String("ops", "push,pull,copy,single", "what to measure: push, pull, copy (sync operations), single (panto on a bucket), localfirst (the local-first store's targets, localfirst.go)")
	lfParts := flag.String("lf-parts", "", "localfirst: only these measurements, comma-separated (durable, lag, continue, watch; default all)")
	watchIdle := flag.Duration("watch-idle", 30*time.Second, "localfirst: the idle window in which watch's requests are counted")
	concurrency := flag.Int("concurrency", 0, "panto-sync --concurrency (0: its default)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("wan: ")

	work, err := os.MkdirTemp("", "panto-wan-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	b := &bench{work: work, rounds: *rounds, tools: strings.Split(*toolsFlag, ","), ops: strings.Split(*opsFlag, ","), concurrency: *concurrency}
	if *lfParts != "" {
		b.lfParts = strings.Split(*lfParts, ",")
	}
	stop, err := b.startMinIO()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	if err := b.build(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("# bench/wan: %s, %d rounds, tools %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), b.rounds, strings.Join(b.tools, ", "))
	for _, ns := range strings.Split(*sessionsFlag, ",") {
		if !b.wants("push") && !b.wants("pull") && !b.wants("copy") {
			break
		}
		n, err := strconv.Atoi(ns)
		if err != nil || n < 1 {
			log.Fatalf("-sessions %q: not a number", ns)
		}
		cat := filepath.Join(work, fmt.Sprintf("catalog-%d", n))
		written, err := sessiongen.New(1).Catalog(cat, n, float64(n)*11e6/300)
		if err != nil {
			log.Fatal(err)
		}
		for _, pn := range strings.Split(*profilesFlag, ",") {
			i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == pn })
			if i < 0 {
				log.Fatalf("-profiles: no profile %q (loopback, 20ms, 60ms)", pn)
			}
			p := profiles[i]
			ep, closeProxy, err := b.proxy(p)
			if err != nil {
				log.Fatal(err)
			}
			if b.wants("push") || b.wants("pull") || b.wants("copy") {
				fmt.Printf("## %d sessions (%.1f MB), %s\n\n", n, float64(written)/1e6, describe(p))
				b.syncTable(p, ep, cat)
			}
			closeProxy()
		}
	}
	if b.wants("single") {
		fmt.Printf("## panto on a bucket\n\n")
		b.singleTable(strings.Split(*profilesFlag, ","))
	}
	if b.wants("localfirst") {
		fmt.Printf("## The local-first store (issue 22)\n\n")
		b.localfirstTable(strings.Split(*profilesFlag, ","), *watchIdle)
	}
}

func (b *bench) wants(op string) bool { return slices.Contains(b.ops, op) }

func describe(p profile) string {
	if p.rtt == 0 {
		return "loopback"
	}
	return fmt.Sprintf("%v round trip, %d Mbit/s", p.rtt, p.kbps*8/1000)
}

// startMinIO starts MinIO on a free loopback port.
func (b *bench) startMinIO() (func(), error) {
	bin := os.Getenv("PANTO_MINIO")
	if bin == "" {
		bin, _ = exec.LookPath("minio")
	}
	if bin == "" {
		gopath, _ := exec.Command("go", "env", "GOPATH").Output()
		bin = filepath.Join(strings.TrimSpace(string(gopath)), "bin", "minio")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no minio binary (set PANTO_MINIO, or run make minio): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	console, err := freePort()
	if err != nil {
		return nil, err
	}
	b.minioAddr = fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "server", "--quiet", "--address", b.minioAddr, "--console-address", fmt.Sprintf("127.0.0.1:%d", console), filepath.Join(b.work, "minio"))
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey, "MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_REGION="+region)
	logf, err := os.Create(filepath.Join(b.work, "minio.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for i := 0; i < 300; i++ {
		if resp, err := http.Get("http://" + b.minioAddr + "/minio/health/live"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return stop, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return nil, errors.New("minio did not start")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (b *bench) build() error {
	b.pantoSync, b.panto = filepath.Join(b.work, "panto-sync"), filepath.Join(b.work, "panto")
	out, err := exec.Command("go", "build", "-o", b.work+"/", "./cmd/panto-sync", "./cmd/panto").CombinedOutput()
	if err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	return nil
}

// proxy returns the endpoint of MinIO as profile p reaches it: a link
// delaying each direction by half the round trip, at a rate all the
// connections share.
func (b *bench) proxy(p profile) (string, func(), error) {
	k, err := startLink(b.minioAddr, p.rtt, float64(p.kbps)*1000)
	if err != nil {
		return "", nil, err
	}
	return "http://" + k.addr(), k.close, nil
}

// newBucket makes a bucket on MinIO directly (not through the proxy).
func (b *bench) newBucket(tag string) (string, error) {
	b.bucketN++
	name := strings.ToLower(fmt.Sprintf("wan-%s-%d", tag, b.bucketN))
	c, err := minio.New(b.minioAddr, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), Region: region})
	if err != nil {
		return "", err
	}
	return name, c.MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: region})
}

// env is the environment of every tool: credentials and nothing of the
// machine's (AWS_CA_BUNDLE least of all: Debian's rclone refuses it).
func (b *bench) env(extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(b.work, "home"), "TMPDIR=" + b.work,
		"AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey, "AWS_REGION=" + region,
		"AWS_EC2_METADATA_DISABLED=true",
	}, extra...)
}

// run is one timed run of a tool: its time and, for panto, the requests
// its trace logged.
type run struct {
	d        time.Duration
	requests int
}

func (b *bench) exec(args []string, extraEnv ...string) (run, error) {
	return b.execIn("", args, extraEnv...)
}

// execIn is exec in directory dir ("": this process's).
func (b *bench) execIn(dir string, args []string, extraEnv ...string) (run, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = b.env(extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	start := time.Now()
	err := cmd.Run()
	r := run{d: time.Since(start), requests: strings.Count(stderr.String(), "msg=s3 ")}
	if os.Getenv("WAN_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "== %s (%v, %d requests)\n%s", strings.Join(args, " "), r.d, r.requests, stderr.String())
	}
	if err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return r, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, tail)
	}
	return r, nil
}

// syncOps are the sync operations, in the order a round runs them.
var syncOps = []string{"full push", "no-op push", "full pull", "no-op pull", "incremental push", "incremental pull", "copy bucket to bucket"}

// targets are the issue's, as ratios to rclone.
var targets = map[string]string{
	"full push": "≤ 0.5 (WAN)", "no-op push": "≤ 0.1", "full pull": "≤ 0.5 (WAN), ≤ 0.7 (5,000 loopback)",
	"no-op pull": "≤ 0.1", "incremental push": "≤ 0.25 (WAN)",
}

// syncTable runs every sync operation for every tool and round, and
// prints the medians.
func (b *bench) syncTable(p profile, ep, catalog string) {
	times := map[string]map[string][]time.Duration{} // op -> tool -> runs
	reqs := map[string][]int{}                       // op -> panto's requests
	for r := 0; r < b.rounds; r++ {
		order := slices.Clone(b.tools)
		for i := 0; i < r%len(order); i++ {
			order = append(order[1:], order[0])
		}
		for _, tool := range order {
			res, err := b.syncRound(tool, ep, catalog, uint64(r+1))
			if err != nil {
				log.Printf("%s, %s, round %d: %v", p.name, tool, r+1, err)
				continue
			}
			for op, ru := range res {
				if times[op] == nil {
					times[op] = map[string][]time.Duration{}
				}
				times[op][tool] = append(times[op][tool], ru.d)
				if tool == "panto" {
					reqs[op] = append(reqs[op], ru.requests)
				}
			}
		}
	}
	header := "| operation |"
	sep := "|---|"
	for _, tool := range b.tools {
		header += " " + tool + " s |"
		sep += "---|"
	}
	fmt.Println(header + " panto / rclone | target | panto requests |")
	fmt.Println(sep + "---|---|---|")
	for _, op := range syncOps {
		if times[op] == nil || !b.wants(opKind(op)) {
			continue
		}
		line := "| " + op + " |"
		for _, tool := range b.tools {
			line += " " + secs(median(times[op][tool])) + " |"
		}
		ratio := ""
		if pt, rt := median(times[op]["panto"]), median(times[op]["rclone"]); pt > 0 && rt > 0 {
			ratio = fmt.Sprintf("%.2f", pt.Seconds()/rt.Seconds())
		}
		n := ""
		if len(reqs[op]) > 0 {
			sort.Ints(reqs[op])
			n = strconv.Itoa(reqs[op][len(reqs[op])/2])
		}
		fmt.Printf("%s %s | %s | %s |\n", line, ratio, targets[op], n)
	}
	fmt.Println()
}

// opKind is the -ops word of a sync operation.
func opKind(op string) string {
	for _, k := range []string{"push", "pull", "copy"} {
		if strings.Contains(op, k) {
			return k
		}
	}
	return op
}

// syncRound runs the sync operations of one tool on new buckets.
func (b *bench) syncRound(tool, ep, catalog string, seed uint64) (map[string]run, error) {
	dir := filepath.Join(b.work, fmt.Sprintf("round-%s-%d", tool, b.bucketN))
	cat, pulled := filepath.Join(dir, "cat"), filepath.Join(dir, "pulled")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command("cp", "-a", catalog, cat).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy the catalog: %v: %s", err, out)
	}
	bucket, err := b.newBucket(tool)
	if err != nil {
		return nil, err
	}
	other, err := b.newBucket(tool)
	if err != nil {
		return nil, err
	}
	res := map[string]run{}
	// Every step runs (each needs the ones before it); syncTable prints
	// those -ops asks for.
	step := func(op string, args []string) error {
		r, err := b.exec(args, "PANTO_TRACE=1")
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		res[op] = r
		return nil
	}
	push := b.command(tool, "push", ep, cat, "s3://"+bucket)
	pull := b.command(tool, "pull", ep, "s3://"+bucket, pulled)
	for _, s := range []struct {
		op   string
		args []string
	}{{"full push", push}, {"no-op push", push}, {"full pull", pull}, {"no-op pull", pull}} {
		if err := step(s.op, s.args); err != nil {
			return res, err
		}
	}
	if _, _, err := sessiongen.New(seed).AppendSome(cat, 0.1); err != nil {
		return res, err
	}
	for _, s := range []struct {
		op   string
		args []string
	}{{"incremental push", push}, {"incremental pull", pull}, {"copy bucket to bucket", b.command(tool, "copy", ep, "s3://"+bucket, "s3://"+other)}} {
		if err := step(s.op, s.args); err != nil {
			return res, err
		}
	}
	return res, nil
}

// command is the command line of tool doing op from src to dst (a
// directory or s3://BUCKET).
func (b *bench) command(tool, op, ep, src, dst string) []string {
	switch tool {
	case "panto":
		verb := op
		args := []string{b.pantoSync, verb, "--quiet", "--endpoint", ep}
		if b.concurrency > 0 {
			args = append(args, "--concurrency", strconv.Itoa(b.concurrency))
		}
		switch op {
		case "push":
			return append(args, "--dir", src, dst)
		case "pull":
			return append(args, "--dir", dst, src)
		}
		return append(args, src, dst)
	case "rclone":
		rc := func(s string) string {
			if b, ok := strings.CutPrefix(s, "s3://"); ok {
				return ":s3:" + b
			}
			return s
		}
		verb := "sync"
		if op != "push" {
			verb = "copy"
		}
		return []string{"env", "RCLONE_S3_PROVIDER=Minio", "RCLONE_S3_ENDPOINT=" + ep, "RCLONE_S3_ACCESS_KEY_ID=" + accessKey,
			"RCLONE_S3_SECRET_ACCESS_KEY=" + secretKey, "RCLONE_S3_REGION=" + region, "RCLONE_S3_ENV_AUTH=false",
			"rclone", verb, rc(src), rc(dst), "--transfers", "16", "--checkers", "16", "--exclude", ".panto*/**", "--exclude", ".panto*", "-q"}
	case "aws":
		return []string{"aws", "--endpoint-url", ep, "s3", "sync", src, dst, "--exclude", ".panto*", "--only-show-errors"}
	}
	log.Fatalf("unknown tool %q", tool)
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func secs(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

// single is one measurement of panto on a bucket, per profile.
type single struct {
	op     string
	target string
	// rtts: report round trips (the time above loopback's over the
	// profile's round trip); else a ratio to the bare PUT.
	rtts bool
}

var singles = []single{
	{"bare PutObject (2 KB)", "", true},
	{"first append of a session", "≤ 2 round trips", true},
	{"steady append", "≤ 1.1x a bare PUT", true},
	{"panto -c to the first provider request (60 messages)", "≤ 4 round trips + transfer", true},
	{"panto sessions", "≤ 2 round trips", true},
	{"panto sessions in a project (its head: the recent view holds none of its sessions)", "≤ 2 round trips", true},
	{"panto sessions in a project with imported sessions (its head and the dirs head)", "≤ 2 round trips", true},
	{"panto sessions in a project with sessions imported at its root (its head and the root's)", "≤ 2 round trips", true},
	{"panto sessions in a directory that is not a git tree (its own head)", "≤ 2 round trips", true},
	{"panto show PREFIX (a recent session, 1 message)", "≤ 2 round trips + its read", true},
	{"panto rm ID (a recent session)", "", true},
	{"panto rm ID (60 messages: 1 segment each, compacted past 32)", "", true},
	{"panto rm --direct of 40 sessions (1 message each) in one command", "", true},
	{"panto rm of 40 sessions, local-first (until its exit has shipped the deletions)", "", true},
	{"panto import of 40 Claude Code sessions (8 KB each) into the bucket", "", true},
	{"a turn that compacts: load 30 segments, 6 appends, close (the exit merges 36)", "", true},
	{"a turn's exit: Close after a prompt and its answer (a new session of a project)", "", true},
	{"a turn's exit, the mean of 8 in a row (every fourth merges the runs of the three before)", "", true},
}

// singleTable measures panto on a bucket on each profile.
func (b *bench) singleTable(names []string) {
	results := map[string]map[string]time.Duration{} // profile -> op -> median
	for _, pn := range names {
		i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == pn })
		p := profiles[i]
		ep, closeProxy, err := b.proxy(p)
		if err != nil {
			log.Fatal(err)
		}
		results[p.name], err = b.singles(ep)
		if err != nil {
			log.Printf("%s: %v", p.name, err)
		}
		closeProxy()
	}
	fmt.Print("| operation |")
	for _, pn := range names {
		fmt.Printf(" %s ms |", pn)
		if pn != "loopback" {
			fmt.Printf(" %s round trips |", pn)
		}
	}
	// Between two delayed profiles, process start and CPU cancel out: the
	// difference over the difference of round trips counts the round
	// trips alone (plus the transfer the lower rate adds, a few ms here).
	slow, fast := "60ms", "20ms"
	both := slices.Contains(names, slow) && slices.Contains(names, fast)
	if both {
		fmt.Printf(" round trips, (%s − %s) ÷ 40 ms |", slow, fast)
	}
	fmt.Println(" target |")
	fmt.Print("|---|")
	for _, pn := range names {
		fmt.Print("---|")
		if pn != "loopback" {
			fmt.Print("---|")
		}
	}
	if both {
		fmt.Print("---|")
	}
	fmt.Println("---|")
	for _, s := range singles {
		fmt.Printf("| %s |", s.op)
		for _, pn := range names {
			d := results[pn][s.op]
			fmt.Printf(" %.1f |", float64(d.Microseconds())/1000)
			if pn != "loopback" {
				i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == pn })
				extra := d - results["loopback"][s.op]
				fmt.Printf(" %.1f |", extra.Seconds()/profiles[i].rtt.Seconds())
			}
		}
		if both {
			fmt.Printf(" %.1f |", (results[slow][s.op]-results[fast][s.op]).Seconds()/0.040)
		}
		fmt.Printf(" %s |\n", s.target)
	}
	fmt.Println()
}

// singles measures each single operation once per profile (medians of
// several runs).
func (b *bench) singles(ep string) (map[string]time.Duration, error) {
	ctx := context.Background()
	out := map[string]time.Duration{}
	bucket, err := b.newBucket("single")
	if err != nil {
		return nil, err
	}
	url := "s3://" + bucket + "/panto"
	if out["bare PutObject (2 KB)"], err = barePut(ctx, ep, bucket); err != nil {
		return nil, err
	}
	var small []string
	var long string
	if out["first append of a session"], out["steady append"], small, long, err = appendTimes(ctx, ep, url); err != nil {
		return nil, err
	}
	out["panto -c to the first provider request (60 messages)"], out["panto sessions"], err = b.commandTimes(url, ep)
	if err != nil {
		return nil, err
	}
	out["panto show PREFIX (a recent session, 1 message)"], out["panto rm ID (a recent session)"], err = b.resolveAndRemove(url, ep, small)
	if err != nil {
		return nil, err
	}
	// Last: the session panto -c continued goes (one sample).
	r, err := b.exec([]string{b.panto, "rm", "--yes", "--store", url, "--endpoint", ep, long}, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
	if err != nil {
		return nil, fmt.Errorf("panto rm %s: %w", long, err)
	}
	out["panto rm ID (60 messages: 1 segment each, compacted past 32)"] = r.d
	if out["panto rm --direct of 40 sessions (1 message each) in one command"], err = b.removeMany(ctx, ep, url, 40, true); err != nil {
		return nil, err
	}
	if out["panto rm of 40 sessions, local-first (until its exit has shipped the deletions)"], err = b.removeMany(ctx, ep, url, 40, false); err != nil {
		return nil, err
	}
	if out["panto import of 40 Claude Code sessions (8 KB each) into the bucket"], err = b.importMany(url, ep, 40); err != nil {
		return nil, err
	}
	if out["a turn that compacts: load 30 segments, 6 appends, close (the exit merges 36)"], err = compactingTurn(ctx, ep, url); err != nil {
		return nil, err
	}
	if out["a turn's exit: Close after a prompt and its answer (a new session of a project)"], out["a turn's exit, the mean of 8 in a row (every fourth merges the runs of the three before)"], err = turnExit(ctx, ep, url); err != nil {
		return nil, err
	}
	// After the others, whose sessions its 130 would push out of the
	// recent view.
	if out["panto sessions in a project (its head: the recent view holds none of its sessions)"], err = b.projectPage(ctx, url, ep, "page", true, 0, "cmd"); err != nil {
		return nil, err
	}
	// Then a project half of whose sessions were imported from another
	// agent's logs (they know only their directory, in its tree): the
	// bucket has a dirs head from here on.
	if out["panto sessions in a project with imported sessions (its head and the dirs head)"], err = b.projectPage(ctx, url, ep, "imported", true, 30, "cmd"); err != nil {
		return nil, err
	}
	// One whose imported sessions are at its root (another agent run at
	// the top of the tree), and a directory that is not a git tree, whose
	// sessions know only their directory: each reads a head of its own,
	// not the dirs head (§P3, "Directory heads").
	if out["panto sessions in a project with sessions imported at its root (its head and the root's)"], err = b.projectPage(ctx, url, ep, "rootimported", true, 30, "."); err != nil {
		return nil, err
	}
	if out["panto sessions in a directory that is not a git tree (its own head)"], err = b.projectPage(ctx, url, ep, "scratch", false, 60, "."); err != nil {
		return nil, err
	}
	return out, nil
}

// barePut is the median time of a PutObject of 2 KB to bucket, without
// panto: the floor under an append.
func barePut(ctx context.Context, ep, bucket string) (time.Duration, error) {
	c, err := minio.New(strings.TrimPrefix(ep, "http://"), &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), Region: region})
	if err != nil {
		return 0, err
	}
	body := bytes.Repeat([]byte("x"), 2048)
	var puts []time.Duration
	for i := 0; i < 15; i++ {
		start := time.Now()
		if _, err := c.PutObject(ctx, bucket, fmt.Sprintf("bare/%d", i), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{DisableContentSha256: true}); err != nil {
			return 0, err
		}
		puts = append(puts, time.Since(start))
	}
	return median(puts[1:]), nil // the first dials
}

// appendTimes are the median times of the first append of a session and
// of an append to one (59 of them, to the last session created), through
// an object store on url. It leaves that session of 60 messages behind
// (long), and small, the ids of the 7 sessions of one message created
// before it.
func appendTimes(ctx context.Context, ep, url string) (first, steady time.Duration, small []string, long string, err error) {
	os.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	os.Setenv("AWS_REGION", region)
	opts := []objstore.Option{objstore.WithEndpoint(ep)}
	if os.Getenv("WAN_TRACE") != "" {
		opts = append(opts, objstore.WithTrace(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	}
	st, err := objstore.Open(ctx, url, opts...)
	if err != nil {
		return 0, 0, nil, "", err
	}
	msg := func(i int) []agent.PersistentMessage {
		return []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("message %d %s", i, strings.Repeat("words ", 300)))}}
	}
	var firsts, steadies []time.Duration
	var last string
	for i := 0; i < 8; i++ {
		s := st.Create()
		if os.Getenv("WAN_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "first append %d:\n", i)
		}
		start := time.Now()
		if err := s.Append(ctx, msg(0)); err != nil {
			return 0, 0, nil, "", err
		}
		firsts = append(firsts, time.Since(start))
		if last != "" {
			small = append(small, last)
		}
		last = s.Info.ID
	}
	if os.Getenv("WAN_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "steady appends:\n")
	}
	for i := 1; i < 60; i++ {
		start := time.Now()
		if err := st.AppendMessages(ctx, last, msg(i)); err != nil {
			return 0, 0, nil, "", err
		}
		steadies = append(steadies, time.Since(start))
	}
	// Closed, as panto closes its store when it exits: what panto -c
	// then reads is what a previous panto left (its entries in a run).
	if err := st.Close(ctx); err != nil {
		return 0, 0, nil, "", err
	}
	return median(firsts[1:]), median(steadies), small, last, nil
}

// turnExit is the median and the mean time of the Close that ends a
// one-turn panto in a work tree, through the objstore API, over 8 in a
// row: a Store of its own (a new process) appends a prompt to a new
// session of a project, then, 50 ms later (the answer's stream, shorter
// than the checkpoint's linger), the answer, and closes; Close is
// timed. Every fourth exit's run completes a tier of runs, whose merge
// the median leaves out and the mean takes in (two of the 8).
func turnExit(ctx context.Context, ep, url string) (med, mean time.Duration, err error) {
	opts := []objstore.Option{objstore.WithEndpoint(ep)}
	if os.Getenv("WAN_TRACE") != "" {
		opts = append(opts, objstore.WithTrace(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	}
	p := agent.Project{Remote: "wan.test/team/exit", Root: "/src/exit", Dir: "/src/exit"}
	var exits []time.Duration
	var sum time.Duration
	for range 8 {
		st, err := objstore.Open(ctx, url, opts...)
		if err != nil {
			return 0, 0, err
		}
		id := agent.NewSessionID()
		if err := st.AppendMessagesIn(ctx, p, id, []agent.PersistentMessage{{Message: agent.UserText("the prompt")}}); err != nil {
			return 0, 0, err
		}
		time.Sleep(50 * time.Millisecond)
		answer := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock(strings.Repeat("the answer ", 100))}}
		if err := st.AppendMessagesIn(ctx, p, id, []agent.PersistentMessage{{Message: answer}}); err != nil {
			return 0, 0, err
		}
		start := time.Now()
		if err := st.Close(ctx); err != nil {
			return 0, 0, err
		}
		d := time.Since(start)
		exits = append(exits, d)
		sum += d
	}
	return median(exits), sum / time.Duration(len(exits)), nil
}

// compactingTurn is the median time of a turn of `panto -c` whose exit
// compacts, through the objstore API: a Store of its own (a new
// process) loads a session of 30 segments, appends 6 messages and
// closes, which merges the 36 (past the threshold of 32). Each of the 5
// samples is a session of its own, written by another Store first.
func compactingTurn(ctx context.Context, ep, url string) (time.Duration, error) {
	opts := []objstore.Option{objstore.WithEndpoint(ep)}
	msg := func(i int) []agent.PersistentMessage {
		return []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("turn message %d %s", i, strings.Repeat("words ", 300)))}}
	}
	var turns []time.Duration
	for range 5 {
		setup, err := objstore.Open(ctx, url, opts...)
		if err != nil {
			return 0, err
		}
		id := agent.NewSessionID()
		for i := range 30 {
			if err := setup.AppendMessages(ctx, id, msg(i)); err != nil {
				return 0, err
			}
		}
		if err := setup.Close(ctx); err != nil {
			return 0, err
		}
		st, err := objstore.Open(ctx, url, opts...)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if _, err := st.Load(ctx, id); err != nil {
			return 0, err
		}
		for i := 30; i < 36; i++ {
			if err := st.AppendMessages(ctx, id, msg(i)); err != nil {
				return 0, err
			}
		}
		if err := st.Close(ctx); err != nil {
			return 0, err
		}
		turns = append(turns, time.Since(start))
	}
	return median(turns), nil
}

// commandTimes are the median times of `panto -c` until its first
// provider request, and of `panto sessions`, on the store at url.
func (b *bench) commandTimes(url, ep string) (cont, sessions time.Duration, err error) {
	var conts, lists []time.Duration
	for i := 0; i < 5; i++ {
		d, err := b.untilProvider(url, ep)
		if err != nil {
			return 0, 0, err
		}
		conts = append(conts, d)
		r, err := b.exec([]string{b.panto, "sessions", "--all", "--store", url, "--endpoint", ep}, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
		if err != nil {
			return 0, 0, err
		}
		if os.Getenv("WAN_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "panto sessions: %d requests\n", r.requests)
		}
		lists = append(lists, r.d)
	}
	return median(conts), median(lists), nil
}

// projectPage is the median time of `panto sessions` in the work tree of
// project name (a directory that is not a git tree, unless git), of 60
// sessions, after 70 sessions of no project that push them out of the
// newest commit's recent view: the page is read from the project's head
// (docs/DESIGN.md §P3, "Project heads"), beside a newest commit stored
// against a base. The first imported of the 60 know only their
// directory, importedDir in the tree, as an imported session does: the
// page reads the dirs head too, or the root's head for "." .
func (b *bench) projectPage(ctx context.Context, url, ep, name string, git bool, imported int, importedDir string) (time.Duration, error) {
	dir := filepath.Join(b.work, name+"-project")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	if git {
		if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
			return 0, err
		}
		cfg := "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = https://wan.test/team/" + name + ".git\n"
		if err := os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(cfg), 0o644); err != nil {
			return 0, err
		}
	}
	p, err := project.Detect(dir)
	if err != nil {
		return 0, err
	}
	// A sync's bulk write: the sessions go to a run, and the project's
	// head, at Close.
	st, err := objstore.Open(ctx, url, objstore.WithEndpoint(ep), objstore.WithDeferredIndex())
	if err != nil {
		return 0, err
	}
	for i := range 130 {
		in := p
		switch {
		case i >= 60:
			in = agent.Project{}
		case i < imported:
			in = agent.Project{Dir: filepath.Join(p.Dir, importedDir)}
		}
		m := []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("page %d", i))}}
		if err := st.AppendMessagesIn(ctx, in, agent.NewSessionID(), m); err != nil {
			return 0, err
		}
	}
	if err := st.Close(ctx); err != nil {
		return 0, err
	}
	// Then an agent's turn elsewhere, whose commits are stored against
	// the bulk write's (whole) one, as 15 commits in 16 are.
	agentStore, err := objstore.Open(ctx, url, objstore.WithEndpoint(ep))
	if err != nil {
		return 0, err
	}
	m := []agent.PersistentMessage{{Message: agent.UserText("elsewhere")}}
	if err := agentStore.AppendMessages(ctx, agent.NewSessionID(), m); err != nil {
		return 0, err
	}
	if err := agentStore.Close(ctx); err != nil {
		return 0, err
	}
	var pages []time.Duration
	for range 5 {
		r, err := b.execIn(dir, []string{b.panto, "sessions", "--store", url, "--endpoint", ep}, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
		if err != nil {
			return 0, err
		}
		if os.Getenv("WAN_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "panto sessions in project %s: %d requests\n", name, r.requests)
		}
		pages = append(pages, r.d)
	}
	return median(pages), nil
}

// resolveAndRemove are the median times of `panto show PREFIX` of a
// recent session of one message (its resolve by prefix, then its read)
// and of `panto rm --yes ID` of one, over the sessions small (each shown,
// then deleted).
func (b *bench) resolveAndRemove(url, ep string, small []string) (show, rm time.Duration, err error) {
	var shows, rms []time.Duration
	for _, id := range small {
		r, err := b.exec([]string{b.panto, "show", "--store", url, "--endpoint", ep, id[:8]}, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
		if err != nil {
			return 0, 0, fmt.Errorf("panto show %s: %w", id[:8], err)
		}
		shows = append(shows, r.d)
		r, err = b.exec([]string{b.panto, "rm", "--yes", "--store", url, "--endpoint", ep, id}, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
		if err != nil {
			return 0, 0, fmt.Errorf("panto rm %s: %w", id, err)
		}
		if os.Getenv("WAN_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "panto rm: %d requests\n", r.requests)
		}
		rms = append(rms, r.d)
	}
	return median(shows), median(rms), nil
}

// removeMany is the time of one `panto rm --yes` of n sessions of one
// message each, which another Store wrote first: a prune's work, on the
// bucket itself (direct), or local-first, whose exit waits for the
// shipper to send the deletions.
func (b *bench) removeMany(ctx context.Context, ep, url string, n int, direct bool) (time.Duration, error) {
	st, err := objstore.Open(ctx, url, objstore.WithEndpoint(ep))
	if err != nil {
		return 0, err
	}
	args := []string{b.panto, "rm", "--yes", "--store", url, "--endpoint", ep}
	if direct {
		args = append(args, "--direct")
	}
	for i := range n {
		s := st.Create()
		if err := s.Append(ctx, []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("to delete %d", i))}}); err != nil {
			return 0, err
		}
		args = append(args, s.Info.ID)
	}
	if err := st.Close(ctx); err != nil {
		return 0, err
	}
	r, err := b.exec(args, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
	if err != nil {
		return 0, fmt.Errorf("panto rm of %d sessions: %w", n, err)
	}
	if os.Getenv("WAN_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "panto rm of %d sessions: %d requests\n", n, r.requests)
	}
	return r.d, nil
}

// importMany is the time of one `panto import` of n Claude Code logs
// into the bucket: copies of importer's fixture (8 KB, 18 lines), each
// under a session id of its own, in a CLAUDE_CONFIG_DIR of their own.
func (b *bench) importMany(url, ep string, n int) (time.Duration, error) {
	const fixtureID = "5e0c1a2b-0000-4000-8000-00000000c0de"
	fixture, err := os.ReadFile(filepath.Join("importer", "testdata", "claude-code.jsonl"))
	if err != nil {
		return 0, fmt.Errorf("run bench/wan from the repository root: %w", err)
	}
	home, err := os.MkdirTemp(b.work, "claude-")
	if err != nil {
		return 0, err
	}
	project := filepath.Join(home, "projects", "-home-me-app")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return 0, err
	}
	for i := range n {
		id := fmt.Sprintf("5e0c1a2b-0000-4000-8000-%012d", i)
		if err := os.WriteFile(filepath.Join(project, id+".jsonl"), bytes.ReplaceAll(fixture, []byte(fixtureID), []byte(id)), 0o644); err != nil {
			return 0, err
		}
	}
	r, err := b.exec([]string{b.panto, "import", "--from", "claude-code", "--store", url, "--endpoint", ep}, "CLAUDE_CONFIG_DIR="+home, "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
	if err != nil {
		return 0, fmt.Errorf("panto import of %d sessions: %w", n, err)
	}
	if os.Getenv("WAN_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "panto import of %d sessions: %d requests\n", n, r.requests)
	}
	return r.d, nil
}

// untilProvider runs panto -c on the bucket, with a provider that records
// when its first request arrives and answers with an error, and returns
// the time from the start of the process to that request.
func (b *bench) untilProvider(url, ep string) (time.Duration, error) {
	got := make(chan time.Time, 4)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- time.Now():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"bench: stop here","type":"invalid_request_error"}}`)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	go srv.Serve(l)
	defer srv.Close()
	start := time.Now()
	cmd := exec.Command(b.panto, "--store", url, "--endpoint", ep, "--base-url", "http://"+l.Addr().String()+"/v1", "-c", "--any", "and now?")
	cmd.Env = b.env("PANTO_API_KEY=bench", "PANTO_TRACE="+os.Getenv("WAN_TRACE"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // it fails on the provider's error, by design
	if os.Getenv("WAN_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "panto -c:\n%s\n", stderr.String())
	}
	select {
	case t := <-got:
		return t.Sub(start), nil
	default:
		return 0, fmt.Errorf("panto -c never reached the provider: %s", stderr.String())
	}
}
