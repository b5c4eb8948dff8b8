package manifest

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/internal/sessionlog"
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

// FuzzIndexShard: DecodeIndexShard never panics (on a shard's JSON,
// compressed in the target, or on any frame), and what it accepts
// round-trips: re-encoded and decoded, it is
// the same shard (every entry, tombstone, number and time), and the
// encoding is stable from then on.
func FuzzIndexShard(f *testing.F) {
	c, err := NewCodec()
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range shardSeeds(f, c) {
		f.Add(seed)
	}
	f.Add(c.Compress([]byte(`{"version":1,"shard":"0","sessions":{"x":{}}}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := c.DecodeIndexShard(shardName, stored(c, data))
		if err != nil {
			return
		}
		again, err := c.EncodeIndexShard(shardName, s)
		if err != nil {
			t.Fatalf("accepted shard does not re-encode: %v", err)
		}
		s2, err := c.DecodeIndexShard(shardName, again)
		if err != nil {
			t.Fatalf("re-encoded shard does not decode: %v", err)
		}
		sameShard(t, "re-decoded", s, s2)
		third, _ := c.EncodeIndexShard(shardName, s2)
		if !bytes.Equal(mustDecompress(t, c, again), mustDecompress(t, c, third)) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzIndexFold: folding deltas into a base (IndexShard.Apply, what every
// reader does and what a fold writes as the next base) keeps the index's
// promises whatever the documents hold:
//   - an entry never goes back: a session the base lists is listed after
//     with at least its length, unless a delta buried it;
//   - a buried session stays buried and is never listed;
//   - every entry of a delta is listed after (or a longer one is, or the
//     session is buried);
//   - folding a delta twice is folding it once (a reader that re-reads
//     a delta it applied);
//   - a reader of a folded base (stored and read back) that applies the
//     remaining delta sees what a reader of the unfolded deltas sees.
//
// Each input is a shard document (its JSON, or a zstd frame as the
// bucket holds them); deltas of another shard are skipped, as a reader
// refuses them. The seed corpus is in testdata/fuzz/FuzzIndexFold.
func FuzzIndexFold(f *testing.F) {
	c, err := NewCodec()
	if err != nil {
		f.Fatal(err)
	}
	seeds := shardSeeds(f, c)
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+1)%len(seeds)], seeds[(i+2)%len(seeds)])
	}
	f.Fuzz(func(t *testing.T, baseData, d1Data, d2Data []byte) {
		base, err1 := c.DecodeIndexShard(shardName, stored(c, baseData))
		d1, err2 := c.DecodeIndexShard(shardName, stored(c, d1Data))
		d2, err3 := c.DecodeIndexShard(shardName, stored(c, d2Data))
		if err1 != nil || err2 != nil || err3 != nil || d1.Shard != base.Shard || d2.Shard != base.Shard {
			return
		}
		v := base.Clone()
		v.Apply(d1)
		for id, e := range base.Sessions {
			if _, gone := v.Tombstones[id]; gone {
				continue
			}
			if after, ok := v.Sessions[id]; !ok || after.Length < e.Length {
				t.Fatalf("session %s went back from %d bytes to %d (listed %v)", id, e.Length, after.Length, ok)
			}
		}
		for id := range base.Tombstones {
			if _, ok := v.Tombstones[id]; !ok {
				t.Fatalf("session %s was unburied", id)
			}
		}
		for id := range v.Tombstones {
			if _, ok := v.Sessions[id]; ok {
				t.Fatalf("buried session %s is listed", id)
			}
		}
		for id, e := range d1.Sessions {
			_, gone := v.Tombstones[id]
			if after, ok := v.Sessions[id]; !gone && (!ok || after.Length < e.Length) {
				t.Fatalf("the delta's entry of %s (%d bytes) is not listed after the fold", id, e.Length)
			}
		}
		twice := v.Clone()
		twice.Apply(d1)
		sameShard(t, "a delta folded twice", v, twice)

		// A reader of the deltas, and a reader of the base a fold
		// wrote of the first, agree after the second.
		read := v.Clone()
		read.Apply(d2)
		v.Through = max(v.Through, v.Pruned) + 1
		stored, err := c.EncodeIndexShard(shardName, v)
		if err != nil {
			t.Fatalf("a folded base does not encode: %v", err)
		}
		folded, err := c.DecodeIndexShard(shardName, stored)
		if err != nil {
			t.Fatalf("a folded base does not decode: %v", err)
		}
		folded.Apply(d2)
		folded.Through, folded.Pruned, folded.Purge, folded.Written = read.Through, read.Pruned, read.Purge, read.Written
		sameShard(t, "the folded base, the next delta applied", read, folded)
	})
}

// FuzzMarker: DecodeMarker never panics; it refuses with ErrNotMarker,
// ErrNewerVersion, or ErrInvalid (a marker whose encryption section
// contradicts what it requires); what it accepts is a marker of a version
// this package reads, requiring only features it knows, and re-encodes to
// the same marker.
func FuzzMarker(f *testing.F) {
	f.Add(EncodeMarker(Marker{Version: Version}))
	f.Add(EncodeMarker(Marker{Version: Version, Requires: []string{FeatureTombstones}}))
	f.Add(EncodeMarker(Marker{Version: Version, Requires: []string{FeatureEncryption}, Encryption: &Encryption{Scheme: knownSchemes[0], KeyID: "3f9a12c4d5e6f708"}}))
	f.Add(EncodeMarker(Marker{Version: 1}))
	f.Add([]byte(`{"format":"panto-objstore","version":99}`))
	f.Add([]byte(`{"format":"panto-objstore","version":3,"requires":["teleportation"]}`))
	f.Add([]byte(`{"format":"panto-objstore","version":3,"requires":["encryption"]}`))
	f.Add(EncodeMarker(Marker{Version: Version, Requires: []string{FeatureIndexBases, FeatureEncryption}, Encryption: &Encryption{Scheme: seal.Scheme, KeyID: "k1"}}))
	f.Add([]byte(`{"format":"panto-objstore","version":3,"requires":["encryption"],"encryption":{"scheme":"rot13","key_id":"00"}}`))
	f.Add([]byte(`{"format":"other","version":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMarker(data)
		if err != nil {
			if !errors.Is(err, ErrNotMarker) && !errors.Is(err, ErrNewerVersion) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeMarker: %v, want ErrNotMarker, ErrNewerVersion or ErrInvalid", err)
			}
			return
		}
		if m.Version < 1 || m.Version > Version {
			t.Fatalf("accepted a marker of version %d", m.Version)
		}
		for _, feat := range m.Requires {
			if !slices.Contains(knownFeatures, feat) {
				t.Fatalf("accepted a marker requiring %q", feat)
			}
		}
		if (m.Encryption != nil) != slices.Contains(m.Requires, FeatureEncryption) {
			t.Fatalf("accepted a marker whose encryption %+v disagrees with its requirements %v", m.Encryption, m.Requires)
		}
		if m.Encryption != nil && (m.Encryption.Scheme != seal.Scheme || m.Encryption.KeyID == "") {
			t.Fatalf("accepted a marker encrypted with %+v", *m.Encryption)
		}
		m2, err := DecodeMarker(EncodeMarker(m))
		if err != nil || m2.Version != m.Version || !slices.Equal(m2.Requires, m.Requires) || (m.Encryption == nil) != (m2.Encryption == nil) || m.Encryption != nil && *m.Encryption != *m2.Encryption {
			t.Fatalf("marker %+v re-decodes to %+v, %v", m, m2, err)
		}
	})
}

// FuzzTombstone: DecodeTombstone never panics; what it accepts has an id
// and re-encodes to the same tombstone, and is not also a log (the
// object at a segment's name is one or the other, never both).
func FuzzTombstone(f *testing.F) {
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	f.Add(EncodeTombstone(Tombstone{ID: "0123abcd", Deleted: at, Length: 650, SHA256: "ab"}))
	f.Add(EncodeTombstone(Tombstone{ID: "x", Deleted: at}))
	f.Add([]byte(`{"format":"panto-tombstone","id":""}`))
	f.Add([]byte(`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","more":0}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, ok := DecodeTombstone(data)
		if !ok {
			return
		}
		if ts.ID == "" {
			t.Fatal("accepted a tombstone without an id")
		}
		if log, err := sessionlog.Parse("fuzz", data); err == nil && log != nil {
			t.Fatalf("both a tombstone and a log of %d committed bytes: %q", log.Committed, data)
		}
		again, ok := DecodeTombstone(EncodeTombstone(ts))
		if !ok || again.ID != ts.ID || !again.Deleted.Equal(ts.Deleted) || again.Length != ts.Length || again.SHA256 != ts.SHA256 {
			t.Fatalf("tombstone %+v re-decodes to %+v (%v)", ts, again, ok)
		}
	})
}

// stored is data as a shard is stored: a zstd frame as it is, anything
// else compressed, so that the fuzzer mutates the JSON inside (a mutated
// frame almost never passes its checksum).
// shardName is the object name the fuzzed shards are sealed to and read
// as (a plaintext codec ignores it).
const shardName = "index/x.json.zst"

func stored(c *Codec, data []byte) []byte {
	if bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		return data
	}
	return c.Compress(data)
}

// shardSeeds are stored shards: a delta of one session, an empty one, a
// base that folded deltas and buried a session.
func shardSeeds(tb testing.TB, c *Codec) [][]byte {
	m, _ := sample(tb)
	s := NewIndexShard(ShardOf(m.ID))
	s.Put(IndexEntry{Info: m.Info(), Length: m.Length, SHA256: m.SHA256})
	data, _ := c.EncodeIndexShard(shardName, s)
	empty, _ := c.EncodeIndexShard(shardName, NewIndexShard(ShardOf(m.ID)))
	base := s.Clone()
	base.Through, base.Pruned, base.Purge, base.Written = 32, 16, 24, time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	base.Bury(Tombstone{ID: "0fed", Deleted: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), Length: 10, SHA256: m.SHA256})
	folded, _ := c.EncodeIndexShard(shardName, base)
	return [][]byte{data, empty, folded}
}

// sameShard fails unless a and b are the same shard: the same numbers,
// entries and tombstones, times compared as instants.
func sameShard(t *testing.T, what string, a, b *IndexShard) {
	t.Helper()
	if !reflect.DeepEqual(normShard(a), normShard(b)) {
		t.Fatalf("%s: shards differ:\n%+v\n%+v", what, normShard(a), normShard(b))
	}
}

// normShard is s with every time in UTC (a time read back from its RFC
// 3339 form is the same instant in another zone) and empty maps as nil.
func normShard(s *IndexShard) *IndexShard {
	n := s.Clone()
	n.Written = n.Written.UTC()
	for id, e := range n.Sessions {
		e.Info.Created, e.Info.Modified = e.Info.Created.UTC(), e.Info.Modified.UTC()
		n.Sessions[id] = e
	}
	for id, ts := range n.Tombstones {
		ts.Deleted = ts.Deleted.UTC()
		n.Tombstones[id] = ts
	}
	if len(n.Tombstones) == 0 {
		n.Tombstones = nil
	}
	if len(n.Sessions) == 0 {
		n.Sessions = nil
	}
	return n
}

func mustDecompress(t *testing.T, c *Codec, data []byte) []byte {
	t.Helper()
	raw, err := c.Decompress(data)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// FuzzCatalog: DecodeCatalog never panics on what a machine's disk may
// hold (this version's gob, an earlier version's JSON, anything torn or
// foreign), and what it accepts encodes again to a catalog that decodes
// to the same thing.
func FuzzCatalog(f *testing.F) {
	c, err := NewCodec()
	if err != nil {
		f.Fatal(err)
	}
	m, _ := sample(f)
	doc := &IndexShard{Shard: LogName, Through: 3, Written: t0, Sessions: map[string]IndexEntry{m.ID: m.Entry()}}
	asGob, err := c.EncodeCatalog("catalog", doc)
	if err != nil {
		f.Fatal(err)
	}
	asJSON, err := c.EncodeIndexShard("catalog", doc)
	if err != nil {
		f.Fatal(err)
	}
	raw, _ := c.Decompress(asGob)
	f.Add(asGob)
	f.Add(asJSON)
	f.Add(raw[:len(raw)/2])
	f.Add([]byte(catalogMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := c.DecodeCatalog("catalog", data)
		if err != nil {
			return
		}
		again, err := c.EncodeCatalog("catalog", got)
		if err != nil {
			t.Fatalf("accepted, then not encoded: %v", err)
		}
		back, err := c.DecodeCatalog("catalog", again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back, got)
		}
	})
}
