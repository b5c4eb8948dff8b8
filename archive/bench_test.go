package archive_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/panto-dev/panto/archive"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// BenchmarkSearchCatalog searches a directory catalog of 1,000 sessions
// and 200 MB, the one `go run ./bench/gencatalog -dir DIR -sessions 1000
// -mb 200` writes (PANTO_BENCH_CATALOG=DIR uses such a DIR; otherwise
// the benchmark writes it first, untimed), as `panto search` does in a
// fresh process whose summary cache is warm: open the store, list it,
// read and search every session. No limit, so every byte is searched.
// Beside the wall time it reports the CPU time per search (of the two
// cores): the machine is shared, and others' load inflates the former.
//
//	go test ./archive -run XXX -bench SearchCatalog -benchtime 5x
func BenchmarkSearchCatalog(b *testing.B) {
	dir := os.Getenv("PANTO_BENCH_CATALOG")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "catalog")
		if _, err := sessiongen.New(1).Catalog(dir, 1000, 200e6); err != nil {
			b.Fatal(err)
		}
	}
	var total int64
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			total += fi.Size()
		}
	}
	// Warm the summary cache, as any earlier panto command would.
	warm, err := fsjsonl.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := warm.List(b.Context()); err != nil {
		b.Fatal(err)
	}
	if err := warm.Flush(b.Context()); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		q    archive.Query
	}{
		{"absent", archive.Query{Pattern: "panto-needle-absent"}},    // no line passes the prefilter
		{"common", archive.Query{Pattern: "Mutex"}},                  // thousands of lines decoded
		{"regexp", archive.Query{Pattern: `re:func \(\w \*cache\)`}}, // prefiltered by "func "
		{"thinking", archive.Query{Pattern: "goroutine channel", Thinking: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(total)
			matches := 0
			cpu := cpuTime()
			for b.Loop() {
				s, err := fsjsonl.Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				matches = 0
				stats, err := archive.Search(b.Context(), s, bc.q, archive.Options{}, func(archive.Match) error {
					matches++
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if stats.Sessions != len(files) || stats.Bytes != total {
					b.Fatalf("searched %d sessions, %d bytes; the catalog has %d, %d", stats.Sessions, stats.Bytes, len(files), total)
				}
			}
			b.ReportMetric(float64(matches), "matches")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
