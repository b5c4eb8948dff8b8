// Package objstore stores sessions in an S3-compatible bucket (AWS S3,
// MinIO, R2, ...). It implements agent.SessionStore and the raw-log
// vocabulary of package store (Logs, ReadLog, AppendLog, Checkpoints,
// Verify, Compact, Flush), which panto-sync copies sessions through.
//
// The bucket format (the marker, segments, manifests, index shards and
// their versions) and the protocol that writes it without locks are
// specified in docs/DESIGN.md, sections "The bucket format" and "The
// object store protocol"; the rules cited in this package as §P1..§P7 are
// that document's. internal/manifest encodes the documents.
//
// In short, under the store's prefix P/ (s3://BUCKET/P):
//
//	P/panto-store.json                           format marker (version, required features)
//	P/sessions/<id>/seg/<start:020d>.jsonl.zst   appended segment: one zstd frame of whole
//	                                             committed lines starting at raw offset <start>
//	P/sessions/<id>/seg/<s:020d>-<e:020d>.c.jsonl.zst
//	                                             merged segment written by compaction, [s, e)
//	P/sessions/<id>/manifest.json                per-session checkpoint, every 8 segments
//	                                             and at compaction
//	P/index/<shard>.json.zst                     catalog index base, 16 shards keyed by the
//	                                             id's first character (manifest.ShardOf)
//	P/index/<shard>/<n:020d>.json.zst            index delta n: the entries one write changed
//
// A session's raw bytes — the segments decompressed and concatenated — are
// exactly the bytes store/fsjsonl writes for the same appends at the same
// times: both use internal/sessionlog, one EncodeBatch per append, the
// header with the first batch.
//
// An append commits with one conditional PUT of its segment (§P1) and
// returns there; the checkpoints (the index entry, and every 8 segments
// the manifest) follow in the background (checkpoint.go, §P2, §P3), and
// readers probe past them (§P4). Compaction (compact.go, §P5) merges a
// session's segments without ever deleting what a reader may still need.
// No routine path lists the bucket (§P6); every object read is verified
// (§P7).
//
// A prefix created by a Store opened WithKey is encrypted (encryption.go,
// docs/DESIGN.md §9): its marker requires encryption and names the key's
// id, and the Store's Codec seals every object it writes, bound to its
// name, and opens every object it reads. Everything above is the same in
// both kinds of prefix; the checkpoints the Store hands sync are the
// plaintext sha256 in both, kept sealed in an encrypted one.
//
// # Trying it
//
// docker-compose.minio.yml at the repository root runs a MinIO with a
// bucket named panto; point panto at it with the standard variables:
//
//	docker compose -f docker-compose.minio.yml up -d
//	export AWS_ACCESS_KEY_ID=panto AWS_SECRET_ACCESS_KEY=panto-secret-key
//	export AWS_ENDPOINT_URL_S3=http://127.0.0.1:9000 AWS_REGION=us-east-1
//	panto --store s3://panto/sessions
//
// # Cost
//
// A steady-state append is 1 PUT and 1 round trip on the caller's path
// (the segment), then in the background 1 PUT (an index delta) or, every
// 8 segments, 2 in parallel (and the manifest); every 16 deltas of a
// shard, a writer folds them into its base (1 PUT, and deletes of the
// deltas an older base folded). The first append of a session is 2 PUTs
// in 2 round trips (segment, then index delta) and 2 GETs the first time
// a Store writes the shard. List and latest are 2 GETs per shard (the
// base, a 304 when cached, then a probe for the next delta; plus the
// deltas not yet folded), resolve 2 GETs, whatever the number of sessions
// or segments. BENCHMARKS.md has the measured figures.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/store"
)

const markerName = "panto-store.json"

var (
	// ErrOpen: the bucket cannot be used (missing, unreachable, bad
	// credentials); the message says which.
	ErrOpen = errors.New("cannot open object store")
	// ErrNewerFormat: the bucket was written by a newer panto (a format
	// version, or a required feature, this one does not know).
	ErrNewerFormat = manifest.ErrNewerVersion
	// ErrCorrupt: an object does not match what the manifest says of it,
	// or does not decode. The message names the object.
	ErrCorrupt = errors.New("corrupt object")
	// ErrIndexDamaged: an index shard does not decode (overwritten,
	// truncated, replaced): the sessions it lists are missing from lists
	// until `panto-sync repair` rebuilds it; their data is untouched, and
	// the other shards list as before.
	ErrIndexDamaged = fmt.Errorf("%w: the bucket's index is damaged", agent.ErrIncompleteList)
	// ErrOutcomeUnknown: an append's write failed without an answer and
	// the bucket could not be asked afterwards whether it landed: the
	// batch is either wholly present or wholly absent, but which is not
	// known.
	ErrOutcomeUnknown = errors.New("append outcome unknown")
)

// Store is a SessionStore on an S3-compatible bucket. It is safe for
// concurrent use; several Stores (in one process or many) may share a
// bucket and even a session.
type Store struct {
	b     *bucket
	codec *manifest.Codec // seals too, in an encrypted prefix
	key   *seal.Key       // nil: a plaintext prefix
	clock func() time.Time
	now   func() time.Time // wall time, for the compaction grace period

	compactThreshold int
	compactGrace     time.Duration
	maxAttempts      int // of the conditional-PUT loops
	parallel         int // concurrent GETs of one load
	deferIndex       bool
	manifestEvery    int
	indexPruneAfter  time.Duration

	// marker is what the format marker said at Open, and markerEtag its
	// ETag; a marker older than manifest.Version is upgraded before the
	// Store's first write (ensureMarker), guarded by markerMu.
	markerMu   sync.Mutex
	marker     manifest.Marker
	markerEtag string
	// created: this Store created the prefix (its marker), so a session
	// this Store did not write cannot be in it.
	created bool

	mu       sync.Mutex
	sessions map[string]*sessionState
	shards   map[string]*shardState
	busy     int           // running checkpointLoops
	idle     chan struct{} // closed when busy drops to 0

	// openSnapshot: WithOpenSnapshot.
	openSnapshot bool
	// adoptMu: one adoption of manifest.FeatureIndexBases at a time.
	adoptMu sync.Mutex
}

// Option configures Open.
type Option func(*options)

type options struct {
	endpoint         string
	pathStyle        *bool
	clock            func() time.Time
	compactThreshold int
	compactGrace     time.Duration
	s3Options        []func(*s3.Options)
	maxAttempts      int
	deferIndex       bool
	manifestEvery    int
	idleTimeout      time.Duration
	openSnapshot     bool
	key              *seal.Key
}

// WithEndpoint sets the S3 endpoint URL (e.g. http://127.0.0.1:9000 for
// MinIO), overriding AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL. A custom
// endpoint implies path-style addressing unless WithPathStyle says
// otherwise.
func WithEndpoint(u string) Option { return func(o *options) { o.endpoint = u } }

// WithPathStyle forces path-style (true) or virtual-hosted (false)
// addressing.
func WithPathStyle(on bool) Option { return func(o *options) { o.pathStyle = &on } }

// WithClock sets the clock that stamps appended lines (for deterministic
// bytes in tests). The default is time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithCompactThreshold sets the number of segments above which the
// checkpoint after an append compacts the session, in the background
// (default 32; 0 or less disables automatic compaction).
func WithCompactThreshold(n int) Option { return func(o *options) { o.compactThreshold = n } }

// WithCompactGrace sets how long a segment replaced by compaction is kept
// before deletion (default 1h), so that a reader holding an older manifest
// never meets a missing object.
func WithCompactGrace(d time.Duration) Option { return func(o *options) { o.compactGrace = d } }

// WithS3Options adds a function applied to the S3 client's options after
// the store's own (endpoint, addressing, retries): the hook for custom
// HTTP clients, middleware, request counting and fault injection.
func WithS3Options(fn func(*s3.Options)) Option {
	return func(o *options) { o.s3Options = append(o.s3Options, fn) }
}

// WithHTTPClient sets the HTTP client of the S3 client. The SDK's own
// client honours AWS_CA_BUNDLE and proxy settings; a replacement must do so
// itself (wrapping the SDK's client through WithS3Options keeps them).
func WithHTTPClient(c s3.HTTPClient) Option {
	return WithS3Options(func(so *s3.Options) { so.HTTPClient = c })
}

// WithManifestInterval sets how many segments are appended to a session
// before its manifest is rewritten (default 8; a log's first segment does
// not count). Readers find the segments after the manifest by probing, one
// GET each, and check them against the index entry; a larger interval
// writes fewer and smaller checkpoints and makes loads probe more. 1
// writes the manifest with every append after the first.
func WithManifestInterval(n int) Option { return func(o *options) { o.manifestEvery = n } }

// WithDeferredIndex makes the Store write the index entries of its
// appends at Flush (and before its own List, Resolve, Latest and
// Sessions), each index shard once, instead of after each append: for a
// bulk writer such as panto-sync push, which appends to many sessions and
// would otherwise rewrite each shard many times. Until the Flush, other
// processes do not list the sessions it created or changed (they load
// them); a writer that dies before it leaves the index behind, and its
// re-run (AppendRaw finds its own segments) writes it.
func WithDeferredIndex() Option { return func(o *options) { o.deferIndex = true } }

// DefaultIdleTimeout is how long a connection to the server may make no
// progress before its request fails (and is retried): a stalled network
// must not hang a command, and a slow one that still moves bytes must
// not fail it, so this bounds silence, not the length of a request.
const DefaultIdleTimeout = 30 * time.Second

// WithIdleTimeout sets how long a connection may move no byte, in either
// direction, before its request fails (default DefaultIdleTimeout; 0 or
// less: never).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idleTimeout = d } }

// WithOpenSnapshot makes the Store's listings of the index (List, Latest,
// Resolve, Logs, Tombstones) in the two seconds after Open serve the
// reading Open made, which goes out with Open's own requests, instead of
// reading the index again: for a command that opens a store to list it at
// once (panto sessions, panto -c, a sync), Open and the listing are one
// round trip. Those listings show the bucket as it was during Open, plus
// this Store's own writes; later ones read it again.
func WithOpenSnapshot() Option { return func(o *options) { o.openSnapshot = true } }

// WithMaxAttempts bounds the attempts of each conditional-write loop
// (default 10) and of the SDK's retries of one request (at most 5).
func WithMaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// maxIdleConnsPerHost is the idle connection pool per host: at least the
// number of requests a caller (panto-sync push --concurrency) keeps in
// flight.
const maxIdleConnsPerHost = 64

// Open opens the store at url, s3://BUCKET[/PREFIX]. Region, credentials
// and endpoint come from the standard AWS chain (AWS_REGION, defaulting to
// us-east-1; AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE;
// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL). Open reads (and on first use
// creates) the format marker, so a missing bucket, an unreachable
// endpoint or rejected credentials fail here with one line saying which.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	o := options{clock: time.Now, compactThreshold: 32, compactGrace: time.Hour, maxAttempts: 10, manifestEvery: 8, idleTimeout: DefaultIdleTimeout}
	for _, fn := range opts {
		fn(&o)
	}
	bucketName, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// The SDK logs warnings (an IMDS fallback, say) on stderr by itself;
	// a user must see one line from us instead.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, fmt.Errorf("%w: load AWS configuration: %v", ErrOpen, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // MinIO and most S3-compatible services accept it
	}
	endpoint := o.endpoint
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
			tr.DialContext = stallTimeout(tr.DialContext, o.idleTimeout)
		})
	}
	sdkAttempts := min(max(o.maxAttempts, 1), 5)
	api := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.endpoint != "" {
			so.BaseEndpoint = aws.String(o.endpoint)
		}
		so.UsePathStyle = endpoint != ""
		if o.pathStyle != nil {
			so.UsePathStyle = *o.pathStyle
		}
		// We verify every object with our own sha256; the SDK's extra
		// checksums would only cost CPU (and aws-chunked encoding).
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.Retryer = retry.NewStandard(func(r *retry.StandardOptions) {
			r.MaxAttempts = sdkAttempts
			r.MaxBackoff = 2 * time.Second
			r.RateLimiter = ratelimit.None // a restarting server must not drain a token bucket
		})
		for _, fn := range o.s3Options {
			fn(so)
		}
	})
	codec, err := manifest.NewCodec()
	if err != nil {
		return nil, err
	}
	if o.key != nil {
		codec = codec.WithSealer(o.key)
	}
	s := &Store{
		b:                &bucket{api: api, name: bucketName, prefix: prefix},
		codec:            codec,
		key:              o.key,
		clock:            o.clock,
		now:              time.Now,
		compactThreshold: o.compactThreshold,
		compactGrace:     o.compactGrace,
		maxAttempts:      max(o.maxAttempts, 1),
		parallel:         8,
		deferIndex:       o.deferIndex,
		openSnapshot:     o.openSnapshot,
		manifestEvery:    max(o.manifestEvery, 1),
		indexPruneAfter:  indexPruneAfter,
		sessions:         map[string]*sessionState{},
		shards:           map[string]*shardState{},
	}
	if err := s.open(ctx, endpoint); err != nil {
		return nil, err
	}
	return s, nil
}

// parseURL splits s3://BUCKET[/PREFIX] into the bucket and a prefix that
// is "" or ends in "/".
func parseURL(raw string) (bucketName, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("%w: store %q: want s3://BUCKET[/PREFIX]", ErrOpen, raw)
	}
	p := strings.Trim(u.Path, "/")
	for _, part := range strings.Split(p, "/") {
		if part == "." || part == ".." || (part == "" && p != "") {
			return "", "", fmt.Errorf("%w: store %q: the prefix may not contain empty, . or .. elements", ErrOpen, raw)
		}
	}
	if p != "" {
		p += "/"
	}
	return u.Host, p, nil
}

// open reads (or creates) the format marker and, in parallel, probes that
// the server honours conditional writes and reads the index shards for the
// first listing: Open's one round trip. These are the Store's first
// requests, so their errors are explained for the user.
func (s *Store) open(ctx context.Context, endpoint string) error {
	var created, matched probeOutcome
	var probeErr error
	probed := make(chan struct{})
	go func() { defer close(probed); created, matched, probeErr = s.probePuts(ctx, false) }()
	marker := make(chan struct{})
	prefetched := s.prefetchIndex(ctx, marker)
	markerErr := s.checkMarker(ctx, endpoint)
	close(marker)
	<-probed
	prefetched.Wait()
	if markerErr != nil {
		return markerErr
	}
	if probeErr != nil {
		return explainOpenError(probeErr, s.b.name, endpoint)
	}
	return s.probe(ctx, created, matched)
}

// checkMarker reads the format marker, creating it on a fresh prefix.
func (s *Store) checkMarker(ctx context.Context, endpoint string) error {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		data, etag, err := s.b.get(ctx, markerName, "")
		if errors.Is(err, errNotFound) {
			fresh := s.freshMarker()
			etag, err = s.b.put(ctx, markerName, manifest.EncodeMarker(fresh), putCond{ifNoneMatch: true}, "application/json")
			if errors.Is(err, errPrecondition) || errors.Is(err, errConflict) {
				continue // created meanwhile: read it
			}
			if isNotImplemented(err) {
				return s.notImplemented()
			}
			if errors.Is(err, ErrPermission) {
				return fmt.Errorf("%w: s3://%s/%s holds no panto store yet, and these credentials cannot create one: %w", ErrOpen, s.b.name, s.b.prefix, err)
			}
			if err != nil {
				return explainOpenError(err, s.b.name, endpoint)
			}
			s.marker, s.markerEtag, s.created = fresh, etag, true
			return nil
		}
		if err != nil {
			return explainOpenError(err, s.b.name, endpoint)
		}
		m, err := manifest.DecodeMarker(data)
		if errors.Is(err, manifest.ErrNotMarker) {
			return fmt.Errorf("%w: s3://%s/%s%s is not a panto store marker: is this prefix used by something else?", ErrOpen, s.b.name, s.b.prefix, markerName)
		}
		if err != nil {
			return fmt.Errorf("s3://%s/%s: %w: upgrade panto", s.b.name, s.b.prefix, err)
		}
		if err := s.checkKey(m); err != nil {
			return err
		}
		s.marker, s.markerEtag = m, etag
		return nil
	}
	return fmt.Errorf("%w: s3://%s/%s%s: could not read or create the format marker", ErrOpen, s.b.name, s.b.prefix, markerName)
}

// ensureMarker upgrades a marker older than manifest.Version before the
// Store's first write (docs/DESIGN.md, "Versions"): once a document of
// the new version may be in the prefix, a panto that cannot read it must
// refuse the prefix at open. A lost race re-reads the marker.
func (s *Store) ensureMarker(ctx context.Context) error {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	for attempt := 0; s.marker.Version < manifest.Version; attempt++ {
		if attempt >= s.maxAttempts {
			return fmt.Errorf("upgrade the format marker s3://%s/%s%s: too many concurrent updates", s.b.name, s.b.prefix, markerName)
		}
		up := s.marker
		up.Version = manifest.Version
		etag, err := s.b.put(ctx, markerName, manifest.EncodeMarker(up), putCond{ifMatch: s.markerEtag}, "application/json")
		if err == nil {
			s.marker, s.markerEtag = up, etag
			return nil
		}
		if !errors.Is(err, errPrecondition) && !errors.Is(err, errConflict) {
			return fmt.Errorf("upgrade the format marker: %w", err)
		}
		data, etag, err := s.b.get(ctx, markerName, "")
		if err != nil {
			return fmt.Errorf("upgrade the format marker: %w", err)
		}
		m, err := manifest.DecodeMarker(data)
		if err != nil {
			return fmt.Errorf("s3://%s/%s: %w: upgrade panto", s.b.name, s.b.prefix, err)
		}
		s.marker, s.markerEtag = m, etag
	}
	return nil
}

// put is every write of the Store's documents and segments: the marker is
// brought to this version first.
func (s *Store) put(ctx context.Context, rel string, data []byte, cond putCond, contentType string) (string, error) {
	if err := s.ensureMarker(ctx); err != nil {
		return "", err
	}
	return s.b.put(ctx, rel, data, cond, contentType)
}

// Create mints a handle on a new session. No I/O: the session exists once
// its first batch is appended.
func (s *Store) Create() *agent.Session {
	id := agent.NewSessionID()
	s.mu.Lock()
	if _, ok := s.sessions[id]; !ok {
		// A fresh random id: the first append need not read a manifest.
		st := &sessionState{mu: make(chanMutex, 1)}
		st.adopt(manifest.New(id), "", s.now())
		s.sessions[id] = st
	}
	s.mu.Unlock()
	return &agent.Session{Info: agent.SessionInfo{ID: id}, Store: s}
}

func (s *Store) sessionKey(id, rel string) string { return "sessions/" + id + "/" + rel }

// objectURL names an object in errors.
func (s *Store) objectURL(rel string) string {
	return "s3://" + s.b.name + "/" + s.b.key(rel)
}

var (
	_ store.LogStore     = (*Store)(nil)
	_ store.Checkpointer = (*Store)(nil)
	_ store.Verifier     = (*Store)(nil)
	_ store.Compacter    = (*Store)(nil)
	_ store.Flusher      = (*Store)(nil)
)
