package objstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store/objstore"
)

// TestIsUnreachable: no answer (a refused connection, a server that
// stopped answering, at Open or on a write) is unreachable, and so is a
// server error past the client's retries (a proxy or gateway before the
// bucket answering 500, 502, 503); an answer that is an error (wrong
// credentials, a missing bucket, 501 from a server that is no S3) is
// not. A captive portal on the endpoint's plain http (hotel Wi-Fi),
// answering every request with a redirect to its login page or with
// that page, is no answer from the bucket either.
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
	// failing is a proxy before the server that answers status to every
	// request while it is set, and passes them on otherwise.
	failing := func(t *testing.T, status *atomic.Int32) string {
		target, err := url.Parse(e.srv.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch code := status.Load(); code {
			case 0:
			case http.StatusFound: // a captive portal's redirect to its login page
				w.Header().Set("Location", "http://127.0.0.1:1/login?continue="+url.QueryEscape(r.URL.String()))
				w.WriteHeader(http.StatusFound)
				return
			case http.StatusOK: // a captive portal's login page, whatever was asked
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = w.Write([]byte("<!DOCTYPE html><html><body><form>Hotel Wi-Fi: sign in</form></body></html>"))
				return
			default:
				http.Error(w, http.StatusText(int(code)), int(code))
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	openBehind := func(t *testing.T, code int) error {
		var status atomic.Int32
		status.Store(int32(code))
		return open(e.url, objstore.WithEndpoint(failing(t, &status)), objstore.WithS3Options(e.srv.SetCredentials), objstore.WithMaxAttempts(1))
	}
	for _, tc := range []struct {
		name        string
		err         func(t *testing.T) error
		unreachable bool
	}{
		{"a gateway answering 503 at open", func(t *testing.T) error { return openBehind(t, http.StatusServiceUnavailable) }, true},
		{"a gateway answering 502 at open", func(t *testing.T) error { return openBehind(t, http.StatusBadGateway) }, true},
		{"a server answering 500 at open", func(t *testing.T) error { return openBehind(t, http.StatusInternalServerError) }, true},
		{"a server answering 501 at open (no S3)", func(t *testing.T) error { return openBehind(t, http.StatusNotImplemented) }, false},
		{"a captive portal redirecting at open", func(t *testing.T) error { return openBehind(t, http.StatusFound) }, true},
		{"a captive portal's page at open", func(t *testing.T) error { return openBehind(t, http.StatusOK) }, true},
		{"an append redirected by a captive portal", func(t *testing.T) error {
			var status atomic.Int32
			s := e.open(t, objstore.WithEndpoint(failing(t, &status)), objstore.WithS3Options(e.srv.SetCredentials), objstore.WithMaxAttempts(1))
			status.Store(http.StatusFound)
			return s.AppendMessages(context.Background(), agent.NewSessionID(), []agent.PersistentMessage{user("hello?")})
		}, true},
		{"an append answered by a captive portal's page", func(t *testing.T) error {
			var status atomic.Int32
			s := e.open(t, objstore.WithEndpoint(failing(t, &status)), objstore.WithS3Options(e.srv.SetCredentials), objstore.WithMaxAttempts(1))
			status.Store(http.StatusOK)
			return s.AppendMessages(context.Background(), agent.NewSessionID(), []agent.PersistentMessage{user("hello?")})
		}, true},
		{"an append answered 503 by the gateway", func(t *testing.T) error {
			var status atomic.Int32
			s := e.open(t, objstore.WithEndpoint(failing(t, &status)), objstore.WithS3Options(e.srv.SetCredentials), objstore.WithMaxAttempts(1))
			status.Store(http.StatusServiceUnavailable)
			return s.AppendMessages(context.Background(), agent.NewSessionID(), []agent.PersistentMessage{user("hello?")})
		}, true},
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
