package manifest

import (
	"bytes"
	"testing"
	"time"
)

// FuzzManifest: Decode never panics, and what it accepts re-encodes to a
// manifest that decodes to the same thing.
func FuzzManifest(f *testing.F) {
	m, _ := sample(f)
	good, _ := Encode(m)
	f.Add(good)
	empty, _ := Encode(New("abc"))
	f.Add(empty)
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(m)
		if err != nil {
			t.Fatalf("accepted manifest does not re-encode: %v", err)
		}
		m2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		third, _ := Encode(m2)
		if !bytes.Equal(again, third) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzIndexShard: DecodeIndexShard never panics (on compressed or raw
// input), and what it accepts round-trips.
func FuzzIndexShard(f *testing.F) {
	c, err := NewCodec()
	if err != nil {
		f.Fatal(err)
	}
	m, _ := sample(f)
	s := NewIndexShard(ShardOf(m.ID))
	s.Put(IndexEntry{Info: m.Info(), Length: m.Length, SHA256: m.SHA256})
	data, _ := c.EncodeIndexShard("index/x.json.zst", s)
	f.Add(data)
	empty, _ := c.EncodeIndexShard("index/x.json.zst", NewIndexShard("a"))
	f.Add(empty)
	base := s.Clone()
	base.Through, base.Pruned, base.Purge, base.Written = 32, 16, 24, time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	folded, _ := c.EncodeIndexShard("index/x.json.zst", base)
	f.Add(folded)
	f.Add(c.Compress([]byte(`{"version":1,"shard":"0","sessions":{"x":{}}}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := c.DecodeIndexShard("index/x.json.zst", data)
		if err != nil {
			return
		}
		again, err := c.EncodeIndexShard("index/x.json.zst", s)
		if err != nil {
			t.Fatalf("accepted shard does not re-encode: %v", err)
		}
		if _, err := c.DecodeIndexShard("index/x.json.zst", again); err != nil {
			t.Fatalf("re-encoded shard does not decode: %v", err)
		}
	})
}
