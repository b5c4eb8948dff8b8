package tools

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAfterCheckStaysInside changes the tree between confine's check
// and the write, as another process could: the write, through os.Root,
// neither follows a parent swapped for a link out nor writes through a
// link put in place of the file.
func TestWriteAfterCheckStaysInside(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		path   string
		swap   func(t *testing.T, work, outside string)
		wantOK bool
		// regular is the file that must be a regular file afterwards.
		regular string
	}{
		{
			name: "parent replaced by a link out",
			path: "sub/x.txt",
			swap: func(t *testing.T, work, outside string) {
				must(t, os.Rename(filepath.Join(work, "sub"), filepath.Join(work, "moved")))
				must(t, os.Symlink(outside, filepath.Join(work, "sub")))
			},
		},
		{
			name: "file replaced by a link out",
			path: "sub/x.txt",
			swap: func(t *testing.T, work, outside string) {
				must(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(work, "sub", "x.txt")))
			},
			wantOK:  true,
			regular: "sub/x.txt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			work, outside := filepath.Join(base, "work"), filepath.Join(base, "outside")
			must(t, os.MkdirAll(filepath.Join(work, "sub"), 0o755))
			must(t, os.Mkdir(outside, 0o755))
			secret := filepath.Join(outside, "secret.txt")
			must(t, os.WriteFile(secret, []byte("secret"), 0o644))
			b := New(Options{Dir: work, AllowWrite: true})
			c, err := b.confine(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.root.Close()
			tt.swap(t, work, outside)
			err = c.write([]byte("written"), 0)
			if (err == nil) != tt.wantOK {
				t.Fatalf("write: %v", err)
			}
			if data, _ := os.ReadFile(secret); string(data) != "secret" {
				t.Errorf("the file outside holds %q", data)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("outside holds %d entries", len(entries))
			}
			if tt.regular != "" {
				fi, err := os.Lstat(filepath.Join(work, tt.regular))
				if err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s: %v %v", tt.regular, fi, err)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
