package miniotest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestChildProcessesAreBounded: every process a test of this module
// starts is made with exec.CommandContext (a deadline kills it, and its
// Wait returns), never exec.Command, whose Wait can hang a CI run for its
// whole limit when the child does not exit (a missed signal, a stuck
// server). It reads the module's test files; the harness's own server
// processes (killed by group, and with the binary) are not test files.
func TestChildProcessesAreBounded(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Command" {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "exec" {
					rel, _ := filepath.Rel(root, fset.Position(call.Pos()).Filename)
					t.Errorf("%s:%d: exec.Command without a context: use exec.CommandContext with a deadline (and WaitDelay)", rel, fset.Position(call.Pos()).Line)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("read only %d test files under %s", files, root)
	}
}
