package manifest

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestReplacedList: a list of replaced objects decodes to the names it
// was made from; one that is not what its name says, or that names
// anything but a segment, is refused.
func TestReplacedList(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{SegmentName(512), SegmentName(1024), MergedName(1536, 4096)}
	rel := ReplacedListName(names)
	if !IsReplacedList(rel) || IsReplacedList(SegmentName(0)) || IsReplacedList(MergedName(0, 1)) || IsReplacedList("seg/replaced-x.txt.zst") {
		t.Fatalf("IsReplacedList is wrong about %s or a segment", rel)
	}
	got, err := c.DecodeReplacedList("obj", rel, c.EncodeReplacedList("obj", names))
	if err != nil || !slices.Equal(got, names) {
		t.Fatalf("decoded %q, %v; want %q", got, err, names)
	}
	other := ReplacedListName(names[:2])
	if _, err := c.DecodeReplacedList("obj", other, c.EncodeReplacedList("obj", names)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a list under another list's name: %v", err)
	}
	for _, bad := range [][]string{
		{"seg/../manifest.json"},
		{"manifest.json"},
		{SegmentName(0) + "x"},
		{"seg/0001.jsonl.zst"},
		{strings.Replace(MergedName(1, 2), "-", "_", 1)},
	} {
		if _, err := ParseReplacedList(replacedListBytes(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseReplacedList(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "\n", SegmentName(0)} {
		if _, err := ParseReplacedList([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseReplacedList(%q): %v", bad, err)
		}
	}
}

// FuzzReplacedList: ParseReplacedList never panics, and accepts only
// segment names, which re-encode to the same bytes.
func FuzzReplacedList(f *testing.F) {
	f.Add(replacedListBytes([]string{SegmentName(0), MergedName(10, 20)}))
	f.Add([]byte("seg/../x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := ParseReplacedList(data)
		if err != nil {
			return
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "seg/") || strings.Contains(n, "..") || strings.ContainsAny(n[4:], "/\\\n") {
				t.Fatalf("accepted %q", n)
			}
		}
		if string(replacedListBytes(names)) != string(data) {
			t.Fatal("an accepted list does not re-encode to its bytes")
		}
	})
}
