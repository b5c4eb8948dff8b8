package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// memBucket is a bucket in memory with the conditional semantics of S3
// (bucketChecks holds it to the same table as the real servers): ETags
// are the quoted MD5 of the bytes, a failed condition is errPrecondition,
// an If-Match on a missing object errNotFound. The protocol tests run on
// it, in milliseconds; what S3 servers do is tested against them.
type memBucket struct {
	name string

	mu      sync.Mutex
	objects map[string]memObject
}

type memObject struct {
	data        []byte
	etag        string
	contentType string
}

var _ bucket = (*memBucket)(nil)

func newMemBucket(name string) *memBucket {
	return &memBucket{name: name, objects: map[string]memObject{}}
}

func (b *memBucket) get(ctx context.Context, key, ifNoneMatch string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[key]
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
	if _, ok := b.objects[key]; !ok {
		return fmt.Errorf("head %s: %w", key, errNotFound)
	}
	return nil
}

func (b *memBucket) put(ctx context.Context, key string, data []byte, cond putCond, contentType string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[key]
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
	b.objects[key] = memObject{data: slices.Clone(data), etag: etag, contentType: contentType}
	return etag, nil
}

func (b *memBucket) delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, key)
	return nil
}

func (b *memBucket) list(ctx context.Context, prefix, delimiter string) (keys, prefixes []string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.objects {
		if !strings.HasPrefix(k, prefix) {
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
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(prefixes)
	return keys, prefixes, nil
}

func (b *memBucket) url(key string) string { return "mem://" + b.name + "/" + key }

func (b *memBucket) explainOpenError(err error) error {
	return fmt.Errorf("%w: %s: %v", ErrOpen, b.url(""), err)
}

// snapshot returns a copy of every object's bytes, by key.
func (b *memBucket) snapshot() map[string][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]byte, len(b.objects))
	for k, o := range b.objects {
		out[k] = slices.Clone(o.data)
	}
	return out
}
