package main

import (
	"io"
	"strings"
	"testing"
)

func TestNormalizeArgs(t *testing.T) {
	app := newApp(&env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
	tests := []struct{ in, want string }{
		// -r: with an id, as it was; without one, the picker.
		{"panto -r 3f9a", "panto -r 3f9a"},
		{"panto -r 3f9a more words", "panto -r 3f9a more words"},
		{"panto -r", "panto --pick"},
		{"panto --resume", "panto --pick"},
		{"panto -r --model m", "panto --pick --model m"},
		{"panto --model m -r", "panto --model m --pick"},
		{"panto --resume=3f9a", "panto --resume=3f9a"},
		{"panto --store -r sessions", "panto --store -r sessions"}, // -r is --store's value
		// A subcommand's flags after its arguments move before them.
		{"panto search timeout --json --limit 3", "panto search --json --limit 3 timeout"},
		{"panto --store d search a b --thinking", "panto --store d search --thinking a b"},
		{"panto fork 3f9a --at 2", "panto fork --at 2 3f9a"},
		{"panto title 3f9a -- -draft- title", "panto title -- 3f9a -draft- title"},
		{"panto show --json 3f9a", "panto show --json 3f9a"},
		{"panto export 3f9a -o x.html", "panto export -o x.html 3f9a"},
		// A prompt is left alone, flags and all.
		{"panto explain --json please", "panto explain --json please"},
		{"panto", "panto"},
	}
	for _, tt := range tests {
		if got := strings.Join(normalizeArgs(app, strings.Fields(tt.in)), " "); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}
