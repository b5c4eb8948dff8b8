package miniotest_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestCapabilities measures, on every kind of server, the behaviours in
// miniotest.Capabilities and fails where a kind's declared Supports (the
// README's table) says otherwise. Run with -v for the table's rows.
func TestCapabilities(t *testing.T) {
	miniotest.Each(t, miniotest.Kinds, func(t *testing.T, s *miniotest.Server) {
		got := measure(t, s)
		t.Logf("| %s | %s |", s.Kind.Name, row(got))
		if got != s.Kind.Supports {
			t.Errorf("%s measured %+v\ndeclared %+v", s.Kind.Name, got, s.Kind.Supports)
		}
	})
}

func row(c miniotest.Capabilities) string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	return strings.Join([]string{yes(c.CreateIfAbsent), yes(c.RacingCreates), yes(c.ReplaceIfMatch), yes(c.RacingReplaces),
		yes(c.GetIfNoneMatch), yes(c.Multipart), yes(c.ListPrefix)}, " | ")
}

// prober sends the requests of a measurement with the AWS SDK, as the
// object store does (its payload hash, no extra checksums, no retries),
// and reads back with minio-go.
type prober struct {
	t      *testing.T
	api    *s3.Client
	mc     *minio.Client
	bucket string
}

func newProber(t *testing.T, s *miniotest.Server) *prober {
	api := s3.New(s3.Options{
		Region:                     miniotest.Region,
		BaseEndpoint:               aws.String(s.Endpoint()),
		UsePathStyle:               true,
		Credentials:                s.Credentials(),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		Retryer:                    aws.NopRetryer{},
	})
	return &prober{t: t, api: api, mc: s.Client(t), bucket: s.NewBucket(t)}
}

// status is the HTTP status of a request's outcome: 200 for success.
func status(err error) int {
	if err == nil {
		return 200
	}
	var st interface{ HTTPStatusCode() int }
	if errors.As(err, &st) {
		return st.HTTPStatusCode()
	}
	return -1
}

// put writes body under key with the given conditions and returns the
// ETag and the status.
func (p *prober) put(key, body, ifNoneMatch, ifMatch string) (string, int) {
	in := &s3.PutObjectInput{Bucket: &p.bucket, Key: &key, Body: strings.NewReader(body), ContentLength: aws.Int64(int64(len(body)))}
	if ifNoneMatch != "" {
		in.IfNoneMatch = &ifNoneMatch
	}
	if ifMatch != "" {
		in.IfMatch = &ifMatch
	}
	out, err := p.api.PutObject(p.t.Context(), in)
	if err != nil {
		code := status(err)
		if unavailable(code) {
			// The status alone does not say why (a CI rehearsal gave five 503s without it).
			p.t.Logf("PUT %s: %v", key, err)
		}
		return "", code
	}
	return aws.ToString(out.ETag), 200
}

// get reads key back with minio-go. A loaded distributed MinIO has
// answered NoSuchKey through another node right after the PUT returned
// (as objstore's probe notes for If-Match): asked again a few times
// before the read counts.
func (p *prober) get(key string) string {
	var err error
	for attempt := range 5 {
		var b []byte
		if b, err = p.getOnce(key); err == nil {
			return string(b)
		}
		if minio.ToErrorResponse(err).Code != "NoSuchKey" {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	p.t.Fatalf("get %s: %v", key, err)
	return ""
}

func (p *prober) getOnce(key string) ([]byte, error) {
	o, err := p.mc.GetObject(p.t.Context(), p.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return io.ReadAll(o)
}

// putSettled is put of an unconditional write, sent again while the
// server answers that it is busy or unavailable (5xx, or no answer): a
// loaded distributed MinIO has answered 503 to a setup write, which says
// nothing of the behaviour measured.
func (p *prober) putSettled(key, body string) (string, int) {
	etag, codes := p.putUntilDecided(key, body, "", 5)
	return etag, codes[len(codes)-1]
}

// putUntilDecided sends a PUT of key (with If-Match ifMatch, when not
// empty) up to tries times, backing off, until the server decides it,
// and returns the ETag of the one that succeeded and every answer.
func (p *prober) putUntilDecided(key, body, ifMatch string, tries int) (string, []int) {
	var codes []int
	for attempt := 0; ; attempt++ {
		etag, code := p.put(key, body, "", ifMatch)
		codes = append(codes, code)
		if !unavailable(code) || attempt == tries-1 {
			return etag, codes
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
}

// unavailable reports whether status code says the server did not
// decide: an internal error, busy, unavailable, or no answer at all (not
// 501, which says it does not implement the request).
func unavailable(code int) bool { return code < 0 || code >= 500 && code != 501 }

// race sends n PUTs of key at once, each with its own body and the given
// conditions, and reports whether exactly one succeeded and its body is
// what the key holds. A race no PUT won while some were not decided
// (unavailable) is sent again (setup makes the key as it was): a busy
// server is no evidence either way; two winners, or a winner whose body
// the key does not hold, are.
func (p *prober) race(key string, n int, ifNoneMatch, ifMatch string, setup func() string) bool {
	for attempt := 0; ; attempt++ {
		if setup != nil {
			ifMatch = setup()
		}
		var wg sync.WaitGroup
		codes := make([]int, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, codes[i] = p.put(key, fmt.Sprintf("writer %d", i), ifNoneMatch, ifMatch)
			}()
		}
		wg.Wait()
		winners := 0
		var winner string
		for i, c := range codes {
			if c == 200 {
				winners++
				winner = fmt.Sprintf("writer %d", i)
			}
		}
		if winners == 0 && slices.ContainsFunc(codes, unavailable) && attempt < 3 {
			p.t.Logf("race on %s: no winner, answers %v: again", key, codes)
			time.Sleep(time.Duration(attempt+1) * 300 * time.Millisecond)
			continue
		}
		if winners != 1 {
			p.t.Logf("race on %s: %d winners, answers %v", key, winners, codes)
			return false
		}
		return p.get(key) == winner
	}
}

const wrongETag = `"00000000000000000000000000000000"`

func measure(t *testing.T, s *miniotest.Server) miniotest.Capabilities {
	p := newProber(t, s)
	var c miniotest.Capabilities

	c.CreateIfAbsent = p.createIfAbsent()

	c.RacingCreates = true
	for round := range 5 {
		if !p.race(fmt.Sprintf("race-create-%d", round), 8, "*", "", nil) {
			c.RacingCreates = false
		}
	}

	c.ReplaceIfMatch = p.replaceIfMatch()

	c.RacingReplaces = true
	for round := range 5 {
		key := fmt.Sprintf("race-replace-%d", round)
		base := func() string {
			etag, code := p.putSettled(key, "base")
			if etag == "" {
				p.t.Fatalf("put %s: status %d", key, code)
			}
			return etag
		}
		if !p.race(key, 8, "", "", base) {
			c.RacingReplaces = false
		}
	}

	if _, code := p.putSettled("unchanged", "v1"); code != 200 {
		t.Fatalf("put unchanged: status %d", code)
	}
	_, err := p.api.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &p.bucket, Key: aws.String("unchanged"), IfNoneMatch: aws.String(etagOf(t, p, "unchanged"))})
	c.GetIfNoneMatch = status(err) == 304

	c.Multipart = p.multipart()
	c.ListPrefix = p.listPrefix()
	return c
}

// settle runs an attempt of a measurement on a fresh key until no
// answer in it was undecided (unavailable): a loaded distributed MinIO
// has answered 503 to one of these PUTs, which says nothing of the
// behaviour measured, and a retried conditional PUT on the same key
// could meet its own earlier, undecided write.
func (p *prober) settle(name string, attempt func(key string) (ok bool, codes []int)) bool {
	for try := 0; ; try++ {
		key := fmt.Sprintf("%s-%d", name, try)
		ok, codes := attempt(key)
		if !slices.ContainsFunc(codes, unavailable) || try == 4 {
			if !ok {
				p.t.Logf("%s: answers %v", name, codes)
			}
			return ok
		}
		p.t.Logf("%s: answers %v: again on a fresh key", name, codes)
		time.Sleep(time.Duration(try+1) * 300 * time.Millisecond)
	}
}

// createIfAbsent: a PUT with If-None-Match: * creates a key and a
// second one of it is refused (412), leaving the first body.
func (p *prober) createIfAbsent() bool {
	return p.settle("create", func(key string) (bool, []int) {
		_, created := p.put(key, "first", "*", "")
		_, again := p.put(key, "second", "*", "")
		if unavailable(created) || unavailable(again) {
			return false, []int{created, again}
		}
		return created == 200 && again == 412 && p.get(key) == "first", []int{created, again}
	})
}

// replaceIfMatch: a PUT with If-Match of a wrong ETag is refused (412)
// and leaves the body; one with the right ETag replaces it.
//
// The right one is sent again on the same key while the server does not
// decide it: a loaded 4-node MinIO has answered 503 to it on five fresh
// keys in a row (CI, 18 s), where a fresh key repeats the whole
// sequence. A retry that meets an undecided PUT which landed after all
// is refused (412) with v3 stored, which is a replace too; a server that
// ignored If-Match replaced on the wrong ETag already.
func (p *prober) replaceIfMatch() bool {
	return p.settle("replace", func(key string) (bool, []int) {
		etag, first := p.put(key, "v1", "", "")
		if unavailable(first) {
			return false, []int{first}
		}
		_, wrong := p.put(key, "v2", "", wrongETag)
		if unavailable(wrong) {
			return false, []int{first, wrong}
		}
		kept := p.get(key)
		_, rights := p.putUntilDecided(key, "v3", etag, 10)
		codes := append([]int{first, wrong}, rights...)
		right := rights[len(rights)-1]
		if unavailable(right) {
			return false, codes
		}
		replaced := right == 200 || right == 412 && len(rights) > 1
		return first == 200 && wrong == 412 && kept == "v1" && replaced && p.get(key) == "v3", codes
	})
}

func etagOf(t *testing.T, p *prober, key string) string {
	info, err := p.mc.StatObject(t.Context(), p.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("stat %s: %v", key, err)
	}
	return `"` + strings.Trim(info.ETag, `"`) + `"`
}

// multipart uploads 11 MiB in 5 MiB parts and reads it back.
func (p *prober) multipart() bool {
	data := bytes.Repeat([]byte("0123456789abcdef"), 11<<16)
	_, err := p.mc.PutObject(p.t.Context(), p.bucket, "multi", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{PartSize: 5 << 20})
	if err != nil {
		p.t.Logf("multipart upload: %v", err)
		return false
	}
	if got := p.get("multi"); got != string(data) {
		p.t.Logf("multipart upload of %d bytes read back as %d bytes", len(data), len(got))
		return false
	}
	return true
}

// listPrefix lists the keys under a prefix, three of them in two levels,
// with one key beside it: all of them (no delimiter), then one level
// (delimiter /: two keys and one common prefix), as repair lists.
func (p *prober) listPrefix() bool {
	for _, k := range []string{"list/a", "list/b", "list/c/d", "listless"} {
		if _, code := p.putSettled(k, k); code != 200 {
			p.t.Logf("put %s: status %d", k, code)
			return false
		}
	}
	all, ok := p.list("list/", false)
	level, ok2 := p.list("list/", true)
	if !ok || !ok2 || all != "list/a,list/b,list/c/d" || level != "list/a,list/b,list/c/" {
		p.t.Logf("list: %q (%v), delimited %q (%v)", all, ok, level, ok2)
		return false
	}
	return true
}

// list returns the keys (and common prefixes) under prefix, sorted and
// joined, with or without the delimiter /.
func (p *prober) list(prefix string, delimited bool) (string, bool) {
	in := &s3.ListObjectsV2Input{Bucket: &p.bucket, Prefix: &prefix}
	if delimited {
		in.Delimiter = aws.String("/")
	}
	out, err := p.api.ListObjectsV2(p.t.Context(), in)
	for attempt := 0; err != nil && unavailable(status(err)) && attempt < 4; attempt++ {
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		out, err = p.api.ListObjectsV2(p.t.Context(), in)
	}
	if err != nil {
		p.t.Logf("list %s (delimited %v): %v", prefix, delimited, err)
		return "", false
	}
	var got []string
	for _, o := range out.Contents {
		got = append(got, aws.ToString(o.Key))
	}
	for _, cp := range out.CommonPrefixes {
		got = append(got, aws.ToString(cp.Prefix))
	}
	sort.Strings(got)
	return strings.Join(got, ","), true
}
