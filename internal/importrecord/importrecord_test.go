package importrecord

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/store"
)

// TestRecordFile: the record's file outlives a torn last line and
// a damaged one, and is rewritten whole, without the logs gone since,
// once it holds more than twice the lines it needs.
func TestRecordFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "cache", "record.jsonl")
	r := Load(path)
	if r == nil {
		t.Fatal("no record")
	}
	var logs []string
	for i := range 3 {
		log := filepath.Join(dir, "log"+string(rune('a'+i))+".jsonl")
		if err := os.WriteFile(log, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, log)
		f, ok := r.File(log)
		if !ok {
			t.Fatalf("no key for %s", log)
		}
		r.Note(f, Entry{Agent: "pi", ID: "id" + string(rune('a'+i)), Messages: i, Length: 3, SHA256: strings.Repeat("a", 64)})
	}
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not json\n{\"source\":\"/x\",\"fi"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r = Load(path)
	if len(r.entries) != 3 || r.lines != 5 {
		t.Fatalf("after a damaged and a torn line: %d entries, %d lines", len(r.entries), r.lines)
	}
	for _, log := range logs {
		f, _ := r.File(log)
		if _, ok := r.Lookup(f, "pi"); !ok {
			t.Fatalf("%s not found in the record", log)
		}
	}
	if err := os.Remove(logs[0]); err != nil {
		t.Fatal(err)
	}
	// Noted again and again (a log a watch imports at every turn): the
	// file is rewritten once it holds more than twice its entries and
	// the slack.
	for i := range 100 {
		f, _ := r.File(logs[1])
		r.Note(f, Entry{Agent: "pi", ID: "idb", Messages: 10 + i, Length: int64(10 + i), SHA256: strings.Repeat("b", 64)})
		if err := r.Save(); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte{'\n'}); n > 2*2+64 {
		t.Fatalf("the record holds %d lines for 2 logs", n)
	}
	r = Load(path)
	if _, ok := r.entries[logs[0]]; ok || len(r.entries) != 2 {
		t.Fatalf("after the rewrite: %v", r.entries)
	}
	f1, _ := r.File(logs[1])
	if e, ok := r.Lookup(f1, "pi"); !ok || e.Messages != 109 {
		t.Fatalf("the last entry of %s: %+v, %v", logs[1], e, ok)
	}
	if p := Path(func(k string) string { return map[string]string{"HOME": "/home/me"}[k] }); p != "/home/me/.cache/panto/import/record.jsonl" {
		t.Fatalf("record path: %s", p)
	}
	if p := Path(func(string) string { return "" }); p != "" {
		t.Fatalf("record path without a home: %s", p)
	}
}

// FuzzRecord: a record file of any bytes loads without failing,
// keeps only whole entries of this panto, and what it keeps is saved
// and loaded again as it was.
func FuzzRecord(f *testing.F) {
	rules, err := executableRules()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"source":"/l.jsonl","file":{"ino":1,"size":3,"mtime_ns":2,"ctime_ns":2},"rules":"` + rules + `","agent":"pi","foreign_id":"f","id":"i","messages":1,"length":3,"sha256":"aa"}` + "\n"))
	f.Add([]byte("not json\n{\"source\":\"/x\",\"rules\":\"" + rules + "\"}\n{\"source\":"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "record.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := Load(path)
		for src, e := range r.entries {
			if e.Source != src || e.Rules != rules {
				t.Fatalf("kept %+v under %q", e, src)
			}
		}
		for _, e := range r.entries {
			r.pending = append(r.pending, e)
		}
		r.lines = 1 << 20 // rewritten whole, the logs gone left out
		if err := r.Save(); err != nil {
			t.Fatal(err)
		}
		again := Load(path)
		for src, e := range r.entries {
			if again.entries[src] != e {
				t.Fatalf("%q saved as %+v, loaded as %+v", src, e, again.entries[src])
			}
		}
	})
}

// TestHolds: an entry vouches for the store's copy only at the length
// and hash it noted; a listing without hashes vouches for nothing.
func TestHolds(t *testing.T) {
	e := Entry{Length: 3, SHA256: "aa"}
	for _, tc := range []struct {
		at   store.Checkpoint
		want bool
	}{
		{store.Checkpoint{Length: 3, SHA256: "aa"}, true},
		{store.Checkpoint{Length: 4, SHA256: "aa"}, false},
		{store.Checkpoint{Length: 3, SHA256: "ab"}, false},
		{store.Checkpoint{Length: 3}, false},
		{store.Checkpoint{}, false},
	} {
		if got := e.Holds(tc.at); got != tc.want {
			t.Errorf("Holds(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
	if (Entry{}).Holds(store.Checkpoint{}) {
		t.Error("an empty entry holds an empty checkpoint")
	}
	// An outcome the log's bytes decided vouches for no checkpoint.
	if (Entry{Length: 3, SHA256: "aa", Outcome: OutcomeSkipped}).Holds(store.Checkpoint{Length: 3, SHA256: "aa"}) {
		t.Error("a skipped entry holds a checkpoint")
	}
}
