package miniotest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// errPortTaken: the port picked for a server was taken by another
// process between the pick and the server's bind (or answered by another
// server), so the start tries another port.
var errPortTaken = errors.New("the port is taken by another server")

// startAttempts bounds the ports a start tries.
const startAttempts = 5

// startTimeout bounds the time a server takes to answer.
const startTimeout = 90 * time.Second

// process is a server process: how to run it, and the running one.
type process struct {
	dir     string // data and log
	bin     string
	command func(s *Server, bin, dir string) (*exec.Cmd, error)

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// pickPort returns a free loopback port. The port is released before the
// server binds it, so another process may take it first: launch finds
// out, and startProcess tries another. Tests replace it to force a clash.
var pickPort = func() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startProcess starts s as a server process in a new data directory, on
// a port that no other server answers.
func startProcess(s *Server, bin string, command func(s *Server, bin, dir string) (*exec.Cmd, error)) error {
	dir, err := os.MkdirTemp("", "panto-"+s.Kind.Name+"-")
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	p := &process{dir: dir, bin: bin, command: command}
	s.proc = p
	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		err = p.launch(s)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			os.RemoveAll(dir)
			return err
		}
	}
}

// launch starts the process on s.Addr and waits until it answers a
// request signed with the server's own credentials, which no other server
// knows. It returns errPortTaken if the process could not bind the port
// or another server answers there.
func (p *process) launch(s *Server) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(p.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("server log: %w", err)
	}
	cmd, err := p.command(s, p.bin, p.dir)
	if err != nil {
		log.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := spawn(cmd); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	p.cmd, p.log = cmd, log
	exited := make(chan struct{})
	p.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	client, err := s.client()
	if err != nil {
		p.killLocked()
		return err
	}
	for time.Since(start) < startTimeout {
		select {
		case <-exited:
			p.killLocked()
			out, _ := os.ReadFile(log.Name())
			if strings.Contains(string(out), "already in use") {
				return fmt.Errorf("%s: %w", s.Addr, errPortTaken)
			}
			return fmt.Errorf("%s exited at start (%v): %s", s.Kind.Name, cmd.ProcessState, lastLines(string(out), 10))
		default:
		}
		switch err := p.answers(s, client); {
		case err == nil:
			return nil
		case errors.Is(err, errPortTaken):
			p.killLocked()
			return fmt.Errorf("%s: %w", s.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.killLocked()
	return fmt.Errorf("%s did not answer on %s within %s; see %s", s.Kind.Name, s.Addr, startTimeout, log.Name())
}

// answers returns nil when the server on s.Addr is this process: it
// lists the buckets with the server's own credentials, which no other
// server knows, and the listening socket is this process's (a server
// without authentication accepts any credentials). errPortTaken means
// another server answers there; any other error, not ready yet.
func (p *process) answers(s *Server, client *minio.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := client.ListBuckets(ctx)
	if err != nil {
		switch minio.ToErrorResponse(err).Code {
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidClientTokenId":
			return fmt.Errorf("%w: it refused this server's credentials: %v", errPortTaken, err)
		}
		return err
	}
	_, portText, _ := net.SplitHostPort(s.Addr)
	port, _ := strconv.Atoi(portText)
	ours, err := listens(p.cmd.Process.Pid, port)
	if err != nil {
		return err
	}
	if !ours {
		return fmt.Errorf("%w: another process holds the listening socket", errPortTaken)
	}
	return nil
}

// kill stops the process group, waits (a bounded time) for the process
// to exit and the port to close.
func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killLocked()
}

func (p *process) killLocked() {
	if p.cmd == nil {
		return
	}
	pid := p.cmd.Process.Pid
	_ = killGroup(pid)
	if !waitBounded(p.exited, 10*time.Second) {
		_ = p.cmd.Process.Kill()
	}
	forget(pid)
	p.cmd = nil
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
}

// binary finds a server's binary: $envVar, then PATH, then $GOBIN and
// $GOPATH/bin (where `go install` puts it); install says how to get it.
func binary(name, envVar, install string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gopath := os.Getenv("GOPATH"); gopath != "" {
		for _, p := range filepath.SplitList(gopath) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	} else if out, err := goEnvGOPATH(); err == nil {
		for _, p := range filepath.SplitList(out) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: these tests need a real %s server; install it with `%s` (or run `make test`, which does), or set %s to its path", name, name, install, envVar)
}

var (
	gopathOnce sync.Once
	gopath     string
	gopathErr  error
)

// goEnvGOPATH is `go env GOPATH`, asked once and bounded in time.
func goEnvGOPATH() (string, error) {
	gopathOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "env", "GOPATH").Output()
		gopath, gopathErr = strings.TrimSpace(string(out)), err
	})
	return gopath, gopathErr
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
