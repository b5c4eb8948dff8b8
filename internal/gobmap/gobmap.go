// Package gobmap writes a large map as a stream of small gob messages
// and reads it back, for the caches panto keeps on a machine's disk (the
// directory's summary cache, a bucket's catalog).
//
// One gob message of a whole map is read into one buffer before it is
// decoded, and encoding/gob grows that buffer by appending chunks (so
// that a torn length cannot allocate gigabytes): a 60 MB cache of
// 100,000 sessions cost a no-op sync about 360 MB of allocations and
// their garbage collection (BENCHMARKS.md, "A no-op sync of 100,000 sessions … the caches in chunks").
// Messages of at most Chunk entries keep each buffer small, and the
// decoder reads straight from the file. A chunk is a slice of pairs, not
// a map: gob makes a map of whatever size a message states before it
// reads an entry (a damaged cache of a few bytes could ask for
// gigabytes), a slice only as large as it can check.
package gobmap

import (
	"encoding/gob"
	"errors"
	"fmt"
)

// Chunk is the most entries one message holds.
const Chunk = 1024

// maxHint is the most entries Decode makes room for before they arrive:
// a catalog of 100,000 sessions is read without growing its map.
const maxHint = 1 << 17

// ErrShort: the stream ended, or a chunk came empty, before the count of
// entries its first message promised.
var ErrShort = errors.New("gobmap: fewer entries than the stream promised")

// pair is one entry of a chunk.
type pair[K comparable, V any] struct {
	K K
	V V
}

// Encode writes m to enc: its length, then its entries in messages of at
// most Chunk.
func Encode[K comparable, V any](enc *gob.Encoder, m map[K]V) error {
	if err := enc.Encode(len(m)); err != nil {
		return fmt.Errorf("gobmap: encode length: %w", err)
	}
	chunk := make([]pair[K, V], 0, min(len(m), Chunk))
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		if err := enc.Encode(chunk); err != nil {
			return fmt.Errorf("gobmap: encode entries: %w", err)
		}
		clear(chunk) // no references held past their message
		chunk = chunk[:0]
		return nil
	}
	for k, v := range m {
		chunk = append(chunk, pair[K, V]{k, v})
		if len(chunk) == Chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// Decode reads a map Encode wrote to dec. A key given twice keeps its
// last value, as a map in one message would.
func Decode[K comparable, V any](dec *gob.Decoder) (map[K]V, error) {
	var n int
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("gobmap: decode length: %w", err)
	}
	if n < 0 {
		return nil, fmt.Errorf("gobmap: a length of %d", n)
	}
	// The length sizes the map only up to maxHint: a damaged stream may
	// promise any number. Past it the map grows as entries arrive.
	m := make(map[K]V, min(n, maxHint))
	// One chunk's slice serves every message, zeroed before each: gob
	// leaves a field a message omits (its zero value) as it finds it.
	var chunk []pair[K, V]
	for read := 0; read < n; {
		chunk = chunk[:cap(chunk)]
		clear(chunk)
		if err := dec.Decode(&chunk); err != nil {
			return nil, fmt.Errorf("%w: %d of %d: %w", ErrShort, read, n, err)
		}
		if len(chunk) == 0 || len(chunk) > Chunk {
			return nil, fmt.Errorf("%w: a message of %d entries after %d of %d", ErrShort, len(chunk), read, n)
		}
		for _, p := range chunk {
			m[p.K] = p.V
		}
		read += len(chunk)
	}
	return m, nil
}
