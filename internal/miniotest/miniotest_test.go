package miniotest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/panto-dev/panto/internal/miniotest"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

func TestSharedServerMakesBuckets(t *testing.T) {
	s := miniotest.Shared(t)
	a, b := s.NewBucket(t), s.NewBucket(t)
	if a == b {
		t.Fatalf("two buckets share the name %s", a)
	}
	for _, name := range []string{a, b} {
		ok, err := s.Client(t).BucketExists(context.Background(), name)
		if err != nil || !ok {
			t.Fatalf("bucket %s: exists=%v err=%v", name, ok, err)
		}
	}
}

func TestKillAndRestartKeepData(t *testing.T) {
	s := miniotest.New(t)
	bucket := s.NewBucket(t)
	s.Kill()
	if resp, err := http.Get(s.Endpoint() + "/minio/health/live"); err == nil {
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
}
