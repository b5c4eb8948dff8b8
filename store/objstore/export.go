package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/manifest"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// This file is the export side used by panto-sync: raw bytes in, raw
// bytes out, and the hashes that let sync decide "is a prefix" without
// downloading data.

// RemoteSession is what the bucket holds of one session, as the index says.
type RemoteSession struct {
	Info   agent.SessionInfo
	Length int64  // committed raw bytes
	SHA256 string // hex sha256 of raw[0:Length]
}

// Sessions returns every session in the bucket, from the index shards
// alone (a fixed number of GETs, independent of the number of sessions).
// The index may lag behind a session whose writer crashed before updating
// it; Checkpoints and AppendRaw consult the session itself.
func (s *Store) Sessions(ctx context.Context) (map[string]RemoteSession, error) {
	if err := s.settle(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("list remote sessions: %w", err)
	}
	all, err := s.readIndex(ctx, manifest.ShardNames())
	if err != nil {
		return nil, fmt.Errorf("list remote sessions: %w", err)
	}
	out := make(map[string]RemoteSession, len(all))
	for id, e := range all {
		out[id] = RemoteSession{Info: e.Info, Length: e.Length, SHA256: e.SHA256}
	}
	return out, nil
}

// Checkpoint is a prefix of a session's raw bytes at a segment boundary.
type Checkpoint struct {
	Length int64
	SHA256 string
}

// Checkpoints returns the prefix hashes at every segment boundary of
// session id, from its manifest (plus probed segments); ascending by
// Length. Wrapped agent.ErrSessionNotFound if absent.
func (s *Store) Checkpoints(ctx context.Context, id string) ([]Checkpoint, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, err
	}
	m, _, err := s.readManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.catchUpFrom(ctx, m); err != nil {
		return nil, fmt.Errorf("checkpoints of session %s: %w", id, err)
	}
	if m.Length == 0 {
		return nil, agent.NotFoundError(id)
	}
	out := make([]Checkpoint, len(m.Segments))
	for i, seg := range m.Segments {
		out[i] = Checkpoint{Length: seg.End(), SHA256: seg.PrefixSHA256}
	}
	return out, nil
}

// ReadRaw returns the session's raw committed bytes from offset to the
// end, verified against the manifest hashes. Only the segments holding
// bytes at or after offset are read.
func (s *Store) ReadRaw(ctx context.Context, id string, offset int64) ([]byte, error) {
	if err := agent.ValidateSessionID(id); err != nil {
		return nil, err
	}
	m, raw, start, err := s.readLog(ctx, id, offset)
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	if m.Length == 0 {
		return nil, agent.NotFoundError(id)
	}
	if offset < 0 || offset > m.Length {
		return nil, fmt.Errorf("read session %s: offset %d outside its %d bytes", id, offset, m.Length)
	}
	return raw[offset-start:], nil
}

// AppendRaw appends data (complete committed lines in the sessionlog
// format; must start with the header line when expectLength is 0) as ONE
// new segment, if and only if the remote holds exactly expectLength bytes
// whose prefix hash is expectSHA256 ("" when expectLength is 0). Otherwise
// ErrRemoteChanged (wrapped, with what the remote holds). Updates manifest
// and index like AppendMessages.
//
// AppendRaw is idempotent: when the segment at expectLength already holds
// exactly data (an earlier attempt whose response was lost, or another
// push of the same bytes), it succeeds without writing.
//
// data is read during the call and not retained after it returns, so the
// caller may reuse it (panto-sync recycles its read buffers): a push
// copied every byte it sent once more for nothing.
func (s *Store) AppendRaw(ctx context.Context, id string, expectLength int64, expectSHA256 string, data []byte) error {
	if err := agent.ValidateSessionID(id); err != nil {
		return err
	}
	if len(data) == 0 {
		return fmt.Errorf("append to session %s: no data", id)
	}
	if n, err := sessionlog.CommittedLength(id, data); err != nil || n != len(data) {
		if err == nil {
			err = fmt.Errorf("data does not end at a batch boundary (%d of %d bytes committed)", n, len(data))
		}
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	return s.appendBatch(ctx, id, func(header bool) ([]byte, error) {
		return data, nil
	}, &expectation{length: expectLength, sha256: expectSHA256})
}

// Verify re-reads every segment of session id, checking hashes, chaining
// and that the bytes parse; returns a descriptive error naming the object
// on failure.
func (s *Store) Verify(ctx context.Context, id string) error {
	if err := agent.ValidateSessionID(id); err != nil {
		return err
	}
	m, raw, _, err := s.readLog(ctx, id, 0)
	if err != nil {
		return fmt.Errorf("verify session %s: %w", id, err)
	}
	if m.Length == 0 {
		return agent.NotFoundError(id)
	}
	h := sha256.New()
	var pos int64
	for _, seg := range m.Segments {
		h.Write(raw[pos:seg.End()])
		pos = seg.End()
		if got := hex.EncodeToString(h.Sum(nil)); got != seg.PrefixSHA256 {
			return fmt.Errorf("verify session %s: %s: %w: prefix hash %s, the manifest says %s",
				id, s.objectURL(s.sessionKey(id, seg.Name())), ErrCorrupt, got, seg.PrefixSHA256)
		}
		if n := bytes.Count(raw[seg.Start:seg.End()], []byte{'\n'}); n != seg.Lines {
			return fmt.Errorf("verify session %s: %s: %w: %d lines, the manifest says %d",
				id, s.objectURL(s.sessionKey(id, seg.Name())), ErrCorrupt, n, seg.Lines)
		}
	}
	log, err := sessionlog.Parse(s.objectURL(s.sessionKey(id, "")), raw)
	if err != nil {
		return fmt.Errorf("verify session %s: %w: %w", id, ErrCorrupt, err)
	}
	if log == nil || int64(log.Committed) != m.Length || !sameInfo(log.Info, m.Info()) {
		return fmt.Errorf("verify session %s: %w: the parsed log does not match the manifest's summary", id, ErrCorrupt)
	}
	return nil
}

func sameInfo(a, b agent.SessionInfo) bool {
	ok := a.Created.Equal(b.Created) && a.Modified.Equal(b.Modified)
	a.Created, a.Modified = b.Created, b.Modified
	return ok && a == b
}
