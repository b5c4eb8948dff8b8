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
//	P/sessions/<id>/seg/replaced-<hash>.txt.zst  the names of the objects a compaction replaced,
//	                                             deleted with them after the grace period
//	P/sessions/<id>/manifest.json                per-session checkpoint, every 8 segments
//	                                             and at compaction
//	P/index/<shard>.json.zst                     catalog index, 16 shards keyed by the id's
//	                                             first character (manifest.ShardOf); each
//	                                             write replaces a shard whole (If-Match)
//	P/index/<shard>/<n:020d>.json.zst            legacy index delta n, of pantos before index
//	                                             bases: read, folded and deleted, never written
//	                                             (indexlegacy.go)
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
// (§P7). The index is read in indexread.go, written in indexwrite.go and
// listed from in indexlist.go.
//
// The protocol talks to the bucket through a small interface, bucket
// (blob.go): get (with If-None-Match), head, put (create-only or
// If-Match), delete and list, with the outcomes it branches on as
// sentinel errors. s3bucket.go implements it over the AWS SDK, and
// everything that is S3's business is there: the client and its
// configuration, retries, stall timeouts, payload signing, request traces
// (trace.go, WithTrace) and the one classification of S3's errors. The
// tests run the protocol on an in-memory bucket held to the same
// semantics as the real servers, with faults injected at the interface.
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
// (the segment), then in the background 1 PUT (the session's index shard,
// If-Match; a lost race reads the shard again and retries) or, every 8
// segments, 2 in parallel (and the manifest). Appends that commit while a
// shard is being written are written together in its next base. The first
// append of a session is 2 PUTs in 2 round trips (segment, then index
// shard), no GET (Open read the shards), plus a HEAD of its first segment
// when this Store did not create the prefix. List and latest are 1 GET
// per shard, all at once (a 304 when cached), resolve 1 GET, whatever the
// number of sessions or segments; on a prefix with legacy index deltas,
// each shard's probe for the next one besides. BENCHMARKS.md has the
// measured figures.
package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

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
	b     bucket
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
	markerRead time.Time // when marker was last read
	// created: this Store found the prefix without a marker, and created
	// it (or, opened to read, creates it at its first write:
	// markerUnwritten), so a session this Store did not write cannot be
	// in it.
	created bool
	// markerUnwritten: Open, for a reader (WithProbeAtFirstWrite), found
	// no marker and wrote none; marker is the one the Store's first
	// write creates (upgradeMarker). Under markerMu.
	markerUnwritten bool
	// markerLater: Open leaves a missing marker to the first write.
	markerLater bool

	// writeRefused is the probe's refusal when the credentials may not
	// write (WriteRefused); set once, while Open probes.
	writeRefused error
	// probeLater: Open did not probe (WithProbeAtFirstWrite, or a
	// machine whose probe of the prefix passed more than a day ago);
	// the first write probes, once it passes. probeBeside: that probe
	// goes out beside the write (the machine saw it pass before: put),
	// not before it. Both under probeMu; probes is the probe under
	// way, which every write until it passes waits for (startProbe).
	probeLater  bool
	probeBeside bool
	probeMu     sync.Mutex
	probes      singleflight.Group

	// segs keeps the segments this Store wrote or read, for compaction
	// (it has a lock of its own).
	segs segmentCache

	mu       sync.Mutex
	sessions map[string]*sessionState
	shards   map[string]*shardState
	busy     int           // running checkpointLoops
	idle     chan struct{} // closed when busy drops to 0
	cut      chan struct{} // closed by settle: lingering checkpoints go

	// openSnapshot: WithOpenSnapshot.
	openSnapshot bool
	// ahead: the listings Open sent for the prefixes the command resolves
	// first (WithResolveAhead, resolveahead.go).
	ahead aheadLists
	// pageAhead: the project whose page the command lists first
	// (WithPageAhead, pageahead.go); the zero Project: none. openHeads,
	// its head as Open read it.
	pageAhead agent.Project
	openHeads openedHeads
	// adoptMu: one adoption of manifest.FeatureIndexBases or
	// FeatureIndexLog at a time.
	adoptMu sync.Mutex
	// listing holds the index entries the last Logs returned, by id:
	// ReadListed reads a session as that listing vouched for it.
	listing atomic.Pointer[map[string]manifest.IndexEntry]
	// ilog is this Store's reading of the index log (indexlog.go).
	ilog logState
	// closing: Close has begun, so a checkpoint's commit also folds
	// this Store's sessions (commitFoldingMine).
	closing atomic.Bool
	// widened: a commit this Store read or wrote says the index moved to
	// partitions of three characters (widen.go); wideAfter is how many
	// sessions a sync's catalog holds before it moves them.
	widened   atomic.Bool
	wideAfter int
	// runDeltasTried: this Store asked the marker for
	// manifest.FeatureIndexRunDeltas once (logbase.go).
	runDeltasTried atomic.Bool
	// openedToken is ListingToken's: the index as Open read it.
	openedToken string
	// indexCache is WithIndexCache's directory ("": none), cat the
	// catalog last read (catalog.go).
	indexCache string
	cat        catalogState
	// runs caches the pages of the index's runs; runFoldAt is the least
	// number of entries the runs hold before they are folded (runs.go).
	runs      runState
	runFoldAt int
	// mergeBudget is the most entries an agent's Close rewrites merging
	// runs (runs.go: runsDue); foldAtOnce (tests) folds every run at
	// once, as a sync does.
	mergeBudget int
	foldAtOnce  bool
	// heads is what waits for the project heads, and the heads read
	// (heads.go).
	heads headState
	// baseMu: one write of the base kept on disk at a time (logbase.go).
	baseMu sync.Mutex
	// endpoint is the S3 endpoint the Store was opened on ("" for the
	// AWS environment's), which names its catalog cache with the URL.
	endpoint string
}

// Option configures Open.
type Option func(*options)

type options struct {
	s3               s3Options // the S3 bucket's (s3bucket.go)
	clock            func() time.Time
	compactThreshold int
	compactGrace     time.Duration
	maxAttempts      int
	deferIndex       bool
	manifestEvery    int
	openSnapshot     bool
	resolveAhead     []string
	pageAhead        agent.Project
	probeLater       bool
	key              *seal.Key
	indexCache       string
	runFoldAt        int
	wideAfter        int
	mergeBudget      int
	foldAtOnce       bool
}

// WithClock sets the clock that stamps appended lines (for deterministic
// bytes in tests). The default is time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// withCompactThreshold sets the number of segments above which the
// checkpoint after an append compacts the session, in the background
// (default 32; 0 or less disables automatic compaction).
func withCompactThreshold(n int) Option { return func(o *options) { o.compactThreshold = n } }

// withCompactGrace sets how long a segment replaced by compaction is kept
// before deletion (default 1h), so that a reader holding an older manifest
// never meets a missing object.
func withCompactGrace(d time.Duration) Option { return func(o *options) { o.compactGrace = d } }

// withManifestInterval sets how many segments are appended to a session
// before its manifest is rewritten (default 8; a log's first segment does
// not count). Readers find the segments after the manifest by probing, one
// GET each, and check them against the index entry; a larger interval
// writes fewer and smaller checkpoints and makes loads probe more. 1
// writes the manifest with every append after the first.
func withManifestInterval(n int) Option { return func(o *options) { o.manifestEvery = n } }

// WithDeferredIndex makes the Store write the index entries of its
// appends at Flush (and before its own List, Resolve, Latest and
// Sessions), each index partition once and then one commit of the index
// log, instead of after each append: for a bulk writer such as panto-sync
// push, which appends to many sessions and would otherwise rewrite each
// partition many times. Until the Flush, other
// processes do not list the sessions it created or changed (they load
// them); a writer that dies before it leaves the index behind, and its
// re-run (AppendRaw finds its own segments) writes it.
func WithDeferredIndex() Option { return func(o *options) { o.deferIndex = true } }

// WithOpenSnapshot makes the Store's readings of the index in the two
// seconds after Open serve what Open read, which goes out with Open's own
// requests, instead of reading it again: in format 4 the newest commit of
// the index log (ListNewest, NewestLogs, Latest, and the catalog cache's
// check for Logs and Tombstones); in format 3 the 16 shards (every
// listing). For a command that opens a store to list it at once (panto
// sessions, panto -c, a sync) Open and the listing are one round trip,
// or two. Those listings show the bucket as it was during Open, plus this
// Store's own writes; later ones read it again.
func WithOpenSnapshot() Option { return func(o *options) { o.openSnapshot = true } }

// WithProbeAtFirstWrite is for a command that opens the store to read
// it (panto sessions, show, search): Open sends no conditional-write
// probe (two PUTs, once a day per machine with WithIndexCache), and the
// Store's first write, if it makes one, probes first. A reader's Open
// and first listing are then the same few requests every time.
// WriteRefused says nothing until a write probed. Nor does Open create
// the format marker of a prefix that holds no store (Created says so):
// a read writes nothing, and a mistyped prefix is left as it was; the
// first write, if any, creates it.
func WithProbeAtFirstWrite() Option { return func(o *options) { o.probeLater = true } }

// withMaxAttempts bounds the attempts of each conditional-write loop
// (default 10) and of the SDK's retries of one request (at most 5).
func withMaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// Open opens the store at url, s3://BUCKET[/PREFIX]. Region, credentials
// and endpoint come from the standard AWS chain (AWS_REGION, defaulting to
// us-east-1; AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE;
// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL). Open reads (and on first use
// creates) the format marker, so a missing bucket, an unreachable
// endpoint or rejected credentials fail here with one line saying which.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, fn := range opts {
		fn(&o)
	}
	bucketName, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	b, err := newS3Bucket(ctx, bucketName, prefix, o)
	if err != nil {
		return nil, err
	}
	if o.s3.endpoint == "" {
		// The SDK's own: what names the catalog cache (catalog.go).
		o.s3.endpoint = cmp.Or(os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	}
	return openBucket(ctx, b, o)
}

func defaultOptions() options {
	return options{clock: time.Now, compactThreshold: 32, compactGrace: time.Hour, maxAttempts: 10, manifestEvery: 8, runFoldAt: runFoldMin, mergeBudget: runMergeBudget, wideAfter: manifest.WideAfter, s3: s3Options{idleTimeout: DefaultIdleTimeout}}
}

// openBucket opens the store on b: everything Open does past the S3
// client, the protocol's first requests.
func openBucket(ctx context.Context, b bucket, o options) (*Store, error) {
	codec, err := manifest.NewCodec()
	if err != nil {
		return nil, err
	}
	if o.key != nil {
		codec = codec.WithSealer(o.key)
	}
	s := &Store{
		b:                b,
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
		ahead:            aheadLists{prefixes: o.resolveAhead},
		pageAhead:        o.pageAhead,
		probeLater:       o.probeLater,
		markerLater:      o.probeLater,
		indexCache:       o.indexCache,
		endpoint:         o.s3.endpoint,
		manifestEvery:    max(o.manifestEvery, 1),
		indexPruneAfter:  indexPruneAfter,
		runFoldAt:        o.runFoldAt,
		wideAfter:        o.wideAfter,
		mergeBudget:      max(o.mergeBudget, 1),
		foldAtOnce:       o.foldAtOnce,
		sessions:         map[string]*sessionState{},
		shards:           map[string]*shardState{},
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	s.noteOpened()
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
func (s *Store) open(ctx context.Context) error {
	var created, matched probeOutcome
	var probeErr error
	probed := make(chan struct{})
	at, known := s.probeNote()
	recent := known && s.trusted(at)
	switch {
	case recent:
		s.probeLater = false
	case known:
		// Past the day the note is trusted, but this machine saw the
		// probe pass here before: the first write sends it beside its
		// own request (put), so that Open asks the bucket only what it
		// reads. A machine that never saw it pass (a new one, or
		// credentials that may not write) probes at Open, so that
		// WriteRefused refuses a reader's turn before it is taken.
		s.probeLater, s.probeBeside = true, true
	}
	unprobed := recent || s.probeLater // a reader's: the first write probes
	go func() {
		defer close(probed)
		if unprobed {
			created, matched = probeRefused, probeRefused
			return
		}
		created, matched, probeErr = s.probePuts(ctx, false)
	}()
	s.listAhead(ctx)
	marker := make(chan struct{})
	prefetched := s.prefetchIndex(ctx, marker)
	markerErr := s.checkMarker(ctx)
	close(marker)
	<-probed
	prefetched.Wait()
	if markerErr != nil {
		return markerErr
	}
	if probeErr != nil {
		return s.b.explainOpenError(probeErr)
	}
	if err := s.probe(ctx, created, matched); err != nil {
		return err
	}
	if !unprobed {
		s.noteProbe()
	}
	return nil
}

// ensureProbed probes, before the first write of a Store whose Open
// did not, that the server honours conditional writes (probe), or waits
// for the probe under way; a failure is the write's error, and the next
// write probes again.
func (s *Store) ensureProbed(ctx context.Context) error {
	for {
		s.probeMu.Lock()
		if !s.probeLater {
			s.probeMu.Unlock()
			return nil
		}
		flight := s.startProbe(ctx)
		s.probeMu.Unlock()
		err := waitProbe(ctx, flight)
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue // another write's probe, which that write's end cut short
		}
		return err
	}
}

// checkMarker reads the format marker, creating it on a fresh prefix.
func (s *Store) checkMarker(ctx context.Context) error {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		data, etag, err := s.b.get(ctx, markerName, "")
		if errors.Is(err, errNotFound) && s.markerLater {
			// A reader writes nothing: the first write, if any, makes
			// the marker (upgradeMarker). A 404 is also what a server
			// that is not S3 (or not this bucket's) answers, which the
			// marker's PUT told apart: a LIST, which S3 answers for an
			// empty prefix, does.
			if _, _, err := s.b.list(ctx, markerName, ""); err != nil {
				return s.b.explainOpenError(err)
			}
			s.marker, s.created, s.markerUnwritten = s.freshMarker(), true, true
			return nil
		}
		if errors.Is(err, errNotFound) {
			fresh := s.freshMarker()
			etag, err = s.b.put(ctx, markerName, manifest.EncodeMarker(fresh), putCond{ifNoneMatch: true}, "application/json")
			if errors.Is(err, errPrecondition) || errors.Is(err, errConflict) {
				continue // created meanwhile: read it
			}
			if errors.Is(err, errNotImplemented) {
				return s.notImplemented()
			}
			if errors.Is(err, ErrPermission) {
				return fmt.Errorf("%w: %s holds no panto store yet, and these credentials cannot create one: %w", ErrOpen, s.b.url(""), err)
			}
			if err != nil {
				return s.b.explainOpenError(err)
			}
			s.marker, s.markerEtag, s.created = fresh, etag, true
			return nil
		}
		if err != nil {
			return s.b.explainOpenError(err)
		}
		m, err := manifest.DecodeMarker(data)
		if errors.Is(err, manifest.ErrNotMarker) {
			return fmt.Errorf("%w: %s is not a panto store marker: is this prefix used by something else?", ErrOpen, s.b.url(markerName))
		}
		if err != nil {
			return fmt.Errorf("%s: %w: upgrade panto", s.b.url(""), err)
		}
		if err := s.checkKey(m); err != nil {
			return err
		}
		s.marker, s.markerEtag, s.markerRead = m, etag, s.now()
		return nil
	}
	return fmt.Errorf("%w: %s: could not read or create the format marker", ErrOpen, s.b.url(markerName))
}

// ensureMarker upgrades a marker older than manifest.Version before the
// Store's first write (docs/DESIGN.md, "Versions"): once a document of
// the new version may be in the prefix, a panto that cannot read it must
// refuse the prefix at open. A lost race re-reads the marker.
func (s *Store) ensureMarker(ctx context.Context) error {
	if err := s.ensureProbed(ctx); err != nil {
		return err
	}
	return s.upgradeMarker(ctx)
}

// upgradeMarker is ensureMarker past the probe.
func (s *Store) upgradeMarker(ctx context.Context) error {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	if s.markerUnwritten {
		if err := s.writeMarker(ctx); err != nil {
			return err
		}
	}
	for attempt := 0; s.marker.Version < manifest.Version; attempt++ {
		if attempt >= s.maxAttempts {
			return fmt.Errorf("upgrade the format marker %s: too many concurrent updates", s.b.url(markerName))
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
			return fmt.Errorf("%s: %w: upgrade panto", s.b.url(""), err)
		}
		s.marker, s.markerEtag = m, etag
	}
	return nil
}

// writeMarker creates the marker a reader's Open found missing and left
// to the first write (markerUnwritten), under markerMu. A marker another
// writer created meanwhile is read and checked as Open checks one (this
// Store's key, its version): the write goes on under it, or fails as an
// Open there would have.
func (s *Store) writeMarker(ctx context.Context) error {
	etag, err := s.b.put(ctx, markerName, manifest.EncodeMarker(s.marker), putCond{ifNoneMatch: true}, "application/json")
	switch {
	case err == nil:
		s.markerEtag, s.markerRead, s.markerUnwritten = etag, s.now(), false
		return nil
	case errors.Is(err, errPrecondition) || errors.Is(err, errConflict):
	case errors.Is(err, ErrPermission):
		return fmt.Errorf("%s holds no panto store yet, and these credentials cannot create one: %w", s.b.url(""), err)
	default:
		return fmt.Errorf("create the format marker %s: %w", s.b.url(markerName), err)
	}
	data, etag, err := s.b.get(ctx, markerName, "")
	if err != nil {
		return fmt.Errorf("read the format marker %s: %w", s.b.url(markerName), err)
	}
	m, err := manifest.DecodeMarker(data)
	if errors.Is(err, manifest.ErrNotMarker) {
		return markerRefused{fmt.Errorf("%s is not a panto store marker: is this prefix used by something else?", s.b.url(markerName))}
	}
	if err != nil {
		return markerRefused{fmt.Errorf("%s: %w: upgrade panto", s.b.url(""), err)}
	}
	if err := s.checkKey(m); err != nil {
		return markerRefused{err}
	}
	s.marker, s.markerEtag, s.markerRead, s.markerUnwritten = m, etag, s.now(), false
	return nil
}

// markerRefused is a write refused by the marker another writer made
// (writeMarker): an answer, so the write was never sent.
type markerRefused struct{ err error }

func (e markerRefused) Error() string { return e.err.Error() }
func (e markerRefused) Unwrap() error { return e.err }

// put is every write of the Store's documents and segments: the marker is
// brought to this version first, and the conditional-write probe that
// Open left to the first write goes out before it, or beside it on a
// machine that saw the probe pass here before (probeBeside).
func (s *Store) put(ctx context.Context, rel string, data []byte, cond putCond, contentType string) (string, error) {
	flight := s.probeAside(ctx)
	if flight == nil {
		if err := s.ensureMarker(ctx); err != nil {
			return "", err
		}
		return s.b.put(ctx, rel, data, cond, contentType)
	}
	if err := s.upgradeMarker(ctx); err != nil {
		return "", err
	}
	etag, err := s.b.put(ctx, rel, data, cond, contentType)
	if perr := waitProbe(ctx, flight); errors.Is(perr, ErrConditionalWrites) {
		// The write may have landed, but nothing this server answered
		// can be trusted: the write fails with the reason, and the
		// writes after it probe first (probeAside), writing nothing.
		return "", perr
	}
	// Any other failure of the probe (no answer) leaves it to the next
	// write; this one's outcome is its own.
	return etag, err
}

// Created reports whether this Store's Open found no format marker: the
// prefix held no panto store, and holds an empty one now, or (opened to
// read, WithProbeAtFirstWrite) will once this Store writes (a command
// that only reads says so: a --store mistyped reads as empty).
func (s *Store) Created() bool { return s.created }

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

func (s *Store) sessionKey(id, rel string) string { return sessionsPrefix + id + "/" + rel }

// sessionsPrefix is the key prefix of every session's objects.
const sessionsPrefix = "sessions/"

// objectURL names an object in errors.
func (s *Store) objectURL(rel string) string {
	return s.b.url(rel)
}

var (
	_ store.LogStore     = (*Store)(nil)
	_ store.Checkpointer = (*Store)(nil)
	_ store.Verifier     = (*Store)(nil)
	_ store.Compacter    = (*Store)(nil)
	_ store.Flusher      = (*Store)(nil)
)
