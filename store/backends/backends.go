// Package backends opens the store a spec names (store.ParseSpec). It is
// the one place that knows every backend, shared by panto and panto-sync:
// an explicit registry, as restic's backend/all, so that no backend
// registers itself behind the reader's back.
package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/localfirst"
	"github.com/panto-dev/panto/store/null"
	"github.com/panto-dev/panto/store/objstore"
)

// Options configure Open.
type Options struct {
	// Endpoint is the S3 endpoint URL of an s3:// store (e.g.
	// http://127.0.0.1:9000 for MinIO); empty uses the AWS environment
	// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL) or AWS itself.
	Endpoint string
	// Bulk is for a caller that appends to many sessions and flushes once
	// at the end (panto-sync): the object store then writes each index
	// shard once, at the Flush, instead of after every append, and a
	// directory makes the files written durable in one sync, at the Flush
	// (fsjsonl.WithDeferredSync), instead of an fsync per write.
	Bulk bool
	// StallTimeout bounds how long a connection to an S3 server may move
	// no byte before its request fails and is retried (0: the object
	// store's default, objstore.DefaultIdleTimeout).
	StallTimeout time.Duration
	// Trace, when set, logs every request to an S3 server
	// (objstore.WithTrace).
	Trace *slog.Logger
	// IndexCache, when set, is a directory where a bucket's index catalog
	// is kept between runs (objstore.WithIndexCache): a sync then reads
	// what changed since the last one instead of the whole index.
	IndexCache string
	// Snapshot is for a command that lists the store right after opening
	// it: a bucket's listings in the two seconds after Open are then the
	// reading made during Open (objstore.WithOpenSnapshot), which saves a
	// round trip.
	Snapshot bool
	// Key, when set, is the bucket key of an s3:// store
	// (objstore.WithKey): a new prefix is created encrypted with it, an
	// encrypted one must have been created with it, and a plaintext one
	// is refused. A directory is never encrypted (the local catalog stays
	// plaintext) and ignores it.
	Key *seal.Key
	// LocalFirst opens an s3:// store local-first (store/localfirst):
	// writes land in this machine's replica of the bucket and a shipper
	// sends them in the background. Without it the store is the bucket's
	// own (objstore), each write acknowledged once the bucket has it.
	LocalFirst bool
	// Notify, for a local-first store, is told in one line what the user
	// should know (the bucket is unreachable, a session was kept twice);
	// for any bucket opened Reading, that its prefix held no panto store.
	Notify func(string)
	// CloseTimeout, for a local-first store, bounds how long its Close
	// waits for the shipper (0: localfirst's default, a few seconds).
	CloseTimeout time.Duration
	// ShipConcurrency, for a local-first store, is how many sessions its
	// shipper sends at once (0: localfirst's default).
	ShipConcurrency int
	// Reading is for a command that opens the store to read it (panto
	// sessions, show, search): a bucket's Open then sends no
	// conditional-write probe, which its first write, if any, sends
	// instead (objstore.WithProbeAtFirstWrite).
	Reading bool
	// ResolveAhead are the id prefixes the command resolves first (panto
	// show PREFIX, -r PREFIX, rm): a bucket's Open lists the sessions
	// under each with its own requests (objstore.WithResolveAhead), so
	// that a resolve of one of the newest costs no round trip of its own.
	ResolveAhead []string
	// PageAhead is the project whose newest page the command lists
	// first (panto sessions in a work tree, panto -c): a bucket's Open (a
	// local-first store's too, which lists the bucket's page beside the
	// replica's) then reads the project's head with the newest commit,
	// and no base of that commit, which the page does not need
	// (objstore.WithPageAhead).
	PageAhead agent.Project
}

// Open parses spec (see store.ParseSpec) and opens the store it names.
func Open(ctx context.Context, spec string, opts Options) (agent.SessionStore, error) {
	s, err := store.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return OpenSpec(ctx, s, opts)
}

// OpenSpec opens the store a parsed spec names. Every backend the
// binaries know is in this one switch.
func OpenSpec(ctx context.Context, s store.Spec, opts Options) (agent.SessionStore, error) {
	switch s.Kind {
	case store.KindDir:
		var o []fsjsonl.Option
		if opts.Bulk {
			o = append(o, fsjsonl.WithDeferredSync())
		}
		st, err := fsjsonl.Open(s.Dir, o...)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.Dir, err)
		}
		return st, nil
	case store.KindS3:
		var o []objstore.Option
		if opts.Endpoint != "" {
			o = append(o, objstore.WithEndpoint(opts.Endpoint))
		}
		if opts.Bulk {
			o = append(o, objstore.WithDeferredIndex())
		}
		if opts.StallTimeout > 0 {
			o = append(o, objstore.WithIdleTimeout(opts.StallTimeout))
		}
		if opts.Snapshot {
			o = append(o, objstore.WithOpenSnapshot())
		}
		if opts.Reading {
			o = append(o, objstore.WithProbeAtFirstWrite())
		}
		if len(opts.ResolveAhead) > 0 {
			o = append(o, objstore.WithResolveAhead(opts.ResolveAhead...))
		}
		if opts.IndexCache != "" {
			o = append(o, objstore.WithIndexCache(opts.IndexCache))
		}
		if opts.Trace != nil {
			o = append(o, objstore.WithTrace(opts.Trace))
		}
		if opts.Key != nil {
			o = append(o, objstore.WithKey(opts.Key))
		}
		if opts.PageAhead != (agent.Project{}) {
			o = append(o, objstore.WithPageAhead(opts.PageAhead))
		}
		if opts.LocalFirst {
			return openLocalFirst(ctx, s.URL, opts, append(o, objstore.WithS3Options(failFast)))
		}
		st, err := objstore.Open(ctx, s.URL, o...)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.URL, err)
		}
		tellCreated(st, s.URL, opts)
		return st, nil
	case store.KindNone:
		return null.New(), nil
	}
	return nil, fmt.Errorf("store: unknown kind %q", s.Kind)
}

// ErrNoLogs: the store a spec names keeps no sessions (none), so it has no
// logs to read or copy.
var ErrNoLogs = errors.New("keeps no sessions")

// openLocalFirst opens the bucket at url local-first, its replica in
// panto's data directory (localfirst.Dir); the bucket itself is opened
// with o, in the background.
func openLocalFirst(ctx context.Context, url string, opts Options, o []objstore.Option) (agent.SessionStore, error) {
	dir, err := ReplicaDir(url, opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", url, err)
	}
	if opts.IndexCache == "" {
		// The replica keeps the bucket's index catalog too, so that the
		// shipper's sync reads what changed since the last run, not the
		// whole index (objstore.WithIndexCache; fsjsonl ignores dot
		// files).
		o = append(o, objstore.WithIndexCache(filepath.Join(dir, ".panto-index")))
	}
	var bucket atomic.Pointer[objstore.Store] // once open
	// The bucket's answers, counted: a wait on it that has none in the
	// short timeout is given up (localfirst.Options.Answers).
	var answers atomic.Int64
	o = append(o, objstore.WithOnAnswer(func() { answers.Add(1) }))
	return localfirst.Open(ctx, localfirst.Options{
		Dir:  dir,
		Name: url,
		OpenBucket: func(ctx context.Context) (store.LogStore, error) {
			st, err := objstore.Open(ctx, url, o...)
			if err != nil {
				return nil, err
			}
			tellCreated(st, url, opts)
			bucket.Store(st)
			return st, nil
		},
		WriteRefused: func() error {
			if b := bucket.Load(); b != nil {
				return b.WriteRefused()
			}
			return nil
		},
		Unreachable:     objstore.IsUnreachable,
		Answers:         answers.Load,
		Notify:          opts.Notify,
		CloseTimeout:    opts.CloseTimeout,
		ShipConcurrency: opts.ShipConcurrency,
	})
}

// tellCreated tells a command that only reads (Options.Reading) that the
// bucket's prefix holds no panto store (its Open wrote none: the first
// write makes it): it lists, searches and counts nothing, as a mistyped
// --store did without a word ("no sessions yet", "0 matches").
func tellCreated(st *objstore.Store, url string, opts Options) {
	if opts.Reading && opts.Notify != nil && st.Created() {
		opts.Notify(fmt.Sprintf("%s holds no panto store (nothing was written there): check --store if you meant another bucket or prefix", url))
	}
}

// ReplicaDir is the directory of this machine's local-first replica of
// the bucket store url at endpoint (empty: the AWS environment's, as
// Open takes it), whether or not it exists: localfirst.Dir.
func ReplicaDir(url, endpoint string) (string, error) {
	if endpoint == "" {
		endpoint = firstSet(os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	}
	return localfirst.Dir(url, endpoint)
}

func firstSet(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// OpenLog opens the store a spec names as a store.LogStore, for the
// callers that read or copy sessions as raw bytes; a store that cannot
// (none) is an error wrapping ErrNoLogs that says so.
func OpenLog(ctx context.Context, spec string, opts Options) (store.LogStore, error) {
	s, err := store.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return OpenLogSpec(ctx, s, opts)
}

// OpenLogSpec is OpenLog of a parsed spec.
func OpenLogSpec(ctx context.Context, s store.Spec, opts Options) (store.LogStore, error) {
	st, err := OpenSpec(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	ls, ok := store.AsLogStore(st)
	if !ok {
		return nil, fmt.Errorf("store %q %w to copy: give a directory or s3://BUCKET[/PREFIX]", s.Kind, ErrNoLogs)
	}
	return ls, nil
}
