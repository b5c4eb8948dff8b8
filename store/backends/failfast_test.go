package backends

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestFailFast: the local-first store's S3 client does not retry a
// request nobody could receive (a real refused dial, a name that does
// not resolve), and keeps retrying what the SDK retries otherwise.
func TestFailFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, refused := net.Dial("tcp", addr)
	if refused == nil {
		t.Fatal("a closed port accepted a connection")
	}
	_, unresolved := net.DefaultResolver.LookupHost(context.Background(), "no-such-host.invalid")
	if unresolved == nil {
		t.Fatal("no-such-host.invalid resolved")
	}
	so := &s3.Options{Retryer: retry.NewStandard()}
	failFast(so)
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"refused", refused, false},
		{"not resolved", unresolved, false},
		{"unreachable network", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: network is unreachable")}, true},
	} {
		if got := so.Retryer.IsErrorRetryable(tc.err); got != tc.retry {
			t.Errorf("%s (%v): retryable %v, want %v", tc.name, tc.err, got, tc.retry)
		}
	}
}
