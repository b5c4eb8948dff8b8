package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsageErrors: a mistake on the command line is one line that names
// the help of the command it was made in, the root's as panto-sync's.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"panto-sync", "--bogus"}, "`panto-sync --help`"},
		{[]string{"panto-sync", "push", "--bogus"}, "`panto-sync push --help`"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		msg := strings.TrimSuffix(stderr.String(), "\n")
		if code != 1 || stdout.Len() != 0 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto-sync: ") || !strings.HasSuffix(msg, "see "+c.help) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, one line ending in see %s", c.args, code, stdout.String(), stderr.String(), c.help)
		}
	}
}

// TestFlagsAfterTheBucket: a command's flags may follow its arguments,
// as people type them (status s3://b --json); the command then runs
// with them, and fails on what it meets next (here, no catalog).
func TestFlagsAfterTheBucket(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"panto-sync", "status", "s3://bucket", "--dir", t.TempDir() + "/none", "--json"}, &stdout, &stderr)
	if code != 1 || strings.Contains(stderr.String(), "unexpected argument") || !strings.Contains(stderr.String(), "no session catalog") {
		t.Errorf("exit %d, stderr %q; want the catalog's error, the flags read", code, stderr.String())
	}
}
