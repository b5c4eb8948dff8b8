package manifest

import "testing"

// TestDirFilter: a directory added holds itself and every directory
// above it, not one beside or below it (for these paths: a Bloom filter
// may say yes wrongly, never no wrongly); a filter it cannot read (none,
// another size) holds everything.
func TestDirFilter(t *testing.T) {
	f := NewDirFilter()
	for _, dir := range []string{"/home/ann/src/proj/cmd", "/srv/notes/"} {
		AddDirTo(f, dir)
	}
	for _, dir := range []string{"/home/ann/src/proj/cmd", "/home/ann/src/proj", "/home/ann/src", "/home/ann", "/home", "/", "/srv/notes", "/srv/notes/", "/home/ann/src/proj/"} {
		if !DirFilterMayHold(f, dir) {
			t.Errorf("%s: not held, though a directory in or below it was added", dir)
		}
	}
	for _, dir := range []string{"/home/ann/src/other", "/home/bob", "/home/ann/src/proj/cmd/sub", "/srv/notes/old", "/src/b", "/tmp"} {
		if DirFilterMayHold(f, dir) {
			t.Errorf("%s: held, though no directory in or below it was added", dir)
		}
	}
	for _, g := range [][]byte{nil, make([]byte, DirFilterBytes-1)} {
		if !DirFilterMayHold(g, "/anything") {
			t.Errorf("a filter of %d bytes: not read as holding everything", len(g))
		}
	}
	g := NewDirFilter()
	AddDirTo(g, "/home/bob/x")
	MergeDirFilter(g, f)
	if !DirFilterMayHold(g, "/home/bob") || !DirFilterMayHold(g, "/home/ann/src/proj") {
		t.Error("a merge of two filters does not hold what each held")
	}
}

// TestDirFilterAtAndBelow: the filter tells a directory that holds a
// session from one above such a directory, so that a work tree whose
// root alone holds sessions need not read the dirs head.
func TestDirFilterAtAndBelow(t *testing.T) {
	f := NewDirFilter()
	AddDirTo(f, "/home/ann/src/proj")
	AddDirTo(f, "/srv/notes/old")
	for _, c := range []struct {
		dir       string
		at, below bool
	}{
		{"/home/ann/src/proj", true, false},
		{"/home/ann/src/proj/", true, false},
		{"/home/ann/src", false, true},
		{"/", false, true},
		{"/srv/notes", false, true},
		{"/srv/notes/old", true, false},
		{"/home/ann/src/proj/cmd", false, false},
		{"/tmp", false, false},
	} {
		if at, below := DirFilterMayHoldAt(f, c.dir), DirFilterMayHoldBelow(f, c.dir); at != c.at || below != c.below {
			t.Errorf("%s: a session at it %v, below it %v; want %v, %v", c.dir, at, below, c.at, c.below)
		}
	}
	if !DirFilterMayHoldAt(nil, "/x") || !DirFilterMayHoldBelow(nil, "/x") {
		t.Error("no filter: not read as holding everything")
	}
}
