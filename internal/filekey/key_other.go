//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filekey

import "io/fs"

// Of returns the Key of the file fi describes.
func Of(fi fs.FileInfo) Key {
	return Key{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
}
