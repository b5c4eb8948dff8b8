package miniotest_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

// TestServersMakeBuckets: every kind starts, makes buckets of distinct
// names and reads them back.
func TestServersMakeBuckets(t *testing.T) {
	miniotest.Each(t, miniotest.Kinds, func(t *testing.T, s *miniotest.Server) {
		a, b := s.NewBucket(t), s.NewBucket(t)
		if a == b {
			t.Fatalf("two buckets share the name %s", a)
		}
		for _, name := range []string{a, b} {
			ok, err := s.Client(t).BucketExists(t.Context(), name)
			if err != nil || !ok {
				t.Fatalf("bucket %s: exists=%v err=%v", name, ok, err)
			}
		}
	})
}

// TestKillAndRestartKeepData: a server process killed and restarted on
// its address keeps its buckets.
func TestKillAndRestartKeepData(t *testing.T) {
	for _, k := range []*miniotest.Kind{miniotest.MinIO, miniotest.VersityGW} {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			s := miniotest.NewOf(t, k)
			bucket := s.NewBucket(t)
			s.Kill()
			if resp, err := http.Get(s.Endpoint()); err == nil {
				resp.Body.Close()
				t.Fatal("server still answers after Kill")
			}
			if err := s.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
			ok, err := s.Client(t).BucketExists(context.Background(), bucket)
			if err != nil || !ok {
				t.Fatalf("bucket %s after restart: exists=%v err=%v", bucket, ok, err)
			}
		})
	}
}

// TestChildEnvIsMinimal: a child process gets PATH, HOME, TMPDIR and the
// server's AWS variables, and nothing of the test's environment: not the
// machine's credential sources, not any other variable.
func TestChildEnvIsMinimal(t *testing.T) {
	for _, kv := range []string{
		"AWS_PROFILE=prod", "AWS_WEB_IDENTITY_TOKEN_FILE=/var/run/token", "AWS_ROLE_ARN=arn:aws:iam::1:role/x",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:1/creds", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/creds",
		"AWS_CONFIG_FILE=/home/me/.aws/config", "AWS_SHARED_CREDENTIALS_FILE=/home/me/.aws/credentials",
		"AWS_SESSION_TOKEN=tok", "AWS_CA_BUNDLE=/etc/ca.pem", "PANTO_STORE=/elsewhere", "SOME_SECRET=x",
	} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s := miniotest.SharedOf(t, miniotest.GoFakeS3)
	allowed := []string{"PATH", "HOME", "TMPDIR", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL_S3", "AWS_EC2_METADATA_DISABLED"}
	seen := map[string]string{}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(allowed, k) {
			t.Errorf("the child environment has %s", kv)
		}
		if _, dup := seen[k]; dup {
			t.Errorf("the child environment sets %s twice", k)
		}
		seen[k] = v
	}
	if seen["AWS_ENDPOINT_URL_S3"] != s.Endpoint() || seen["AWS_ACCESS_KEY_ID"] != s.AccessKey() || seen["AWS_EC2_METADATA_DISABLED"] != "true" {
		t.Errorf("the child environment does not point at the server: %v", seen)
	}
	if home := seen["HOME"]; home == os.Getenv("HOME") {
		t.Errorf("HOME=%q is the test's own, want an empty directory of the harness", home)
	} else if entries, err := os.ReadDir(home); err != nil || len(entries) != 0 {
		t.Errorf("HOME=%q: %v, %d entries, want an empty directory", home, err, len(entries))
	}
}
