//go:build !linux

package fileaccess

import "testing"

// Watch skips the test: only Linux's inotify is implemented.
func Watch(t testing.TB, dir string) *Watcher {
	t.Helper()
	t.Skip("fileaccess: watching file accesses needs Linux (inotify)")
	return nil
}

func touch(dir, name string) error { return nil }
