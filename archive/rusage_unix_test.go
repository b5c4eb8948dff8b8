//go:build unix

package archive_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used: a
// benchmark on a machine shared with other work reports it beside the
// wall time, which the others' load inflates.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
