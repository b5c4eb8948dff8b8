//go:build !linux

package miniotest

import "syscall"

// serverAttr puts a server in a process group of its own. There is no
// parent-death signal here: the reaper alone stops the servers of a test
// binary that dies.
func serverAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// reaperAttr puts the reaper in a process group of its own.
func reaperAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to process group pgid.
func killGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }
