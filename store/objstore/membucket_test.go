package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// memBucket is a bucket in memory with the conditional semantics of S3
// (bucketChecks holds it to the same table as the real servers): ETags
// are the quoted MD5 of the bytes, a failed condition is errPrecondition,
// an If-Match on a missing object errNotFound. The protocol tests run on
// it, in milliseconds; what S3 servers do is tested against them.
type memBucket struct {
	name   string
	prefix string // "" or ends in "/", as an s3Bucket's

	mu      sync.Mutex
	objects map[string]memObject
}

type memObject struct {
	data     []byte
	etag     string
	modified time.Time
}

var _ bucket = (*memBucket)(nil)

// newMemBucket is an empty bucket; the store's objects go under prefix.
func newMemBucket(name, prefix string) *memBucket {
	return &memBucket{name: name, prefix: prefix, objects: map[string]memObject{}}
}

func (b *memBucket) get(ctx context.Context, key, ifNoneMatch string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[b.prefix+key]
	switch {
	case !ok:
		return nil, "", fmt.Errorf("get %s: %w", key, errNotFound)
	case ifNoneMatch != "" && ifNoneMatch == o.etag:
		return nil, "", fmt.Errorf("get %s: %w", key, errNotModified)
	}
	return slices.Clone(o.data), o.etag, nil
}

func (b *memBucket) head(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("head %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[b.prefix+key]; !ok {
		return fmt.Errorf("head %s: %w", key, errNotFound)
	}
	return nil
}

func (b *memBucket) put(ctx context.Context, key string, data []byte, cond putCond, _ string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[b.prefix+key]
	switch {
	case cond.ifNoneMatch && ok:
		return "", fmt.Errorf("put %s: %w", key, errPrecondition)
	case cond.ifMatch != "" && !ok:
		return "", fmt.Errorf("put %s: %w", key, errNotFound)
	case cond.ifMatch != "" && cond.ifMatch != o.etag:
		return "", fmt.Errorf("put %s: %w", key, errPrecondition)
	}
	sum := md5.Sum(data)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	b.objects[b.prefix+key] = memObject{data: slices.Clone(data), etag: etag, modified: time.Now()}
	return etag, nil
}

func (b *memBucket) delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, b.prefix+key)
	return nil
}

func (b *memBucket) deleteKeys(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %d objects: %w", len(keys), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, key := range keys {
		delete(b.objects, b.prefix+key)
	}
	return nil
}

func (b *memBucket) list(ctx context.Context, prefix, delimiter string) (objects []listed, prefixes []string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for full, o := range b.objects {
		k, ok := strings.CutPrefix(full, b.prefix)
		if !ok || !strings.HasPrefix(k, prefix) {
			continue
		}
		if delimiter != "" {
			if i := strings.Index(k[len(prefix):], delimiter); i >= 0 {
				p := k[:len(prefix)+i+len(delimiter)]
				if !slices.Contains(prefixes, p) {
					prefixes = append(prefixes, p)
				}
				continue
			}
		}
		objects = append(objects, listed{key: k, etag: o.etag, modified: o.modified, size: int64(len(o.data))})
	}
	slices.SortFunc(objects, func(a, b listed) int { return strings.Compare(a.key, b.key) })
	slices.Sort(prefixes)
	return objects, prefixes, nil
}

func (b *memBucket) url(key string) string { return "mem://" + b.name + "/" + b.prefix + key }

func (b *memBucket) explainOpenError(err error) error {
	return fmt.Errorf("%w: %s: %v", ErrOpen, b.url(""), err)
}

// objectsUnder returns a copy of every object, by key from the bucket's
// root (the prefix included), in key order: what a program reading the
// whole bucket sees.
func (b *memBucket) objectsUnder() []MemObject {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]MemObject, 0, len(b.objects))
	for k, o := range b.objects {
		out = append(out, MemObject{Key: k, ETag: o.etag, Data: slices.Clone(o.data)})
	}
	slices.SortFunc(out, func(a, b MemObject) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// MemObject is one object of a memBucket, by key from its root.
type MemObject struct {
	Key, ETag string
	Data      []byte
}

// putUnder stores data under key (from the bucket's root) unconditionally,
// as another program would.
func (b *memBucket) putUnder(key string, data []byte) {
	sum := md5.Sum(data)
	b.mu.Lock()
	b.objects[key] = memObject{data: slices.Clone(data), etag: `"` + hex.EncodeToString(sum[:]) + `"`, modified: time.Now()}
	b.mu.Unlock()
}

// deleteUnder deletes the object key (from the bucket's root).
func (b *memBucket) deleteUnder(key string) {
	b.mu.Lock()
	delete(b.objects, key)
	b.mu.Unlock()
}
