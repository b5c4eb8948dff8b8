package objstore

import (
	"slices"
	"testing"

	"github.com/panto-dev/panto/internal/manifest"
)

// TestMergeRuns: compaction merges runs of at least two consecutive
// segments, each run at most the bound, and leaves larger segments alone.
func TestMergeRuns(t *testing.T) {
	seg := func(lengths ...int64) []manifest.Segment {
		var out []manifest.Segment
		var pos int64
		for _, n := range lengths {
			out = append(out, manifest.Segment{Start: pos, Length: n})
			pos += n
		}
		return out
	}
	for _, tt := range []struct {
		lengths []int64
		want    [][2]int
	}{
		{[]int64{1}, nil},
		{[]int64{1, 1}, [][2]int{{0, 2}}},
		{[]int64{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, [][2]int{{0, 10}, {10, 12}}},
		{[]int64{40, 1, 1, 40, 1}, [][2]int{{1, 3}}},
		{[]int64{31, 2, 30, 2, 2}, [][2]int{{3, 5}}},
		{[]int64{8, 8, 8}, nil},
		{[]int64{4, 1, 1}, [][2]int{{1, 3}}},
		{[]int64{32, 32}, nil},
	} {
		if got := mergeRuns(seg(tt.lengths...), 32); !slices.Equal(got, tt.want) {
			t.Errorf("mergeRuns(%v) = %v, want %v", tt.lengths, got, tt.want)
		}
	}
}
