package cmdtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuildRace: a command built by Build reports a race it has when the
// tests run under the race detector, and Stderr finds the report.
func TestBuildRace(t *testing.T) {
	src := t.TempDir()
	prog := `package main

import "fmt"

func main() {
	n := 0
	done := make(chan bool)
	go func() { n++; done <- true }()
	n++
	<-done
	fmt.Println(n)
}
`
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module racy\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := t.TempDir()
	t.Chdir(src)
	if err := Build(ctx, out, "."); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, filepath.Join(out, "racy"))
	cmd.Stderr = &stderr
	err := cmd.Run()
	report := RaceReport(stderr.String())
	if !Race {
		if err != nil || report != "" {
			t.Fatalf("built without -race: %v, report %q", err, report)
		}
		return
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 66 || report == "" {
		t.Fatalf("built with -race, a racy command: %v, stderr %q; want exit 66 and a report", err, stderr.String())
	}
}
