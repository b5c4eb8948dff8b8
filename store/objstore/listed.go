package objstore

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/store"
)

// This file is the read of a session as the index listed it
// (store.ListedReader): what a bulk copy out of the bucket (panto-sync
// pull, copy) reads, in about one GET per session.

var _ store.ListedReader = (*Store)(nil)

// ReadListed returns a reader of session id's committed bytes from
// offset from up to listed, the checkpoint this Store's last Logs gave
// it, and listed; every byte is checked before the reader returns it
// (§P7). The session's index entry behind that checkpoint names its
// segments (the stored manifest's, and the tail after it:
// Resume.Tail), so they are all fetched at once, with the manifest when
// one is stored, and nothing else: not the probe past the entry's end
// that ReadLog sends to find segments committed after the index was
// written (§P4). A copy so mirrors the index's state: a session
// appended since its entry was written comes as of its entry, a prefix
// of the log that the next copy completes (docs/DESIGN.md §6).
//
// When the listing did not give this checkpoint, or the entry does not
// say where its segments are, or they do not end where it says (a
// compaction, a deletion, damage since), it is ReadLog: the end of the
// log as it is now, and the error that explains what is wrong.
func (s *Store) ReadListed(ctx context.Context, id string, from int64, listed store.Checkpoint) (io.ReadCloser, store.Checkpoint, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, store.Checkpoint{}, err
	}
	if e, ok := s.listedEntry(id); ok && e.Length == listed.Length && e.SHA256 == listed.SHA256 && from >= 0 && from < e.Length {
		r, err := s.readIndexed(ctx, id, from, e)
		if err == nil {
			return r, listed, nil
		}
		if ctx.Err() != nil {
			return nil, store.Checkpoint{}, fmt.Errorf("read session %s: %w", id, ctx.Err())
		}
	}
	return s.ReadLog(ctx, id, from)
}

// listedEntry is session id's entry in what the last Logs listed.
func (s *Store) listedEntry(id string) (manifest.IndexEntry, bool) {
	all := s.listing.Load()
	if all == nil {
		return manifest.IndexEntry{}, false
	}
	e, ok := (*all)[id]
	return e, ok
}

// errNotAsIndexed: the segments are not where an index entry says
// (ReadListed then reads the session as ReadLog does).
var errNotAsIndexed = errors.New("the segments are not as the index entry says")

// readIndexed reads session id from offset from up to the end of its
// index entry e, from the segments e names: those the stored manifest
// lists (when e says one is stored) up to e's end, each checked against
// the manifest as it is read, and the tail after them (Resume.Tail),
// fetched whole before the first byte of it is returned and checked by
// hashing on from the manifest's hash state to e's sha256. Only that
// hash: e vouches for the bytes (its writer decoded every line before
// it wrote them), so the lines are not decoded here; the destination
// decodes them once, as it appends them.
func (s *Store) readIndexed(ctx context.Context, id string, from int64, e manifest.IndexEntry) (*logReader, error) {
	rs := e.Resume
	tail := rs.TailOffsets()
	switch {
	case rs.Segments < 1 || len(tail) != rs.Segments-rs.Stored:
		return nil, errNotAsIndexed
	case rs.Stored == 0 && (len(tail) == 0 || tail[0] != 0):
		return nil, errNotAsIndexed
	case len(tail) > 0 && e.Length-tail[0] > readAheadBytes/2:
		// A tail held whole in memory until it is checked: a larger one
		// is ReadLog's, which keeps at most this much.
		return nil, errNotAsIndexed
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel() // the GETs a manifest written since made useless
	keys := make([]string, len(tail))
	for i, o := range tail {
		keys[i] = s.sessionKey(id, manifest.SegmentName(o))
	}
	early := s.startGets(gctx, keys...)
	m := manifest.New(id)
	if rs.Stored > 0 {
		var err error
		if m, _, err = s.readManifest(ctx, id); err != nil {
			return nil, err
		}
	}
	r := newLogReader(ctx, s, id, from)
	if err := s.addIndexed(ctx, r, m, e, from, early); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// addIndexed adds to r the segments of session m.ID between from and
// e's end: those the stored manifest m lists, then the tail after m.
func (s *Store) addIndexed(ctx context.Context, r *logReader, m *manifest.Manifest, e manifest.IndexEntry, from int64, early earlyGets) error {
	for _, seg := range m.Segments {
		if seg.End() > e.Length {
			break
		}
		if seg.End() == e.Length && seg.PrefixSHA256 != e.SHA256 {
			return errNotAsIndexed
		}
		if seg.End() <= from {
			continue
		}
		data, ok, gerr := early.take(ctx, s.sessionKey(m.ID, seg.Name()))
		if !ok {
			r.add(seg, nil)
			continue
		}
		raw, err := s.listedSegment(ctx, m.ID, seg, data, gerr)
		if err != nil {
			return err
		}
		r.add(seg, raw)
	}
	at := min(m.Length, e.Length)
	if at > 0 && !endsSegment(m, at) {
		return errNotAsIndexed
	}
	if at == e.Length {
		return nil
	}
	tail, err := s.indexedTail(ctx, m, e, early)
	if err != nil {
		return err
	}
	for _, f := range tail {
		if f.seg.End() > from {
			r.add(f.seg, f.raw)
		}
	}
	return nil
}

// endsSegment reports whether a segment of m ends at offset at.
func endsSegment(m *manifest.Manifest, at int64) bool {
	for _, seg := range m.Segments {
		if seg.End() == at {
			return true
		}
	}
	return false
}

// indexedTail returns the segments e's tail names after m's end, up to
// e's end (their early GETs), once they hash on from m to e's sha256.
func (s *Store) indexedTail(ctx context.Context, m *manifest.Manifest, e manifest.IndexEntry, early earlyGets) ([]fetched, error) {
	offs := e.Resume.TailOffsets()
	for len(offs) > 0 && offs[0] < m.Length {
		offs = offs[1:] // listed by a manifest written after e
	}
	if len(offs) == 0 || offs[0] != m.Length {
		return nil, errNotAsIndexed
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(m.HashState); err != nil {
		return nil, errNotAsIndexed
	}
	out := make([]fetched, len(offs))
	for i, o := range offs {
		end := e.Length
		if i+1 < len(offs) {
			end = offs[i+1]
		}
		key := s.sessionKey(m.ID, manifest.SegmentName(o))
		data, err := early.get(ctx, s, key)
		if err != nil {
			return nil, err
		}
		raw, err := s.codec.DecodeSegment(key, data)
		if err != nil || int64(len(raw)) != end-o {
			return nil, errNotAsIndexed
		}
		h.Write(raw)
		out[i] = fetched{seg: manifest.Segment{Start: o, Length: end - o, Compressed: int64(len(data))}, raw: raw}
	}
	if hex.EncodeToString(h.Sum(nil)) != e.SHA256 {
		return nil, errNotAsIndexed
	}
	return out, nil
}
