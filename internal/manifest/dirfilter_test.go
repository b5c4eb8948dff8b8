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
