package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/panto-dev/panto/store"
)

var (
	_ store.ChangeTokener  = (*Store)(nil)
	_ store.ListingTokener = (*Store)(nil)
)

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

// ListingToken names the index as Open read it (store.ListingTokener):
// the bucket, the marker's ETag (a prefix made anew has another) and
// the number and ETag of the newest commit of the log. Every write of
// the index ends with a commit, created once and never replaced, so a
// listing after Open shows that commit's state or a newer one, and
// another Open that reads the same commit reads the same index. It costs
// no request. "" in format 3 (no log), or when Open read no commit.
func (s *Store) ListingToken(ctx context.Context) (string, error) {
	return s.openedToken, nil
}

// noteOpened keeps, at the end of Open (before any write of the Store
// moves its reading on), the token ListingToken returns.
func (s *Store) noteOpened() {
	if !s.indexLog() {
		return
	}
	s.ilog.mu.Lock()
	n, etag, known := s.ilog.n, s.ilog.etag, s.ilog.known
	if st := s.ilog.stored; st != nil && !known {
		n, etag, known = st.n, st.etag, true // kept aside by Open (pageahead.go)
	}
	s.ilog.mu.Unlock()
	if !known || (n > 0 && etag == "") {
		return
	}
	s.markerMu.Lock()
	marker := s.markerEtag
	s.markerMu.Unlock()
	s.openedToken = fmt.Sprintf("objstore %s marker %s commit %d %s", s.b.url(""), marker, n, etag)
}
