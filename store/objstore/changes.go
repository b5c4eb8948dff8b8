package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
func (s *Store) ChangeToken(ctx context.Context) (string, error) {
	in := &s3.ListObjectsV2Input{Bucket: &s.b.name, Prefix: aws.String(s.b.key("index/"))}
	var lines []string
	p := s3.NewListObjectsV2Paginator(s.b.api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("check s3://%s/%s for changes: %w", s.b.name, s.b.prefix, classify(err))
		}
		for _, o := range page.Contents {
			lines = append(lines, aws.ToString(o.Key)+"\x00"+aws.ToString(o.ETag))
		}
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
