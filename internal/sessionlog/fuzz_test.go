package sessionlog_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// FuzzParse feeds arbitrary bytes to the reader. Parse must never panic,
// and whatever it accepts must be consistent:
//   - the committed length is a committed length of itself;
//   - every prefix parses to a prefix of the messages (a torn write never
//     changes what was committed before it);
//   - a decoder saved as JSON at a batch boundary and resumed reaches the
//     same summary as one pass (what fsjsonl's list cache relies on);
//   - the messages re-encode and decode to the same messages;
//   - SummarizeLine accepts the same lines as DecodeLine and folds the
//     same summary.
//
// The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"type":"session","version":1,"id":"s","created":"2026-01-01T00:00:00Z","more":1}` + "\n" +
		`{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"hi"}]}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// SummarizeLine accepts and folds what DecodeLine does.
		if n, err := sessionlog.CommittedLength("fuzz", data); err == nil {
			bothPaths(t, sessionlog.Decoder{Name: "fuzz"}, data[:n])
		}
		log, err := sessionlog.Parse("fuzz", data)
		if err != nil || log == nil {
			return
		}
		if log.Committed <= 0 || log.Committed > len(data) || data[log.Committed-1] != '\n' {
			t.Fatalf("committed length %d of %d bytes", log.Committed, len(data))
		}
		if n, err := sessionlog.CommittedLength("fuzz", data[:log.Committed]); err != nil || n != log.Committed {
			t.Fatalf("CommittedLength of the committed part = %d, %v; want %d", n, err, log.Committed)
		}
		if log.Info.MessageCount != len(log.Messages) || log.Info.ID != log.Header.ID {
			t.Fatalf("info %+v for %d messages of session %q", log.Info, len(log.Messages), log.Header.ID)
		}

		// Prefixes, at a few cut points.
		for _, cut := range []int{log.Committed / 2, log.Committed - 1, len(data) / 3} {
			if cut < 0 || cut > len(data) {
				continue
			}
			pre, err := sessionlog.Parse("fuzz", data[:cut])
			if err != nil {
				t.Fatalf("prefix %d of an accepted log: %v", cut, err)
			}
			if pre == nil {
				continue
			}
			if pre.Committed > log.Committed || len(pre.Messages) > len(log.Messages) {
				t.Fatalf("prefix %d committed more (%d) than the whole (%d)", cut, pre.Committed, log.Committed)
			}
			if len(pre.Messages) > 0 && !reflect.DeepEqual(pre.Messages, log.Messages[:len(pre.Messages)]) {
				t.Fatalf("prefix %d parses to messages that are not a prefix", cut)
			}
			// Resume from the prefix's boundary through a JSON round trip.
			d := sessionlog.Decoder{Name: "fuzz"}
			decode := func(d *sessionlog.Decoder, b []byte) error {
				return sessionlog.Lines(b, func(l []byte) error { _, _, err := d.DecodeLine(l); return err })
			}
			if err := decode(&d, data[:pre.Committed]); err != nil {
				t.Fatalf("decode prefix: %v", err)
			}
			saved, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("save decoder: %v", err)
			}
			var resumed sessionlog.Decoder
			if err := json.Unmarshal(saved, &resumed); err != nil {
				t.Fatalf("restore decoder %s: %v", saved, err)
			}
			if err := decode(&resumed, data[pre.Committed:log.Committed]); err != nil {
				t.Fatalf("resumed decode: %v", err)
			}
			a, _ := json.Marshal(resumed.Info)
			b, _ := json.Marshal(log.Info)
			if !bytes.Equal(a, b) {
				t.Fatalf("resumed info %s, one pass %s", a, b)
			}
		}

		// Re-encode and decode again.
		batch := make([]agent.PersistentMessage, len(log.Messages))
		for i, m := range log.Messages {
			batch[i] = agent.PersistentMessage{Message: m}
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		enc, err := sessionlog.EncodeBatch(log.Header.ID, true, batch, at)
		if err != nil {
			t.Fatalf("re-encode accepted messages: %v", err)
		}
		again, err := sessionlog.Parse("again", enc)
		if err != nil || again == nil {
			t.Fatalf("re-encoded log does not parse: %v\n%s", err, enc)
		}
		if again.Committed != len(enc) || len(again.Messages) != len(log.Messages) {
			t.Fatalf("re-encoded log: %d of %d bytes committed, %d messages, want %d", again.Committed, len(enc), len(again.Messages), len(log.Messages))
		}
		for i := range log.Messages {
			if x, y := canonical(t, log.Messages[i]), canonical(t, again.Messages[i]); x != y {
				t.Fatalf("message %d changed in a round trip:\n%s\n%s", i, x, y)
			}
		}
		// And the encoding is stable from then on.
		batch2 := make([]agent.PersistentMessage, len(again.Messages))
		for i, m := range again.Messages {
			batch2[i] = agent.PersistentMessage{Message: m}
		}
		enc2, err := sessionlog.EncodeBatch(log.Header.ID, true, batch2, at)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("second re-encoding differs (%v):\n%s\n%s", err, enc, enc2)
		}
	})
}

// canonical renders a message so that forms a JSON round trip may change
// (nil and empty content or metadata, spacing inside a tool input) compare
// equal.
func canonical(t *testing.T, m agent.Message) string {
	if len(m.Content) == 0 {
		m.Content = nil
	}
	if len(m.Metadata) == 0 {
		m.Metadata = nil
	}
	blocks := make([]agent.Block, len(m.Content))
	for i, b := range m.Content {
		if len(b.Input) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, b.Input); err == nil {
				b.Input = buf.Bytes()
			}
		}
		blocks[i] = b
	}
	m.Content = blocks
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %+v: %v", m, err)
	}
	return string(out)
}

// TestMakeFuzzListsEveryTarget: `make fuzz` runs every fuzz target of the
// repository, so that a new one is not left out as FuzzSummarizeLine
// was: each func Fuzz* of a _test.go file is listed in the Makefile's
// FUZZ_TARGETS as package:name, and each listed one exists.
func TestMakeFuzzListsEveryTarget(t *testing.T) {
	root := filepath.Join("..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`([\w/]+:Fuzz\w+)`).FindAllStringSubmatch(string(makefile), -1) {
		listed[m[1]] = true
	}
	found := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
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
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			found[filepath.ToSlash(pkg)+":"+m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for target := range found {
		if !listed[target] {
			t.Errorf("%s is not in the Makefile's FUZZ_TARGETS", target)
		}
	}
	for target := range listed {
		if !found[target] {
			t.Errorf("the Makefile lists %s, which does not exist", target)
		}
	}
	if len(found) == 0 {
		t.Fatal("no fuzz target found")
	}
}
