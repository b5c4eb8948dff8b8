package objstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/objstore"
)

// bareClient is an SDK client configured like the store's, for the bare
// PutObject baseline.
func bareClient(b *testing.B, e *env) *s3.Client {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(e.srv.Endpoint())
		o.UsePathStyle = true
		e.srv.SetCredentials(o)
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkAppend appends one message per iteration and, in the same run,
// PUTs the same bytes with a bare PutObject; it reports both medians,
// their ratio, the PUTs per append (its own and its checkpoint's) and the
// sequential round trips on the append's path and on its checkpoint's.
//
// isolated waits for each append's background checkpoint before the next
// append (outside the timing), as an agent's appends are apart (a model
// call between them); back-to-back does not, so appends overlap the
// previous checkpoints and the checkpoints coalesce.
func BenchmarkAppend(b *testing.B) {
	b.Run("isolated", func(b *testing.B) { benchAppend(b, true) })
	b.Run("back-to-back", func(b *testing.B) { benchAppend(b, false) })
}

func benchAppend(b *testing.B, isolated bool) {
	ctx := context.Background()
	e := newEnv(b)
	rec := &recorder{}
	s := e.open(b, rec.option()) // default compaction threshold, as users run it
	bare := bareClient(b, e)
	codec, _ := manifest.NewCodec()
	id := s.Create().Info.ID
	if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user("warm up")}); err != nil {
		b.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	rec.take()
	var appendT, putT, createT, matchT []time.Duration
	first, err := bare.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String("overwrite"), Body: strings.NewReader("x")})
	if err != nil {
		b.Fatal(err)
	}
	overwriteTag := first.ETag
	puts, maxRounds, totalRounds, ckRounds, plain, compactions := 0, 0, 0, 0, 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pm := user(fmt.Sprintf("message %d: %s", i, strings.Repeat("some words of a prompt ", 8)))
		start := time.Now()
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{pm}); err != nil {
			b.Fatal(err)
		}
		appendT = append(appendT, time.Since(start))
		if isolated {
			onPath := rec.take()
			r := rounds(onPath)
			totalRounds += r
			maxRounds = max(maxRounds, r)
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			ck := rec.take()
			if count(ck, "GET") > 0 { // a compaction: reported in ns/op, not in the per-append counts
				compactions++
			} else {
				puts += count(onPath, "PUT") + count(ck, "PUT")
				ckRounds += rounds(ck)
				plain++
			}
		}

		raw, _ := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{pm}, time.Now())
		comp := codec.Compress(raw)
		start = time.Now()
		_, err := bare.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String(fmt.Sprintf("bare/%d", i)),
			Body: bytes.NewReader(comp), ContentLength: aws.Int64(int64(len(comp)))})
		if err != nil {
			b.Fatal(err)
		}
		putT = append(putT, time.Since(start))

		// What a checkpoint costs, same bytes: a conditional create and a
		// conditional overwrite (If-Match) of an existing object.
		start = time.Now()
		_, err = bare.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String(fmt.Sprintf("create/%d", i)),
			Body: bytes.NewReader(comp), ContentLength: aws.Int64(int64(len(comp))), IfNoneMatch: aws.String("*")})
		if err != nil {
			b.Fatal(err)
		}
		createT = append(createT, time.Since(start))
		start = time.Now()
		out, err := bare.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String("overwrite"),
			Body: bytes.NewReader(comp), ContentLength: aws.Int64(int64(len(comp))), IfMatch: overwriteTag})
		if err != nil {
			b.Fatal(err)
		}
		overwriteTag = out.ETag
		matchT = append(matchT, time.Since(start))
	}
	b.StopTimer()
	if !isolated {
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		puts = count(rec.take(), "PUT")
		plain = b.N
	}
	ma, mp := median(appendT), median(putT)
	b.ReportMetric(float64(ma.Microseconds()), "µs-append-median")
	b.ReportMetric(float64(mp.Microseconds()), "µs-bareput-median")
	b.ReportMetric(float64(ma)/float64(mp), "ratio")
	b.ReportMetric(float64(median(createT).Microseconds()), "µs-bare-create-median")
	b.ReportMetric(float64(median(matchT).Microseconds()), "µs-bare-ifmatch-median")
	b.ReportMetric(float64(puts)/float64(max(plain, 1)), "PUTs/append")
	if isolated {
		b.ReportMetric(float64(compactions), "compactions")
		b.ReportMetric(float64(totalRounds)/float64(b.N), "rounds/append")
		b.ReportMetric(float64(maxRounds), "max-rounds")
		b.ReportMetric(float64(ckRounds)/float64(max(plain, 1)), "checkpoint-rounds")
	}
}

// BenchmarkAppendFirst appends the first message of a new session per
// iteration (what a panto-sync push of a new catalog does per session,
// and panto's first prompt): the median latency against a bare PutObject
// of the same bytes in the same run, and the requests per append. The
// index shards are warmed first, as in a Store that has appended before.
func BenchmarkAppendFirst(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	rec := &recorder{}
	s := e.open(b, rec.option())
	bare := bareClient(b, e)
	codec, _ := manifest.NewCodec()
	for seen := map[string]bool{}; len(seen) < manifest.Shards; {
		if err := s.AppendMessages(ctx, s.Create().Info.ID, []agent.PersistentMessage{user("warm up")}); err != nil {
			b.Fatal(err)
		}
		for _, r := range rec.take() {
			if r.method == "PUT" && strings.Contains(r.path, "/index/") {
				seen[filepath.Base(r.path)] = true
			}
		}
	}
	var appendT, putT []time.Duration
	reqs, puts, totalRounds := 0, 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := s.Create().Info.ID
		pm := user(fmt.Sprintf("message %d: %s", i, strings.Repeat("some words of a prompt ", 8)))
		start := time.Now()
		if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{pm}); err != nil {
			b.Fatal(err)
		}
		appendT = append(appendT, time.Since(start))
		r := rec.take()
		reqs += len(r)
		puts += count(r, "PUT")
		totalRounds += rounds(r)

		raw, _ := sessionlog.EncodeBatch(id, true, []agent.PersistentMessage{pm}, time.Now())
		comp := codec.Compress(raw)
		start = time.Now()
		_, err := bare.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String(fmt.Sprintf("bare/%d", i)),
			Body: bytes.NewReader(comp), ContentLength: aws.Int64(int64(len(comp)))})
		if err != nil {
			b.Fatal(err)
		}
		putT = append(putT, time.Since(start))
	}
	b.StopTimer()
	ma, mp := median(appendT), median(putT)
	b.ReportMetric(float64(ma.Microseconds()), "µs-append-median")
	b.ReportMetric(float64(mp.Microseconds()), "µs-bareput-median")
	b.ReportMetric(float64(ma)/float64(mp), "ratio")
	b.ReportMetric(float64(puts)/float64(b.N), "PUTs/append")
	b.ReportMetric(float64(reqs)/float64(b.N), "requests/append")
	b.ReportMetric(float64(totalRounds)/float64(b.N), "rounds/append")
}

// populated caches bucket populations across the sub-benchmarks of a run.
var (
	popMu sync.Mutex
	pops  = map[string]*env{}
)

// population returns a bucket holding n sessions, created by parallel
// appends of one message each through one Store.
func population(b *testing.B, n int) *env {
	popMu.Lock()
	defer popMu.Unlock()
	key := fmt.Sprint(n)
	if e, ok := pops[key]; ok {
		return e
	}
	e := newEnv(b)
	s := e.open(b)
	ctx := context.Background()
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				sess := s.Create()
				if err := s.AppendMessages(ctx, sess.Info.ID, []agent.PersistentMessage{user(fmt.Sprint("session ", i)), msg(agent.RoleAssistant, "ok")}); err != nil {
					errMu.Lock()
					firstErr = err
					errMu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.Logf("populated %d sessions in %v", n, time.Since(start))
	pops[key] = e
	return e
}

// BenchmarkIndex: List, Resolve and Latest on 1,000 and 10,000 sessions,
// each from a fresh Store (cold: no cached shards), with the requests each
// costs.
func BenchmarkIndex(b *testing.B) {
	sizes := []int{1000, 10000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		for _, op := range []string{"List", "Resolve", "Latest", "ListWarm"} {
			b.Run(fmt.Sprintf("%s/%d", op, n), func(b *testing.B) {
				ctx := context.Background()
				e := population(b, n)
				var some string
				reqs := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					rec := &recorder{}
					s := e.open(b, rec.option())
					if op == "ListWarm" {
						if _, err := s.List(ctx); err != nil {
							b.Fatal(err)
						}
					}
					if some == "" {
						infos, err := s.List(ctx)
						if err != nil || len(infos) != n {
							b.Fatalf("list: %v, %d sessions", err, len(infos))
						}
						some = infos[len(infos)/2].ID[:8]
					}
					rec.take()
					b.StartTimer()
					switch op {
					case "List", "ListWarm":
						infos, err := s.List(ctx)
						if err != nil || len(infos) != n {
							b.Fatalf("list: %v", err)
						}
					case "Resolve":
						if _, err := s.Resolve(ctx, some); err != nil {
							b.Fatal(err)
						}
					case "Latest":
						if _, err := s.Latest(ctx); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					reqs += len(rec.take())
					b.StartTimer()
				}
				b.ReportMetric(float64(reqs)/float64(b.N), "requests/op")
			})
		}
	}
}

// BenchmarkLoad1000: Load of a session of 1,000 messages appended one at a
// time, without compaction (1,000 segments) and with the default threshold.
func BenchmarkLoad1000(b *testing.B) {
	for _, c := range []struct {
		name      string
		threshold int
	}{{"no-compaction", 0}, {"compaction-32", 32}} {
		var e *env // populated once, reused when the benchmark function reruns
		var id string
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			if e == nil {
				e = newEnv(b)
				s := e.open(b, objstore.WithCompactThreshold(c.threshold))
				id = s.Create().Info.ID
				start := time.Now()
				for i := 0; i < 1000; i++ {
					if err := s.AppendMessages(ctx, id, []agent.PersistentMessage{user(fmt.Sprint("message ", i))}); err != nil {
						b.Fatal(err)
					}
				}
				b.Logf("1000 appends in %v", time.Since(start))
			}
			rec := &recorder{}
			r := e.open(b, rec.option())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				conv, err := r.Load(ctx, id)
				if err != nil || len(conv.Messages) != 1000 {
					b.Fatalf("load: %v", err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(rec.take()))/float64(b.N), "GETs/load")
		})
	}
}

// transcript returns a realistic agent session: prompts, assistant prose,
// tool calls (shell commands, file reads) and tool results holding real
// source files (the Go standard library's, as a coding agent reads them).
func transcript(b *testing.B, turns int) [][]agent.PersistentMessage {
	files, _ := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", "net", "http", "*.go"))
	if len(files) == 0 {
		b.Skip("no GOROOT sources for a realistic transcript")
	}
	slices.Sort(files)
	var out [][]agent.PersistentMessage
	id := agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://api.anthropic.com", Model: "claude-sonnet-4-5"}
	for i := 0; i < turns; i++ {
		f := files[i%len(files)]
		src, _ := os.ReadFile(f)
		if len(src) > 6000 {
			src = src[:6000]
		}
		input, _ := json.Marshal(map[string]string{"command": "sed -n 1,200p " + f})
		usage := &agent.Usage{InputTokens: int64(1200 + 37*i), OutputTokens: int64(150 + i)}
		out = append(out,
			[]agent.PersistentMessage{{Message: agent.UserText(fmt.Sprintf("Can you look at %s and explain how the handler deals with request %d? Keep it short.", filepath.Base(f), i)), Identity: id}},
			[]agent.PersistentMessage{
				{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("Let me read the file first."), agent.ToolUseBlock(fmt.Sprint("toolu_", i), "bash", input)}}, Usage: usage, Identity: id},
				{Message: agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock(fmt.Sprint("toolu_", i), string(src), false)}}, Identity: id},
				{Message: agent.AssistantText(fmt.Sprintf("The file %s defines the types and functions shown above. The handler reads the request, checks the method and headers, and writes the response; errors are reported with http.Error. In turn %d the relevant part is the loop over the header fields.", filepath.Base(f), i)), Usage: usage, Identity: id},
			})
	}
	return out
}

// BenchmarkCompression: stored bytes / raw bytes of realistic transcripts,
// as appended (one segment per batch) and after compaction.
func BenchmarkCompression(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	s := e.open(b, objstore.WithCompactThreshold(0))
	batches := transcript(b, 60)
	id := s.Create().Info.ID
	for _, batch := range batches {
		if err := s.AppendMessages(ctx, id, batch); err != nil {
			b.Fatal(err)
		}
	}
	stored := func() (raw, comp int64) {
		m := readManifest(b, e, id)
		for _, seg := range m.Segments {
			raw += seg.Length
			comp += seg.Compressed
		}
		return
	}
	raw, asAppended := stored()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Compact(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_, compacted := stored()
	b.ReportMetric(float64(raw), "raw-bytes")
	b.ReportMetric(float64(asAppended)/float64(raw), "ratio-as-appended")
	b.ReportMetric(float64(compacted)/float64(raw), "ratio-compacted")
}

// BenchmarkConcurrentWriters: 20 writers, each its own Store (a team's
// processes on one bucket), append one message at the same moment to
// their own sessions, once per iteration; the same iteration then PUTs
// the same bytes with 20 bare PutObjects at once. It reports the p50 of
// each (and their ratio: issue 21 wants at most 1.1), the lag from the
// last append's return until a reader's List shows every writer's
// session at its new message count, and what the appends asked of the
// bucket, their checkpoints included: requests and conditional writes
// refused (412: a lost race on an object other writers replace too).
// Run it with a fixed count (-benchtime 20x): an iteration waits for the
// index.
func BenchmarkConcurrentWriters(b *testing.B) {
	const writers = 20
	ctx := context.Background()
	e := newEnv(b)
	bare := bareClient(b, e)
	codec, _ := manifest.NewCodec()
	stores := make([]*objstore.Store, writers)
	recs := make([]*recorder, writers)
	ids := make([]string, writers)
	for w := range stores {
		recs[w] = &recorder{}
		stores[w] = e.open(b, recs[w].option())
		ids[w] = stores[w].Create().Info.ID
		if err := stores[w].AppendMessages(ctx, ids[w], []agent.PersistentMessage{user(fmt.Sprint("writer ", w, " starts"))}); err != nil {
			b.Fatal(err)
		}
	}
	for w := range stores {
		if err := stores[w].Flush(ctx); err != nil {
			b.Fatal(err)
		}
		recs[w].take()
	}
	reader := e.open(b)

	// together runs f for every writer at the same moment and returns
	// each one's latency.
	together := func(f func(w int) error) []time.Duration {
		lat := make([]time.Duration, writers)
		errs := make([]error, writers)
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				start := time.Now()
				errs[w] = f(w)
				lat[w] = time.Since(start)
			}()
		}
		close(gate)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return lat
	}

	var appendT, putT, lags []time.Duration
	messages := 1
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pm := user(fmt.Sprintf("message %d: %s", i, strings.Repeat("some words of a prompt ", 8)))
		appendT = append(appendT, together(func(w int) error {
			return stores[w].AppendMessages(ctx, ids[w], []agent.PersistentMessage{pm})
		})...)
		appended := time.Now()
		messages++
		for indexed := false; !indexed; {
			infos, err := reader.List(ctx)
			if err != nil {
				b.Fatal(err)
			}
			counts := map[string]int{}
			for _, info := range infos {
				counts[info.ID] = info.MessageCount
			}
			indexed = !slices.ContainsFunc(ids, func(id string) bool { return counts[id] < messages })
			if !indexed && time.Since(appended) > time.Minute {
				b.Fatalf("a minute after the appends of round %d the index lists %v of the writers' message counts, want %d each", i, counts, messages)
			}
		}
		lags = append(lags, time.Since(appended))

		putT = append(putT, together(func(w int) error {
			raw, err := sessionlog.EncodeBatch(ids[w], false, []agent.PersistentMessage{pm}, time.Now())
			if err != nil {
				return err
			}
			comp := codec.Compress(raw)
			_, err = bare.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String(fmt.Sprintf("bare/%d/%d", i, w)),
				Body: bytes.NewReader(comp), ContentLength: aws.Int64(int64(len(comp)))})
			return err
		})...)
	}
	b.StopTimer()
	var reqs []request
	for w := range stores {
		if err := stores[w].Flush(ctx); err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, recs[w].take()...)
	}
	refused := 0
	for _, q := range reqs {
		if q.status == http.StatusPreconditionFailed {
			refused++
		}
	}
	appends := float64(writers * b.N)
	ma, mp := median(appendT), median(putT)
	b.ReportMetric(float64(ma.Microseconds()), "µs-append-p50")
	b.ReportMetric(float64(mp.Microseconds()), "µs-bareput-p50")
	b.ReportMetric(float64(ma)/float64(mp), "ratio")
	b.ReportMetric(float64(median(lags).Milliseconds()), "ms-index-lag-p50")
	b.ReportMetric(float64(slices.Max(lags).Milliseconds()), "ms-index-lag-max")
	b.ReportMetric(float64(len(reqs))/appends, "requests/append")
	b.ReportMetric(float64(refused)/appends, "412s/append")
}

// BenchmarkDelete deletes one session per iteration on the tests' MinIO
// (panto rm of one session) and reports the requests each sends, of an
// index whose sessions are in its partitions and of one whose sessions
// a run's page holds (a sync's), which the deletion rewrites. The
// session is written outside the timing.
func BenchmarkDelete(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []objstore.Option
	}{{"partitions", nil}, {"run", []objstore.Option{objstore.WithDeferredIndex()}}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			e := newEnv(b)
			seed := e.open(b, tc.opts...)
			var ids []string
			for i := range 24 + b.N {
				ids = append(ids, appendNew(b, seed, fmt.Sprint("session ", i)))
			}
			if err := seed.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			var fb *objstore.FaultBucket
			wrap := func(bk objstore.Bucket) objstore.Bucket { fb = objstore.NewFaultBucket(bk); return fb }
			s, err := objstore.OpenWrapped(ctx, e.url, wrap, e.reach()...)
			if err != nil {
				b.Fatal(err)
			}
			logs, err := sessionsOf(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			fb.Take()
			requests := 0
			b.ResetTimer()
			for i := range b.N {
				id := ids[i]
				if err := s.Delete(ctx, store.Tombstone{ID: id, Deleted: time.Now().UTC(), At: logs[id].Checkpoint}); err != nil {
					b.Fatal(err)
				}
				requests += len(fb.Take())
			}
			b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
		})
	}
}
