package manifest

import (
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

// BenchmarkAppend: Append of one realistic 200 KB session (the whole log
// as one segment, as panto-sync's push of a new session does): the line
// validation, the summary fold and the hashes.
func BenchmarkAppend(b *testing.B) {
	const id = "0123456789abcdef0123456789abcdef"
	raw, err := sessiongen.New(1).Session(id, 200_000, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(id).Append(SegmentName(0), raw, int64(len(raw)/5)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompressLevels compares zstd settings on a realistic 200 KB
// session: time per segment and stored/raw (the numbers behind Codec's
// choice of levels).
func BenchmarkCompressLevels(b *testing.B) {
	raw, err := sessiongen.New(3).Session("0123456789abcdef0123456789abcdef", 200_000, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []zstd.EOption
	}{
		{"default", []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault)}},
		{"default-lowmem", []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithLowerEncoderMem(true)}},
		{"fastest", []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest)}},
		{"fastest-lowmem", []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true)}},
		{"better", []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression)}},
		{"default-nocrc", []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			enc, err := zstd.NewWriter(nil, c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			var out []byte
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				out = enc.EncodeAll(raw, out[:0])
			}
			b.ReportMetric(float64(len(out))/float64(len(raw)), "stored/raw")
		})
	}
}

// BenchmarkCatalogDecode: decoding a catalog of 100,000 entries, each
// with a full summary and the state an append resumes from, as a sync
// (and a listing the newest commit cannot answer) reads it from a
// machine's disk: in the bucket's JSON form, and as EncodeCatalog keeps
// it.
func BenchmarkCatalogDecode(b *testing.B) {
	c, err := NewCodec()
	if err != nil {
		b.Fatal(err)
	}
	m, _ := sample(b)
	m.Decoder.Info = filledInfo(m.ID)
	base := m.Entry()
	doc := &IndexShard{Shard: LogName, Through: 7, Written: t0, Sessions: map[string]IndexEntry{}}
	for i := range 100_000 {
		e := base
		e.Info.ID = fmt.Sprintf("%032x", i*7919+1)
		e.Info.Modified = t0.Add(time.Duration(i) * time.Second)
		e.Info.LastUserMessage = fmt.Sprintf("question %d about the thing", i)
		doc.Sessions[e.Info.ID] = e
	}
	asJSON, err := c.EncodeIndexShard("catalog", doc)
	if err != nil {
		b.Fatal(err)
	}
	asGob, err := c.EncodeCatalog("catalog", doc)
	if err != nil {
		b.Fatal(err)
	}
	for _, form := range []struct {
		name string
		data []byte
	}{{"json", asJSON}, {"gob", asGob}} {
		b.Run(form.name, func(b *testing.B) {
			b.ReportMetric(float64(len(form.data)), "stored-bytes")
			for b.Loop() {
				got, err := c.DecodeCatalog("catalog", form.data)
				if err != nil || len(got.Sessions) != len(doc.Sessions) {
					b.Fatal(err)
				}
			}
		})
	}
}
