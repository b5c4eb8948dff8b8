package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/panto-dev/panto/agent/tools"
)

func call(t *testing.T, b *tools.Builtin, name string, input any) (string, error) {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return b.Call(context.Background(), name, in)
}

func TestReadFileAndListDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("x", tools.MaxOutput+100)), 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"nonl.txt":  "one\ntwo",
		"bin.dat":   "a\nb\x00c\n",
		"empty.txt": "",
		"long.txt":  "a\n" + strings.Repeat("y", tools.MaxOutput+10) + "\nz\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, "sub", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "sub", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := tools.New(tools.Options{Dir: dir})
	tests := []struct {
		name    string
		tool    string
		input   any
		want    string
		wantErr string
	}{
		{"whole file", "read_file", map[string]any{"path": "a.txt"}, "one\ntwo\nthree\n", ""},
		{"absolute path", "read_file", map[string]any{"path": filepath.Join(dir, "a.txt")}, "one\ntwo\nthree\n", ""},
		{"line range", "read_file", map[string]any{"path": "a.txt", "offset": 2, "limit": 1}, "two\n", ""},
		{"last line", "read_file", map[string]any{"path": "a.txt", "offset": 3}, "three\n", ""},
		{"past the end", "read_file", map[string]any{"path": "a.txt", "offset": 4}, "", "a.txt has 3 lines; offset 4 is past the end"},
		{"no newline at the end", "read_file", map[string]any{"path": "sub/nonl.txt", "offset": 2}, "two", ""},
		{"no newline, past the end", "read_file", map[string]any{"path": "sub/nonl.txt", "offset": 3}, "", "sub/nonl.txt has 2 lines; offset 3 is past the end"},
		{"empty", "read_file", map[string]any{"path": "sub/empty.txt", "offset": 1}, "", ""},
		{"binary by lines", "read_file", map[string]any{"path": "sub/bin.dat", "offset": 2}, "", "sub/bin.dat is a binary file"},
		{"after a long line", "read_file", map[string]any{"path": "sub/long.txt", "offset": 3}, "z\n", ""},
		{"named pipe", "read_file", map[string]any{"path": "sub/fifo"}, "", "sub/fifo is not a regular file (a named pipe): not read"},
		{"device by lines", "read_file", map[string]any{"path": "/dev/zero", "offset": 2}, "", "/dev/zero is not a regular file (a device): not read"},
		{"missing", "read_file", map[string]any{"path": "nope.txt"}, "", "no such file"},
		{"directory", "read_file", map[string]any{"path": "sub"}, "", "use list_dir"},
		{"no path", "read_file", map[string]any{}, "", "path is required"},
		{"bad arguments", "read_file", "just a string", "", "arguments"},
		{"list", "list_dir", map[string]any{"path": "."}, "a.txt\nbig.txt\nsub/", ""},
		{"list default", "list_dir", map[string]any{}, "a.txt\nbig.txt\nsub/", ""},
		{"shell refused", "run_shell", map[string]any{"command": "echo hi"}, "", "--allow-shell"},
		{"unknown", "rm_rf", map[string]any{}, "", "no tool named"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, b, tt.tool, tt.input)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	got, err := call(t, b, "read_file", map[string]any{"path": "big.txt"})
	if err != nil || len(got) > tools.MaxOutput+200 || !strings.Contains(got, "[truncated") {
		t.Errorf("big file: %d bytes, %v", len(got), err)
	}
	// A line longer than a result is cut, and the model is told to go on
	// after it, not to ask for it again.
	got, err = call(t, b, "read_file", map[string]any{"path": "sub/long.txt", "offset": 2, "limit": 1})
	wantNote := fmt.Sprintf("\n[line 2 is %d bytes, cut at 64 KiB; continue with offset 3]", tools.MaxOutput+11)
	if err != nil || !strings.HasPrefix(got, "yyy") || !strings.HasSuffix(got, wantNote) || len(got) > tools.MaxOutput+len(wantNote) {
		t.Errorf("long line: %d bytes ending %q, %v", len(got), got[max(0, len(got)-80):], err)
	}
	for _, d := range b.Tools() {
		if d.Name == "run_shell" {
			t.Error("run_shell offered without AllowShell")
		}
	}
}

func TestRunShell(t *testing.T) {
	dir := t.TempDir()
	b := tools.New(tools.Options{Dir: dir, AllowShell: true})
	var offered bool
	for _, d := range b.Tools() {
		offered = offered || d.Name == "run_shell"
	}
	if !offered {
		t.Fatal("run_shell not offered")
	}
	got, err := call(t, b, "run_shell", map[string]any{"command": "pwd; echo oops >&2; exit 3"})
	if err != nil || !strings.Contains(got, dir) || !strings.Contains(got, "oops") || !strings.Contains(got, "[exit status 3]") {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = call(t, b, "run_shell", map[string]any{"command": "yes | head -c 200000"})
	if err != nil || len(got) > tools.MaxOutput+200 || !strings.Contains(got, "output truncated") {
		t.Errorf("long output: %d bytes, %v", len(got), err)
	}
	// A process left in the background keeps the output open after the
	// shell exits: what came is still the result.
	got, err = call(t, b, "run_shell", map[string]any{"command": "sleep 3 & echo started"})
	if err != nil || !strings.HasPrefix(got, "started\n") || !strings.Contains(got, "[exit status 0; output read for 1s after the exit: a background process still holds it]") {
		t.Errorf("background process: %q, %v", got, err)
	}
	_, err = call(t, b, "run_shell", map[string]any{"command": "sleep 5", "timeout_seconds": 1})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("timeout: %v", err)
	}
}

// A symbolic link to a directory is listed as one, ending in '/': the
// model reads through it as through a directory. A link to a file, or
// one that leads nowhere, is listed as it is.
func TestListDirLinks(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"tosub": "sub", "outside": elsewhere, "tofile": "a.txt", "dangling": "nope"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := call(t, tools.New(tools.Options{Dir: dir}), "list_dir", map[string]any{})
	if want := "a.txt\ndangling\noutside/\nsub/\ntofile\ntosub/"; err != nil || got != want {
		t.Errorf("list_dir = %q, %v; want %q", got, err, want)
	}
}
