package main

import (
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
)

// pantoShapes are panto's --json outputs as a script reads them: the field
// names README.md and each command's --help use (sessions --json "adds
// parent and token totals"; `.[0].id`, `.usage.output_tokens`,
// `.session.usage`, `.messages[-1]`, `.total.output_tokens`, `.session`
// of a match, `.id` of a fork) and every other field the commands print.
// Renaming one is a change of the interface: it fails here.
var pantoShapes = cmdtest.Shapes{
	// A session: panto sessions --json, prune --dry-run --json, and the
	// session of show --json and of the JSON export.
	"session": {
		"id": "id", "created": "time", "modified": "time", "messages": "integer", "usage": "totals",
		"title": "string?", "last_user_message": "string?",
		"api_style": "string?", "base_url": "string?", "model": "string?", "reasoning": "string?",
		"parent": "id?", "forked_at": "integer?", "project": "project?",
	},
	// project: where a session was started.
	"project": {"key": "string", "remote": "string?", "root": "string?", "path": "string?", "dir": "string?"},
	// totals: every count, zeros included.
	"totals": {"input_tokens": "integer", "output_tokens": "integer", "cache_read_tokens": "integer", "cache_write_tokens": "integer", "reasoning_tokens": "integer"},
	// tokens: a message's usage, as stored (zeros left out).
	"tokens": {"input_tokens": "integer?", "output_tokens": "integer?", "cache_read_tokens": "integer?", "cache_write_tokens": "integer?", "reasoning_tokens": "integer?"},
	"show":   {"session": "session", "messages": "[]message"},
	"message": {
		"role": "string", "content": "[]block", "usage": "tokens?",
		"stop_reason": "string?", "stop": "string?", "metadata": "object?",
	},
	"block": {
		"type": "string", "text": "string?", "signature": "string?", "tool_use_id": "string?", "name": "string?",
		"input": "any?", "is_error": "bool?", "mode": "string?", "data": "string?",
	},
	"export": {"session": "session", "messages": "[]exportMessage"},
	"exportMessage": {
		"n": "integer", "ts": "time", "role": "string", "kind": "string", "content": "[]block",
		"title": "string?", "usage": "totals?", "api_style": "string?", "base_url": "string?", "model": "string?",
		"reasoning": "string?", "stop_reason": "string?", "stop": "string?", "metadata": "object?",
	},
	"title": {"id": "id", "title": "string"},
	"fork":  {"id": "id", "parent": "id", "forked_at": "integer"},
	"match": {
		"session": "id", "message": "integer", "ts": "time", "role": "string", "block": "string",
		"snippet": "string", "match": "string", "count": "integer", "title": "string?", "tool": "string?", "project": "string?",
	},
	// usage: the groups of --by under models, projects or days.
	"usage": {
		"by": "string", "models": "[]modelUsage?", "projects": "[]projectUsage?", "days": "[]dayUsage?",
		"total": "modelUsage", "sessions_read": "integer", "bytes_read": "integer", "since": "time?",
	},
	"projectUsage": {
		"project": "string", "sessions": "integer", "answers": "integer",
		"input_tokens": "integer", "output_tokens": "integer", "cache_read_tokens": "integer", "cache_write_tokens": "integer", "reasoning_tokens": "integer",
	},
	"dayUsage": {
		"day": "string", "sessions": "integer", "answers": "integer",
		"input_tokens": "integer", "output_tokens": "integer", "cache_read_tokens": "integer", "cache_write_tokens": "integer", "reasoning_tokens": "integer",
	},
	"modelUsage": {
		"model": "string?", "api_style": "string?", "sessions": "integer", "answers": "integer",
		"input_tokens": "integer", "output_tokens": "integer", "cache_read_tokens": "integer", "cache_write_tokens": "integer", "reasoning_tokens": "integer",
	},
	// removal: what rm and prune deleted.
	"removal": {
		"id": "id", "deleted": "time", "length": "integer", "sha256": "sha256?", "already_deleted": "bool?",
		"messages": "integer?", "title": "string?", "last_user_message": "string?",
	},
}

// TestJSONFieldNames runs every panto command that prints JSON and checks
// what it prints against pantoShapes: decoded into plain maps, as a
// script reads it, every field present, named and typed as there; and,
// over the whole run, every field of every shape seen at least once, so
// that no field is left out of the check by a session that happens not
// to have it. On a directory only: the JSON is the command's, the same
// for every store.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	seedSearch(t, b) // roundTripID (every block kind, usage, metadata), thinkingID
	old := writeOldSession(t, b.openAt, "from two years ago", time.Now().AddDate(-2, 0, 0))
	writeProjectSession(t, b, agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Path: "cmd", Dir: "/src/proj/cmd"}, "exit in a project")
	check := cmdtest.NewShapeChecker(pantoShapes)
	for _, tt := range []struct {
		args []string
		typ  string
	}{
		{[]string{"title", "--json", roundTripID, "A title"}, "title"},
		{[]string{"fork", "--json", "--at", "6", roundTripID}, "fork"},
		{[]string{"sessions", "--all", "--json"}, "[]session"},
		{[]string{"show", "--json", roundTripID}, "show"},
		{[]string{"show", "--json", thinkingID}, "show"},
		{[]string{"export", "--format", "json", roundTripID}, "export"},
		{[]string{"search", "--json", "--thinking", "re:exit|plan|go test"}, "lines:match"},
		{[]string{"usage", "--json"}, "usage"},
		{[]string{"usage", "--json", "--since", "1h"}, "usage"},
		{[]string{"usage", "--json", "--by", "project"}, "usage"},
		{[]string{"usage", "--json", "--by", "day"}, "usage"},
		{[]string{"prune", "--json", "--older-than", "365d", "--dry-run"}, "[]session"},
		{[]string{"prune", "--json", "--older-than", "365d", "--yes"}, "[]removal"},
		{[]string{"rm", "--json", "--yes", thinkingID}, "[]removal"},
		{[]string{"rm", "--json", "--yes", roundTripID, thinkingID, old}, "[]removal"}, // titled, then two deleted already
	} {
		r := pantoOn(t, b, tt.args...)
		check.CheckJSON(t, "panto "+strings.Join(tt.args, " "), []byte(r.stdout), tt.typ)
	}
	for _, f := range check.Unseen() {
		t.Errorf("no output showed %s: the check cannot see it renamed", f)
	}
}
