// Package manifest owns the encoding and versioning of the two checkpoint
// documents of the object store (store/objstore): the per-session manifest
// and the catalog index shards.
//
// A Manifest describes one session's log as a chain of immutable segments,
// each a run of whole committed lines (see internal/sessionlog) starting at
// a raw byte offset. For every segment it keeps the raw length, the
// compressed length, the sha256 of the segment's raw bytes, the number of
// lines, and the sha256 of the whole raw prefix up to the segment's end (the
// prefix hash, so that sync can decide "is a prefix" without downloading
// data). At the tail it keeps the marshalled sha256 state of the whole raw
// log, so that the next append extends the prefix hash without re-reading
// anything, and the sessionlog.Decoder state, so that the next append folds
// the session's summary (SessionInfo) the same way a full parse would.
//
// Invariants checked by Decode (a manifest that breaks one is refused, not
// repaired): segments are contiguous from offset 0; the last segment ends at
// Length; the prefix hash of the last segment is SHA256; the hash state has
// consumed exactly Length bytes and sums to SHA256; the decoder has a header
// for the session exactly when Length > 0.
//
// An IndexShard holds, for every session whose id falls in the shard, the
// SessionInfo plus the committed length and prefix hash: enough for list,
// resolve and latest, and for sync to see that nothing changed, without a
// request per session. Shards are zstd-compressed JSON. A shard is stored
// as a base and a log of deltas: a delta is an IndexShard holding the
// entries one write changed, numbered 1, 2, ... after the base's Through;
// a reader applies them in order with Put.
//
// Both documents carry a format version; a document with a newer version
// than this package writes is refused with ErrNewerVersion.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Version is the manifest and index format version this package writes and
// the newest it reads. 2: index shards have deltas (Through, Pruned); a
// panto that reads 1 would miss the deltas' entries, so it must refuse
// what 2 writes.
const Version = 2

var (
	// ErrInvalid: a document does not decode or breaks an invariant.
	ErrInvalid = errors.New("invalid manifest")
	// ErrNewerVersion: a document was written by a newer panto.
	ErrNewerVersion = errors.New("written by a newer panto")
)

// Segment is one immutable object of a session's log.
type Segment struct {
	// Start is the raw byte offset of the segment's first byte.
	Start int64 `json:"start"`
	// Length is the number of raw (uncompressed) bytes.
	Length int64 `json:"length"`
	// Compressed is the size of the stored object.
	Compressed int64 `json:"compressed"`
	// SHA256 is the hex sha256 of the segment's raw bytes.
	SHA256 string `json:"sha256"`
	// Lines is the number of lines in the segment.
	Lines int `json:"lines"`
	// PrefixSHA256 is the hex sha256 of the log's raw bytes [0, End()).
	PrefixSHA256 string `json:"prefix_sha256"`
	// Merged marks an object written by compaction; it lives under a name
	// of its own (see Name) that no appender ever writes.
	Merged bool `json:"merged,omitempty"`
}

// End is the raw offset just past the segment.
func (s Segment) End() int64 { return s.Start + s.Length }

// Name is the segment's object name relative to the session's directory.
func (s Segment) Name() string {
	if s.Merged {
		return MergedName(s.Start, s.End())
	}
	return SegmentName(s.Start)
}

// SegmentName is the name of the appended segment starting at start: the
// name an appender creates with If-None-Match: *.
func SegmentName(start int64) string { return fmt.Sprintf("seg/%020d.jsonl.zst", start) }

// MergedName is the name of a compacted object covering [start, end). It
// cannot collide with a SegmentName, so a stalled appender re-creating an
// old segment name never overwrites it.
func MergedName(start, end int64) string {
	return fmt.Sprintf("seg/%020d-%020d.c.jsonl.zst", start, end)
}

// PendingDelete is an object replaced by compaction, to be deleted once no
// reader can still hold a manifest that lists it.
type PendingDelete struct {
	Name string `json:"name"`
	// After is when the object may be deleted.
	After time.Time `json:"after"`
}

// Manifest is the checkpoint of one session.
type Manifest struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Length is the committed raw length covered by Segments.
	Length int64 `json:"length"`
	// SHA256 is the hex sha256 of raw[0:Length]; "" when Length is 0.
	SHA256 string `json:"sha256"`
	// HashState is the marshalled crypto/sha256 state after raw[0:Length].
	HashState []byte `json:"hash_state"`
	// Decoder is the line decoder's state after raw[0:Length].
	Decoder  sessionlog.Decoder `json:"decoder"`
	Segments []Segment          `json:"segments"`
	Pending  []PendingDelete    `json:"pending_deletes,omitempty"`
}

// New returns the manifest of an empty session.
func New(id string) *Manifest {
	st, _ := sha256.New().(encoding.BinaryMarshaler).MarshalBinary() // sha256 state always marshals
	return &Manifest{Version: Version, ID: id, HashState: st, Segments: []Segment{}}
}

// Info is the session's summary after the committed lines.
func (m *Manifest) Info() agent.SessionInfo { return m.Decoder.Info }

// Clone returns a deep copy.
func (m *Manifest) Clone() *Manifest {
	c := *m
	c.HashState = bytes.Clone(m.HashState)
	c.Segments = append([]Segment{}, m.Segments...)
	c.Pending = append([]PendingDelete(nil), m.Pending...)
	if m.Decoder.Header != nil {
		h := *m.Decoder.Header
		c.Decoder.Header = &h
	}
	return &c
}

// Append extends the manifest with a segment holding raw at offset Length,
// stored as compressed bytes. name names the object in errors. raw must be
// whole committed lines that continue the log (the first segment starts
// with the session's header); otherwise the manifest is unchanged and the
// error wraps sessionlog.ErrMalformed or ErrInvalid.
func (m *Manifest) Append(name string, raw []byte, compressed int64) (Segment, error) {
	if len(raw) == 0 {
		return Segment{}, fmt.Errorf("%s: %w: empty segment", name, ErrInvalid)
	}
	n, err := sessionlog.CommittedLength(name, raw)
	if err != nil {
		return Segment{}, err
	}
	if n != len(raw) {
		return Segment{}, fmt.Errorf("%s: %w: segment does not end at a batch boundary (%d of %d bytes committed)", name, ErrInvalid, n, len(raw))
	}
	d := m.Decoder
	if d.Header != nil {
		h := *d.Header
		d.Header = &h
	}
	d.Name = name
	lines := 0
	err = sessionlog.Lines(raw, func(line []byte) error {
		lines++
		_, err := d.SummarizeLine(line)
		return err
	})
	if err != nil {
		return Segment{}, err
	}
	if d.Header == nil || d.Header.ID != m.ID {
		return Segment{}, fmt.Errorf("%s: %w: log header is not that of session %s", name, ErrInvalid, m.ID)
	}
	h, err := m.hash()
	if err != nil {
		return Segment{}, err
	}
	h.Write(raw)
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return Segment{}, fmt.Errorf("%s: marshal hash state: %w", name, err)
	}
	prefix := hex.EncodeToString(h.Sum(nil))
	segSHA := prefix // the first segment is the whole prefix: hash it once
	if m.Length > 0 {
		sum := sha256.Sum256(raw)
		segSHA = hex.EncodeToString(sum[:])
	}
	seg := Segment{
		Start:        m.Length,
		Length:       int64(len(raw)),
		Compressed:   compressed,
		SHA256:       segSHA,
		Lines:        lines,
		PrefixSHA256: prefix,
	}
	d.Name = ""
	m.Decoder = d
	m.HashState = st
	m.Length = seg.End()
	m.SHA256 = seg.PrefixSHA256
	m.Segments = append(m.Segments, seg)
	return seg, nil
}

func (m *Manifest) hash() (hash.Hash, error) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(m.HashState); err != nil {
		return nil, fmt.Errorf("%w: session %s: hash state: %v", ErrInvalid, m.ID, err)
	}
	return h, nil
}

// Encode returns the manifest's JSON.
func Encode(m *Manifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest of session %s: %w", m.ID, err)
	}
	return data, nil
}

// Decode parses a manifest and checks its invariants.
func Decode(data []byte) (*Manifest, error) {
	var m Manifest
	if err := decodeVersioned(data, "manifest", &m); err != nil {
		return nil, err
	}
	if m.Segments == nil {
		m.Segments = []Segment{}
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: session %s: %s", ErrInvalid, m.ID, fmt.Sprintf(format, args...))
	}
	if m.Version < 1 || m.Version > Version {
		return bad("version %d", m.Version)
	}
	if err := agent.ValidateSessionID(m.ID); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var pos int64
	prefix := ""
	for i, s := range m.Segments {
		if s.Start != pos {
			return bad("segment %d starts at %d, want %d", i, s.Start, pos)
		}
		if s.Length <= 0 || s.Compressed <= 0 || s.Lines <= 0 || int64(s.Lines) > s.Length {
			return bad("segment %d has length %d, compressed %d, lines %d", i, s.Length, s.Compressed, s.Lines)
		}
		if !isSHA256(s.SHA256) || !isSHA256(s.PrefixSHA256) {
			return bad("segment %d has a malformed sha256", i)
		}
		pos, prefix = s.End(), s.PrefixSHA256
		if pos < 0 {
			return bad("segment %d overflows", i)
		}
	}
	if m.Length != pos || m.SHA256 != prefix {
		return bad("length %d sha256 %q do not match the segments (%d, %q)", m.Length, m.SHA256, pos, prefix)
	}
	h, err := m.hash()
	if err != nil {
		return err
	}
	// The state ends in the number of bytes hashed (big endian).
	if len(m.HashState) < 8 || int64(binary.BigEndian.Uint64(m.HashState[len(m.HashState)-8:])) != m.Length {
		return bad("hash state does not cover %d bytes", m.Length)
	}
	if m.Length > 0 && hex.EncodeToString(h.Sum(nil)) != m.SHA256 {
		return bad("hash state does not sum to the prefix hash")
	}
	if (m.Length > 0) != (m.Decoder.Header != nil) {
		return bad("decoder state does not match the length")
	}
	if m.Decoder.Header != nil && m.Decoder.Header.ID != m.ID {
		return bad("decoder header is of session %q", m.Decoder.Header.ID)
	}
	for _, p := range m.Pending {
		if !strings.HasPrefix(p.Name, "seg/") || strings.Contains(p.Name, "..") || strings.ContainsAny(p.Name[4:], "/\\") {
			return bad("pending delete of %q", p.Name)
		}
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// decodeVersioned decodes a versioned JSON document strictly (no unknown
// fields, no trailing data) into v, refusing one written by a newer
// format version before reading anything else of it: what a newer panto
// wrote must not be misread. what names the document in errors.
func decodeVersioned(data []byte, what string, v any) error {
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	if head.Version > Version {
		return fmt.Errorf("%s version %d: %w (this panto reads up to %d): upgrade panto", what, head.Version, ErrNewerVersion, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: %s: trailing data", ErrInvalid, what)
	}
	return nil
}
