package objstore

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/panto-dev/panto/internal/manifest"
)

// segmentCacheMax bounds the raw bytes a Store keeps of the segments it
// wrote or read (segmentCache): many times a writer's compaction run of
// small segments (33 turns' worth, a few hundred KB), and at most a
// rounding error beside a load's read-ahead (readAheadBytes, per reader).
const segmentCacheMax = 16 << 20

// segmentCache keeps the raw bytes of the segments this Store appended
// or read and verified, up to segmentCacheMax, so that a writer's
// compaction merges what the load of `panto -c` and the turn's appends
// had in hand instead of reading it from the bucket again (§P5): a
// compaction turn of a long session read 33 segments twice. The oldest
// go first. An entry is used only if it is what the manifest being
// compacted lists (length and sha256), so a stale one costs only its
// memory.
type segmentCache struct {
	mu    sync.Mutex
	size  int64
	order []string // keys, oldest first; a key dropped or put again may stay behind
	raws  map[string][]byte
}

// put keeps raw as the bytes of the object key. The caller must not
// change raw afterwards.
func (c *segmentCache) put(key string, raw []byte) {
	if int64(len(raw)) > segmentCacheMax/4 {
		return // a large segment is never merged again (mergeRuns)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raws == nil {
		c.raws = map[string][]byte{}
	}
	if old, ok := c.raws[key]; ok {
		c.size -= int64(len(old))
	}
	c.raws[key] = raw
	c.size += int64(len(raw))
	c.order = append(c.order, key)
	for c.size > segmentCacheMax && len(c.order) > 0 {
		oldest := c.order[0]
		c.order = c.order[1:]
		if raw, ok := c.raws[oldest]; ok {
			c.size -= int64(len(raw))
			delete(c.raws, oldest)
		}
	}
	if len(c.order) > 4*len(c.raws)+64 { // compact the keys dropped
		kept := c.order[:0]
		seen := map[string]bool{}
		for _, k := range c.order {
			if _, ok := c.raws[k]; ok && !seen[k] {
				seen[k] = true
				kept = append(kept, k)
			}
		}
		c.order = kept
	}
}

// get returns the bytes kept of object key if they are seg's.
func (c *segmentCache) get(key string, seg manifest.Segment) ([]byte, bool) {
	c.mu.Lock()
	raw, ok := c.raws[key]
	c.mu.Unlock()
	if !ok || int64(len(raw)) != seg.Length {
		return nil, false
	}
	sum := sha256.Sum256(raw)
	return raw, hex.EncodeToString(sum[:]) == seg.SHA256
}

// has reports whether bytes of object key are kept (they may not be
// what a manifest lists: get checks).
func (c *segmentCache) has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.raws[key]
	return ok
}

// drop forgets the objects keys (replaced by a compaction).
func (c *segmentCache) drop(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if raw, ok := c.raws[k]; ok {
			c.size -= int64(len(raw))
			delete(c.raws, k)
		}
	}
}
