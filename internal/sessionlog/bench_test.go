package sessionlog_test

import (
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

// BenchmarkSummarize: SummarizeLine over every line of a realistic 1 MB
// session (tool results, code and prose inside content strings), as
// manifest.Append validates a pushed segment.
func BenchmarkSummarize(b *testing.B) {
	const id = "0123456789abcdef0123456789abcdef"
	raw, err := sessiongen.New(1).Session(id, 1_000_000, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		d := sessionlog.Decoder{Name: "bench"}
		err := sessionlog.Lines(raw, func(line []byte) error {
			_, err := d.SummarizeLine(line)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
