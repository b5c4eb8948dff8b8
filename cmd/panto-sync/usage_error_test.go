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
