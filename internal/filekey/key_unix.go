//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filekey

import (
	"io/fs"
	"syscall"
)

// Of returns the Key of the file fi describes.
func Of(fi fs.FileInfo) Key {
	k := Key{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.Ino = uint64(st.Ino)
		k.CtimeNS = ctimeNS(st)
	}
	return k
}
