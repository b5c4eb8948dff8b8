package objstore

import (
	"errors"
	"fmt"

	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/seal"
)

// An encrypted prefix (docs/DESIGN.md, "Encryption") is one whose format
// marker requires manifest.FeatureEncryption and names the key's
// identifier. It is so from its creation: a Store opened WithKey on a
// fresh prefix creates it encrypted, and from then on every Store must
// open it with that key. The Store's Codec seals every object it writes
// and opens every object it reads, each bound to its name, so a Store
// with a key cannot write plaintext, nor read anything it did not seal.
// The key is checked against the marker before the Store writes or reads
// anything else, so that a wrong or missing key fails at Open, in one
// line, with nothing written.

var (
	// ErrKeyRequired: the prefix is encrypted and no key was given.
	ErrKeyRequired = errors.New("the prefix is encrypted")
	// ErrWrongKey: the prefix is encrypted with another key than the one
	// given (their identifiers differ).
	ErrWrongKey = errors.New("wrong key")
	// ErrNotEncrypted: a key was given for a prefix that is not
	// encrypted; a prefix is encrypted or not from its creation.
	ErrNotEncrypted = errors.New("the prefix is not encrypted")
)

// WithKey opens the store with a bucket key: a fresh prefix is created
// encrypted with it, an encrypted one must have been created with it, and
// a plaintext one is refused (ErrNotEncrypted).
func WithKey(k *seal.Key) Option { return func(o *options) { o.key = k } }

// freshMarker is the marker of a prefix this Store creates.
func (s *Store) freshMarker() manifest.Marker {
	m := manifest.Marker{Version: manifest.Version, Requires: []string{manifest.FeatureIndexBases, manifest.FeatureIndexLog, manifest.FeatureIndexUnfolded, manifest.FeatureIndexHeads, manifest.FeatureIndexRunDeltas}}
	if s.key != nil {
		m = m.Require(manifest.FeatureEncryption)
		m.Encryption = &manifest.Encryption{Scheme: seal.Scheme, KeyID: s.key.ID().String()}
	}
	return m
}

// checkKey checks the Store's key (or its absence) against the marker of
// an existing prefix.
func (s *Store) checkKey(m manifest.Marker) error {
	where := s.b.url("")
	switch e := m.Encryption; {
	case e == nil && s.key == nil:
		return nil
	case e == nil:
		return fmt.Errorf("%w: %s was created without a key, and a key was given (%s): drop --key-file and PANTO_KEY_FILE for it, or copy it into a new encrypted prefix with panto-sync copy --dst-key-file FILE", ErrNotEncrypted, where, s.key.ID())
	case s.key == nil:
		return fmt.Errorf("%w: %s is encrypted (key %s), and no key was given: pass its key file with --key-file FILE or PANTO_KEY_FILE", ErrKeyRequired, where, e.KeyID)
	case e.KeyID != s.key.ID().String():
		return fmt.Errorf("%w: %s is encrypted with key %s, and the key given is %s: use the key file the prefix was created with", ErrWrongKey, where, e.KeyID, s.key.ID())
	}
	return nil
}

// objectType is the content type of what the Store writes where a
// segment is (a zstd frame, sealed in an encrypted prefix).
func (s *Store) objectType() string {
	if s.key != nil {
		return "application/octet-stream"
	}
	return "application/zstd"
}

// corrupt is the error of an object that does not decode, naming it:
// ErrCorrupt, and what was wrong (an object that fails authentication
// wraps seal.ErrAuth).
func (s *Store) corrupt(rel string, err error) error {
	return fmt.Errorf("%s: %w: %w", s.objectURL(rel), ErrCorrupt, err)
}
