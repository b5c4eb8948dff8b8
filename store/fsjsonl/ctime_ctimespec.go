//go:build darwin || freebsd || netbsd

package fsjsonl

import "syscall"

func ctimeNS(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
