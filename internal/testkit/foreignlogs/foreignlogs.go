// Package foreignlogs finds the real session logs of other agents (Claude
// Code, Codex, pi) that tests of panto import read: shared/fixtures/foreign
// beside the clone, kept out of the repository (their sources and
// licences are in its SOURCES.md).
package foreignlogs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns the directory of the real logs, one subdirectory per agent,
// or skips the test when it is not there. root is the repository's root;
// the logs are in root/../shared/fixtures/foreign, or beside the main
// checkout when root is a git worktree. PANTO_FOREIGN_FIXTURES overrides
// both.
func Dir(t testing.TB, root string) string {
	t.Helper()
	if dir := os.Getenv("PANTO_FOREIGN_FIXTURES"); dir != "" {
		return dir
	}
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	candidates := []string{filepath.Join(root, "..", "shared", "fixtures", "foreign")}
	if data, err := os.ReadFile(filepath.Join(root, ".git")); err == nil { // a worktree: "gitdir: MAIN/.git/worktrees/NAME"
		gitdir := strings.TrimSpace(strings.TrimPrefix(string(data), "gitdir:"))
		sep := string(filepath.Separator)
		if i := strings.Index(gitdir, sep+".git"+sep); i >= 0 {
			candidates = append(candidates, filepath.Join(gitdir[:i], "..", "shared", "fixtures", "foreign"))
		}
	}
	for _, dir := range candidates {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
	}
	t.Skipf("no real foreign logs beside the clone (looked in %s)", strings.Join(candidates, ", "))
	return ""
}
