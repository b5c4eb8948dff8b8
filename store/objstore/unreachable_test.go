package objstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestIsUnreachable: no answer (a refused connection, a server that
// stopped answering, at Open or on a write) is unreachable; an answer
// that is an error (wrong credentials, a missing bucket) is not.
func TestIsUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wrongCreds := objstore.WithS3Options(func(o *s3.Options) {
		o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "nobody", SecretAccessKey: "wrong-secret"}, nil
		})
	})
	open := func(url string, opts ...objstore.Option) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := objstore.Open(ctx, url, opts...)
		return err
	}
	for _, tc := range []struct {
		name        string
		err         func(t *testing.T) error
		unreachable bool
	}{
		{"no error", func(t *testing.T) error { return nil }, false},
		{"connection refused at open", func(t *testing.T) error {
			return open(e.url, objstore.WithEndpoint("http://127.0.0.1:1"), objstore.WithS3Options(e.srv.SetCredentials), objstore.WithMaxAttempts(1))
		}, true},
		{"wrong credentials", func(t *testing.T) error { return open(e.url, e.reach(wrongCreds)...) }, false},
		{"missing bucket", func(t *testing.T) error { return open("s3://no-such-bucket-here/x", e.reach()...) }, false},
		{"an append to a frozen server", func(t *testing.T) error {
			srv := miniotest.New(t)
			own := newEnvOn(t, srv)
			s := own.open(t, objstore.WithIdleTimeout(300*time.Millisecond), objstore.WithMaxAttempts(1))
			if err := srv.Freeze(); err != nil {
				t.Fatal(err)
			}
			defer srv.Thaw()
			return s.AppendMessages(context.Background(), agent.NewSessionID(), []agent.PersistentMessage{user("hello?")})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			if got := objstore.IsUnreachable(err); got != tc.unreachable {
				t.Errorf("IsUnreachable(%v) = %v, want %v", err, got, tc.unreachable)
			}
		})
	}
}
