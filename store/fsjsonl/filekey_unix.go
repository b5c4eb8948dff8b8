//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fsjsonl

import (
	"io/fs"
	"syscall"
)

// fileKey is what identifies a version of a file for the summary cache:
// the inode and size, the mtime, and the ctime, which no user can set
// (an edit that restores the mtime, or lands within its granularity,
// still changes it).
type fileKey struct {
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

func keyOf(fi fs.FileInfo) fileKey {
	k := fileKey{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.Ino = uint64(st.Ino)
		k.CtimeNS = ctimeNS(st)
	}
	return k
}
