package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
)

// TestImportRecordSparesTheRead: a log the record vouches for (its Key
// as noted, its session at the noted checkpoint) is not read, so a
// file that no longer parses is still "unchanged"; once the session's
// checkpoint differs, or the record is another panto's, or the log's
// Key differs, the log is read again (and refused here).
func TestImportRecordSparesTheRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := fsjsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
	if err := os.WriteFile(log, fixture, 0o644); err != nil {
		t.Fatal(err)
	}
	recordPath := filepath.Join(t.TempDir(), "record.jsonl")
	run := func() importEvent {
		t.Helper()
		stored, err := storedCheckpoints(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		job := &importJob{st: st, stored: stored, projects: newProjectFinder(), record: loadImportRecord(recordPath)}
		_, evs, err := job.batch(ctx, &bytes.Buffer{}, nil, []importer.Source{{Path: log, Agent: importer.Pi}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("import: %v, %+v", err, evs)
		}
		return evs[0]
	}
	first := run()
	if first.Action != "new" {
		t.Fatalf("first import: %+v", first)
	}
	// The log is made unreadable as a log, and its Key put in the
	// record: only a read of it can tell.
	garbage := bytes.Repeat([]byte("x"), len(fixture)-1)
	if err := os.WriteFile(log, append(garbage, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	noted, ok := loadImportRecord(recordPath).entries[log]
	if !ok {
		t.Fatalf("the first import noted nothing of %s", log)
	}
	forge := func(edit func(*recordEntry)) {
		t.Helper()
		r := loadImportRecord(recordPath)
		e := noted
		e.File = filekey.Of(fi)
		edit(&e)
		r.entries = map[string]recordEntry{log: e}
		r.pending = []recordEntry{e}
		r.lines = 1 << 20 // rewritten whole
		if err := r.save(); err != nil {
			t.Fatal(err)
		}
	}
	forge(func(*recordEntry) {})
	if ev := run(); ev.Action != "unchanged" || ev.ID != first.ID || ev.Messages != first.Messages || ev.Source != log {
		t.Fatalf("import of a log the record vouches for: %+v, want unchanged as %+v", ev, first)
	}
	forge(func(e *recordEntry) { e.Rules = "another panto" })
	if ev := run(); ev.Action != "refused" {
		t.Fatalf("import with another panto's record: %+v, want the log read (and refused: not a log)", ev)
	}
	forge(func(e *recordEntry) { e.SHA256 = strings.Repeat("0", 64) })
	if ev := run(); ev.Action != "refused" {
		t.Fatalf("import with the session at another checkpoint: %+v, want the log read", ev)
	}
	forge(func(e *recordEntry) { e.File.CtimeNS++ })
	if ev := run(); ev.Action != "refused" {
		t.Fatalf("import of a log whose Key changed: %+v, want the log read", ev)
	}
}

// TestImportRecordSeesChanges: with the record kept between imports, as
// on a user's machine, every change of a log or of its session is still
// seen: an append, an edit of the same length whose modification time
// is put back (diverged, not "unchanged"), a session continued in panto,
// and a session deleted (panto rm).
func TestImportRecordSeesChanges(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			env := append(providerCases[0].env(b), "XDG_CACHE_HOME="+t.TempDir())
			fixture, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(t.TempDir(), "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
			half := bytes.LastIndexByte(fixture[:len(fixture)/2], '\n') + 1
			if err := os.WriteFile(log, fixture[:half], 0o644); err != nil {
				t.Fatal(err)
			}
			one := func(code int) importEvent {
				t.Helper()
				r := runPanto(t, t.TempDir(), env, "", "import", "--json", log)
				evs := decodeLines[importEvent](t, r.stdout)
				if r.code != code || len(evs) != 1 {
					t.Fatalf("import: exit %d (want %d), %d events: %s", r.code, code, len(evs), r.stderr)
				}
				return evs[0]
			}
			first := one(0)
			if ev := one(0); first.Action != "new" || ev.Action != "unchanged" || ev.ID != first.ID || ev.Messages != first.Messages {
				t.Fatalf("import, and again: %+v, %+v", first, ev)
			}
			if err := os.WriteFile(log, fixture, 0o644); err != nil {
				t.Fatal(err)
			}
			if ev := one(0); ev.Action != "appended" || ev.Appended == 0 {
				t.Fatalf("import of the grown log: %+v", ev)
			}
			if ev := one(0); ev.Action != "unchanged" {
				t.Fatalf("import again: %+v", ev)
			}

			// The same length, the modification time put back (a restore,
			// a tool that keeps times): the change time tells.
			fi, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			edited := bytes.Clone(fixture)
			at := bytes.Index(edited, []byte(`"text":"`)) + len(`"text":"`)
			edited[at] ^= 0x20 // a letter's case
			if err := os.WriteFile(log, edited, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(log, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			if ev := one(1); ev.Action != "diverged" {
				t.Fatalf("import of the log edited in place: %+v, want diverged", ev)
			}
			if err := os.WriteFile(log, fixture, 0o644); err != nil {
				t.Fatal(err)
			}
			if ev := one(0); ev.Action != "unchanged" {
				t.Fatalf("import of the log as it was: %+v", ev)
			}

			if r := runPanto(t, t.TempDir(), env, "", "title", first.ID[:8], "named in panto"); r.code != 0 {
				t.Fatalf("title: %s", r.stderr)
			}
			if ev := one(0); ev.Action != "unchanged" {
				t.Fatalf("import after the session was named in panto: %+v", ev)
			}
			if r := runPanto(t, t.TempDir(), env, "", "rm", "--yes", first.ID[:8]); r.code != 0 {
				t.Fatalf("rm: %s", r.stderr)
			}
			if ev := one(0); ev.Action != "deleted" {
				t.Fatalf("import after panto rm: %+v, want deleted", ev)
			}
		})
	}
}

// TestImportRecordFile: the record's file outlives a torn last line and
// a damaged one, and is rewritten whole, without the logs gone since,
// once it holds more than twice the lines it needs.
func TestImportRecordFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "cache", "record.jsonl")
	r := loadImportRecord(path)
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
		f, ok := r.file(log)
		if !ok {
			t.Fatalf("no key for %s", log)
		}
		r.note(f, importEvent{Action: "new", Agent: "pi", ID: "id" + string(rune('a'+i)), Messages: i}, store.Checkpoint{Length: 3, SHA256: strings.Repeat("a", 64)})
	}
	if err := r.save(); err != nil {
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
	r = loadImportRecord(path)
	if len(r.entries) != 3 || r.lines != 5 {
		t.Fatalf("after a damaged and a torn line: %d entries, %d lines", len(r.entries), r.lines)
	}
	for _, log := range logs {
		f, _ := r.file(log)
		if _, ok := r.lookup(f, importer.Pi); !ok {
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
		f, _ := r.file(logs[1])
		r.note(f, importEvent{Action: "appended", Agent: "pi", ID: "idb", Messages: 10 + i}, store.Checkpoint{Length: int64(10 + i), SHA256: strings.Repeat("b", 64)})
		if err := r.save(); err != nil {
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
	r = loadImportRecord(path)
	if _, ok := r.entries[logs[0]]; ok || len(r.entries) != 2 {
		t.Fatalf("after the rewrite: %v", r.entries)
	}
	f1, _ := r.file(logs[1])
	if e, ok := r.lookup(f1, importer.Pi); !ok || e.Messages != 109 {
		t.Fatalf("the last entry of %s: %+v, %v", logs[1], e, ok)
	}
	if p := importRecordPath(func(k string) string { return map[string]string{"HOME": "/home/me"}[k] }); p != "/home/me/.cache/panto/import/record.jsonl" {
		t.Fatalf("record path: %s", p)
	}
	if p := importRecordPath(func(string) string { return "" }); p != "" {
		t.Fatalf("record path without a home: %s", p)
	}
}
