package miniotest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

// childEnv makes this test binary a child of TestNothingOutlivesTheBinary.
const childEnv = "PANTO_MINIOTEST_CHILD"

// TestNothingOutlivesTheBinary runs this test binary as a child that
// starts a MinIO and a versitygw (and a MinIO cluster, when it is
// killed), writes a file under t.TempDir and one under os.TempDir (as the binaries under test are built), and then ends
// each way a test binary ends: the tests pass, a test panics, -timeout
// fires, or the binary is killed. Afterwards no server of the child runs
// and nothing it wrote is left.
func TestNothingOutlivesTheBinary(t *testing.T) {
	for _, mode := range []string{"exit", "panic", "timeout", "kill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChildOfLifecycle$", "-test.timeout="+childTimeout(mode))
			cmd.Env = append(os.Environ(), childEnv+"="+mode)
			cmd.WaitDelay = 5 * time.Second
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			var paths []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				if rest, ok := strings.CutPrefix(line, "pid "); ok {
					n, _ := strconv.Atoi(rest)
					pids = append(pids, n)
				}
				if rest, ok := strings.CutPrefix(line, "path "); ok {
					paths = append(paths, rest)
				}
				if line == "ready" {
					break
				}
			}
			if len(pids) != childServers(mode) || len(paths) != 3 {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the child did not start its servers: pids %v paths %v\n%s", pids, paths, stderr.String())
			}
			if mode == "kill" {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			go func() { _, _ = bufio.NewReader(stdout).WriteTo(discard{}) }()
			err = cmd.Wait()
			t.Logf("child ended: %v", err)
			deadline := time.Now().Add(20 * time.Second)
			for {
				var left []string
				for _, pid := range pids {
					if alive(pid) {
						left = append(left, fmt.Sprintf("server pid %d", pid))
					}
				}
				for _, p := range paths {
					if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
						left = append(left, p)
					}
				}
				if len(left) == 0 {
					return
				}
				if time.Now().After(deadline) {
					for _, pid := range pids {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					t.Fatalf("after the child ended (%s): %s still there\nchild stderr:\n%s", mode, strings.Join(left, ", "), lastLines(stderr.String()))
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestChildOfLifecycle is the child of TestNothingOutlivesTheBinary.
func TestChildOfLifecycle(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("run by TestNothingOutlivesTheBinary")
	}
	for _, k := range []*miniotest.Kind{miniotest.MinIO, miniotest.VersityGW} {
		fmt.Println("pid", miniotest.SharedOf(t, k).Pid())
	}
	if childServers(mode) > 2 {
		c := miniotest.NewCluster(t, miniotest.ClusterNodes)
		for i := range c.Nodes() {
			fmt.Println("pid", c.Node(i).Pid())
		}
	}
	built, err := os.MkdirTemp("", "panto-bin-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(built, "panto"), []byte("a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(tmp, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Println("path", built)
	fmt.Println("path", tmp)
	fmt.Println("path", os.TempDir())
	fmt.Println("ready")
	switch mode {
	case "panic":
		panic("a test panics")
	case "timeout", "kill":
		time.Sleep(time.Minute)
	}
}

// childServers is the number of server processes the child starts: a
// MinIO and a versitygw, and in the harshest ending (killed, so that only
// the reaper and the parent-death signal act) a cluster's nodes too.
func childServers(mode string) int {
	if mode == "kill" {
		return 2 + miniotest.ClusterNodes
	}
	return 2
}

// childTimeout is the child's -timeout: short where the timeout is how it
// ends, long enough to start a cluster where it is killed.
func childTimeout(mode string) string {
	if mode == "kill" {
		return "2m"
	}
	return "10s"
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil && !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) STATE ...: the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
