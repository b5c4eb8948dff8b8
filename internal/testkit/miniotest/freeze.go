package miniotest

import (
	"fmt"
	"syscall"
)

// Freeze stops the server without closing anything (SIGSTOP to its
// process group): connections are accepted by the kernel and requests
// sent, but nothing answers, as a link that went dead mid-session looks
// to a client. Thaw resumes it. Only a server process can be frozen.
func (s *Server) Freeze() error { return s.signalGroup(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() error { return s.signalGroup(syscall.SIGCONT) }

func (s *Server) signalGroup(sig syscall.Signal) error {
	pid := s.Pid()
	if pid == 0 {
		return fmt.Errorf("miniotest: signal %v to a %s server that is not a running process", sig, s.Kind.Name)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("miniotest: signal %v to %s (pid %d): %w", sig, s.Kind.Name, pid, err)
	}
	return nil
}
