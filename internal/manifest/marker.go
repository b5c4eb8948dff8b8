package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// know one refuses the prefix: FeatureTombstones, FeatureIndexBases.
	Requires []string
}

// knownFeatures are the features of Marker.Requires this package
// implements.
var knownFeatures = []string{FeatureTombstones, FeatureIndexBases}

type wireMarker struct {
	Format   string   `json:"format"`
	Version  int      `json:"version"`
	Requires []string `json:"requires,omitempty"`
}

// EncodeMarker returns the stored form of m.
func EncodeMarker(m Marker) []byte {
	data, _ := marshalWire(wireMarker{Format: MarkerFormat, Version: m.Version, Requires: m.Requires}) // strings and ints always encode
	return data
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
	return Marker{Version: w.Version, Requires: w.Requires}, nil
}
