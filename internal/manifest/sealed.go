package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// This file is the encrypted prefix's side of the Codec (docs/DESIGN.md,
// "Encryption"): how each object is sealed, and what of a document stays
// readable.
//
// A segment (appended or merged) and a tombstone object are their zstd
// frame, sealed whole. A manifest or an index shard is a readable
// skeleton — the document's ids, lengths, counts and times, nothing else
// — with one field, "sealed", holding the whole document as a plaintext
// prefix stores it (compressed, then sealed). The skeleton is for people
// and tools that hold no key; a reader uses only the sealed document,
// and refuses one whose skeleton says otherwise, so that neither part can
// be changed alone. Every seal is bound to the object's name, so nothing
// opens under another name.

// Sealer seals and opens the objects of an encrypted prefix, each bound
// to its name (internal/seal's Key).
type Sealer interface {
	Seal(name string, plaintext []byte) []byte
	// Open may decrypt in place, overwriting sealed.
	Open(name string, sealed []byte) ([]byte, error)
}

// ErrSealed: a sealed document was read by a Codec without a key.
var ErrSealed = errors.New("sealed")

// WithSealer returns a Codec that seals what it encodes with s, and
// refuses to decode anything s did not seal. It shares c's compressors.
func (c *Codec) WithSealer(s Sealer) *Codec {
	d := *c
	d.sealer = s
	return &d
}

// Sealed reports whether the Codec seals.
func (c *Codec) Sealed() bool { return c.sealer != nil }

// EncodeSegment returns the stored form of an appended segment's raw
// bytes, the object called name: one zstd frame at the fastest level,
// sealed when the Codec seals.
func (c *Codec) EncodeSegment(name string, raw []byte) []byte {
	return c.seal(name, c.Compress(raw))
}

// EncodeMergedSegment is EncodeSegment at zstd's default level, for
// compaction's merged segments, which are kept.
func (c *Codec) EncodeMergedSegment(name string, raw []byte) []byte {
	return c.seal(name, c.CompressSmaller(raw))
}

// EncodeTombstoneObject returns the stored form of tombstone t where a
// segment would be, the object called name: compressed (and sealed) like
// a segment.
func (c *Codec) EncodeTombstoneObject(name string, t Tombstone) []byte {
	return c.EncodeSegment(name, EncodeTombstone(t))
}

// DecodeSegment returns the raw bytes of the object called name, stored
// where a segment is (a segment's lines, or a tombstone: see
// DecodeTombstone). A sealed data is decrypted in place: the caller must
// not use data afterwards. The error is the seal's when data does not
// open (internal/seal: ErrAuth, ErrWrongKey, ErrNotSealed), else zstd's.
func (c *Codec) DecodeSegment(name string, data []byte) ([]byte, error) {
	frame, err := c.open(name, data)
	if err != nil {
		return nil, err
	}
	return c.Decompress(frame)
}

func (c *Codec) seal(name string, plaintext []byte) []byte {
	if c.sealer == nil {
		return plaintext
	}
	return c.sealer.Seal(name, plaintext)
}

func (c *Codec) open(name string, data []byte) ([]byte, error) {
	if c.sealer == nil {
		return data, nil
	}
	return c.sealer.Open(name, data)
}

// EncodeManifest returns the stored form of m, the object called name:
// the document Encode writes, or in an encrypted prefix its skeleton with
// the document sealed.
func (c *Codec) EncodeManifest(name string, m *Manifest) ([]byte, error) {
	data, err := Encode(m)
	if err != nil || c.sealer == nil {
		return data, err
	}
	w := manifestSkeleton(m)
	w.Sealed = c.sealer.Seal(name, c.Compress(data))
	data, err = marshalWire(w)
	if err != nil {
		return nil, fmt.Errorf("encode manifest of session %s: %w", m.ID, err)
	}
	return data, nil
}

// DecodeManifest parses the stored form of a manifest, the object called
// name (see EncodeManifest), and checks it.
func (c *Codec) DecodeManifest(name string, data []byte) (*Manifest, error) {
	if c.sealer == nil {
		return Decode(data)
	}
	return openSealed(c, name, "manifest", data, func(w *wireSealedManifest) *[]byte { return &w.Sealed }, Decode, manifestSkeleton)
}

// sealShard returns the sealed form of shard s, whose plaintext document
// is data, for the object called name (before compression).
func (c *Codec) sealShard(name string, s *IndexShard, data []byte) ([]byte, error) {
	w := shardSkeleton(s)
	w.Sealed = c.sealer.Seal(name, c.CompressSmaller(data))
	out, err := marshalWire(w)
	if err != nil {
		return nil, fmt.Errorf("encode index shard %s: %w", s.Shard, err)
	}
	return out, nil
}

// openShard parses a sealed shard (decompressed), the object called name.
func (c *Codec) openShard(name string, raw []byte) (*IndexShard, error) {
	return openSealed(c, name, "index shard", raw, func(w *wireSealedShard) *[]byte { return &w.Sealed }, decodeShard, shardSkeleton)
}

// openSealed decodes the sealed document data, the object called name:
// its skeleton (a W, whose sealed field sealedOf points at), then the
// sealed content, opened, decompressed and decoded by decode, which must
// have the skeleton it came in.
func openSealed[T, W any](c *Codec, name, what string, data []byte, sealedOf func(*W) *[]byte, decode func([]byte) (T, error), skeleton func(T) W) (T, error) {
	var zero T
	var w W
	if err := decodeSkeleton(data, what, &w); err != nil {
		return zero, err
	}
	sealed := sealedOf(&w)
	if *sealed == nil {
		return zero, fmt.Errorf("%w: %s: not sealed, in an encrypted prefix", ErrInvalid, what)
	}
	raw, err := c.openDocument(name, what, *sealed)
	if err != nil {
		return zero, err
	}
	doc, err := decode(raw)
	if err != nil {
		return zero, err
	}
	*sealed = nil
	if err := sameSkeleton(w, skeleton(doc)); err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return doc, nil
}

// openDocument opens a document's sealed field and decompresses it.
func (c *Codec) openDocument(name, what string, sealed []byte) ([]byte, error) {
	frame, err := c.open(name, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, what, err)
	}
	raw, err := c.Decompress(frame)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: sealed content: %v", ErrInvalid, what, err)
	}
	return raw, nil
}

// decodeSkeleton decodes a sealed document's readable part into w after
// checking its version (a newer one is refused, as for any document).
func decodeSkeleton(data []byte, what string, w any) error {
	var head struct {
		Version int `json:"version"`
	}
	if err := unmarshalWire(data, what, &head); err != nil {
		return err
	}
	if head.Version > Version {
		return fmt.Errorf("%s version %d: %w (this panto reads up to %d): upgrade panto", what, head.Version, ErrNewerVersion, Version)
	}
	if head.Version < 3 {
		return fmt.Errorf("%w: %s: version %d, and sealing came with 3", ErrInvalid, what, head.Version)
	}
	return unmarshalWire(data, what, w)
}

// sameSkeleton checks that a document's readable part (got, its sealed
// field cleared) is what its sealed content says (want).
func sameSkeleton(got, want any) error {
	a, err := marshalWire(got)
	if err != nil {
		return err
	}
	b, err := marshalWire(want)
	if err != nil {
		return err
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("%w: its readable fields differ from its sealed content", ErrInvalid)
	}
	return nil
}

// wireSealedManifest is a manifest in an encrypted prefix: its skeleton
// (the id, lengths, counts and times) and the sealed document.
type wireSealedManifest struct {
	Version  int                 `json:"version"`
	ID       string              `json:"id"`
	Length   int64               `json:"length"`
	Segments []wireSealedSegment `json:"segments"`
	Pending  []wirePending       `json:"pending_deletes,omitempty"`
	Sealed   []byte              `json:"sealed,omitempty"`
}

// wireSealedSegment is a segment of a sealed manifest's skeleton: no
// hash.
type wireSealedSegment struct {
	Start      int64 `json:"start"`
	Length     int64 `json:"length"`
	Compressed int64 `json:"compressed"`
	Lines      int   `json:"lines"`
	Merged     bool  `json:"merged,omitempty"`
}

func manifestSkeleton(m *Manifest) wireSealedManifest {
	w := wireSealedManifest{Version: Version, ID: m.ID, Length: m.Length, Segments: make([]wireSealedSegment, len(m.Segments))}
	for i, s := range m.Segments {
		w.Segments[i] = wireSealedSegment{Start: s.Start, Length: s.Length, Compressed: s.Compressed, Lines: s.Lines, Merged: s.Merged}
	}
	for _, p := range m.Pending {
		w.Pending = append(w.Pending, wirePending{Name: p.Name, After: p.After.UTC()})
	}
	return w
}

// wireSealedShard is an index shard (base or delta) in an encrypted
// prefix: its skeleton and the sealed document.
type wireSealedShard struct {
	Version    int                            `json:"version"`
	Shard      string                         `json:"shard"`
	Through    int64                          `json:"through,omitempty"`
	Pruned     int64                          `json:"pruned,omitempty"`
	Purge      int64                          `json:"purge,omitempty"`
	Written    time.Time                      `json:"written,omitzero"`
	Omitted    int64                          `json:"omitted,omitempty"`
	Complete   bool                           `json:"complete,omitempty"`
	DirHead    bool                           `json:"dir_head,omitempty"`
	Base       int64                          `json:"base,omitempty"`
	BaseETag   string                         `json:"base_etag,omitempty"`
	Recent     map[string]wireSealedEntry     `json:"recent,omitempty"`
	Unfolded   map[string]wireSealedEntry     `json:"unfolded,omitempty"`
	Runs       []wireRunPage                  `json:"runs,omitempty"`
	Sessions   map[string]wireSealedEntry     `json:"sessions"`
	Tombstones map[string]wireSealedTombstone `json:"tombstones,omitempty"`
	Sealed     []byte                         `json:"sealed,omitempty"`
}

// wireSealedEntry is a session of a sealed shard's skeleton: its length,
// times and message count; no text, no hash.
type wireSealedEntry struct {
	Length   int64     `json:"length"`
	Created  time.Time `json:"created"`
	Modified time.Time `json:"modified"`
	Messages int       `json:"messages"`
}

// wireSealedTombstone is a deleted session of a sealed shard's skeleton.
type wireSealedTombstone struct {
	Deleted time.Time `json:"deleted"`
	Length  int64     `json:"length"`
}

func shardSkeleton(s *IndexShard) wireSealedShard {
	w := wireSealedShard{Version: Version, Shard: s.Shard, Through: s.Through, Pruned: s.Pruned, Purge: s.Purge, Omitted: s.Omitted, Complete: s.Complete, DirHead: s.DirHead, Base: s.Base, BaseETag: s.BaseETag, Runs: runsToWire(s.Runs), Sessions: make(map[string]wireSealedEntry, len(s.Sessions))}
	if !s.Written.IsZero() {
		w.Written = s.Written.UTC()
	}
	skeleton := func(e IndexEntry) wireSealedEntry {
		return wireSealedEntry{Length: e.Length, Created: e.Info.Created.UTC(), Modified: e.Info.Modified.UTC(), Messages: e.Info.MessageCount}
	}
	for id, e := range s.Sessions {
		w.Sessions[id] = skeleton(e)
	}
	for id, e := range s.Recent {
		if w.Recent == nil {
			w.Recent = map[string]wireSealedEntry{}
		}
		w.Recent[id] = skeleton(e)
	}
	for id, e := range s.Unfolded {
		if w.Unfolded == nil {
			w.Unfolded = map[string]wireSealedEntry{}
		}
		w.Unfolded[id] = skeleton(e)
	}
	for id, t := range s.Tombstones {
		if w.Tombstones == nil {
			w.Tombstones = map[string]wireSealedTombstone{}
		}
		w.Tombstones[id] = wireSealedTombstone{Deleted: t.Deleted.UTC(), Length: t.Length}
	}
	return w
}
