package backends

import (
	"errors"
	"net"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// failFast makes the S3 client of a local-first store give up at once on
// a request nobody could receive: a connection refused, or a host name
// that does not resolve. The SDK would retry it with backoff (half a
// second at the object store's attempts) while panto waits to open; the
// local-first store retries on its own schedule and works from the
// replica meanwhile (store/localfirst). Any other failure keeps the
// object store's retries.
func failFast(so *s3.Options) {
	next, ok := so.Retryer.(aws.RetryerV2)
	if !ok {
		return
	}
	so.Retryer = failFastRetryer{next}
}

type failFastRetryer struct{ aws.RetryerV2 }

func (r failFastRetryer) IsErrorRetryable(err error) bool {
	if noOneListens(err) {
		return false
	}
	return r.RetryerV2.IsErrorRetryable(err)
}

// noOneListens reports whether err is a connection refused or a name
// that does not resolve.
func noOneListens(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &dns) && dns.IsNotFound)
}
