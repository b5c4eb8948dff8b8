// Package miniotest starts real MinIO servers for tests: S3 behaviour is
// tested against the real thing, never a mock.
//
// A test binary shares one server, started on first use on a free
// loopback port with a temporary data directory; its TestMain calls Main
// so that the server stops when the tests end. Tests that stop or restart
// the server (fault tests) start their own with New.
//
// A missing minio binary fails the test with the command that installs it.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOVersion is the pinned MinIO release the Makefile installs.
const MinIOVersion = "github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

// Credentials of every test server.
const (
	AccessKey = "panto-test"
	SecretKey = "panto-test-secret-key"
	Region    = "us-east-1"
)

// Server is a running MinIO server.
type Server struct {
	// Addr is host:port on loopback.
	Addr string
	dir  string
	bin  string
	cmd  *exec.Cmd
	log  *os.File
	mu   sync.Mutex
}

// Endpoint is the server's URL.
func (s *Server) Endpoint() string { return "http://" + s.Addr }

// Env returns the environment a child process needs to reach the server
// through the standard AWS variables, on top of os.Environ.
func (s *Server) Env() []string {
	return append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+AccessKey,
		"AWS_SECRET_ACCESS_KEY="+SecretKey,
		"AWS_REGION="+Region,
		"AWS_ENDPOINT_URL_S3="+s.Endpoint(),
		"AWS_EC2_METADATA_DISABLED=true",
	)
}

// SetEnv points the standard AWS variables of this process at the server
// for the duration of the test.
func (s *Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", Region)
	t.Setenv("AWS_ENDPOINT_URL_S3", s.Endpoint())
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Client returns a minio-go client, for bucket setup and for reading the
// bucket back independently of the code under test.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Addr, &minio.Options{
		Creds:  credentials.NewStaticV4(AccessKey, SecretKey, ""),
		Secure: false,
		Region: Region,
	})
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	return c
}

// NewBucket creates a bucket with a unique name and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "panto-" + strings.ToLower(sanitize(t.Name())) + "-" + hex.EncodeToString(b[:])
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = "p" + strings.TrimLeft(name[1:], "-.")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Client(t).MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the test binary's shared server, starting it on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		t.Fatalf("%v", sharedErr)
	}
	return shared
}

// Main runs the tests of a binary and stops the shared server after them.
// Call it from TestMain: func TestMain(m *testing.M) { miniotest.Main(m) }.
//
// It also turns off the AWS SDK's EC2 metadata lookup for the whole binary
// and its children: a test that runs without credentials must fail on the
// loopback server, not send a request to 169.254.169.254.
func Main(m *testing.M) {
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// New starts a server of the test's own, stopped when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Binary finds the minio binary: $PANTO_MINIO, then PATH, then
// $GOBIN and $GOPATH/bin (where `go install` puts it).
func Binary() (string, error) {
	if p := os.Getenv("PANTO_MINIO"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "minio")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("minio not found: these tests need a real MinIO server; install it with `go install %s` (or run `make test`, which does), or set PANTO_MINIO to its path", MinIOVersion)
}

// Start starts a server on a free loopback port with a fresh data
// directory.
func Start() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "panto-minio-")
	if err != nil {
		return nil, fmt.Errorf("minio data dir: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, bin: bin}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	console, err := freePort()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "minio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("minio log: %w", err)
	}
	data := filepath.Join(s.dir, "data")
	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.Addr, "--console-address", fmt.Sprintf("127.0.0.1:%d", console), data)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_REGION="+Region,
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start minio %s: %w", s.bin, err)
	}
	s.cmd, s.log = cmd, log
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(log.Name())
			return fmt.Errorf("minio exited at start (%v): %s", err, lastLines(string(out), 10))
		default:
		}
		resp, err := http.Get(s.Endpoint() + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				go func() { <-exited }() // reap when stopped
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return errors.New("minio did not become healthy within 90s; see " + log.Name())
}

// Stop kills the server and removes its data.
func (s *Server) Stop() {
	s.Kill()
	os.RemoveAll(s.dir)
}

// Kill stops the server abruptly (SIGKILL), keeping its data, as a crash
// or a network outage would look to a client.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		for i := 0; i < 100; i++ { // wait until the port is free
			c, err := net.DialTimeout("tcp", s.Addr, 50*time.Millisecond)
			if err != nil {
				break
			}
			c.Close()
			time.Sleep(50 * time.Millisecond)
		}
		s.cmd = nil
	}
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
}

// Restart starts a killed server again on the same address and data.
func (s *Server) Restart() error { return s.start() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
