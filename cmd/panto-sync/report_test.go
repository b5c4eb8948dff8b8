package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/replica"
	"github.com/panto-dev/panto/store"
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

// TestDescribeEventNames: every kind of replica.Event has its event name,
// done and with --dry-run, whatever the relation behind it (a keep-both
// of a deletion conflict is would-keep-both like any other).
func TestDescribeEventNames(t *testing.T) {
	t.Parallel()
	tomb := &store.Tombstone{ID: "a", Deleted: time.Unix(1e9, 0), At: store.Checkpoint{Length: 5}}
	tests := []struct {
		kind         replica.Kind
		relation     replica.Relation
		done, dryRun string
	}{
		{replica.Unchanged, replica.Same, "unchanged", "unchanged"},
		{replica.Created, replica.SrcOnly, "pushed", "would-push"},
		{replica.Appended, replica.SrcAhead, "pushed", "would-push"},
		{replica.Deleted, replica.SrcDeleted, "deleted", "would-delete"},
		{replica.Conflicted, replica.DeleteConflict, "conflict", "conflict"},
		{replica.Skipped, replica.DstAhead, "skipped", "skipped"},
		{replica.Divergent, replica.Diverged, "diverged", "diverged"},
		{replica.KeptBoth, replica.Diverged, "kept-both", "would-keep-both"},
		{replica.KeptBoth, replica.DeleteConflict, "kept-both", "would-keep-both"},
		{replica.Refused, replica.Same, "refused", "refused"},
		{replica.Failed, replica.SrcAhead, "failed", "failed"},
	}
	r := newReporter(&options{Stdout: &bytes.Buffer{}}, pushDirection)
	for _, tt := range tests {
		for _, dryRun := range []bool{false, true} {
			e := replica.Event{Plan: replica.Plan{ID: "a", Relation: tt.relation, SrcTomb: tomb}, Kind: tt.kind, DryRun: dryRun, NewID: "b"}
			want := tt.done
			if dryRun {
				want = tt.dryRun
			}
			if got := r.describeEvent(e); got.Event != want || (tt.kind != replica.Unchanged && got.Text == "") {
				t.Errorf("%v (%v), dry run %v: event %q, text %q; want event %q and a text", tt.kind, tt.relation, dryRun, got.Event, got.Text, want)
			}
		}
	}
}
