//go:build darwin || freebsd || netbsd

package filekey

import "syscall"

func ctimeNS(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
