package fileaccess_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/testkit/fileaccess"
)

// TestWatch: a read, an open without a read, and a read by another
// process are seen; a stat, a rename and a listing of the directory are
// not accesses of a file; a file of a subdirectory is not watched.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"read", "opened", "stat", "child", "renamed"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "deep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := fileaccess.Watch(t, dir)
	if got := w.Take(t); len(got) != 0 {
		t.Fatalf("accesses before any: %v", got)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "read")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "opened"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Stat(filepath.Join(dir, "stat"))
	os.ReadDir(dir)
	os.Rename(filepath.Join(dir, "renamed"), filepath.Join(dir, "moved"))
	os.ReadFile(filepath.Join(sub, "deep"))
	if got, want := w.Take(t), []string{"opened", "read"}; !slices.Equal(got, want) {
		t.Errorf("accessed %v, want %v", got, want)
	}
	if got := w.Take(t); len(got) != 0 {
		t.Errorf("a second Take: %v", got)
	}
	// Another process: cat reads the file.
	exe, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, filepath.Join(dir, "child"))
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got := w.Take(t); !slices.Equal(got, []string{"child"}) {
		t.Errorf("a child's read: %v", got)
	}
}
