package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// s3Bucket is the bucket of an S3-compatible server: objects by key
// relative to the store's prefix, with the conditional-request outcomes
// turned into the protocol's sentinels (classify).
type s3Bucket struct {
	api      *s3.Client
	name     string
	prefix   string // "" or ends in "/"
	endpoint string // as configured, for messages ("": AWS's default)
	// busyAttempts is how often deleteKeys sends again the keys a
	// DeleteObjects answered as busy: the SDK retries a request the
	// server refused, but not the keys of one it answered 200.
	busyAttempts int
}

var _ bucket = (*s3Bucket)(nil)

// WithEndpoint sets the S3 endpoint URL (e.g. http://127.0.0.1:9000 for
// MinIO), overriding AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL. A custom
// endpoint implies path-style addressing.
func WithEndpoint(u string) Option { return func(o *options) { o.s3.endpoint = u } }

// WithS3Options adds a function applied to the S3 client's options after
// the store's own (endpoint, addressing, retries): the hook for custom
// HTTP clients, middleware, request counting and fault injection.
func WithS3Options(fn func(*s3.Options)) Option {
	return func(o *options) { o.s3.sdk = append(o.s3.sdk, fn) }
}

// DefaultIdleTimeout is how long a connection to the server may make no
// progress before its request fails (and is retried): a stalled network
// must not hang a command, and a slow one that still moves bytes must
// not fail it, so this bounds silence, not the length of a request.
const DefaultIdleTimeout = 30 * time.Second

// WithIdleTimeout sets how long a connection may move no byte, in either
// direction, before its request fails (default DefaultIdleTimeout; 0 or
// less: never).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.s3.idleTimeout = d } }

// WithOnAnswer calls fn as each answer of the server arrives: the status
// and headers of a response, to each attempt of a retried request (not an
// answer that is not the server's, a captive portal's: portalCheck). A
// caller that waits on the bucket tells by it a bucket that says nothing
// from one that is slow: store/localfirst gives up on a listing the
// bucket has answered nothing of for its short timeout, and lets one it
// answers run to its longer one. fn must be quick: it runs on the
// request's goroutine.
func WithOnAnswer(fn func()) Option { return func(o *options) { o.s3.onAnswer = fn } }

// s3Options are the options of Open that only the S3 bucket reads.
type s3Options struct {
	endpoint    string
	sdk         []func(*s3.Options) // WithS3Options
	idleTimeout time.Duration
	onAnswer    func() // WithOnAnswer
}

// maxIdleConnsPerHost is the idle connection pool per host: at least the
// number of requests a caller (panto-sync push --concurrency) keeps in
// flight.
const maxIdleConnsPerHost = 64

// newS3Bucket builds the S3 client of bucketName/prefix from the standard
// AWS chain and o (endpoint, retries, stall timeout, WithS3Options). It
// makes no request.
func newS3Bucket(ctx context.Context, bucketName, prefix string, o options) (*s3Bucket, error) {
	// The SDK logs warnings (an IMDS fallback, say) on stderr by itself;
	// a user must see one line from us instead.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, fmt.Errorf("%w: load AWS configuration: %v", ErrOpen, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // MinIO and most S3-compatible services accept it
	}
	endpoint := o.s3.endpoint
	if endpoint == "" {
		endpoint = firstNonEmpty(os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	}
	// The SDK's transport keeps at most 10 idle connections per host: a
	// sync pushing with more workers than that closes and re-dials
	// connections all the time. Keep the client the configuration built
	// (it honours AWS_CA_BUNDLE and proxies), with a larger idle pool.
	httpClient, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok || httpClient == nil {
		httpClient = awshttp.NewBuildableClient()
	}
	if cfg.HTTPClient == nil || ok {
		cfg.HTTPClient = httpClient.WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = max(tr.MaxIdleConns, 2*maxIdleConnsPerHost)
			tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, maxIdleConnsPerHost)
			tr.DialContext = stallTimeout(tr.DialContext, o.s3.idleTimeout)
		})
	}
	sdkAttempts := min(max(o.maxAttempts, 1), 5)
	api := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.s3.endpoint != "" {
			so.BaseEndpoint = aws.String(o.s3.endpoint)
		}
		so.UsePathStyle = endpoint != ""
		// We verify every object with our own sha256; the SDK's extra
		// checksums would only cost CPU (and aws-chunked encoding).
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.Retryer = retry.NewStandard(func(r *retry.StandardOptions) {
			r.MaxAttempts = sdkAttempts
			r.MaxBackoff = 2 * time.Second
			r.RateLimiter = ratelimit.None // a restarting server must not drain a token bucket
		})
		for _, fn := range o.s3.sdk {
			fn(so)
		}
		// Outermost, so that a trace (WithTrace) logs what came back,
		// and what is not the server's answer is not taken for one.
		so.HTTPClient = portalCheck{next: so.HTTPClient}
		if o.s3.onAnswer != nil {
			so.HTTPClient = answerHook{next: so.HTTPClient, fn: o.s3.onAnswer}
		}
	})
	// As long as an append waits out a busy server (append.go).
	busy := 3 * max(o.maxAttempts, 1)
	return &s3Bucket{api: api, name: bucketName, prefix: prefix, endpoint: endpoint, busyAttempts: busy}, nil
}

func (b *s3Bucket) key(rel string) string { return b.prefix + rel }

func (b *s3Bucket) url(rel string) string { return "s3://" + b.name + "/" + b.key(rel) }

func (b *s3Bucket) get(ctx context.Context, rel, ifNoneMatch string) ([]byte, string, error) {
	in := &s3.GetObjectInput{Bucket: &b.name, Key: aws.String(b.key(rel))}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	out, err := b.api.GetObject(ctx, in)
	if err != nil {
		return nil, "", b.requestFailed("get", b.key(rel), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", b.key(rel), err)
	}
	return data, aws.ToString(out.ETag), nil
}

func (b *s3Bucket) head(ctx context.Context, rel string) error {
	_, err := b.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.name, Key: aws.String(b.key(rel))})
	if err != nil {
		return b.requestFailed("head", b.key(rel), err)
	}
	return nil
}

func (b *s3Bucket) put(ctx context.Context, rel string, data []byte, cond putCond, contentType string) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:        &b.name,
		Key:           aws.String(b.key(rel)),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String(contentType),
	}
	switch {
	case cond.ifNoneMatch:
		in.IfNoneMatch = aws.String("*")
	case cond.ifMatch != "":
		in.IfMatch = aws.String(cond.ifMatch)
	}
	opts := []func(*s3.Options){s3.WithAPIOptions(signPayloadOffLoopback)}
	if cond.once {
		opts = append(opts, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	}
	out, err := b.api.PutObject(ctx, in, opts...)
	if err != nil {
		return "", b.requestFailed("put", b.key(rel), err)
	}
	return aws.ToString(out.ETag), nil
}

// signPayloadOffLoopback replaces the SDK's choice of SigV4 payload hash
// for a PUT (unsigned over HTTPS, the body's sha256 over plain HTTP) by
// payloadSigning.
func signPayloadOffLoopback(stack *middleware.Stack) error {
	_, err := stack.Finalize.Swap(computePayloadHashID, payloadSigning{})
	return err
}

// computePayloadHashID is the ID of the SDK's payload-hash middleware
// (aws/signer/v4), which payloadSigning replaces.
const computePayloadHashID = "ComputePayloadHash"

// payloadSigning signs a request's body only where that protects it: not
// over HTTPS (TLS does, as the SDK itself decides) and not to a loopback
// address (no network between the two ends), where the SigV4 payload
// hash would cost a sha256 of every byte on both sides, client and
// server, for nothing. Over plain HTTP to another host the body is
// signed, as the SDK does. Our own sha256 of every segment, checked by
// every reader, is the end-to-end check in all cases.
type payloadSigning struct{}

func (payloadSigning) ID() string { return computePayloadHashID }

func (payloadSigning) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok && (req.IsHTTPS() || isLoopback(req.URL.Hostname())) {
		return (&v4.UnsignedPayload{}).HandleFinalize(ctx, in, next)
	}
	return (&v4.ComputePayloadSHA256{}).HandleFinalize(ctx, in, next)
}

// isLoopback reports whether host (a name or an address, without port)
// is this machine's loopback: localhost, 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stallTimeout wraps a dialer so that every read and write of its
// connections fails after d without progress (an idle deadline, pushed
// back by each byte that moves).
func stallTimeout(dial func(ctx context.Context, network, addr string) (net.Conn, error), d time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if d <= 0 {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, idle: d}, nil
	}
}

// idleConn is a connection whose reads and writes time out after idle
// without progress.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// list pages through ListObjectsV2.
func (b *s3Bucket) list(ctx context.Context, rel, delimiter string) (objects []listed, prefixes []string, err error) {
	in := &s3.ListObjectsV2Input{Bucket: &b.name, Prefix: aws.String(b.key(rel))}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	p := s3.NewListObjectsV2Paginator(b.api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, b.requestFailed("list", b.key(rel), err)
		}
		for _, o := range page.Contents {
			objects = append(objects, listed{key: strings.TrimPrefix(aws.ToString(o.Key), b.prefix), etag: aws.ToString(o.ETag), modified: aws.ToTime(o.LastModified), size: aws.ToInt64(o.Size)})
		}
		for _, cp := range page.CommonPrefixes {
			prefixes = append(prefixes, strings.TrimPrefix(aws.ToString(cp.Prefix), b.prefix))
		}
	}
	return objects, prefixes, nil
}

func (b *s3Bucket) delete(ctx context.Context, rel string) error {
	_, err := b.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.name, Key: aws.String(b.key(rel))})
	if err != nil && !errors.Is(classify(err), errNotFound) {
		return b.requestFailed("delete", b.key(rel), err)
	}
	return nil
}

// deleteBatch is the most keys S3 takes in one DeleteObjects.
const deleteBatch = 1000

func (b *s3Bucket) deleteKeys(ctx context.Context, rels []string) error {
	for len(rels) > 0 {
		batch := rels[:min(len(rels), deleteBatch)]
		rels = rels[len(batch):]
		if err := b.deleteChunk(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// deleteChunk deletes up to deleteBatch keys in one request. A
// DeleteObjects is answered 200 with an error per key it could not
// delete; a key the server was too busy for (a MinIO cluster missing a
// node answers SlowDownWrite for seconds) is sent again, with the
// backoff an append's busy PUT gets, as the SDK would a whole request.
func (b *s3Bucket) deleteChunk(ctx context.Context, batch []string) error {
	for attempt := 0; ; attempt++ {
		if len(batch) == 1 {
			return b.delete(ctx, batch[0])
		}
		busy, err := b.deleteObjects(ctx, batch)
		if err != nil || len(busy) == 0 {
			return err
		}
		if attempt+1 >= b.busyAttempts {
			return fmt.Errorf("delete %s: gave up after %d attempts: %w", b.key(busy[0]), attempt+1, errThrottled)
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("delete %s: %w", b.key(busy[0]), err)
		}
		batch = busy
	}
}

// deleteObjects sends one DeleteObjects and returns the keys the server
// answered that it was too busy to delete, to be sent again.
func (b *s3Bucket) deleteObjects(ctx context.Context, batch []string) (busy []string, err error) {
	ids := make([]types.ObjectIdentifier, len(batch))
	rel := make(map[string]string, len(batch))
	for i, r := range batch {
		ids[i] = types.ObjectIdentifier{Key: aws.String(b.key(r))}
		rel[b.key(r)] = r
	}
	out, err := b.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &b.name, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
	if errors.Is(classify(err), errNotImplemented) {
		// A server without the batch call: one request a key.
		for _, r := range batch {
			if err := b.delete(ctx, r); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	if err != nil {
		return nil, b.requestFailed("delete", fmt.Sprintf("%s and %d more", b.key(batch[0]), len(batch)-1), err)
	}
	for _, e := range out.Errors {
		code, key := aws.ToString(e.Code), aws.ToString(e.Key)
		switch {
		case code == "NoSuchKey":
			continue
		case code == "AccessDenied":
			return nil, &PermissionError{Op: "DeleteObject", Bucket: b.name, Prefix: b.prefix, Key: key, Permission: permissions["DeleteObject"], Code: code,
				Err: fmt.Errorf("delete %s: %s", key, aws.ToString(e.Message))}
		case errors.Is(classify(&smithy.GenericAPIError{Code: code}), errThrottled) || code == "InternalError":
			if r, ok := rel[key]; ok {
				busy = append(busy, r)
				continue
			}
		}
		return nil, fmt.Errorf("delete %s: %s: %s", key, code, aws.ToString(e.Message))
	}
	return busy, nil
}

// classify maps an SDK error to one of the protocol's sentinels, keeping
// the original error in the chain.
func classify(err error) error {
	var status interface{ HTTPStatusCode() int }
	code := 0
	if errors.As(err, &status) {
		code = status.HTTPStatusCode()
	}
	var api smithy.APIError
	name := ""
	if errors.As(err, &api) {
		name = api.ErrorCode()
	}
	switch {
	case code == 304 || name == "NotModified":
		return fmt.Errorf("%w: %w", errNotModified, err)
	case code == 412 || name == "PreconditionFailed":
		return fmt.Errorf("%w: %w", errPrecondition, err)
	case code == 409 || name == "ConditionalRequestConflict":
		return fmt.Errorf("%w: %w", errConflict, err)
	case name == "NoSuchKey" || (code == 404 && name != "NoSuchBucket"):
		return fmt.Errorf("%w: %w", errNotFound, err)
	case code == 501 || name == "NotImplemented":
		return fmt.Errorf("%w: %w", errNotImplemented, err)
	case code == 403 || name == "AccessDenied":
		return fmt.Errorf("%w: %w", errForbidden, err)
	case code == 503 || strings.HasPrefix(name, "SlowDown") || name == "ServiceUnavailable":
		return fmt.Errorf("%w: %w", errThrottled, err)
	}
	return err
}

func (b *s3Bucket) explainOpenError(err error) error {
	bucketName, endpoint := b.name, b.endpoint
	var api smithy.APIError
	name := ""
	if errors.As(err, &api) {
		name = api.ErrorCode()
	}
	var status interface{ HTTPStatusCode() int }
	code := 0
	if errors.As(err, &status) {
		code = status.HTTPStatusCode()
	}
	where := "the default AWS endpoint"
	if endpoint != "" {
		where = endpoint
	}
	var netErr net.Error
	var opErr *net.OpError
	var perm *PermissionError
	var notS3 *foreignAnswer
	switch {
	case errors.As(err, &perm):
		return fmt.Errorf("%w: %w", ErrOpen, perm)
	case errors.As(err, &notS3):
		// No answer from the bucket (IsUnreachable): the chain keeps it.
		return serverError{msg: fmt.Sprintf("%v: %s gave an answer that is not S3's (%v): sign in to the network if it asks (a captive portal), or check AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (or --endpoint)", ErrOpen, where, notS3), err: err}
	case name == "InvalidBucketName":
		return fmt.Errorf("%w: %q is not a valid bucket name: use 3 to 63 lowercase letters, digits, dots and hyphens", ErrOpen, bucketName)
	case name == "NoSuchBucket":
		return fmt.Errorf("%w: bucket %q does not exist at %s: create it (e.g. `mc mb ALIAS/%s`) or fix the bucket name", ErrOpen, bucketName, where, bucketName)
	case name == "InvalidAccessKeyId" || name == "SignatureDoesNotMatch" || name == "AccessDenied" || name == "InvalidToken" || name == "ExpiredToken" || code == 403:
		return fmt.Errorf("%w: credentials rejected by %s (%s): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE", ErrOpen, where, firstNonEmpty(name, "403 Forbidden"))
	case strings.Contains(err.Error(), "failed to retrieve credentials") || strings.Contains(err.Error(), "no EC2 IMDS role found"):
		return fmt.Errorf("%w: no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE", ErrOpen)
	case errors.Is(err, errNotFound) || code == 404 || code == 405 || code == 501:
		// Writing the marker found no bucket, yet the server did not say
		// NoSuchBucket: it is not an S3 endpoint (or not this bucket's).
		return fmt.Errorf("%w: %s did not answer as an S3 server with bucket %q (HTTP %d): check AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (or --endpoint) and the bucket name", ErrOpen, where, bucketName, code)
	case errors.As(err, &opErr) || errors.As(err, &netErr):
		return fmt.Errorf("%w: cannot reach the S3 endpoint %s: check AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (or --endpoint) and that the server is running (%v)", ErrOpen, where, rootCause(err))
	case code >= 500:
		// The server, or a proxy before it, cannot answer now: the
		// status stays in the chain, for IsUnreachable, out of the text.
		return serverError{msg: fmt.Sprintf("%v: %s answered HTTP %d %s for bucket %q: the server or a proxy in front of it is failing; try again later", ErrOpen, where, code, firstNonEmpty(name, http.StatusText(code)), bucketName), err: err}
	}
	if api != nil {
		return fmt.Errorf("%w: bucket %q at %s: %s: %s", ErrOpen, bucketName, where, api.ErrorCode(), api.ErrorMessage())
	}
	return fmt.Errorf("%w: bucket %q at %s: %v", ErrOpen, bucketName, where, err)
}

// serverError is Open's error for a server error: it reads as msg, and
// holds ErrOpen and the SDK's error (with its status) in its chain.
type serverError struct {
	msg string
	err error
}

func (e serverError) Error() string   { return e.msg }
func (e serverError) Unwrap() []error { return []error{ErrOpen, e.err} }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
