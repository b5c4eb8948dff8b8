package store

import (
	"context"
	"fmt"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/null"
	"github.com/panto-dev/panto/store/objstore"
)

// Options configure Open.
type Options struct {
	// Endpoint is the S3 endpoint URL of an s3:// store (e.g.
	// http://127.0.0.1:9000 for MinIO); empty uses the AWS environment
	// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL) or AWS itself.
	Endpoint string
}

// Open parses spec (see ParseSpec) and opens the store it names. Every
// backend the binaries know is in this one switch.
func Open(ctx context.Context, spec string, opts Options) (agent.SessionStore, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return OpenSpec(ctx, s, opts)
}

// OpenSpec opens the store a parsed spec names.
func OpenSpec(ctx context.Context, s Spec, opts Options) (agent.SessionStore, error) {
	switch s.Kind {
	case KindDir:
		st, err := fsjsonl.Open(s.Dir)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.Dir, err)
		}
		return st, nil
	case KindS3:
		var o []objstore.Option
		if opts.Endpoint != "" {
			o = append(o, objstore.WithEndpoint(opts.Endpoint))
		}
		st, err := objstore.Open(ctx, s.URL, o...)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.URL, err)
		}
		return st, nil
	case KindNone:
		return null.New(), nil
	}
	return nil, fmt.Errorf("store: unknown kind %q", s.Kind)
}
