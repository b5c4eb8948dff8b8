package objstore_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// recorder wraps the SDK's own HTTP client (so AWS_CA_BUNDLE and the rest
// of its configuration still apply): it records every request, for the
// tests of what goes over HTTP (the probe, payload signing, benchmarks).
// It is a wrapper around the real client, not a mock: every request goes
// to the server. The protocol's tests record and inject faults at the
// bucket seam instead (objstore.FaultBucket).
type recorder struct {
	inner s3.HTTPClient

	mu   sync.Mutex
	reqs []request
	// delay is added to every answer, so that requests sent together
	// overlap however the goroutines sending them are scheduled (rounds
	// counts them as one round trip).
	delay time.Duration
}

type request struct {
	// class is the method, or LIST for a listing (miniotest.RequestClass:
	// a GET of the bucket whose query makes it one, which its path does
	// not show).
	class        string
	method, path string
	query        string
	payload      string // X-Amz-Content-Sha256
	status       int    // as the server answered
	start, end   time.Time
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	delay := r.delay
	r.mu.Unlock()
	start := time.Now()
	resp, err := r.inner.Do(req)
	time.Sleep(delay)
	rec := request{class: miniotest.RequestClass(req), method: req.Method, path: req.URL.Path, query: req.URL.RawQuery, payload: req.Header.Get("X-Amz-Content-Sha256"), start: start, end: time.Now()}
	if resp != nil {
		rec.status = resp.StatusCode
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, rec)
	r.mu.Unlock()
	return resp, err
}

// option installs the recorder on a store.
func (r *recorder) option() objstore.Option {
	return objstore.WithS3Options(func(o *s3.Options) {
		r.inner = o.HTTPClient
		o.HTTPClient = r
	})
}

// take returns the requests recorded since the last take.
func (r *recorder) take() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// count counts the requests of a class: a method, or LIST (which is not
// counted as a GET).
func count(reqs []request, class string) int {
	n := 0
	for _, q := range reqs {
		if q.class == class {
			n++
		}
	}
	return n
}

// rounds is the number of sequential round trips: the longest chain of
// requests each of which started after the previous one ended.
func rounds(reqs []request) int {
	reqs = slices.Clone(reqs)
	slices.SortFunc(reqs, func(a, b request) int { return a.start.Compare(b.start) })
	best := make([]int, len(reqs))
	longest := 0
	for i, q := range reqs {
		best[i] = 1
		for j := range i {
			if !reqs[j].end.After(q.start) {
				best[i] = max(best[i], best[j]+1)
			}
		}
		longest = max(longest, best[i])
	}
	return longest
}

// TestRecorderSeesLists: the recorder the request-count tests use counts
// a listing as a LIST, not a GET, though its path names only the bucket
// (the prefix is in its query): CheckIndex lists the sessions by prefix
// and "/", and the "no LIST" checks of those tests can fail.
func TestRecorderSeesLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	rec := &recorder{}
	s := e.open(t, rec.option())
	if err := s.AppendMessages(ctx, s.Create().Info.ID, []agent.PersistentMessage{user("listed")}); err != nil {
		t.Fatal(err)
	}
	rec.take()
	if _, err := s.CheckIndex(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := rec.take()
	lists := slices.DeleteFunc(slices.Clone(reqs), func(q request) bool { return q.class != "LIST" })
	if len(lists) == 0 || count(reqs, "LIST") != len(lists) {
		t.Fatalf("CheckIndex made %+v: no LIST counted", reqs)
	}
	for _, q := range lists {
		if q.method != http.MethodGet || strings.Count(strings.Trim(q.path, "/"), "/") != 0 || !strings.Contains(q.query, "prefix=") {
			t.Errorf("a LIST of %s?%s: want a GET of the bucket with the prefix in its query", q.path, q.query)
		}
	}
	if !slices.ContainsFunc(lists, func(q request) bool { return strings.Contains(q.query, "delimiter=") }) {
		t.Errorf("no LIST by delimiter among %+v", lists)
	}
	if n := count(reqs, "GET"); n+len(lists) > len(reqs) {
		t.Errorf("a LIST was counted as a GET too: %d GETs, %d LISTs of %d requests", n, len(lists), len(reqs))
	}
}

// The protocol tests record and fault at the seam (objstore.FaultBucket on
// a memory bucket); these are the recorder's helpers for its operations.

// countOps counts the operations of a method: GET, HEAD, PUT, DELETE or
// LIST.
func countOps(ops []objstore.Op, method string) int {
	n := 0
	for _, o := range ops {
		if o.Method == method {
			n++
		}
	}
	return n
}

// countGets is the number of GETs of key.
func countGets(ops []objstore.Op, key string) int {
	n := 0
	for _, o := range ops {
		if o.Method == "GET" && o.Key == key {
			n++
		}
	}
	return n
}

// opRounds is the number of sequential round trips: the longest chain of
// operations each of which started after the previous one ended.
func opRounds(ops []objstore.Op) int {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b objstore.Op) int { return a.Start.Compare(b.Start) })
	best := make([]int, len(ops))
	longest := 0
	for i, o := range ops {
		best[i] = 1
		for j := range i {
			if !ops[j].End.After(o.Start) {
				best[i] = max(best[i], best[j]+1)
			}
		}
		longest = max(longest, best[i])
	}
	return longest
}

// isPutOp reports whether o is a PUT of a key ending in suffix.
func isPutOp(o objstore.Op, suffix string) bool {
	return o.Method == "PUT" && strings.HasSuffix(o.Key, suffix)
}

// describeOps lists ops in the order they started, each with its start
// and end relative to the first start, for a failure's message.
func describeOps(ops []objstore.Op) string {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b objstore.Op) int { return a.Start.Compare(b.Start) })
	var b strings.Builder
	for i, o := range ops {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s %v–%v", o.Method, o.Key, o.Start.Sub(ops[0].Start).Round(time.Millisecond), o.End.Sub(ops[0].Start).Round(time.Millisecond))
	}
	return b.String()
}
