package objstore

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// errNotTheBucket: an answer to a request to the bucket came from
// something on the way that is not an S3 server: a captive portal on the
// endpoint's plain http (hotel Wi-Fi) redirecting every request to its
// login page, or answering with that page. It is no answer from the
// bucket (IsUnreachable): once the user signs in, the bucket answers.
var errNotTheBucket = errors.New("not an answer of the S3 server (a captive portal's sign-in page?)")

// foreignAnswer is the error of a request whose answer is not S3's.
type foreignAnswer struct {
	method, key string
	status      int
	contentType string
	location    string
}

func (e *foreignAnswer) Error() string {
	what := fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
	if e.location != "" {
		what += " to " + e.location
	} else if e.contentType != "" {
		what += " (" + e.contentType + ")"
	}
	return fmt.Sprintf("%s %s: %s: %v", e.method, e.key, what, errNotTheBucket)
}

func (e *foreignAnswer) Unwrap() error { return errNotTheBucket }

// RetryableError tells the SDK's retryer not to ask again at once: a
// portal answers the same until the user signs in, and the callers that
// work around an unreachable bucket retry on their own schedule.
func (e *foreignAnswer) RetryableError() bool { return false }

// portalCheck wraps the S3 client's HTTP client: an answer that bears no
// sign of S3 and is a redirect (but 304, a conditional read's answer) or
// a 2xx HTML page is turned into a foreignAnswer, before the SDK takes a
// redirect for an API error with a status the callers report as the
// server's, or a page for the object asked (a manifest "corrupt", a
// marker "used by something else").
type portalCheck struct{ next s3.HTTPClient }

func (c portalCheck) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || !foreign(resp) {
		return resp, err
	}
	// The page is not read: the connection may as well be closed.
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
	return nil, &foreignAnswer{method: req.Method, key: traceKey(req), status: resp.StatusCode,
		contentType: resp.Header.Get("Content-Type"), location: resp.Header.Get("Location")}
}

// foreign reports whether resp is not an S3 server's answer. Every S3
// answer bears a request id (AWS's redirect to another region, a 301,
// too); those of a portal bear none, and are redirects or HTML. S3's
// answers are XML, empty, or the object's bytes: panto stores no HTML.
func foreign(resp *http.Response) bool {
	if resp.Header.Get("X-Amz-Request-Id") != "" || resp.Header.Get("X-Amz-Id-2") != "" || resp.Header.Get("X-Amz-Bucket-Region") != "" {
		return false
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch code := resp.StatusCode; {
	case code >= 300 && code < 400 && code != http.StatusNotModified:
		return media != "application/xml" && media != "text/xml"
	case code >= 200 && code < 300:
		return media == "text/html"
	}
	return false
}
