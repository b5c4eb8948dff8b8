// Package manifest owns the bucket format of the object store
// (store/objstore): the format marker, the per-session manifest and the
// catalog index shards, their wire encoding and its versions. The format
// is documented in docs/DESIGN.md ("The bucket format"); this package is
// its one implementation, and its wire structs (wire.go) are the only
// place that says how a document is spelled.
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
// request per session. A shard is stored as a base and a log of deltas: a
// delta is an IndexShard holding the entries one write changed, numbered
// 1, 2, ... after the base's Through; a reader applies them in order with
// Put.
//
// A session's summary, in manifests and index entries, holds the title,
// the fork link, the token totals and the project too (optional fields
// within version 3). A manifest says in summary_version what its summary folds, so that
// a writer does not resume from one an older panto folded without them
// (see SummaryVersion and docs/DESIGN.md, "The bucket format").
//
// In an encrypted prefix (the marker requires FeatureEncryption) the
// Codec seals every object it encodes (WithSealer, sealed.go): segments
// and tombstone objects whole, manifests and index shards as a readable
// skeleton of ids, lengths, counts and times around one sealed field that
// holds the document, each bound to its object's name.
//
// Every document carries its format version. This package writes Version
// and reads every version from 1 on: version 1 and 2 documents (whose
// session summaries were Go struct layouts) through frozen structs of
// their own, version 3 through tagged wire structs that ignore fields they
// do not know, so that a 3.x writer may add optional fields. A document of
// a newer version is refused with ErrNewerVersion: what a newer panto wrote
// must not be misread.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Version is the format version this package writes and the newest it
// reads: 3, tagged wire structs (docs/DESIGN.md, "Versions").
const Version = 3

// SummaryVersion says what a manifest's summary folds, so that a summary
// folded by a writer that did not know a field is not taken for one that
// is: 0, the count, the last prompt, the endpoint and the times (every
// writer of formats 1 and 2, and of 3 before the title); 1, also the
// title, the fork link and the token totals; 2, also the project (from
// the header). A writer refolds a summary of an older version from the
// log before it appends (Refold), so that what it writes is whole.
const SummaryVersion = 2

// Folded is info as a summary of version v folds it: the fields of later
// versions zero, so that a summary an older writer folded compares
// equal to one folded anew in what both fold.
func Folded(info agent.SessionInfo, v int) agent.SessionInfo {
	if v < 2 {
		info.Project = agent.Project{}
	}
	if v < 1 {
		info.Title, info.Parent, info.ForkedAt, info.Usage = "", "", 0, agent.Usage{}
	}
	return info
}

var (
	// ErrInvalid: a document does not decode or breaks an invariant.
	ErrInvalid = errors.New("invalid manifest")
	// ErrNewerVersion: a document was written by a newer panto.
	ErrNewerVersion = errors.New("written by a newer panto")
)

// Segment is one immutable object of a session's log.
type Segment struct {
	// Start is the raw byte offset of the segment's first byte.
	Start int64
	// Length is the number of raw (uncompressed) bytes.
	Length int64
	// Compressed is the size of the stored object.
	Compressed int64
	// SHA256 is the hex sha256 of the segment's raw bytes.
	SHA256 string
	// Lines is the number of lines in the segment.
	Lines int
	// PrefixSHA256 is the hex sha256 of the log's raw bytes [0, End()).
	PrefixSHA256 string
	// Merged marks an object written by compaction; it lives under a name
	// of its own (see Name) that no appender ever writes.
	Merged bool
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
	Name string
	// After is when the object may be deleted.
	After time.Time
}

// Manifest is the checkpoint of one session.
type Manifest struct {
	ID string
	// Length is the committed raw length covered by Segments.
	Length int64
	// SHA256 is the hex sha256 of raw[0:Length]; "" when Length is 0.
	SHA256 string
	// HashState is the marshalled crypto/sha256 state after raw[0:Length].
	HashState []byte
	// Decoder is the line decoder's state after raw[0:Length].
	Decoder sessionlog.Decoder
	// SummaryVersion is what Decoder.Info folds (see the constant).
	SummaryVersion int
	Segments       []Segment
	Pending        []PendingDelete
}

// New returns the manifest of an empty session.
func New(id string) *Manifest {
	st, _ := sha256.New().(encoding.BinaryMarshaler).MarshalBinary() // sha256 state always marshals
	return &Manifest{ID: id, HashState: st, SummaryVersion: SummaryVersion, Segments: []Segment{}}
}

// StaleSummary reports whether the summary was folded by a writer that
// folds less than this one (SummaryVersion): its fields of later
// versions are missing or partial, those of its own version are right.
func (m *Manifest) StaleSummary() bool {
	return m.Length > 0 && m.SummaryVersion < SummaryVersion
}

// Refold replaces the summary with one folded from raw, the whole log
// (m.Length bytes whose sha256 is m.SHA256); name names it in errors.
func (m *Manifest) Refold(name string, raw []byte) error {
	if sum := sha256.Sum256(raw); int64(len(raw)) != m.Length || hex.EncodeToString(sum[:]) != m.SHA256 {
		return fmt.Errorf("%s: %w: refold: %d bytes with sha256 %x, the manifest says %d bytes with sha256 %s", name, ErrInvalid, len(raw), sum, m.Length, m.SHA256)
	}
	d := sessionlog.Decoder{Name: name}
	if err := sessionlog.Lines(raw, func(line []byte) error {
		_, err := d.SummarizeLine(line)
		return err
	}); err != nil {
		return err
	}
	if d.Header == nil || d.Header.ID != m.ID {
		return fmt.Errorf("%s: %w: log header is not that of session %s", name, ErrInvalid, m.ID)
	}
	d.Name = ""
	d.Header.More = 0
	m.Decoder, m.SummaryVersion = d, SummaryVersion
	return nil
}

// Info is the session's summary after the committed lines.
func (m *Manifest) Info() agent.SessionInfo { return m.Decoder.Info }

// TailAfter is where m's segments after its first stored ones begin (a
// Resume.Tail when the stored manifest lists those), and false if one of
// them is merged: its name is not its offset's (compaction merges only
// listed segments, so this is not expected).
func (m *Manifest) TailAfter(stored int) ([]int64, bool) {
	var offs []int64
	for _, seg := range m.Segments[min(stored, len(m.Segments)):] {
		if seg.Merged {
			return nil, false
		}
		offs = append(offs, seg.Start)
	}
	return offs, true
}

// Entry is the session's index entry, with the state to resume from; its
// Resume.Segments counts m's segments and Resume.Stored is 0 (the caller
// knows how many the stored manifest lists, and sets Tail).
func (m *Manifest) Entry() IndexEntry {
	e := IndexEntry{Info: m.Info(), Length: m.Length, SHA256: m.SHA256}
	if h := m.Decoder.Header; h != nil && m.Length > 0 {
		e.Resume = Resume{HashState: string(m.HashState), Lines: m.Decoder.Line, Format: h.Version,
			SummaryVersion: m.SummaryVersion, Segments: len(m.Segments)}
	}
	return e
}

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
	d, lines, err := m.summarize(name, raw)
	if err != nil {
		return Segment{}, err
	}
	prefix, segSHA, st, err := m.hashSegment(name, raw)
	if err != nil {
		return Segment{}, err
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
	d.Header.More = 0 // of the header's batch only: nothing later reads it
	m.Decoder = d
	m.HashState = st
	m.Length = seg.End()
	m.SHA256 = seg.PrefixSHA256
	m.Segments = append(m.Segments, seg)
	return seg, nil
}

// summarize checks that raw, the next segment (object name), is whole
// batches of session m.ID's log, and returns m's summary with raw's lines
// decoded into it (m unchanged) and the number of those lines.
func (m *Manifest) summarize(name string, raw []byte) (sessionlog.Decoder, int, error) {
	if len(raw) == 0 {
		return sessionlog.Decoder{}, 0, fmt.Errorf("%s: %w: empty segment", name, ErrInvalid)
	}
	n, err := sessionlog.CommittedLength(name, raw)
	if err != nil {
		return sessionlog.Decoder{}, 0, err
	}
	if n != len(raw) {
		return sessionlog.Decoder{}, 0, fmt.Errorf("%s: %w: segment does not end at a batch boundary (%d of %d bytes committed)", name, ErrInvalid, n, len(raw))
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
		return sessionlog.Decoder{}, 0, err
	}
	if d.Header == nil || d.Header.ID != m.ID {
		return sessionlog.Decoder{}, 0, fmt.Errorf("%s: %w: log header is not that of session %s", name, ErrInvalid, m.ID)
	}
	return d, lines, nil
}

// hashSegment returns the prefix hash of m's log with raw appended, the
// hash of raw alone, and the prefix hash's state to resume from (m
// unchanged).
func (m *Manifest) hashSegment(name string, raw []byte) (prefix, segSHA string, state []byte, err error) {
	h, err := m.hash()
	if err != nil {
		return "", "", nil, err
	}
	h.Write(raw)
	state, err = h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: marshal hash state: %w", name, err)
	}
	prefix = hex.EncodeToString(h.Sum(nil))
	segSHA = prefix // the first segment is the whole prefix: hash it once
	if m.Length > 0 {
		sum := sha256.Sum256(raw)
		segSHA = hex.EncodeToString(sum[:])
	}
	return prefix, segSHA, state, nil
}

func (m *Manifest) hash() (hash.Hash, error) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(m.HashState); err != nil {
		return nil, fmt.Errorf("%w: session %s: hash state: %v", ErrInvalid, m.ID, err)
	}
	return h, nil
}

// Encode returns the manifest's stored form (format Version).
func Encode(m *Manifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	data, err := marshalWire(manifestToWire(m))
	if err != nil {
		return nil, fmt.Errorf("encode manifest of session %s: %w", m.ID, err)
	}
	return data, nil
}

// Decode parses a manifest of any version this package reads and checks
// its invariants.
func Decode(data []byte) (*Manifest, error) {
	version, err := peekVersion(data, "manifest")
	if err != nil {
		return nil, err
	}
	var m *Manifest
	if version >= 3 {
		var w wireManifest
		if err := unmarshalWire(data, "manifest", &w); err != nil {
			return nil, err
		}
		m = w.manifest()
	} else {
		var l legacyManifest
		if err := unmarshalLegacy(data, "manifest", &l); err != nil {
			return nil, err
		}
		m = l.manifest()
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Manifest) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: session %s: %s", ErrInvalid, m.ID, fmt.Sprintf(format, args...))
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
