package objstore

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
)

// IsUnreachable reports whether err means the bucket gave no answer: a
// connection refused or reset, a timeout, a name that does not resolve,
// a connection that stalled (WithIdleTimeout), or a write whose outcome
// is unknown for one of those reasons; or no answer but that it cannot
// answer now, a server error (HTTP 5xx but 501) that outlived the
// client's retries: a proxy or gateway in front of the bucket failing,
// a cluster short of its quorum; or an answer that is not the S3
// server's, a captive portal's redirect to its sign-in page or that page
// (portalCheck). A bucket that answered otherwise, even
// wrongly (rejected credentials, a missing bucket, a server without
// conditional writes, another key), is not unreachable: retrying will
// not help, and the caller must say what to fix.
//
// store/localfirst branches on it: an unreachable bucket is worked around
// (the replica keeps the writes until it answers), any other error is
// reported.
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, errNotTheBucket) {
		return true
	}
	// Every transport failure of the SDK's HTTP client is a *url.Error,
	// which is a net.Error; an answer with a status never is.
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		if code := status.HTTPStatusCode(); code >= 500 && code != http.StatusNotImplemented {
			return true
		}
	}
	// Open explains its first request's failure in a sentence that keeps
	// only the root cause's text (explainOpenError).
	return errors.Is(err, ErrOpen) && strings.Contains(err.Error(), "cannot reach the S3 endpoint")
}
