package manifest

import (
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/sessiongen"
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
