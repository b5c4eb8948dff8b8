package importer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// fuzzConvert seeds f with the fixtures of agent a (testdata/) and
// checks that any input converts without a panic to a log that parses,
// is valid on the wire, converts the same twice, and of which the
// conversion of the input's first half (cut at a line) is a prefix (of a
// form of it, for a Claude Code fork).
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
		// Each form of the conversion of the first half (what an import
		// then stored) is a prefix of a form of the whole's, which that
		// stored session grows in: the conversion itself of the whole's,
		// but where the first half cannot tell what the whole can (a
		// Claude Code fork before its first answer).
		for i, form := range half.forms() {
			if !slices.ContainsFunc(c.forms(), func(whole []byte) bool { return bytes.HasPrefix(whole, form) }) {
				t.Fatalf("form %d of the conversion of the first %d bytes is not a prefix of a form of the whole one's", i, cut)
			}
		}
		if !bytes.HasPrefix(c.Log, half.Log) && claudeCodeFork(data).parent == "" {
			t.Fatalf("the conversion of the first %d bytes is not a prefix of the whole one", cut)
		}
	})
}

func FuzzClaudeCode(f *testing.F) {
	fuzzConvert(f, ClaudeCode, "claude-code.jsonl", "claude-code-subagent.jsonl", "claude-code-fork.jsonl")
}

func FuzzCodex(f *testing.F) {
	fuzzConvert(f, Codex, "codex.jsonl", "codex-0.171.jsonl", "codex-0.171-fork.jsonl", "codex-migrated.jsonl")
}

func FuzzPi(f *testing.F) { fuzzConvert(f, Pi, "pi.jsonl", "pi-fork.jsonl") }

// FuzzUnderStoredHeader: any first line a store may hold of a session
// either is refused (nil) or gives the conversion's lines under exactly
// that line, the conversion's header with the stored project alone
// changed.
func FuzzUnderStoredHeader(f *testing.F) {
	var logs [][]byte
	for _, tc := range []struct {
		a    Agent
		file string
	}{{ClaudeCode, "claude-code.jsonl"}, {Codex, "codex.jsonl"}, {Pi, "pi.jsonl"}} {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			f.Fatal(err)
		}
		c, err := Convert(tc.a, tc.file, data)
		if err != nil {
			f.Fatal(err)
		}
		logs = append(logs, c.Log)
		for _, form := range c.forms() {
			f.Add(len(logs)-1, form[:bytes.IndexByte(form, '\n')+1])
		}
		other, err := c.WithProject(agent.Project{Remote: "host.test/team/app", Root: "/w/app", Path: "cmd", Dir: "/w/app/cmd"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(len(logs)-1, other.Log[:bytes.IndexByte(other.Log, '\n')+1])
	}
	f.Fuzz(func(t *testing.T, which int, header []byte) {
		if which < 0 {
			which = -which
		}
		log := logs[which%len(logs)]
		got := underStoredHeader(log, header)
		if got == nil {
			return
		}
		if !bytes.HasPrefix(got, header) || !bytes.Equal(got[len(header):], log[bytes.IndexByte(log, '\n')+1:]) {
			t.Fatalf("under %q: not that line followed by the conversion's lines", header)
		}
		var stored, ours sessionlog.Header
		if err := json.Unmarshal(header, &stored); err != nil {
			t.Fatalf("accepted a header that does not parse: %v", err)
		}
		if err := json.Unmarshal(log[:bytes.IndexByte(log, '\n')], &ours); err != nil {
			t.Fatal(err)
		}
		ours.Project = stored.Project
		if want, err := sessionlog.EncodeHeader(ours); err != nil || !bytes.Equal(want, header) {
			t.Fatalf("accepted %q, which differs from the conversion's header in more than its project", header)
		}
	})
}

// FuzzCodexForkLinked: any parent log given to a fork converts without
// a panic to a log that parses, and once it copies the parent's
// messages, the parent's lines past the fork point change nothing.
func FuzzCodexForkLinked(f *testing.F) {
	fork, err := os.ReadFile(filepath.Join("testdata", "codex-0.171-fork.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	parent, err := os.ReadFile(filepath.Join("testdata", "codex-0.171-fork-parent.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	alone, err := Convert(Codex, "fork.jsonl", fork)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(parent)
	f.Add(parent[:len(parent)/2])
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := ConvertLinked(Codex, "fork.jsonl", fork, func(string) ([]byte, bool) { return p, true })
		if err != nil {
			t.Fatal(err)
		}
		checkLog(t, c)
		grown := append(append([]byte{}, p...), []byte(`{"ordinal":99999,"type":"event_msg","payload":{"type":"user_message","message":"later"}}`+"\n")...)
		g, err := ConvertLinked(Codex, "fork.jsonl", fork, func(string) ([]byte, bool) { return grown, true })
		if err != nil {
			t.Fatal(err)
		}
		if linked := !bytes.Equal(c.Log, alone.Log); linked && !bytes.Equal(g.Log, c.Log) {
			t.Fatalf("the parent grown past the fork point changed the fork's conversion")
		}
	})
}
