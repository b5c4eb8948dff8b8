package manifest

import (
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
)

// A dir filter, in a log commit (IndexShard.DirFilter; docs/DESIGN.md
// §P3, the dir filter), says which directories the head of the sessions
// that know only their directory may hold sessions in or below: a Bloom
// filter of every ancestor of every such session's directory (the
// directory itself included), so that a listing of a work tree's
// sessions asks it for the tree's root and reads the dirs head only
// when a session may be in the tree. A
// false positive costs a read of the head; a directory is never left
// out, since the filter only grows (a deleted session's bits stay).
// Without it, every work tree's page in a bucket where anyone ever ran
// panto outside a git tree, or imported another agent's sessions, read
// the dirs head, and took its oldest session as the bound of what it
// may miss.

// DirFilterBytes is the size of a dir filter: 4,096 bits, which at 300
// directories (and their ancestors, shared) answers a directory that is
// not there wrongly about once in a hundred times.
const DirFilterBytes = 512

// dirFilterProbes is how many bits a directory sets.
const dirFilterProbes = 3

// NewDirFilter is a dir filter that holds no directory.
func NewDirFilter() []byte { return make([]byte, DirFilterBytes) }

// AddDirTo sets in filter f (DirFilterBytes long) the bits of dir and of
// every directory above it.
func AddDirTo(f []byte, dir string) {
	if len(f) != DirFilterBytes || dir == "" {
		return
	}
	for d := filepath.Clean(dir); ; {
		for _, bit := range dirBits(d) {
			f[bit/8] |= 1 << (bit % 8)
		}
		up := filepath.Dir(d)
		if up == d {
			return
		}
		d = up
	}
}

// DirFilterMayHold reports whether a session in or below directory root
// may be in the dirs head filter f describes: true unless f says not,
// and true for a filter of another size (one it cannot read).
func DirFilterMayHold(f []byte, root string) bool {
	if len(f) != DirFilterBytes {
		return true
	}
	for _, bit := range dirBits(filepath.Clean(root)) {
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

// dirBits are the bits of a cleaned directory path in a dir filter.
func dirBits(dir string) [dirFilterProbes]uint32 {
	sum := sha256.Sum256([]byte(dir))
	var bits [dirFilterProbes]uint32
	for i := range bits {
		bits[i] = binary.BigEndian.Uint32(sum[4*i:]) % (DirFilterBytes * 8)
	}
	return bits
}
