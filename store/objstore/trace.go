package objstore

import (
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// WithTrace logs every HTTP request the store makes, each attempt of a
// retried one too, on l (at level Info): method, key, status, bytes sent
// and received, and milliseconds until its body was read. It is how a
// user sees why an operation is slow, or which request a server refuses.
// No header is logged, so no credential or signature reaches the trace.
func WithTrace(l *slog.Logger) Option {
	return WithS3Options(func(so *s3.Options) {
		so.HTTPClient = &tracingClient{next: so.HTTPClient, log: l}
	})
}

// tracingClient wraps the S3 client's HTTP client.
type tracingClient struct {
	next s3.HTTPClient
	log  *slog.Logger
}

func (c *tracingClient) Do(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := c.next.Do(req)
	if err != nil {
		c.log.Info("s3", "method", req.Method, "key", traceKey(req), "error", err.Error(), "sent", max(req.ContentLength, 0), "ms", ms(time.Since(start)))
		return resp, err
	}
	resp.Body = &tracedBody{ReadCloser: resp.Body, c: c, req: req, status: resp.StatusCode, start: start}
	return resp, nil
}

// traceKey is the request's path, with a LIST's query (its prefix and
// continuation) after it.
func traceKey(req *http.Request) string {
	q := req.URL.Query()
	if q.Has("list-type") || q.Has("prefix") || q.Has("delimiter") {
		return req.URL.Path + "?prefix=" + q.Get("prefix")
	}
	return req.URL.Path
}

// tracedBody logs its request once the body is closed, with what was
// read of it.
type tracedBody struct {
	io.ReadCloser
	c      *tracingClient
	req    *http.Request
	status int
	start  time.Time
	n      atomic.Int64
	done   atomic.Bool
}

func (b *tracedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *tracedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.c.log.Info("s3", "method", b.req.Method, "key", traceKey(b.req), "status", b.status,
			"sent", max(b.req.ContentLength, 0), "received", b.n.Load(), "ms", ms(time.Since(b.start)))
	}
	return err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// answerHook wraps the S3 client's HTTP client: fn is called as each
// response arrives (WithOnAnswer).
type answerHook struct {
	next s3.HTTPClient
	fn   func()
}

func (c answerHook) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err == nil {
		c.fn()
	}
	return resp, err
}
