package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/panto-dev/panto/store"
)

var _ store.ChangeTokener = (*Store)(nil)

// ChangeToken returns a token that differs from the last one whenever the
// sessions the Store lists may have changed: the hash of the names and
// ETags of the index objects (every append, title and deletion rewrites
// an index shard, conditionally, before it is listed; §P2). It is one
// LIST request of the index prefix (a page holds 1,000 objects; a prefix
// keeps 16 shards and a few legacy deltas), where reading the index is
// two GETs per shard: for a process that polls an idle bucket (panto-sync
// watch). A change it reports may be none (a fold, a pruning); none it
// misses. It is the one listing of a routine path (§P6 otherwise holds),
// and bounded.
//
// In format 4 it lists the index log alone (every write of the index
// ends with a commit there; the log is pruned to its last 64 to 128
// commits): the newest commit's name and ETag.
func (s *Store) ChangeToken(ctx context.Context) (string, error) {
	prefix := "index/"
	if s.indexLog() {
		prefix = "index/log/"
	}
	objects, _, err := s.b.list(ctx, prefix, "")
	if err != nil {
		return "", fmt.Errorf("check %s for changes: %w", s.b.url(""), err)
	}
	h := sha256.New()
	for _, o := range objects { // in lexical order
		h.Write([]byte(o.key + "\x00" + o.etag + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
