package miniotest_test

import (
	"net/http/httptest"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// TestRequestClass: a listing is a LIST however its query spells it (the
// prefix in the query, a delimiter, a continuation, a listing of versions
// or uploads, no query at all), and only a GET of the bucket itself is
// one: an object's GET, whatever its query, a bucket's location and the
// other methods are their method.
func TestRequestClass(t *testing.T) {
	for _, tt := range []struct{ method, target, want string }{
		{"GET", "/bucket?list-type=2&prefix=panto%2Fsessions%2F", "LIST"},
		{"GET", "/bucket/?list-type=2&prefix=panto/sessions/abc/&delimiter=%2F", "LIST"},
		{"GET", "/bucket?list-type=2&continuation-token=xyz&prefix=panto/", "LIST"},
		{"GET", "/bucket?prefix=panto/index/", "LIST"},
		{"GET", "/bucket", "LIST"},
		{"GET", "/bucket/", "LIST"},
		{"GET", "/bucket?versions&prefix=panto/", "LIST"},
		{"GET", "/bucket?uploads", "LIST"},
		{"GET", "/bucket?x-id=ListObjectsV2&list-type=2", "LIST"},
		{"GET", "/bucket?location", "GET"},
		{"GET", "/bucket?versioning", "GET"},
		{"GET", "/bucket/panto/sessions/x/manifest.json", "GET"},
		{"GET", "/bucket/panto/index/0.json.zst?prefix=x", "GET"},
		{"GET", "/", "GET"}, // the list of buckets: not a listing of one
		{"HEAD", "/bucket", "HEAD"},
		{"PUT", "/bucket/panto/seg/0.jsonl.zst", "PUT"},
		{"DELETE", "/bucket/panto/seg/0.jsonl.zst", "DELETE"},
		{"POST", "/bucket?delete", "POST"},
	} {
		if got := miniotest.RequestClass(httptest.NewRequest(tt.method, tt.target, nil)); got != tt.want {
			t.Errorf("%s %s: %s, want %s", tt.method, tt.target, got, tt.want)
		}
	}
}
