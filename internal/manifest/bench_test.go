package manifest

import (
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
