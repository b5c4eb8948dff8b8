package miniotest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// reaperEnv marks the test binary re-executed as the reaper.
const reaperEnv = "PANTO_MINIOTEST_REAPER"

// harness is what Main set up for one test binary: the temporary root
// that holds everything the tests write (servers' data, built binaries,
// t.TempDir), and the reaper that cleans up after a binary that died.
type harness struct {
	root   string
	home   string // an empty HOME for child processes
	reaper *reaperConn
}

var (
	hmu     sync.Mutex
	current *harness
)

// Main runs the tests of a binary that uses the harness. Call it from
// TestMain, first:
//
//	func TestMain(m *testing.M) { miniotest.Main(m) }
//
// Each setup function (building the binaries under test, say) runs after
// the harness is in place and before the tests; an error ends the binary.
//
// Main gives the binary one temporary root and points TMPDIR at it, so
// that os.TempDir, t.TempDir and anything a setup function or a child
// process writes there is removed with it. It takes every AWS_* variable
// out of the process's environment (a developer's AWS_PROFILE or
// container credentials must not reach a test) and turns off the SDK's EC2
// metadata lookup, so that a test without credentials fails on the
// loopback server instead of calling out. After the tests it stops the
// shared servers and removes the root; if the binary dies first (a panic,
// -timeout, a signal), the servers die with it (Pdeathsig on Linux) and
// the reaper, a copy of the binary waiting on a pipe, kills their process
// groups and removes the root.
func Main(m *testing.M, setup ...func() error) {
	if os.Getenv(reaperEnv) != "" {
		reap(os.Stdin)
		os.Exit(0)
	}
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup []func() error) int {
	h, err := startHarness()
	if err != nil {
		fmt.Fprintln(os.Stderr, "miniotest:", err)
		return 1
	}
	defer h.close()
	for _, fn := range setup {
		if err := fn(); err != nil {
			fmt.Fprintln(os.Stderr, "miniotest: setup:", err)
			return 1
		}
	}
	return m.Run()
}

func startHarness() (*harness, error) {
	root, err := os.MkdirTemp("", "panto-test-"+filepath.Base(os.Args[0])+"-")
	if err != nil {
		return nil, err
	}
	h := &harness{root: root, home: filepath.Join(root, "home")}
	if err := os.Mkdir(h.home, 0o755); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if h.reaper, err = startReaper(); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	h.reaper.remove(root)
	scrubAWSEnv(filepath.Join(root, "no-aws"))
	os.Setenv("TMPDIR", root)
	hmu.Lock()
	current = h
	hmu.Unlock()
	return h, nil
}

// close stops the shared servers, removes the root and lets the reaper go.
func (h *harness) close() {
	stopShared()
	os.RemoveAll(h.root)
	h.reaper.close()
}

// active returns the harness Main set up, or an error that says to call
// Main.
func active() (*harness, error) {
	hmu.Lock()
	defer hmu.Unlock()
	if current == nil {
		return nil, errors.New("miniotest: the test binary has no harness: call miniotest.Main(m) from TestMain")
	}
	return current, nil
}

// scrubAWSEnv takes every AWS_* variable out of the environment and
// points the SDK's configuration files at missing ones under dir.
func scrubAWSEnv(dir string) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			os.Unsetenv(k)
		}
	}
	os.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	os.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// credentialSources are the variables through which the AWS SDK finds
// credentials (or a way to fetch them) and the endpoints it would fetch
// them from.
var credentialSources = []string{
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY", "AWS_SECRET_KEY",
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
	"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
	"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_SSO", "AWS_ENDPOINT_URL_SSO_OIDC", "AWS_SDK_LOAD_CONFIG",
}

// NoCredentials leaves the test with no way for the AWS SDK to find
// credentials: every variable that names them or a source of them is
// unset (restored when the test ends), the configuration files point at
// missing ones and the EC2 metadata lookup is off. It uses t.Setenv, so
// the test cannot be parallel.
func NoCredentials(t testing.TB) {
	t.Helper()
	missing := filepath.Join(t.TempDir(), "no-aws")
	for _, k := range credentialSources {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(missing, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(missing, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// The spawner starts every server from one goroutine locked to its OS
// thread for the life of the binary: Linux sends the parent-death signal
// when the thread that started a child exits, not the process, and Go
// ends the thread of a goroutine that exits while locked.
var (
	spawnOnce sync.Once
	spawnReq  = make(chan spawnRequest)
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// spawn starts cmd as a server: in its own process group, killed with
// the test binary, and known to the reaper until forget.
func spawn(cmd *exec.Cmd) error {
	h, err := active()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = serverAttr()
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked
			for r := range spawnReq {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReq <- spawnRequest{cmd, done}
	if err := <-done; err != nil {
		return err
	}
	h.reaper.kill(cmd.Process.Pid)
	return nil
}

// forget tells the reaper that the group of pid is stopped.
func forget(pid int) {
	if h, err := active(); err == nil {
		h.reaper.forget(pid)
	}
}

// reaperConn is the pipe to the reaper. Each line names a process group
// to kill or a directory to remove if the binary dies, or a group that
// was stopped; the reaper acts when the pipe closes, which the kernel
// does however the binary ends.
type reaperConn struct {
	mu  sync.Mutex
	w   *os.File
	cmd *exec.Cmd
}

func startReaper() (*reaperConn, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperEnv+"=1")
	cmd.Stdin = r // stdout and stderr: /dev/null, so that go test does not wait on them
	cmd.SysProcAttr = reaperAttr()
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	return &reaperConn{w: w, cmd: cmd}, nil
}

func (c *reaperConn) send(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w != nil {
		_, _ = io.WriteString(c.w, line+"\n")
	}
}

func (c *reaperConn) kill(pgid int)      { c.send("kill " + strconv.Itoa(pgid)) }
func (c *reaperConn) forget(pgid int)    { c.send("forget " + strconv.Itoa(pgid)) }
func (c *reaperConn) remove(path string) { c.send("remove " + path) }

// close ends the pipe and waits (a bounded time) for the reaper to act.
func (c *reaperConn) close() {
	c.mu.Lock()
	w := c.w
	c.w = nil
	c.mu.Unlock()
	if w == nil {
		return
	}
	w.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
	}
}

// reap is the reaper: it reads its orders until its stdin closes (the
// test binary ended, however), then kills the process groups not yet
// stopped and removes the directories.
func reap(in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	groups := map[int]bool{}
	var dirs []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		what, arg, _ := strings.Cut(sc.Text(), " ")
		switch what {
		case "kill", "forget":
			if pgid, err := strconv.Atoi(arg); err == nil && pgid > 1 {
				groups[pgid] = what == "kill"
			}
		case "remove":
			dirs = append(dirs, arg)
		}
	}
	for pgid, live := range groups {
		if live {
			_ = killGroup(pgid)
		}
	}
	// A killed server may hold files open for a moment; RemoveAll does
	// not mind, but give the kernel a beat to close them.
	if len(groups) > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// waitBounded waits for done (a process's Wait) at most d.
func waitBounded(done <-chan struct{}, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
