package localfirst

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/panto-dev/panto/store"
)

// Dir is the replica directory of the bucket store url
// (s3://BUCKET[/PREFIX]) at endpoint: $XDG_DATA_HOME/panto/replicas/NAME,
// beside the default session directory, one per bucket and prefix. NAME
// is the bucket and prefix made safe for a file name, then a hash of the
// endpoint and url, so that two buckets of one name on two servers (or
// prefixes that read alike once made safe) never share a replica.
func Dir(url, endpoint string) (string, error) {
	sessions, err := store.DefaultDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(sessions), "replicas", replicaName(url, endpoint)), nil
}

func replicaName(url, endpoint string) string {
	readable := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, strings.Trim(strings.TrimPrefix(url, "s3://"), "/"))
	if len(readable) > 80 {
		readable = readable[:80]
	}
	sum := sha256.Sum256([]byte(strings.TrimRight(endpoint, "/") + "\x00" + strings.TrimRight(url, "/")))
	return readable + "-" + hex.EncodeToString(sum[:4])
}
