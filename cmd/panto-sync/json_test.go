package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/internal/testkit/cmdtest"
)

// syncShapes are panto-sync's --json outputs as a script reads them: the
// field names README.md and each command's --help use (`.event`, `.id`,
// `.action`, `.key_id`; "one JSON object per event, then a summary") and
// every other field the commands print. Renaming one is a change of the
// interface: it fails here.
var syncShapes = cmdtest.Shapes{
	// event: one session's fate in push, pull, copy, status, verify,
	// repair and compact. Its id is a session's, or for repair's
	// damaged-shard the shard's name.
	"event": {
		"event": "string", "id": "string", "bytes": "integer", "action": "string?",
		"local_length": "integer?", "remote_length": "integer?", "src_length": "integer?", "dst_length": "integer?",
		"deleted_at": "time?", "new_id": "id?", "forked_from": "id?", "error": "string?", "note": "string?",
	},
	// summary: the last line of every command but keygen.
	"summary": {
		"event": "string", "command": "string", "dry_run": "bool", "sessions": "integer", "counts": "map:integer",
		"bytes": "integer", "seconds": "number", "failed": "integer", "diverged": "integer", "exit_code": "integer",
	},
	// session: one line of ls (the sha256 of a damaged session is empty).
	"session": {
		"event": "string", "id": "id", "created": "time", "modified": "time", "message_count": "integer",
		"length": "integer", "sha256": "sha256|empty", "last_user_message": "string?", "model": "string?", "error": "string?",
	},
	"keygen": {"event": "string", "file": "string", "key_id": "string"},
}

// TestJSONFieldNames runs every panto-sync command with --json, in the
// states that make it print each field (a deletion, a divergence kept
// both ways, a damaged local session, a dry run), and checks each line
// against syncShapes: decoded into plain maps, as a script reads it,
// every field named and typed as there, the summary last; over the whole
// run every field of every shape is seen at least once.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	check := cmdtest.NewShapeChecker(syncShapes)
	// lines checks output of one JSON object per line: each of typ, the
	// last the summary of cmd.
	lines := func(cmd string, r result, typ string) {
		t.Helper()
		out := strings.Split(strings.TrimSpace(r.stdout), "\n")
		last := out[len(out)-1]
		var sum map[string]any
		if err := json.Unmarshal([]byte(last), &sum); err != nil || sum["event"] != "summary" || sum["command"] != cmd {
			t.Errorf("%s --json: the last line is not its summary: %q", cmd, last)
		}
		check.CheckJSON(t, cmd+" summary", []byte(last), "summary")
		if len(out) > 1 {
			check.CheckJSON(t, cmd, []byte(strings.Join(out[:len(out)-1], "\n")), "lines:"+typ)
		}
	}

	r := e.must(t, 0, "keygen", "--json", filepath.Join(t.TempDir(), "bucket.key"))
	check.CheckJSON(t, "keygen", []byte(r.stdout), "keygen")

	dir, ids := catalog(t, 4)
	lines("push", e.must(t, 0, "push", "--json", "--dry-run", "--dir", dir, e.url), "event")
	lines("push", e.must(t, 0, "push", "--json", "--dir", dir, e.url), "event")
	appendBatch(t, dir, ids[1], false)
	lines("status", e.must(t, 0, "status", "--json", "--dir", dir, e.url), "event")
	lines("ls", e.must(t, 0, "ls", "--json", e.url), "session")
	lines("verify", e.must(t, 0, "verify", "--json", e.url), "event")
	lines("repair", e.must(t, 0, "repair", "--json", "--dry-run", e.url), "event")
	lines("compact", e.must(t, 0, "compact", "--json", e.url), "event")
	lines("compact", e.must(t, 0, "compact", "--json", dir), "event") // a directory: a note
	copied := t.TempDir()
	lines("copy", e.must(t, 0, "copy", "--json", e.url, copied), "event")
	pulled := t.TempDir()
	lines("pull", e.must(t, 0, "pull", "--json", "--dir", pulled, e.url), "event")

	// A deletion carried: deleted_at.
	deleteLocal(t, dir, ids[0])
	lines("push", e.must(t, 0, "push", "--json", "--dir", dir, e.url), "event")
	// A divergence kept both ways: new_id, forked_from.
	appendBatch(t, dir, ids[2], false)
	appendBatch(t, pulled, ids[2], false)
	e.must(t, 0, "push", "--dir", pulled, e.url)
	lines("push", e.must(t, 3, "push", "--json", "--dir", dir, e.url), "event")
	lines("push", e.must(t, 0, "push", "--json", "--on-diverge=keep-both", "--dir", dir, e.url), "event")

	// A damaged local session: ls says what is wrong with it (error),
	// verify fails it.
	path := filepath.Join(copied, ids[3]+".jsonl")
	appendFile(t, path, []byte("this line is not JSON\n"))
	lines("ls", e.run(t, "ls", "--json", copied), "session")
	lines("verify", e.must(t, 1, "verify", "--json", copied), "event")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}

	for _, f := range check.Unseen() {
		t.Errorf("no output showed %s: the check cannot see it renamed", f)
	}
}
