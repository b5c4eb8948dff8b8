package objstore_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/internal/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestOpenErrors: a store that cannot be used fails in Open with one line
// that says what to fix.
func TestOpenErrors(t *testing.T) {
	srv := miniotest.Shared(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := "http://" + l.Addr().String()
	l.Close()
	notS3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>not here</html>", http.StatusNotFound)
	}))
	defer notS3.Close()
	cases := []struct {
		name, url string
		env       map[string]string
		want      []string
	}{
		{"missing bucket", "s3://no-such-bucket-panto", nil, []string{"bucket \"no-such-bucket-panto\" does not exist", "create it"}},
		{"wrong endpoint", "s3://panto", map[string]string{"AWS_ENDPOINT_URL_S3": closedPort}, []string{"cannot reach the S3 endpoint " + closedPort, "AWS_ENDPOINT_URL_S3"}},
		{"not an S3 endpoint", "s3://panto", map[string]string{"AWS_ENDPOINT_URL_S3": notS3.URL}, []string{notS3.URL + " did not answer as an S3 server", "AWS_ENDPOINT_URL_S3"}},
		{"bad credentials", "s3://panto", map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-secret"}, []string{"credentials rejected", "AWS_ACCESS_KEY_ID"}},
		{"unknown access key", "s3://panto", map[string]string{"AWS_ACCESS_KEY_ID": "nobody"}, []string{"credentials rejected", "InvalidAccessKeyId"}},
		{"no credentials", "s3://panto", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "",
			"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials", "AWS_CONFIG_FILE": "/nonexistent/config"}, []string{"no AWS credentials found", "AWS_ACCESS_KEY_ID"}},
		{"invalid bucket name", "s3://ux", nil, []string{`"ux" is not a valid bucket name`, "3 to 63"}},
		{"bad url", "s3:///x", nil, []string{"want s3://BUCKET[/PREFIX]"}},
		{"escaping prefix", "s3://panto/a/../b", nil, []string{"may not contain"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.SetEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := objstore.Open(ctx, c.url, objstore.WithMaxAttempts(2))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !errors.Is(err, objstore.ErrOpen) || strings.Contains(msg, "\n") {
				t.Errorf("not a one-line ErrOpen: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			t.Log(msg)
		})
	}
}

// TestOpenMarker: the first Open creates the format marker; a prefix
// written by a newer format is refused.
func TestOpenMarker(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.open(t)
	e.open(t) // the marker exists: read, not re-created
	c := e.srv.Client(t)
	newer := `{"format":"panto-objstore","version":99}`
	if _, err := c.PutObject(ctx, e.bucket, "pfx/panto-store.json", strings.NewReader(newer), int64(len(newer)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := objstore.Open(ctx, e.url)
	if !errors.Is(err, objstore.ErrNewerFormat) || !strings.Contains(err.Error(), "upgrade panto") {
		t.Fatalf("open of a newer format: %v", err)
	}
	other := `{"hello":1}`
	if _, err := c.PutObject(ctx, e.bucket, "pfx/panto-store.json", strings.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.Open(ctx, e.url); !errors.Is(err, objstore.ErrOpen) || !strings.Contains(err.Error(), "not a panto store marker") {
		t.Fatalf("open of a foreign marker: %v", err)
	}
}
