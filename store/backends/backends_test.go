package backends_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/backends"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/null"
	"github.com/panto-dev/panto/store/objstore"
)

func TestMain(m *testing.M) { miniotest.Main(m) }

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tests := []struct {
		spec    string
		check   func(agent.SessionStore) bool
		wantErr string
	}{
		{dir, func(s agent.SessionStore) bool { _, ok := s.(*fsjsonl.Store); return ok }, ""},
		{"file://" + dir, func(s agent.SessionStore) bool { _, ok := s.(*fsjsonl.Store); return ok }, ""},
		{"none", func(s agent.SessionStore) bool { _, ok := s.(*null.Store); return ok }, ""},
		{"gs://bucket", nil, "unknown scheme"},
		{"s3://", nil, "s3://BUCKET"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := backends.Open(ctx, tt.spec, backends.Options{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(s) {
				t.Fatalf("Open(%q) = %T, %v", tt.spec, s, err)
			}
		})
	}
}

func TestOpenS3(t *testing.T) {
	srv := miniotest.Shared(t)
	srv.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", "") // the endpoint comes from Options
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	s, err := backends.Open(ctx, "s3://"+bucket+"/sessions", backends.Options{Endpoint: srv.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*objstore.Store); !ok {
		t.Fatalf("Open = %T", s)
	}
	sess := s.Create()
	if err := sess.Append(ctx, []agent.PersistentMessage{{Message: agent.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, sess.Info.ID[:8]); err != nil {
		t.Fatal(err)
	}
	_, err = backends.Open(ctx, "s3://no-such-bucket-panto", backends.Options{Endpoint: srv.Endpoint()})
	if !errors.Is(err, objstore.ErrOpen) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing bucket: %v", err)
	}
}

func TestOpenLog(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	tests := []struct {
		spec   string
		wantOK bool
	}{
		{dir, true},
		{"file://" + dir, true},
		{"none", false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			ls, err := backends.OpenLog(ctx, tt.spec, backends.Options{})
			if !tt.wantOK {
				if !errors.Is(err, backends.ErrNoLogs) || !strings.Contains(err.Error(), "give a directory or s3://") {
					t.Fatalf("OpenLog(%q) = %T, %v; want ErrNoLogs saying what to give", tt.spec, ls, err)
				}
				return
			}
			if err != nil || ls == nil {
				t.Fatalf("OpenLog(%q) = %T, %v", tt.spec, ls, err)
			}
		})
	}
}
