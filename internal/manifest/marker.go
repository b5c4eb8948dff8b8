package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/panto-dev/panto/internal/seal"
)

// MarkerFormat names the format of a panto-store.json marker.
const MarkerFormat = "panto-objstore"

// ErrNotMarker: the object at the marker's name is not a panto marker
// (the prefix is used by something else).
var ErrNotMarker = errors.New("not a panto store marker")

// Marker is the content of a prefix's format marker, P/panto-store.json:
// the format version of the prefix and the features every panto that
// opens it must know.
//
// Version 1 markers come from before format 3 (they sit over documents of
// versions 1 and 2); a writer of this package upgrades the marker to
// Version before its first write, so that a panto that reads only the old
// documents refuses the prefix at open instead of failing on one of them.
type Marker struct {
	Version int
	// Requires lists features beyond the version that change what a
	// reader must do (docs/DESIGN.md, "Versions"); a panto that does not
	// know one refuses the prefix: FeatureTombstones, FeatureIndexBases,
	// FeatureEncryption.
	Requires []string
	// Encryption is set in an encrypted prefix, whose Requires then holds
	// FeatureEncryption; nil in a plaintext one. A prefix is one or the
	// other from its creation.
	Encryption *Encryption
}

// FeatureEncryption is the marker feature of an encrypted prefix: every
// object's content is sealed (internal/seal), so a panto that does not
// know encryption must refuse the prefix rather than read sealed objects
// as damaged ones, or write plaintext among them.
const FeatureEncryption = "encryption"

// Encryption is what a marker says of an encrypted prefix's key: the
// scheme, and the key's identifier (seal.ID), which tells a wrong key
// from a damaged object. Never the key.
type Encryption struct {
	Scheme string
	KeyID  string
}

// knownFeatures are the features of Marker.Requires this package
// implements.
var knownFeatures = []string{FeatureTombstones, FeatureIndexBases, FeatureIndexLog, FeatureIndexUnfolded, FeatureIndexHeads, FeatureIndexWide, FeatureIndexRunDeltas, FeatureEncryption}

// knownSchemes are the encryption schemes this panto reads and writes.
var knownSchemes = []string{seal.Scheme}

type wireMarker struct {
	Format     string          `json:"format"`
	Version    int             `json:"version"`
	Requires   []string        `json:"requires,omitempty"`
	Encryption *wireEncryption `json:"encryption,omitempty"`
}

type wireEncryption struct {
	Scheme string `json:"scheme"`
	KeyID  string `json:"key_id"`
}

// EncodeMarker returns the stored form of m.
func EncodeMarker(m Marker) []byte {
	w := wireMarker{Format: MarkerFormat, Version: m.Version, Requires: m.Requires}
	if e := m.Encryption; e != nil {
		w.Encryption = &wireEncryption{Scheme: e.Scheme, KeyID: e.KeyID}
	}
	data, _ := marshalWire(w) // strings and ints always encode
	return data
}

// Require returns m with feature f in its Requires.
func (m Marker) Require(f string) Marker {
	if !slices.Contains(m.Requires, f) {
		m.Requires = append(slices.Clone(m.Requires), f)
	}
	return m
}

// DecodeMarker parses a marker. It fails with ErrNotMarker for anything
// but a panto marker, and with ErrNewerVersion for a marker of a newer
// version or one that requires a feature this panto does not know.
func DecodeMarker(data []byte) (Marker, error) {
	var w wireMarker
	if err := json.Unmarshal(data, &w); err != nil || w.Format != MarkerFormat || w.Version < 1 {
		return Marker{}, ErrNotMarker
	}
	if w.Version > Version {
		return Marker{}, fmt.Errorf("%w: format version %d, this panto reads up to %d", ErrNewerVersion, w.Version, Version)
	}
	var unknown []string
	for _, f := range w.Requires {
		if !slices.Contains(knownFeatures, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return Marker{}, fmt.Errorf("%w: it requires %s, which this panto does not know", ErrNewerVersion, strings.Join(unknown, ", "))
	}
	m := Marker{Version: w.Version, Requires: w.Requires}
	encrypted := slices.Contains(w.Requires, FeatureEncryption)
	switch e := w.Encryption; {
	case encrypted && (e == nil || e.Scheme == "" || e.KeyID == ""):
		return Marker{}, fmt.Errorf("%w: the marker requires encryption but names no scheme and key id", ErrInvalid)
	case !encrypted && e != nil:
		// Written so, an older panto would take the prefix for a
		// plaintext one: no writer of this package does that.
		return Marker{}, fmt.Errorf("%w: the marker names an encryption key but does not require encryption", ErrInvalid)
	case e != nil && !slices.Contains(knownSchemes, e.Scheme):
		return Marker{}, fmt.Errorf("%w: it is encrypted with %q, which this panto does not know", ErrNewerVersion, e.Scheme)
	case e != nil:
		m.Encryption = &Encryption{Scheme: e.Scheme, KeyID: e.KeyID}
	}
	return m, nil
}
