// This file parses the store specs users write:
//
//	/path/to/dir or file:///path/to/dir   store/fsjsonl (the default)
//	s3://BUCKET[/PREFIX]                  store/objstore
//	none                                  store/null
//
// store/backends opens them.

package store

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Kind is a kind of backend.
type Kind string

const (
	KindDir  Kind = "dir"
	KindS3   Kind = "s3"
	KindNone Kind = "none"
)

// Spec is a parsed store spec.
type Spec struct {
	Kind Kind
	// Dir is the catalog directory of a KindDir spec.
	Dir string
	// URL is the s3://BUCKET[/PREFIX] of a KindS3 spec.
	URL string
}

// ParseSpec parses a store spec. An empty spec is the default directory.
func ParseSpec(spec string) (Spec, error) {
	switch {
	case spec == "":
		dir, err := DefaultDir()
		if err != nil {
			return Spec{}, err
		}
		return Spec{Kind: KindDir, Dir: dir}, nil
	case spec == "none":
		return Spec{Kind: KindNone}, nil
	case strings.HasPrefix(spec, "s3://"):
		u, err := url.Parse(spec)
		if err != nil || u.Host == "" {
			return Spec{}, fmt.Errorf("store %q: want s3://BUCKET[/PREFIX]", spec)
		}
		return Spec{Kind: KindS3, URL: spec}, nil
	case strings.HasPrefix(spec, "file://"):
		u, err := url.Parse(spec)
		if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
			return Spec{}, fmt.Errorf("store %q: want file:///absolute/dir", spec)
		}
		return Spec{Kind: KindDir, Dir: filepath.Clean(u.Path)}, nil
	case strings.Contains(spec, "://"):
		return Spec{}, fmt.Errorf("store %q: unknown scheme; use a directory, file://DIR, s3://BUCKET[/PREFIX] or none", spec)
	default:
		return Spec{Kind: KindDir, Dir: filepath.Clean(spec)}, nil
	}
}

// DefaultIndexCacheDir is where panto and panto-sync keep a bucket's
// index catalog between runs (objstore.WithIndexCache):
// $XDG_CACHE_HOME/panto/index, else ~/.cache/panto/index; "" (no cache)
// when there is no cache directory.
func DefaultIndexCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "panto", "index")
}

// DefaultDir is panto's session directory: $XDG_DATA_HOME/panto/sessions,
// else ~/.local/share/panto/sessions.
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "panto", "sessions"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("no session directory: set HOME or XDG_DATA_HOME, or pass --store DIR")
	}
	return filepath.Join(home, ".local", "share", "panto", "sessions"), nil
}
