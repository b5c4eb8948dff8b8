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
		{[]string{"panto", "prune"}, "`panto prune --help`"},
		{[]string{"panto", "prune", "--dry-run"}, "`panto prune --help`"},
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

// A --tool-timeout of 0 or less is a mistake on the command line, said
// before anything is opened: it is not "no limit" (every extension runs
// bounded), nor silently the 2-minute default.
func TestToolTimeoutNotPositive(t *testing.T) {
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"panto", "--tool-timeout", "0", "--no-session", "hi"}, "`panto --help`"},
		{[]string{"panto", "--tool-timeout=-1s", "--no-session", "hi"}, "`panto --help`"},
		{[]string{"panto", "extensions", "--tool-timeout", "0s"}, "`panto extensions --help`"},
	} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }, now: time.Now}
		code := run(context.Background(), e, c.args)
		msg := strings.TrimSuffix(stderr.String(), "\n")
		if code != 1 || stdout.Len() != 0 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panto: --tool-timeout ") ||
			!strings.Contains(msg, "want a positive duration, as 30s or 5m") || !strings.HasSuffix(msg, "see "+c.help) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, one line on --tool-timeout ending in see %s", c.args, code, stdout.String(), stderr.String(), c.help)
		}
	}
}
