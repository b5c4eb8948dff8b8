package manifest

import (
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
)

// A dir filter, in a log commit (IndexShard.DirFilter; docs/DESIGN.md
// §P3, the dir filter), says which directories the head of the sessions
// that know only their directory may hold sessions in, and which it may
// hold sessions below: a Bloom filter of every such session's directory
// and, apart from those, of every directory above one, so that a
// listing of a work tree's sessions asks it for the tree's root, and
// reads the dirs head only when a session may be below the root (one
// at the root itself is in the root's own head as well, a far smaller
// one: IndexShard.DirKeys). A false positive costs a read of a head; a
// directory is never left out, since the filter only grows (a deleted
// session's bits stay). Without it, every work tree's page in a bucket
// where anyone ever ran panto outside a git tree, or imported another
// agent's sessions, read the dirs head, and took its oldest session as
// the bound of what it may miss.
//
// The first version of the filter ("dir_filter" on the wire) did not
// tell a directory from those above it; a commit now carries this one
// under another name, "dir_filter_v2", so that a panto that reads the
// first finds none, and reads the dirs head as it did before it.

// DirFilterBytes is the size of a dir filter: 4,096 bits, which at 300
// directories (and their ancestors, shared) answers a directory that is
// not there wrongly about once in a hundred times.
const DirFilterBytes = 512

// dirFilterProbes is how many bits a directory sets.
const dirFilterProbes = 3

// NewDirFilter is a dir filter that holds no directory.
func NewDirFilter() []byte { return make([]byte, DirFilterBytes) }

// AddDirTo sets in filter f (DirFilterBytes long) the bits of dir, as a
// directory that holds a session, and of every directory above it, as
// one that holds a session below it.
func AddDirTo(f []byte, dir string) {
	if len(f) != DirFilterBytes || dir == "" {
		return
	}
	d := filepath.Clean(dir)
	setDirBits(f, dirBits(dirAt, d))
	for {
		up := filepath.Dir(d)
		if up == d {
			return
		}
		d = up
		setDirBits(f, dirBits(dirAbove, d))
	}
}

func setDirBits(f []byte, bits [dirFilterProbes]uint32) {
	for _, bit := range bits {
		f[bit/8] |= 1 << (bit % 8)
	}
}

// DirFilterMayHold reports whether a session in or below directory root
// may be in the dirs head filter f describes: true unless f says not,
// and true for a filter of another size (one it cannot read).
func DirFilterMayHold(f []byte, root string) bool {
	return DirFilterMayHoldAt(f, root) || DirFilterMayHoldBelow(f, root)
}

// DirFilterMayHoldAt reports whether a session in directory dir itself
// may be in the dirs head filter f describes (true for a filter it
// cannot read).
func DirFilterMayHoldAt(f []byte, dir string) bool {
	return hasDirBits(f, dirBits(dirAt, filepath.Clean(dir)))
}

// DirFilterMayHoldBelow reports whether a session in a directory below
// root, not root itself, may be in the dirs head filter f describes
// (true for a filter it cannot read).
func DirFilterMayHoldBelow(f []byte, root string) bool {
	return hasDirBits(f, dirBits(dirAbove, filepath.Clean(root)))
}

func hasDirBits(f []byte, bits [dirFilterProbes]uint32) bool {
	if len(f) != DirFilterBytes {
		return true
	}
	for _, bit := range bits {
		if f[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// MergeDirFilter sets in f every bit of g (both DirFilterBytes long).
func MergeDirFilter(f, g []byte) {
	if len(f) != DirFilterBytes || len(g) != DirFilterBytes {
		return
	}
	for i := range f {
		f[i] |= g[i]
	}
}

// AddClaimTo sets in filter f (DirFilterBytes long) the bits that say
// the head of the project whose Key is key claimed the head of directory
// dir (IndexShard.Claims): a listing of the work tree rooted at dir then
// expects that project's head to hold the sessions at dir that know only
// their directory, and does not read dir's head beside it unless the
// project's head says otherwise (a false positive costs that read one
// round trip later, not a session).
func AddClaimTo(f []byte, dir, key string) {
	if len(f) != DirFilterBytes || dir == "" || key == "" {
		return
	}
	setDirBits(f, dirBits(dirClaimed, filepath.Clean(dir)+"\x00"+key))
}

// DirFilterMayHoldClaim reports whether filter f may say that the head
// of the project whose Key is key claimed the head of directory dir
// (AddClaimTo); false for a filter it cannot read, which says nothing.
func DirFilterMayHoldClaim(f []byte, dir, key string) bool {
	return len(f) == DirFilterBytes && hasDirBits(f, dirBits(dirClaimed, filepath.Clean(dir)+"\x00"+key))
}

// What a directory's bits say: a session in it, or one below it, or that
// a project's head claimed its head.
const (
	dirAt      = '='
	dirAbove   = '<'
	dirClaimed = '@'
)

// dirBits are the bits of a cleaned directory path in a dir filter, as
// one that holds a session (kind dirAt) or one above a directory that
// does (dirAbove).
func dirBits(kind byte, dir string) [dirFilterProbes]uint32 {
	sum := sha256.Sum256(append([]byte{kind}, dir...))
	var bits [dirFilterProbes]uint32
	for i := range bits {
		bits[i] = binary.BigEndian.Uint32(sum[4*i:]) % (DirFilterBytes * 8)
	}
	return bits
}
