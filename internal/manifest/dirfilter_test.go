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

// TestDirFilterClaims: a claim's bits say that one project's head
// claimed one directory's, and not another project's, another
// directory's, or that the directory holds a session; a filter that
// cannot be read says no claim (a reader then reads the directory's
// head, as without one).
func TestDirFilterClaims(t *testing.T) {
	f := NewDirFilter()
	AddClaimTo(f, "/src/c/", "host.test/team/c")
	if !DirFilterMayHoldClaim(f, "/src/c", "host.test/team/c") {
		t.Fatal("the claim is not in the filter")
	}
	for _, c := range [][2]string{{"/src/c", "host.test/team/d"}, {"/src/d", "host.test/team/c"}, {"/src", "host.test/team/c"}} {
		if DirFilterMayHoldClaim(f, c[0], c[1]) {
			t.Errorf("the filter says %s claimed %s", c[1], c[0])
		}
	}
	if DirFilterMayHoldAt(f, "/src/c") || DirFilterMayHoldBelow(f, "/src") {
		t.Error("a claim's bits say a directory holds a session")
	}
	if DirFilterMayHoldClaim(nil, "/src/c", "host.test/team/c") || DirFilterMayHoldClaim(f[:10], "/src/c", "host.test/team/c") {
		t.Error("a filter that cannot be read says a claim")
	}
}
