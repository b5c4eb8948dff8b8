package main

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
)

// errStdoutClosed: the reader of panto's output went away (panto sessions
// | head -1, panto "..." | head). It ends the printing, not the command,
// and is no failure: panto exits 0, as the reader asked for no more, and
// says nothing (run). A script under `set -o pipefail` that keeps the
// first line of a listing does not fail for it.
var errStdoutClosed = errors.New("stdout closed")

// stdoutWriter is panto's stdout: once a write finds the pipe closed
// (EPIPE: SIGPIPE is caught, main), every later write fails at once
// with errStdoutClosed, so that a command that checks its writes stops
// writing, and one that does not costs no more system calls.
type stdoutWriter struct {
	w      io.Writer
	closed atomic.Bool
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	if s.closed.Load() {
		return 0, errStdoutClosed
	}
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		s.closed.Store(true)
		return n, fmt.Errorf("%w: %w", errStdoutClosed, err)
	}
	return n, err
}
