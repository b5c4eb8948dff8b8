package fileaccess

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// Watch records, until the test ends, the files of dir that are opened
// or read.
func Watch(t testing.TB, dir string) *Watcher {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("fileaccess: inotify_init1: %v", err)
	}
	// Non-blocking, so os.File reads through the runtime's poller and
	// Close ends a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_OPEN|syscall.IN_ACCESS); err != nil {
		f.Close()
		t.Fatalf("fileaccess: watch %s: %v", dir, err)
	}
	w := &Watcher{dir: dir, seen: map[string]bool{}, barriers: map[string]bool{}, changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.read(f)
	}()
	t.Cleanup(func() {
		f.Close()
		<-done
	})
	return w
}

// read records the events read from f until it is closed.
func (w *Watcher) read(f *os.File) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.record("", true) // an unexpected end: Take must not trust what it has
			}
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			w.record(string(bytes.TrimRight(name, "\x00")), ev.Mask&syscall.IN_Q_OVERFLOW != 0)
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// touch opens (creating) and removes the file name of dir: one IN_OPEN.
func touch(dir, name string) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(path)
}
