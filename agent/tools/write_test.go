package tools_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/panto-dev/panto/agent/tools"
)

// writeFixture is a working directory reached through a symbolic link
// (the root's own resolution is what confines), beside a directory
// outside it, with links of every kind between them.
type writeFixture struct {
	work, outside, secret string
	b                     *tools.Builtin
}

func newWriteFixture(t *testing.T) writeFixture {
	t.Helper()
	base := t.TempDir()
	f := writeFixture{work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside")}
	f.secret = filepath.Join(f.outside, "secret.txt")
	for _, d := range []string{f.work, f.outside, filepath.Join(f.work, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, f.secret, "do not touch\n")
	mustWrite(t, filepath.Join(f.work, "edit.txt"), "alpha\nbeta\ngamma\nbeta\n")
	for link, dest := range map[string]string{
		"link_out":      f.outside,
		"link_in":       filepath.Join(f.work, "sub"),
		"file_link_out": f.secret,
		"dangling":      filepath.Join(f.outside, "nothere.txt"),
		"file_link_in":  filepath.Join(f.work, "edit.txt"),
	} {
		if err := os.Symlink(dest, filepath.Join(f.work, link)); err != nil {
			t.Fatal(err)
		}
	}
	workLink := filepath.Join(base, "worklink")
	if err := os.Symlink(f.work, workLink); err != nil {
		t.Fatal(err)
	}
	f.b = tools.New(tools.Options{Dir: workLink, AllowWrite: true})
	return f
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteFileConfinement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    func(f writeFixture) string
		want    string // the result's start
		wantErr string
		outside bool   // ErrOutsideWorkDir
		lands   string // the file written, under work
	}{
		{name: "new file", path: rel("new.txt"), want: "wrote new.txt: new file, +2 lines", lands: "new.txt"},
		{name: "new directories", path: rel("deep/er/new.txt"), want: "wrote deep/er/new.txt: new file", lands: "deep/er/new.txt"},
		{name: "absolute inside", path: func(f writeFixture) string { return filepath.Join(f.work, "abs.txt") }, want: "wrote ", lands: "abs.txt"},
		{name: "link to a directory inside", path: rel("link_in/x.txt"), want: "wrote link_in/x.txt", lands: "sub/x.txt"},
		{name: "link to a file inside", path: rel("file_link_in"), want: "wrote file_link_in: -4 +2 lines from line 1", lands: "edit.txt"},
		{name: "dot-dot", path: rel("../outside/x.txt"), outside: true},
		{name: "dot-dot after a directory", path: rel("sub/../../outside/x.txt"), outside: true},
		{name: "absolute outside", path: func(f writeFixture) string { return filepath.Join(f.outside, "x.txt") }, outside: true},
		{name: "parent links outside", path: rel("link_out/x.txt"), outside: true, wantErr: "through a symbolic link"},
		{name: "final component links outside", path: rel("file_link_out"), outside: true, wantErr: "through a symbolic link"},
		{name: "dangling link", path: rel("dangling"), wantErr: "does not exist: not followed"},
		{name: "the directory itself", path: func(f writeFixture) string { return f.work }, wantErr: "the working directory itself"},
		{name: "dot", path: rel("."), wantErr: ". ends in '.'"},
		{name: "a directory", path: rel("sub"), wantErr: "is a directory"},
		{name: "no path", path: rel(""), wantErr: "path is required"},
		{name: "a file and a slash", path: rel("edit.txt/"), wantErr: "edit.txt/ ends in '/': give the path of a file"},
		{name: "a file and a dot", path: rel("edit.txt/."), wantErr: "edit.txt/. ends in '.': give the path of a file"},
		{name: "a new name and a slash", path: rel("newdir/"), wantErr: "newdir/ ends in '/'"},
		{name: "a NUL byte", path: rel("newdir/a\x00b"), wantErr: `"newdir/a\x00b" holds a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newWriteFixture(t)
			got, err := call(t, f.b, "write_file", map[string]any{"path": tt.path(f), "content": "one\ntwo\n"})
			if readString(t, f.secret) != "do not touch\n" {
				t.Fatal("the file outside was changed")
			}
			if entries, _ := os.ReadDir(f.outside); len(entries) != 1 {
				t.Fatalf("outside holds %d entries", len(entries))
			}
			if tt.outside || tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, tools.ErrOutsideWorkDir) != tt.outside {
					t.Fatalf("result %q, error %v; want an error with %q (outside %v)", got, err, tt.wantErr, tt.outside)
				}
				if c := readString(t, filepath.Join(f.work, "edit.txt")); c != "alpha\nbeta\ngamma\nbeta\n" {
					t.Errorf("a refused write changed edit.txt: %q", c)
				}
				if _, err := os.Stat(filepath.Join(f.work, "newdir")); err == nil {
					t.Error("a refused write made newdir")
				}
				return
			}
			if err != nil || !strings.HasPrefix(got, tt.want) {
				t.Fatalf("result %q, error %v; want %q", got, err, tt.want)
			}
			if c := readString(t, filepath.Join(f.work, tt.lands)); c != "one\ntwo\n" {
				t.Errorf("%s holds %q", tt.lands, c)
			}
			if fi, err := os.Lstat(filepath.Join(f.work, "file_link_in")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("a link inside was replaced: %v", err)
			}
			leftovers, _ := filepath.Glob(filepath.Join(f.work, "*", ".*.tmp"))
			top, _ := filepath.Glob(filepath.Join(f.work, ".*.tmp"))
			if len(leftovers)+len(top) > 0 {
				t.Errorf("temporary files left: %v %v", leftovers, top)
			}
		})
	}
}

func rel(p string) func(writeFixture) string { return func(writeFixture) string { return p } }

func TestEditFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		path     string
		old, new string
		want     string
		wantErr  string
		after    string
	}{
		{name: "one match", path: "edit.txt", old: "gamma\n", new: "GAMMA\nDELTA\n", want: "edited edit.txt: -1 +2 lines at line 3", after: "alpha\nbeta\nGAMMA\nDELTA\nbeta\n"},
		{name: "delete", path: "edit.txt", old: "alpha\n", new: "", want: "edited edit.txt: -1 +0 lines at line 1", after: "beta\ngamma\nbeta\n"},
		{name: "no match", path: "edit.txt", old: "omega", wantErr: "old_text was not found in edit.txt"},
		{name: "whitespace differs", path: "edit.txt", old: "beta\n  gamma", wantErr: "line 2 holds it with different whitespace"},
		{name: "several matches", path: "edit.txt", old: "beta", wantErr: "occurs 2 times in edit.txt (at lines 2, 4)"},
		{name: "empty old_text", path: "edit.txt", old: "", wantErr: "old_text is empty"},
		{name: "the same text", path: "edit.txt", old: "gamma\n", new: "gamma\n", wantErr: "new_text is old_text: nothing to change"},
		{name: "missing file", path: "nope.txt", old: "x", wantErr: "does not exist (write_file creates a file)"},
		{name: "outside", path: "link_out/secret.txt", old: "do", wantErr: "outside the working directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newWriteFixture(t)
			path := filepath.Join(f.work, "edit.txt")
			if err := os.Chmod(path, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := call(t, f.b, "edit_file", map[string]any{"path": tt.path, "old_text": tt.old, "new_text": tt.new})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("result %q, error %v; want %q", got, err, tt.wantErr)
				}
				if c := readString(t, path); c != "alpha\nbeta\ngamma\nbeta\n" {
					t.Errorf("a failed edit changed the file: %q", c)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("result %q, error %v; want %q", got, err, tt.want)
			}
			if c := readString(t, path); c != tt.after {
				t.Errorf("file holds %q, want %q", c, tt.after)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode after the edit: %v %v", fi.Mode(), err)
			}
		})
	}
}

func TestWriteToolsNeedAllowWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := tools.New(tools.Options{Dir: dir})
	for _, d := range b.Tools() {
		if d.Name == "write_file" || d.Name == "edit_file" {
			t.Errorf("%s offered without AllowWrite", d.Name)
		}
	}
	for _, name := range []string{"write_file", "edit_file"} {
		_, err := call(t, b, name, map[string]any{"path": "x.txt", "content": "x", "old_text": "x", "new_text": "y"})
		if err == nil || !strings.Contains(err.Error(), "--allow-write") {
			t.Errorf("%s without AllowWrite: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("a file was written: %v", err)
	}
	offered := map[string]bool{}
	for _, d := range tools.New(tools.Options{Dir: dir, AllowWrite: true}).Tools() {
		offered[d.Name] = true
	}
	if !offered["write_file"] || !offered["edit_file"] {
		t.Errorf("offered with AllowWrite: %v", offered)
	}
}

// A file whose lines end in "\r\n" is edited with old_text and new_text
// written with "\n", and keeps its line endings; a file of mixed endings
// is matched exactly.
func TestEditFileCRLF(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, before, old, new string
		want, after            string
	}{
		{"lines given with \\n", "one\r\ntwo\r\nthree\r\n", "one\ntwo\n", "ONE\nTWO\n", "edited f.txt: -2 +2 lines at line 1", "ONE\r\nTWO\r\nthree\r\n"},
		{"lines given with \\r\\n", "one\r\ntwo\r\nthree\r\n", "two\r\n", "2\r\n2.5\n", "edited f.txt: -1 +2 lines at line 2", "one\r\n2\r\n2.5\r\nthree\r\n"},
		{"a line added", "one\r\ntwo", "two", "two\nthree", "edited f.txt: -1 +2 lines at line 2", "one\r\ntwo\r\nthree"},
		{"mixed endings", "one\r\ntwo\nthree\r\n", "two\nthree", "2\n3", "edited f.txt: -2 +2 lines at line 2", "one\r\n2\n3\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "f.txt")
			mustWrite(t, path, tt.before)
			b := tools.New(tools.Options{Dir: dir, AllowWrite: true})
			got, err := call(t, b, "edit_file", map[string]any{"path": "f.txt", "old_text": tt.old, "new_text": tt.new})
			if err != nil || got != tt.want {
				t.Fatalf("result %q, error %v; want %q", got, err, tt.want)
			}
			if c := readString(t, path); c != tt.after {
				t.Errorf("file holds %q, want %q", c, tt.after)
			}
		})
	}
}

// A read-only file is not changed, though its directory would let the
// rename replace it; a named pipe is not opened (it would wait for a
// writer).
func TestNotChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ro.txt")
	mustWrite(t, path, "keep\n")
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := tools.New(tools.Options{Dir: dir, AllowWrite: true})
	for _, name := range []string{"edit_file", "write_file"} {
		if _, err := call(t, b, name, map[string]any{"path": "fifo", "old_text": "a", "new_text": "b", "content": "b"}); err == nil || !strings.Contains(err.Error(), "fifo is not a regular file (a named pipe): not changed") {
			t.Errorf("%s of a named pipe: %v", name, err)
		}
		got, err := call(t, b, name, map[string]any{"path": "ro.txt", "old_text": "keep", "new_text": "changed", "content": "changed\n"})
		if !errors.Is(err, tools.ErrReadOnly) || !strings.Contains(err.Error(), "ro.txt is read-only (mode 0444)") {
			t.Errorf("%s: result %q, error %v", name, got, err)
		}
	}
	if c := readString(t, path); c != "keep\n" {
		t.Errorf("file holds %q", c)
	}
}
