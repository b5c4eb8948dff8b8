package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/benchprovider"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/backends"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// The local-first targets (issue 22), measured per profile by -ops
// localfirst:
//
//	go run ./bench/wan -ops localfirst -profiles loopback
//	go run ./bench/wan -ops localfirst -profiles 20ms
//	go run ./bench/wan -ops localfirst -profiles 60ms
//
// (one profile a run keeps each run near a minute: the watch idle window
// alone is -watch-idle, 30 s). Per profile:
//
//   - prompt durable: the time of an acknowledged append (the prompt,
//     before the provider is called) to a local-first store opened as panto
//     opens it (store/backends), 200 appends each with the link up, frozen
//     (bytes held both ways: a bucket that accepts and never answers) and
//     down (connections refused);
//   - panto -c: the real binary continuing a session this machine wrote,
//     from its start to its first provider request, link up (the S3
//     requests it completed before that request, counted from its trace),
//     down and frozen;
//   - shipping lag: from an append's return to the bucket holding it (a
//     direct store on MinIO, not through the link, polled every ms);
//   - watch: panto-sync watch --json (default --poll, 30 s); the S3
//     requests of an idle window after its first round, then a local
//     append's lag to watch's report that it pushed it.

// lfResult is one profile's figures.
type lfResult struct {
	// durable: link state -> p50, p99 of the local-first appends, and of
	// the directory store's appends made between them.
	durable          map[string][4]time.Duration
	contUp           time.Duration
	contUpRequests   int
	contUpRoundTrips int // the most of the five runs
	// contDay*: one more run, after the noted probe was made a day old.
	contDay             time.Duration
	contDayRequests     int
	contDayRoundTrips   int
	contDown, contFrozn time.Duration
	// contTurn: a whole `panto -c PROMPT` run, start to exit, the
	// provider answering at once (median of five).
	contTurn    time.Duration
	lag         [2]time.Duration // p50, p99
	watchLag    time.Duration    // p50
	watchIdle   int              // requests in the idle window
	watchWindow time.Duration
}

// localfirstTable measures every profile named, then prints the targets
// and the figures.
func (b *bench) localfirstTable(names []string, idle time.Duration) {
	results := map[string]*lfResult{}
	for _, pn := range names {
		i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == pn })
		p := profiles[i]
		r, err := b.localfirst(p, idle)
		if err != nil {
			log.Fatalf("localfirst %s: %v", p.name, err)
		}
		results[p.name] = r
	}
	fmt.Print("| target | measured |")
	for _, pn := range names {
		fmt.Printf(" %s |", pn)
	}
	fmt.Println()
	fmt.Print("|---|---|")
	for range names {
		fmt.Print("---|")
	}
	fmt.Println()
	row := func(part, target, what string, value func(p profile, r *lfResult) string) {
		if len(b.lfParts) > 0 && !slices.Contains(b.lfParts, part) {
			return
		}
		fmt.Printf("| %s | %s |", target, what)
		for _, pn := range names {
			i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == pn })
			fmt.Printf(" %s |", value(profiles[i], results[pn]))
		}
		fmt.Println()
	}
	for _, state := range []string{"up", "frozen", "down"} {
		row("durable", "prompt durable ≤ 5 ms p99", "append, link "+state+": p50 / p99 (the floor: a directory store's append between each two, fsync alone)", func(_ profile, r *lfResult) string {
			d := r.durable[state]
			return fmt.Sprintf("%s / %s (%s / %s)", ms(d[0]), ms(d[1]), ms(d[2]), ms(d[3]))
		})
	}
	row("continue", "panto -c: ≤ 1 round trip online", "S3 round trips before the first provider request, from the trace (requests)", func(_ profile, r *lfResult) string {
		return fmt.Sprintf("%d (%d)", r.contUpRoundTrips, r.contUpRequests)
	})
	row("continue", "", "the same, the first run of a day (the last probe noted 25 h ago)", func(_ profile, r *lfResult) string {
		return fmt.Sprintf("%d (%d), %s", r.contDayRoundTrips, r.contDayRequests, ms(r.contDay))
	})
	// timed is a row of a time per profile, with the round trips it
	// counts over loopback's, then a line of the round trips between the
	// 20 and 60 ms profiles (where process start and CPU cancel out).
	timed := func(what, short string, of func(r *lfResult) time.Duration) {
		row("continue", "", what, func(p profile, r *lfResult) string {
			s := ms(of(r))
			if lb, ok := results["loopback"]; ok && p.rtt > 0 {
				s += fmt.Sprintf(", %.1f round trips over loopback", (of(r)-of(lb)).Seconds()/p.rtt.Seconds())
			}
			return s
		})
		if r20, ok := results["20ms"]; ok && (len(b.lfParts) == 0 || slices.Contains(b.lfParts, "continue")) {
			if r60, ok := results["60ms"]; ok {
				fmt.Printf("| | %s: round trips, (60ms − 20ms) ÷ 40 ms | %.1f |\n", short, (of(r60)-of(r20)).Seconds()/0.040)
			}
		}
	}
	timed("start to first provider request, link up", "panto -c", func(r *lfResult) time.Duration { return r.contUp })
	timed("a whole `panto -c PROMPT` run, start to exit (the provider answers at once)", "a whole run", func(r *lfResult) time.Duration { return r.contTurn })
	row("continue", "panto -c: none offline (after the short timeout)", "link down (refused)", func(_ profile, r *lfResult) string { return ms(r.contDown) })
	row("continue", "", "link frozen (the short timeout: 2 s)", func(_ profile, r *lfResult) string { return ms(r.contFrozn) })
	row("lag", "shipping lag p50 < 1 round trip + 100 ms", "append returned to the bucket holding it: p50 / p99", func(_ profile, r *lfResult) string {
		return ms(r.lag[0]) + " / " + ms(r.lag[1])
	})
	row("watch", "watch: a local append in the bucket ≤ 1 s p50", "append to watch's report of its push, p50", func(_ profile, r *lfResult) string { return ms(r.watchLag) })
	row("watch", "watch idle ≤ 2 requests a minute", "S3 requests in an idle window", func(_ profile, r *lfResult) string {
		return fmt.Sprintf("%d in %v (%.1f a minute)", r.watchIdle, r.watchWindow, float64(r.watchIdle)/r.watchWindow.Minutes())
	})
	fmt.Println()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// localfirst measures one profile through a link of its own (which the
// faults freeze and kill).
func (b *bench) localfirst(p profile, idle time.Duration) (*lfResult, error) {
	k, err := startLink(b.minioAddr, p.rtt, float64(p.kbps)*1000)
	if err != nil {
		return nil, err
	}
	defer k.close()
	ep := "http://" + k.addr()
	bucket, err := b.newBucket("lf-" + p.name)
	if err != nil {
		return nil, err
	}
	url := "s3://" + bucket + "/panto"
	r := &lfResult{durable: map[string][4]time.Duration{}}
	for _, env := range [][2]string{{"AWS_ACCESS_KEY_ID", accessKey}, {"AWS_SECRET_ACCESS_KEY", secretKey}, {"AWS_REGION", region}, {"XDG_DATA_HOME", filepath.Join(b.work, "lf-"+p.name)}} {
		os.Setenv(env[0], env[1])
	}
	parts := []struct {
		name string
		run  func() error
	}{
		{"durable", func() error { return b.durable(k, ep, url, r) }},
		{"lag", func() error { return b.lag(ep, url, bucket, r) }},
		{"continue", func() error { return b.continues(k, ep, url, r) }},
		{"watch", func() error {
			// A bucket of its own: the first round of watch (a pull of
			// what the measurements above wrote) would fall in the idle
			// window.
			wb, err := b.newBucket("lfw-" + p.name)
			if err != nil {
				return err
			}
			return b.watchTimes(ep, "s3://"+wb+"/panto", idle, r)
		}},
	}
	for _, part := range parts {
		if len(b.lfParts) > 0 && !slices.Contains(b.lfParts, part.name) {
			continue
		}
		if err := part.run(); err != nil {
			return nil, fmt.Errorf("%s: %w", part.name, err)
		}
	}
	return r, nil
}

// openLocalFirst opens url as panto does for --store s3://.
func openLocalFirst(ctx context.Context, ep, url string) (agent.SessionStore, error) {
	opts := backends.Options{Endpoint: ep, LocalFirst: true, Snapshot: true}
	if os.Getenv("WAN_TRACE") != "" {
		opts.Trace = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return backends.Open(ctx, url, opts)
}

// durable times 200 acknowledged appends to one session per link state,
// each followed by the same append to a directory store (the floor: the
// disk's fsync alone), so that both see the same load of the machine.
func (b *bench) durable(k *link, ep, url string, r *lfResult) error {
	ctx := context.Background()
	st, err := openLocalFirst(ctx, ep, url)
	if err != nil {
		return err
	}
	dir, err := fsjsonl.Open(filepath.Join(b.work, "durable-"+strings.TrimPrefix(url, "s3://")))
	if err != nil {
		return err
	}
	sess, plain := st.Create(), dir.Create()
	if path := os.Getenv("WAN_BLOCKPROFILE"); path != "" {
		// Where the appends wait (go tool pprof -top bench/wan PATH).
		runtime.SetBlockProfileRate(int(50 * time.Microsecond))
		defer func() {
			runtime.SetBlockProfileRate(0)
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	i := 0
	for _, state := range []string{"up", "frozen", "down"} {
		switch state {
		case "frozen":
			k.freeze()
		case "down":
			k.thaw()
			k.kill()
		}
		var ds, floor []time.Duration
		for n := 0; n < 200; n++ {
			start := time.Now()
			if err := sess.Append(ctx, prompt(i)); err != nil {
				return err
			}
			ds = append(ds, time.Since(start))
			time.Sleep(time.Millisecond)
			start = time.Now()
			if err := plain.Append(ctx, prompt(i)); err != nil {
				return err
			}
			floor = append(floor, time.Since(start))
			i++
			time.Sleep(time.Millisecond) // the shipper runs between prompts, as in a REPL
		}
		r.durable[state] = [4]time.Duration{quantile(ds, 0.5), quantile(ds, 0.99), quantile(floor, 0.5), quantile(floor, 0.99)}
	}
	if err := k.revive(); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return store.Close(cctx, st) // sends what the outage kept
}

func prompt(i int) []agent.PersistentMessage {
	return []agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("prompt %d: summarise the diff and list what the tests miss", i))}}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1))]
}

// lag times 40 appends, 200 ms apart, from their return to the bucket
// holding them, as a store on MinIO itself (not through the link) reads
// it, every ms.
func (b *bench) lag(ep, url, bucket string, r *lfResult) error {
	ctx := context.Background()
	st, err := openLocalFirst(ctx, ep, url)
	if err != nil {
		return err
	}
	defer store.Close(ctx, st)
	direct, err := objstore.Open(ctx, url, objstore.WithEndpoint("http://"+b.minioAddr))
	if err != nil {
		return err
	}
	// The replica itself: the local-first store's reads would ask the
	// bucket too.
	lf, ok := st.(interface{ Replica() *fsjsonl.Store })
	if !ok {
		return fmt.Errorf("the store opened is not local-first")
	}
	replica := lf.Replica()
	sess := st.Create()
	var ds []time.Duration
	for i := 0; i < 40; i++ {
		if err := sess.Append(ctx, prompt(i)); err != nil {
			return err
		}
		start := time.Now()
		want, err := store.Head(ctx, replica, sess.Info.ID)
		if err != nil {
			return err
		}
		for {
			if time.Since(start) > 30*time.Second {
				return fmt.Errorf("append %d not in the bucket after 30 s", i)
			}
			if cp, err := store.Head(ctx, direct, sess.Info.ID); err == nil && cp.Length >= want.Length {
				break
			}
			time.Sleep(time.Millisecond)
		}
		ds = append(ds, time.Since(start))
		// Appends 200 ms apart, the shipper idle at each (a prompt and
		// its reply are seconds apart): one closer would wait for the
		// round before it, whose index write follows the segment.
		time.Sleep(200 * time.Millisecond)
	}
	r.lag = [2]time.Duration{quantile(ds, 0.5), quantile(ds, 0.99)}
	return nil
}

// continues runs panto once to write a session, then panto -c on it:
// five times with the link up, three with it down, once frozen.
func (b *bench) continues(k *link, ep, url string, r *lfResult) error {
	if _, _, _, err := b.untilProviderArgs(url, ep, "write a session"); err != nil {
		return err
	}
	var ups []time.Duration
	var reqs, rts []int
	for i := 0; i < 5; i++ {
		d, n, rt, err := b.untilProviderArgs(url, ep, "-c", "--any", "and now?")
		if err != nil {
			return err
		}
		ups, reqs, rts = append(ups, d), append(reqs, n), append(rts, rt)
	}
	r.contUp, r.contUpRequests, r.contUpRoundTrips = median(ups), slices.Max(reqs), slices.Max(rts)
	turn, err := b.wholeTurns(url, ep)
	if err != nil {
		return err
	}
	r.contTurn = turn
	// The first run of a day: the probe the last runs noted is a day old.
	if err := b.ageProbeNotes(25 * time.Hour); err != nil {
		return err
	}
	d, n, rt, err := b.untilProviderArgs(url, ep, "-c", "--any", "and the next day?")
	if err != nil {
		return err
	}
	r.contDay, r.contDayRequests, r.contDayRoundTrips = d, n, rt
	k.kill()
	var downs []time.Duration
	for i := 0; i < 3; i++ {
		d, _, _, err := b.untilProviderArgs(url, ep, "-c", "--any", "and offline?")
		if err != nil {
			return err
		}
		downs = append(downs, d)
	}
	r.contDown = median(downs)
	if err := k.revive(); err != nil {
		return err
	}
	k.freeze()
	d, _, _, err = b.untilProviderArgs(url, ep, "-c", "--any", "and frozen?")
	k.thaw()
	r.contFrozn = d
	return err
}

// wholeTurns is the median time of five `panto -c PROMPT` runs, start
// to exit, against a provider that answers at once: what a user waits
// for besides the model, the bucket's reads before the prompt and its
// writes at exit (the local-first store ships the turn and closes the
// bucket's Store before panto exits).
func (b *bench) wholeTurns(url, ep string) (time.Duration, error) {
	baseURL, stop, err := benchprovider.Start()
	if err != nil {
		return 0, err
	}
	defer stop()
	var turns []time.Duration
	for range 5 {
		start := time.Now()
		cmd := exec.Command(b.panto, "--store", url, "--endpoint", ep, "--api-style", "openai-chat", "--base-url", baseURL, "--model", "bench-model", "-c", "--any", "a whole turn, please")
		cmd.Env = b.env("PANTO_API_KEY=bench")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("panto -c PROMPT: %w: %s", err, out)
		}
		turns = append(turns, time.Since(start))
	}
	return median(turns), nil
}

// ageProbeNotes makes the conditional-write probes noted in the bench's
// home (objstore's "<catalog>.probed", beside each cached catalog) old
// by age, as on the first run of a day.
func (b *bench) ageProbeNotes(age time.Duration) error {
	at := []byte(time.Now().Add(-age).UTC().Format(time.RFC3339Nano) + "\n")
	n := 0
	err := filepath.WalkDir(filepath.Join(b.work, "home"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".probed") {
			return err
		}
		n++
		return os.WriteFile(path, at, 0o600)
	})
	if err == nil && n == 0 {
		err = errors.New("no probe noted in the bench's home: where does objstore keep it?")
	}
	return err
}

// untilProviderArgs runs panto with args on the bucket (request trace
// on), with a provider that records when its first request arrives and
// answers with an error; it returns the time from the start of the
// process to that request and the S3 requests the trace shows done
// before it.
func (b *bench) untilProviderArgs(url, ep string, args ...string) (d time.Duration, requests, roundTrips int, err error) {
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
		return 0, 0, 0, err
	}
	go srv.Serve(l)
	defer srv.Close()
	start := time.Now()
	cmd := exec.Command(b.panto, append([]string{"--store", url, "--endpoint", ep, "--base-url", "http://" + l.Addr().String() + "/v1"}, args...)...)
	cmd.Env = b.env("PANTO_API_KEY=bench", "PANTO_TRACE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // it fails on the provider's error, by design
	if os.Getenv("WAN_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "panto %s:\n%s\n", strings.Join(args, " "), stderr.String())
	}
	select {
	case t := <-got:
		n, rt := requestsBefore(stderr.String(), t)
		return t.Sub(start), n, rt, nil
	default:
		return 0, 0, 0, fmt.Errorf("panto %s never reached the provider: %s", strings.Join(args, " "), stderr.String())
	}
}

// requestsBefore counts the trace's requests that ended before t, and
// the round trips among them: the longest chain of requests each begun
// after the one before it ended (the trace logs a request's end and
// duration), which the machine's load does not change as it does times.
func requestsBefore(trace string, t time.Time) (n, roundTrips int) {
	type span struct{ start, end time.Time }
	var spans []span
	for _, line := range strings.Split(trace, "\n") {
		if !strings.Contains(line, "msg=s3 ") {
			continue
		}
		var end time.Time
		var dur time.Duration
		for _, f := range strings.Fields(line) {
			switch {
			case strings.HasPrefix(f, "time="):
				end, _ = time.Parse(time.RFC3339Nano, strings.TrimPrefix(f, "time="))
			case strings.HasPrefix(f, "ms="):
				var v float64
				fmt.Sscanf(strings.TrimPrefix(f, "ms="), "%g", &v)
				dur = time.Duration(v * float64(time.Millisecond))
			}
		}
		if !end.IsZero() && end.Before(t) {
			spans = append(spans, span{end.Add(-dur), end})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	chain := make([]int, len(spans))
	for i, s := range spans {
		chain[i] = 1
		for j := 0; j < i; j++ {
			// The trace's times are in ms: a request begun within a ms of
			// another's end may have overlapped it.
			if !spans[j].end.After(s.start.Add(-time.Millisecond)) && chain[j]+1 > chain[i] {
				chain[i] = chain[j] + 1
			}
		}
		roundTrips = max(roundTrips, chain[i])
	}
	return len(spans), roundTrips
}

// stamped is a writer that keeps each line with the time it arrived.
type stamped struct {
	mu    sync.Mutex
	buf   []byte
	lines []stampedLine
}

type stampedLine struct {
	at   time.Time
	text string
}

func (s *stamped) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		s.lines = append(s.lines, stampedLine{time.Now(), string(s.buf[:i])})
		s.buf = s.buf[i+1:]
	}
}

// count counts the lines holding what that arrived after t.
func (s *stamped) count(what string, after time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if l.at.After(after) && strings.Contains(l.text, what) {
			n++
		}
	}
	return n
}

// watchTimes runs panto-sync watch on a catalog of its own: ten appends,
// each timed to watch's report of its push, then idle for idle.
func (b *bench) watchTimes(ep, url string, idle time.Duration, r *lfResult) error {
	dir := filepath.Join(b.work, "watch-"+strings.TrimPrefix(url, "s3://")[:8]+fmt.Sprint(time.Now().UnixNano()))
	local, err := fsjsonl.Open(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, b.pantoSync, "watch", "--json", "--dir", dir, "--endpoint", ep, url)
	cmd.Env = b.env("PANTO_TRACE=1")
	trace := &stamped{}
	cmd.Stderr = trace
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	type event struct {
		at time.Time
		ev map[string]any
	}
	events := make(chan event, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- event{time.Now(), ev}
			}
		}
		close(events)
	}()
	next := func(match func(map[string]any) bool) (time.Time, error) {
		timeout := time.After(20 * time.Second)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					return time.Time{}, fmt.Errorf("watch ended")
				}
				if match(e.ev) {
					return e.at, nil
				}
			case <-timeout:
				return time.Time{}, fmt.Errorf("no such event in 20 s")
			}
		}
	}
	if _, err := next(func(ev map[string]any) bool { return ev["event"] == "watching" }); err != nil {
		return err
	}
	// Idle first: after its own pushes, watch's next poll finds the index
	// changed and pulls once (a no-op pull, a round trip of index reads);
	// idle is what follows, as here after its first round (an empty
	// bucket and catalog: a few round trips).
	time.Sleep(2 * time.Second)
	from := time.Now()
	time.Sleep(idle)
	r.watchIdle, r.watchWindow = trace.count("msg=s3 ", from), idle
	sess := local.Create()
	var ds []time.Duration
	for i := 0; i < 10; i++ {
		if err := sess.Append(ctx, prompt(i)); err != nil {
			return err
		}
		start := time.Now()
		at, err := next(func(ev map[string]any) bool { return ev["id"] == sess.Info.ID })
		if err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
		ds = append(ds, at.Sub(start))
		time.Sleep(300 * time.Millisecond)
	}
	r.watchLag = quantile(ds, 0.5)
	return nil
}
