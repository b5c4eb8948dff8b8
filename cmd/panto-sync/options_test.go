package main

import "testing"

func TestSelected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		include, exclude []string
		id               string
		want             bool
	}{
		{nil, nil, "abc", true},
		{[]string{"a*"}, nil, "abc", true},
		{[]string{"a*"}, nil, "bcd", false},
		{[]string{"x*", "b*"}, nil, "bcd", true},
		{nil, []string{"a*"}, "abc", false},
		{[]string{"a*"}, []string{"ab?"}, "abc", false},
		{[]string{"a*"}, []string{"ab?"}, "abcd", true},
	}
	for _, tt := range tests {
		o := &options{Include: tt.include, Exclude: tt.exclude}
		if got := o.selected(tt.id); got != tt.want {
			t.Errorf("include %v exclude %v: selected(%q) = %v, want %v", tt.include, tt.exclude, tt.id, got, tt.want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 1500000: "1.5 MB", 2_000_000_000: "2.0 GB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
