package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/importer"
	"github.com/panto-dev/panto/internal/filekey"
	"github.com/panto-dev/panto/internal/importrecord"
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
		return importInProcess(t, st, recordPath, importer.Source{Path: log, Agent: importer.Pi})
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
	noted := recordLines(t, recordPath)
	if len(noted) != 1 || noted[0].Source != log {
		t.Fatalf("the first import noted %+v, want %s", noted, log)
	}
	forge := func(edit func(*importrecord.Entry)) { forgeRecord(t, recordPath, noted[0], fi, edit) }
	forge(func(*importrecord.Entry) {})
	if ev := run(); ev.Action != "unchanged" || ev.ID != first.ID || ev.Messages != first.Messages || ev.Source != log {
		t.Fatalf("import of a log the record vouches for: %+v, want unchanged as %+v", ev, first)
	}
	forge(func(e *importrecord.Entry) { e.Rules = "another panto" })
	if ev := run(); ev.Action != "refused" {
		t.Fatalf("import with another panto's record: %+v, want the log read (and refused: not a log)", ev)
	}
	forge(func(e *importrecord.Entry) { e.SHA256 = strings.Repeat("0", 64) })
	if ev := run(); ev.Action != "refused" {
		t.Fatalf("import with the session at another checkpoint: %+v, want the log read", ev)
	}
	forge(func(e *importrecord.Entry) { e.File.CtimeNS++ })
	if ev := run(); ev.Action != "refused" {
		t.Fatalf("import of a log whose Key changed: %+v, want the log read", ev)
	}
}

// TestImportRecordSparesSkipped: a log skipped (not an agent's log) or
// waiting (no message complete yet) comes to that again while its Key is
// the one noted, without a read: a file that is now a whole pi log, its
// Key forged into the record, is still skipped, or still waiting; with
// another panto's record, or another Key, it is read (and imported).
func TestImportRecordSparesSkipped(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile(filepath.Join("..", "..", "importer", "testdata", "pi.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	header := fixture[:bytes.IndexByte(fixture, '\n')+1]
	for _, c := range []struct {
		name, outcome string
		agent         importer.Agent
		first         []byte
	}{
		{"not a log", "skipped", "", []byte("some notes, not a log\n")},
		{"no message yet", "waiting", importer.Pi, header},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := fsjsonl.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(t.TempDir(), "2026-03-01T10-00-00-000Z_0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl")
			if err := os.WriteFile(log, c.first, 0o644); err != nil {
				t.Fatal(err)
			}
			recordPath := filepath.Join(t.TempDir(), "record.jsonl")
			run := func() importEvent {
				return importInProcess(t, st, recordPath, importer.Source{Path: log, Agent: c.agent})
			}
			first := run()
			if first.Action != c.outcome {
				t.Fatalf("first import: %+v, want %s", first, c.outcome)
			}
			noted := recordLines(t, recordPath)
			if len(noted) != 1 || noted[0].Outcome != c.outcome || noted[0].Length != 0 {
				t.Fatalf("the first import noted %+v, want the outcome %s", noted, c.outcome)
			}
			// The file becomes a whole log; only a read can tell.
			if err := os.WriteFile(log, fixture, 0o644); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			forge := func(edit func(*importrecord.Entry)) { forgeRecord(t, recordPath, noted[0], fi, edit) }
			forge(func(*importrecord.Entry) {})
			if ev := run(); ev.Action != c.outcome || ev.Error != first.Error {
				t.Fatalf("import of a log the record says is %s: %+v", c.outcome, ev)
			}
			forge(func(e *importrecord.Entry) { e.Rules = "another panto" })
			if ev := run(); ev.Action != "new" {
				t.Fatalf("import with another panto's record: %+v, want the log read and imported", ev)
			}
		})
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

// recordLines reads the record of imported logs at path.
// importInProcess imports src into st in this process, with the record
// at recordPath, and returns its one event.
func importInProcess(t *testing.T, st store.LogStore, recordPath string, src importer.Source) importEvent {
	t.Helper()
	ctx := context.Background()
	stored, err := storedCheckpoints(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	job := &importJob{st: st, stored: stored, projects: newProjectFinder(), record: importrecord.Load(recordPath)}
	_, evs, err := job.batch(ctx, &bytes.Buffer{}, nil, []importer.Source{src})
	if err != nil || len(evs) != 1 {
		t.Fatalf("import: %v, %+v", err, evs)
	}
	return evs[0]
}

// forgeRecord makes the record at recordPath the one line e, edited,
// that notes the log whose file is fi now: only a read of the log can
// then tell whether it is what e says.
func forgeRecord(t *testing.T, recordPath string, e importrecord.Entry, fi os.FileInfo, edit func(*importrecord.Entry)) {
	t.Helper()
	e.File = filekey.Of(fi)
	edit(&e)
	line, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recordPath, append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

func recordLines(t *testing.T, path string) []importrecord.Entry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeLines[importrecord.Entry](t, string(data))
}
