package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestUsageErrors: a mistake on the command line is one line on stderr
// that says what is wrong and where the help of that command is, exit 1,
// and nothing on stdout (not the cli package's "Incorrect Usage" and the
// whole help).
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"panto", "--bogus"}, "`panto --help`"},
		{[]string{"panto", "sessions", "--bogus"}, "`panto sessions --help`"},
		{[]string{"panto", "sessions", "--limit", "many"}, "`panto sessions --help`"},
		{[]string{"panto", "extensions", "--bogus"}, "`panto extensions --help`"},
	} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }, now: time.Now}
		code := run(context.Background(), e, c.args)
		msg := strings.TrimSuffix(stderr.String(), "\n")
		if code != 1 || stdout.Len() != 0 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto: ") || !strings.HasSuffix(msg, "see "+c.help) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, one line ending in see %s", c.args, code, stdout.String(), stderr.String(), c.help)
		}
	}
}
