// Package filekey tells whether a file changed since it was last read
// without reading it: its Key is the inode, the size, the modification
// time and the change time, the test restic's backup and git's index
// make of a file. The change time is the one no user can set, so an edit
// that puts the modification time back, or lands within its granularity,
// still changes the Key. A cache that keeps a Key beside what it learned
// from the file reads the file again only when the Key differs.
package filekey

// Key identifies a version of a file. The JSON tags are those of the
// caches that keep it (store/fsjsonl's index, panto import's record).
// On a platform without inodes and change times they are 0, and the
// size and modification time alone tell.
type Key struct {
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}
