package miniotest

import "syscall"

// serverAttr puts a server in a process group of its own (so that one
// signal stops it and anything it started) and has the kernel kill it
// when the thread that started it dies: the spawner's locked thread,
// which lives as long as the test binary. A test binary that panics, is
// killed or runs past -timeout takes its servers with it.
func serverAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// reaperAttr puts the reaper in a process group of its own, out of reach
// of the terminal's Ctrl-C, and without a parent-death signal: it must
// outlive the test binary.
func reaperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to process group pgid.
func killGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }
