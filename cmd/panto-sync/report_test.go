package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestReporter(t *testing.T) {
	t.Parallel()
	evs := []Event{
		{Event: "pushed", ID: "a", Bytes: 10, Text: "pushed    a"},
		{Event: "unchanged", ID: "b", Text: "unchanged b"},
		{Event: "diverged", ID: "c", Text: "diverged  c"},
		{Event: "failed", ID: "d", Error: "boom", Text: "failed    d: boom"},
	}
	sum := Summary{Command: "push", Sessions: 4, Counts: map[string]int{"pushed": 1}, Text: "push: done"}
	tests := []struct {
		name        string
		json, quiet bool
		want        []string // lines, in order
	}{
		{"text", false, false, []string{"pushed    a", "diverged  c", "failed    d: boom", "push: done"}},
		{"quiet", false, true, []string{"diverged  c", "failed    d: boom"}},
		{"json", true, false, []string{`"id":"a"`, `"id":"b"`, `"id":"c"`, `"id":"d"`, `"event":"summary"`}},
		{"json quiet", true, true, []string{`"id":"c"`, `"id":"d"`, `"event":"summary"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := newReporter(&options{Stdout: &out, JSON: tt.json, Quiet: tt.quiet}, pushDirection)
			for _, e := range evs {
				r.print(e)
			}
			r.printSummary(sum)
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(tt.want), out.String())
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want it to contain %q", i+1, lines[i], w)
				}
				if tt.json && !json.Valid([]byte(lines[i])) {
					t.Errorf("line %d is not JSON: %q", i+1, lines[i])
				}
			}
		})
	}
}
