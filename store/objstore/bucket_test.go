package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestPayloadSigning: a PUT's body is signed (its sha256 in the SigV4
// payload hash) only over plain HTTP to another host.
func TestPayloadSigning(t *testing.T) {
	t.Parallel()
	body := []byte("a segment")
	sum := sha256.Sum256(body)
	signed := hex.EncodeToString(sum[:])
	for _, c := range []struct{ endpoint, want string }{
		{"https://s3.us-east-1.amazonaws.com/b/k", "UNSIGNED-PAYLOAD"},
		{"https://minio.example:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://127.0.0.1:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://127.9.8.7:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://[::1]:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://localhost:9000/b/k", "UNSIGNED-PAYLOAD"},
		{"http://10.1.2.3:9000/b/k", signed},
		{"http://minio.example:9000/b/k", signed},
		{"http://localhost.example/b/k", signed},
	} {
		req := smithyhttp.NewStackRequest().(*smithyhttp.Request)
		u, err := url.Parse(c.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		req.URL = u
		if req, err = req.SetStream(bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		var got string
		next := middleware.FinalizeHandlerFunc(func(ctx context.Context, in middleware.FinalizeInput) (middleware.FinalizeOutput, middleware.Metadata, error) {
			got = v4.GetPayloadHash(ctx)
			return middleware.FinalizeOutput{}, middleware.Metadata{}, nil
		})
		if _, _, err := (payloadSigning{}).HandleFinalize(context.Background(), middleware.FinalizeInput{Request: req}, next); err != nil {
			t.Fatalf("%s: %v", c.endpoint, err)
		}
		if got != c.want {
			t.Errorf("%s: payload hash %q, want %q", c.endpoint, got, c.want)
		}
	}
}

// TestBucketSemantics holds the in-memory bucket the protocol tests run on
// to the same table of bucket semantics as every real server that
// honours conditional writes (miniotest.ConditionalKinds, the 4-node
// cluster included): what the protocol tests prove on memory holds on the
// servers only if the two agree.
func TestBucketSemantics(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		checkBucket(t, newMemBucket("semantics", "pfx/"))
	})
	miniotest.Each(t, miniotest.ConditionalKinds(), func(t *testing.T, srv *miniotest.Server) {
		o := defaultOptions()
		o.s3.endpoint = srv.Endpoint()
		o.s3.sdk = append(o.s3.sdk, srv.SetCredentials)
		b, err := newS3Bucket(t.Context(), srv.NewBucket(t), "pfx/", o)
		if err != nil {
			t.Fatal(err)
		}
		checkBucket(t, b)
	})
}

// checkBucket runs the table of bucket semantics the protocol relies on
// against b, which must be empty.
func checkBucket(t *testing.T, b bucket) {
	ctx := t.Context()
	put := func(key, body string, cond putCond) (string, error) {
		return b.put(ctx, key, []byte(body), cond, "application/octet-stream")
	}
	mustPut := func(key, body string, cond putCond) string {
		t.Helper()
		etag, err := put(key, body, cond)
		if err != nil || etag == "" {
			t.Fatalf("put %s: etag %q, %v", key, etag, err)
		}
		return etag
	}
	holds := func(key, want string) {
		t.Helper()
		data, _, err := b.get(ctx, key, "")
		if err != nil || string(data) != want {
			t.Fatalf("get %s: %q %v, want %q", key, data, err, want)
		}
	}
	etagA := mustPut("a", "one", putCond{ifNoneMatch: true})
	etagB := mustPut("d/b", "two", putCond{})
	mustPut("d/e/c", "three", putCond{})
	for _, c := range []struct {
		name  string
		check func() error // nil: as the protocol expects
	}{
		{"get of a missing object: not found", func() error {
			_, _, err := b.get(ctx, "missing", "")
			return want(err, errNotFound)
		}},
		{"head of a missing object: not found", func() error { return want(b.head(ctx, "missing"), errNotFound) }},
		{"head of an object", func() error { return b.head(ctx, "a") }},
		{"get: the bytes and the ETag of the put", func() error {
			data, etag, err := b.get(ctx, "a", "")
			if err != nil || string(data) != "one" || etag != etagA {
				return fmt.Errorf("got %q %q %v, want %q %q", data, etag, err, "one", etagA)
			}
			return nil
		}},
		{"get if-none-match the current ETag: not modified", func() error {
			_, _, err := b.get(ctx, "a", etagA)
			return want(err, errNotModified)
		}},
		{"get if-none-match another ETag: the object", func() error {
			data, _, err := b.get(ctx, "a", etagB)
			if err != nil || string(data) != "one" {
				return fmt.Errorf("got %q %v", data, err)
			}
			return nil
		}},
		{"create of an existing object: precondition failed, object kept", func() error {
			_, err := put("a", "other", putCond{ifNoneMatch: true})
			holds("a", "one")
			return want(err, errPrecondition)
		}},
		{"replace naming a wrong ETag: precondition failed, object kept", func() error {
			_, err := put("a", "other", putCond{ifMatch: etagB})
			holds("a", "one")
			return want(err, errPrecondition)
		}},
		// AWS, MinIO and versitygw answer 404, gofakes3 412: the protocol
		// takes both as a refusal.
		{"replace of a missing object: refused", func() error {
			_, err := put("missing", "other", putCond{ifMatch: etagA})
			if _, _, gerr := b.get(ctx, "missing", ""); !errors.Is(gerr, errNotFound) {
				return fmt.Errorf("the replace created the object: %v", gerr)
			}
			if errors.Is(err, errPrecondition) {
				return nil
			}
			return want(err, errNotFound)
		}},
		{"replace naming the current ETag: a new ETag", func() error {
			etag, err := put("d/b", "two, replaced", putCond{ifMatch: etagB})
			if err != nil || etag == etagB {
				return fmt.Errorf("replace: %q %v", etag, err)
			}
			holds("d/b", "two, replaced")
			_, err = put("d/b", "again", putCond{ifMatch: etagB})
			return want(err, errPrecondition)
		}},
		{"list by prefix: every key under it, in order", func() error {
			objects, prefixes, err := b.list(ctx, "d/", "")
			keys := listedKeys(objects)
			if err != nil || !slices.Equal(keys, []string{"d/b", "d/e/c"}) || len(prefixes) != 0 {
				return fmt.Errorf("got %q %q %v", keys, prefixes, err)
			}
			return nil
		}},
		{"list: each object's ETag as its get gives it (ChangeToken)", func() error {
			objects, _, err := b.list(ctx, "d/", "")
			if err != nil || len(objects) == 0 {
				return fmt.Errorf("got %v %v", objects, err)
			}
			for _, o := range objects {
				if _, etag, err := b.get(ctx, o.key, ""); err != nil || etag != o.etag {
					return fmt.Errorf("%s: listed ETag %q, get %q %v", o.key, o.etag, etag, err)
				}
			}
			return nil
		}},
		{"list by prefix and delimiter: one level", func() error {
			objects, prefixes, err := b.list(ctx, "d/", "/")
			keys := listedKeys(objects)
			if err != nil || !slices.Equal(keys, []string{"d/b"}) || !slices.Equal(prefixes, []string{"d/e/"}) {
				return fmt.Errorf("got %q %q %v", keys, prefixes, err)
			}
			return nil
		}},
		{"delete: gone; delete of a missing object: no error", func() error {
			if err := b.delete(ctx, "d/e/c"); err != nil {
				return err
			}
			if err := b.head(ctx, "d/e/c"); !errors.Is(err, errNotFound) {
				return fmt.Errorf("after delete: %v", err)
			}
			return b.delete(ctx, "d/e/c")
		}},
		{"delete many: those named gone, missing ones no error, the others kept", func() error {
			var keys []string
			for i := range 5 {
				keys = append(keys, fmt.Sprintf("many/%d", i))
				mustPut(keys[i], "x", putCond{})
			}
			mustPut("many/kept", "kept", putCond{})
			if err := b.deleteKeys(ctx, append(keys, "many/missing")); err != nil {
				return err
			}
			objects, _, err := b.list(ctx, "many/", "")
			if got := listedKeys(objects); err != nil || !slices.Equal(got, []string{"many/kept"}) {
				return fmt.Errorf("left %q %v, want only many/kept", got, err)
			}
			return b.deleteKeys(ctx, nil)
		}},
		{"racing creates: exactly one wins", func() error {
			return race(8, func(i int) error {
				_, err := put("raced", fmt.Sprint("writer ", i), putCond{ifNoneMatch: true, once: true})
				return err
			})
		}},
		{"racing replaces of one ETag: exactly one wins", func() error {
			return race(8, func(i int) error {
				_, err := put("a", fmt.Sprint("writer ", i), putCond{ifMatch: etagA, once: true})
				return err
			})
		}},
	} {
		if err := c.check(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// want is nil when err is sentinel, an error saying what came instead.
func want(err, sentinel error) error {
	if errors.Is(err, sentinel) {
		return nil
	}
	return fmt.Errorf("got %v, want %v", err, sentinel)
}

// race runs n writes at once: exactly one must succeed and the others
// lose (a precondition failure, or a conflict the protocol retries).
func race(n int, write func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = write(i) }()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict):
			return fmt.Errorf("a racing write: %v", err)
		}
	}
	if won != 1 {
		return fmt.Errorf("%d of %d racing writes won, want 1", won, n)
	}
	return nil
}

// TestDeleteKeysRefused: a batch delete by credentials that may not
// delete (MinIO answers each key AccessDenied inside a 200) is the same
// one-line permission error as a DELETE's, naming s3:DeleteObject, and
// deletes nothing.
func TestDeleteKeysRefused(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	name := srv.NewBucket(t)
	open := func(user *miniotest.Server) bucket {
		o := defaultOptions()
		o.s3.endpoint = srv.Endpoint()
		o.s3.sdk = append(o.s3.sdk, user.SetCredentials)
		b, err := newS3Bucket(t.Context(), name, "pfx/", o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	root := open(srv)
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		if _, err := root.put(t.Context(), k, []byte(k), putCond{}, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	reader := open(srv.AsUser(t, fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::%s/pfx/*"]}]}`, name)))
	err := reader.deleteKeys(t.Context(), keys)
	var perm *PermissionError
	if !errors.As(err, &perm) || perm.Permission != "s3:DeleteObject" || !errors.Is(err, ErrPermission) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a reader's batch delete: %v; want the one-line permission error naming s3:DeleteObject", err)
	}
	for _, k := range keys {
		if err := root.head(t.Context(), k); err != nil {
			t.Errorf("%s after the refused delete: %v", k, err)
		}
	}
}

// proxiedBucket opens bucket name of srv with o, through a proxy that
// lets answer (when it returns true, having answered) each request before
// srv does: a server that behaves otherwise, for a test.
func proxiedBucket(t *testing.T, srv *miniotest.Server, name string, o options, answer func(w http.ResponseWriter, r *http.Request) bool) *s3Bucket {
	t.Helper()
	target, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !answer(w, r) {
			forward.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(proxy.Close)
	o.s3.endpoint = proxy.URL
	o.s3.sdk = append(o.s3.sdk, srv.SetCredentials)
	b, err := newS3Bucket(t.Context(), name, "pfx/", o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeleteKeysWithoutBatch: a server that answers DeleteObjects 501
// Not Implemented has each key deleted by a DELETE of its own.
func TestDeleteKeysWithoutBatch(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	var refused, deletes atomic.Int32
	b := proxiedBucket(t, srv, srv.NewBucket(t), defaultOptions(), func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
			refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotImplemented)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`)
			return true
		case r.Method == http.MethodDelete:
			deletes.Add(1)
		}
		return false
	})
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		if _, err := b.put(t.Context(), k, []byte(k), putCond{}, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.deleteKeys(t.Context(), keys); err != nil {
		t.Fatalf("deleteKeys through a server without DeleteObjects: %v", err)
	}
	objects, _, err := b.list(t.Context(), "", "")
	if err != nil || len(objects) != 0 || refused.Load() == 0 || deletes.Load() != int32(len(keys)) {
		t.Fatalf("left %q (%v); %d batch requests refused, %d DELETEs; want none left, one DELETE a key", listedKeys(objects), err, refused.Load(), deletes.Load())
	}
}

// TestDeleteKeysBusy: a DeleteObjects answered 200 with some keys
// refused as busy (a MinIO cluster missing a node answers SlowDownWrite
// per key, which the SDK does not retry) has those keys, and only
// those, sent again; a server busy for longer than an append would wait
// is an error that says so (errThrottled), with the objects left.
func TestDeleteKeysBusy(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	keyRE := regexp.MustCompile(`<Key>([^<]*)</Key>`)
	// setup puts a, b and c behind a proxy that answers the first n
	// DeleteObjects as a busy server would, deleting the first key they
	// name and refusing the rest; n < 0: every DeleteObjects, refusing
	// every key. It returns the bucket and the bodies of the
	// DeleteObjects sent.
	var root *s3Bucket
	setup := func(t *testing.T, n int32, o options) (*s3Bucket, *[]string) {
		var sent atomic.Int32
		var mu sync.Mutex
		var bodies []string
		name := srv.NewBucket(t)
		b := proxiedBucket(t, srv, name, o, func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost || !r.URL.Query().Has("delete") {
				return false
			}
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(body))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
			if k := sent.Add(1); n >= 0 && k > n {
				return false
			}
			keys := keyRE.FindAllStringSubmatch(string(body), -1)
			if n >= 0 {
				if err := root.delete(r.Context(), strings.TrimPrefix(keys[0][1], "pfx/")); err != nil {
					t.Error(err)
				}
				keys = keys[1:]
			}
			var out strings.Builder
			out.WriteString(`<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
			for _, k := range keys {
				fmt.Fprintf(&out, `<Error><Key>%s</Key><Code>SlowDownWrite</Code><Message>Resource requested is unwritable, please reduce your request rate</Message></Error>`, k[1])
			}
			out.WriteString(`</DeleteResult>`)
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, out.String())
			return true
		})
		direct := defaultOptions()
		direct.s3.endpoint = srv.Endpoint()
		direct.s3.sdk = append(direct.s3.sdk, srv.SetCredentials)
		var err error
		if root, err = newS3Bucket(t.Context(), name, "pfx/", direct); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			if _, err := root.put(t.Context(), k, []byte(k), putCond{}, "application/octet-stream"); err != nil {
				t.Fatal(err)
			}
		}
		return b, &bodies
	}

	t.Run("for a while", func(t *testing.T) {
		b, bodies := setup(t, 1, defaultOptions())
		if err := b.deleteKeys(t.Context(), []string{"a", "b", "c"}); err != nil {
			t.Fatalf("deleteKeys through a busy answer: %v", err)
		}
		objects, _, err := root.list(t.Context(), "", "")
		if err != nil || len(objects) != 0 {
			t.Fatalf("left %q (%v)", listedKeys(objects), err)
		}
		if len(*bodies) != 2 || strings.Contains((*bodies)[1], "pfx/a<") || !strings.Contains((*bodies)[1], "pfx/b<") {
			t.Fatalf("%d DeleteObjects (%q); want 2, the second naming only the busy keys", len(*bodies), *bodies)
		}
	})
	t.Run("for too long", func(t *testing.T) {
		o := defaultOptions()
		o.maxAttempts = 1
		b, bodies := setup(t, -1, o)
		err := b.deleteKeys(t.Context(), []string{"a", "b", "c"})
		if !errors.Is(err, errThrottled) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("deleteKeys through a server busy throughout: %v; want a one-line errThrottled", err)
		}
		objects, _, _ := root.list(t.Context(), "", "")
		if len(objects) != 3 || len(*bodies) != 3 {
			t.Fatalf("left %q after %d DeleteObjects; want all three after 3", listedKeys(objects), len(*bodies))
		}
	})
}
