package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fuzzConvert seeds f with the fixtures of agent a (testdata/) and
// checks that any input converts without a panic to a log that parses,
// is valid on the wire, converts the same twice, and of which the
// conversion of the input's first half (cut at a line) is a prefix.
func fuzzConvert(f *testing.F, a Agent, seeds ...string) {
	for _, s := range seeds {
		data, err := os.ReadFile(filepath.Join("testdata", s))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		lines := bytes.SplitAfter(data, []byte("\n"))
		for i := 0; i+2 <= len(lines); i += 3 {
			f.Add(bytes.Join(lines[i:i+2], nil))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Convert(a, "fuzz.jsonl", data)
		if err != nil {
			return
		}
		again, err := Convert(a, "fuzz.jsonl", data)
		if err != nil || !bytes.Equal(again.Log, c.Log) {
			t.Fatalf("converted twice: %v, the logs differ", err)
		}
		if len(c.Log) > 0 {
			checkLog(t, c)
		}
		cut := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
		half, err := Convert(a, "fuzz.jsonl", data[:cut])
		if err != nil {
			t.Fatalf("the whole converts, its first %d bytes do not: %v", cut, err)
		}
		if !bytes.HasPrefix(c.Log, half.Log) {
			t.Fatalf("the conversion of the first %d bytes is not a prefix of the whole one", cut)
		}
	})
}

func FuzzClaudeCode(f *testing.F) {
	fuzzConvert(f, ClaudeCode, "claude-code.jsonl", "claude-code-subagent.jsonl")
}

func FuzzCodex(f *testing.F) { fuzzConvert(f, Codex, "codex.jsonl") }

func FuzzPi(f *testing.F) { fuzzConvert(f, Pi, "pi.jsonl") }
