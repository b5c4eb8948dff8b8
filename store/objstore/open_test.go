package objstore_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestOpenErrors: a store that cannot be used fails in Open with one line
// that says what to fix. Not parallel: the cases set the process's AWS
// variables, as a user would.
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
		{"no credentials", "s3://panto", nil, []string{"no AWS credentials found", "AWS_ACCESS_KEY_ID"}},
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
			if c.name == "no credentials" {
				miniotest.NoCredentials(t)
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
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.open(t)
	e.open(t) // the marker exists: read, not re-created
	c := e.srv.Client(t)
	newer := `{"format":"panto-objstore","version":99}`
	if _, err := c.PutObject(ctx, e.bucket, "pfx/panto-store.json", strings.NewReader(newer), int64(len(newer)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := objstore.Open(ctx, e.url, e.reach()...)
	if !errors.Is(err, objstore.ErrNewerFormat) || !strings.Contains(err.Error(), "upgrade panto") {
		t.Fatalf("open of a newer format: %v", err)
	}
	other := `{"hello":1}`
	if _, err := c.PutObject(ctx, e.bucket, "pfx/panto-store.json", strings.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.Open(ctx, e.url, e.reach()...); !errors.Is(err, objstore.ErrOpen) || !strings.Contains(err.Error(), "not a panto store marker") {
		t.Fatalf("open of a foreign marker: %v", err)
	}
}

// TestOpenWithoutCredentialsCallsNobody: on a machine whose environment
// names other credential sources (a profile with a credential_process,
// a web identity token, a container credentials endpoint), the "no
// credentials" case consults none of them: the SDK would otherwise run
// the process or call out for credentials. The sources here are traps on
// loopback that count what reaches them.
func TestOpenWithoutCredentialsCallsNobody(t *testing.T) {
	srv := miniotest.Shared(t)
	var calls atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "trap", http.StatusInternalServerError)
	}))
	defer trap.Close()
	dir := t.TempDir()
	ran := filepath.Join(dir, "credential_process-ran")
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[profile trap]\ncredential_process = /bin/sh -c 'touch "+ran+"; exit 1'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("a-web-identity-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, source := range []struct {
		name string
		env  map[string]string
	}{
		{"credential_process", map[string]string{"AWS_PROFILE": "trap", "AWS_CONFIG_FILE": config}},
		{"web identity", map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": token, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/trap",
			"AWS_ROLE_SESSION_NAME": "trap", "AWS_ENDPOINT_URL_STS": trap.URL}},
		{"container credentials", map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": trap.URL + "/creds", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "trap"}},
	} {
		t.Run(source.name, func(t *testing.T) {
			for k, v := range source.env {
				t.Setenv(k, v)
			}
			srv.SetEnv(t)
			miniotest.NoCredentials(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := objstore.Open(ctx, "s3://panto", objstore.WithMaxAttempts(2))
			if err == nil || !strings.Contains(err.Error(), "no AWS credentials found") {
				t.Errorf("Open without credentials: %v, want no AWS credentials found", err)
			}
			if n := calls.Swap(0); n != 0 {
				t.Errorf("the SDK called the trap %d times for credentials", n)
			}
			if _, err := os.Stat(ran); err == nil {
				os.Remove(ran)
				t.Error("the SDK ran the profile's credential_process")
			}
		})
	}
}
