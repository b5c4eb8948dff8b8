package main

import (
	"context"

	"github.com/panto-dev/panto/agent"
)

// RemoteSession is what the remote index says of one session.
type RemoteSession struct {
	Info   agent.SessionInfo
	Length int64
	SHA256 string
}

// Checkpoint is the hash of a remote session's prefix at a segment
// boundary.
type Checkpoint struct {
	Length int64
	SHA256 string
}

// RemoteCatalog is what sync needs of a bucket; remoteStore adapts
// *objstore.Store to it.
type RemoteCatalog interface {
	// Sessions reads the index: every session with its length and hash,
	// in a number of requests independent of the number of sessions.
	Sessions(ctx context.Context) (map[string]RemoteSession, error)
	// Checkpoints are the prefix hashes at segment boundaries, ascending.
	Checkpoints(ctx context.Context, id string) ([]Checkpoint, error)
	// ReadRaw returns the session's bytes from offset on.
	ReadRaw(ctx context.Context, id string, offset int64) ([]byte, error)
	// AppendRaw appends data as one new segment iff the remote holds
	// exactly expectLength bytes hashing to expectSHA256; otherwise it
	// fails with an error for which IsRemoteChanged is true.
	AppendRaw(ctx context.Context, id string, expectLength int64, expectSHA256 string, data []byte) error
	// IsRemoteChanged reports whether err says the remote was not as
	// expected.
	IsRemoteChanged(err error) bool
	Verify(ctx context.Context, id string) error
	Compact(ctx context.Context, id string) error
	// Flush finishes the index and manifest writes that AppendRaw left to
	// the background.
	Flush(ctx context.Context) error
}
