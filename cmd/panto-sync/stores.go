package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// openStores opens the local catalog at --dir (creating the directory
// when create) and the bucket.
func openStores(ctx context.Context, o *options, create bool) (LocalCatalog, RemoteCatalog, error) {
	if !create { // fsjsonl.Open creates a missing directory (mode 0700)
		if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
			return nil, nil, fmt.Errorf("no session catalog at %s: pass --dir DIR (a directory of <id>.jsonl files)", o.Dir)
		}
	}
	local, err := fsjsonl.Open(o.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open the session directory %s: %w", o.Dir, err)
	}
	remote, err := openRemote(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return local, remote, nil
}

// openRemote opens the bucket named by --endpoint and the s3:// URL.
func openRemote(ctx context.Context, o *options) (RemoteCatalog, error) {
	// Sync appends to many sessions: each index shard is written once, at
	// the end of the run (syncer.run flushes), not after every append.
	opts := []objstore.Option{objstore.WithDeferredIndex()}
	if o.Endpoint != "" {
		opts = append(opts, objstore.WithEndpoint(o.Endpoint))
	}
	s, err := objstore.Open(ctx, o.Remote, opts...)
	if err != nil {
		return nil, err
	}
	return remoteStore{s}, nil
}

// remoteStore adapts *objstore.Store to RemoteCatalog.
type remoteStore struct{ s *objstore.Store }

func (r remoteStore) Sessions(ctx context.Context) (map[string]RemoteSession, error) {
	got, err := r.s.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]RemoteSession, len(got))
	for id, rs := range got {
		out[id] = RemoteSession{Info: rs.Info, Length: rs.Length, SHA256: rs.SHA256}
	}
	return out, nil
}

func (r remoteStore) Checkpoints(ctx context.Context, id string) ([]Checkpoint, error) {
	got, err := r.s.Checkpoints(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]Checkpoint, len(got))
	for i, cp := range got {
		out[i] = Checkpoint{Length: cp.Length, SHA256: cp.SHA256}
	}
	return out, nil
}

func (r remoteStore) ReadRaw(ctx context.Context, id string, offset int64) ([]byte, error) {
	return r.s.ReadRaw(ctx, id, offset)
}

func (r remoteStore) AppendRaw(ctx context.Context, id string, expectLength int64, expectSHA256 string, data []byte) error {
	return r.s.AppendRaw(ctx, id, expectLength, expectSHA256, data)
}

func (r remoteStore) Flush(ctx context.Context) error { return r.s.Flush(ctx) }

func (r remoteStore) IsRemoteChanged(err error) bool {
	return errors.Is(err, objstore.ErrRemoteChanged)
}

func (r remoteStore) Verify(ctx context.Context, id string) error { return r.s.Verify(ctx, id) }

func (r remoteStore) Compact(ctx context.Context, id string) error { return r.s.Compact(ctx, id) }
