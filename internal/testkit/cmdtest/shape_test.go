package cmdtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var testShapes = Shapes{
	"session": {"id": "id", "created": "time", "messages": "integer", "title": "string?", "usage": "tokens", "tags": "[]string?"},
	"tokens":  {"input_tokens": "number"},
	"summary": {"counts": "map:integer", "sha256": "sha256|empty", "done": "bool"},
}

const goodSession = `{"id":"0123456789abcdef0123456789abcdef","created":"2026-01-02T03:04:05.5Z","messages":3,"usage":{"input_tokens":12}}`

// TestShapeChecker: each way a script's reading breaks is reported, and
// names where: a renamed field (missing, and unknown), a number become a
// string, an id or a time in another form, a nested object's field, an
// element of an array; valid output passes, and the fields it never
// showed are listed.
func TestShapeChecker(t *testing.T) {
	c := NewShapeChecker(testShapes)
	if errs := c.Check("ok", decode(t, goodSession), "session"); errs != nil {
		t.Fatalf("a valid session: %v", errs)
	}
	if errs := c.Check("ok", decode(t, `{"counts":{},"sha256":"","done":false}`), "summary"); errs != nil {
		t.Fatalf("a valid summary: %v", errs)
	}
	if errs := c.Check("ok", decode(t, "["+goodSession+"]"), "[]session"); errs != nil {
		t.Fatalf("an array of valid sessions: %v", errs)
	}
	if got, want := c.Unseen("session"), []string{"session.tags", "session.title"}; !slices.Equal(got, want) {
		t.Errorf("unseen %v, want %v", got, want)
	}
	for _, tt := range []struct {
		name, json, typ string
		says            []string
	}{
		{"renamed", strings.Replace(goodSession, `"messages"`, `"message_count"`, 1), "session", []string{`no field "messages"`, `"message_count" is not one of session's`}},
		{"number as string", strings.Replace(goodSession, `"messages":3`, `"messages":"3"`, 1), "session", []string{`x.messages: "3" is not an integer`}},
		{"fraction", strings.Replace(goodSession, `"messages":3`, `"messages":3.5`, 1), "session", []string{"is not an integer"}},
		{"short id", strings.Replace(goodSession, `0123456789abcdef0123456789abcdef`, `0123`, 1), "session", []string{"x.id", "session id"}},
		{"not a time", strings.Replace(goodSession, `2026-01-02T03:04:05.5Z`, `yesterday`, 1), "session", []string{"x.created", "RFC 3339"}},
		{"nested", strings.Replace(goodSession, `"input_tokens":12`, `"input":12`, 1), "session", []string{`x.usage: no field "input_tokens"`}},
		{"optional of a wrong type", strings.Replace(goodSession, `"messages":3`, `"messages":3,"title":7`, 1), "session", []string{"x.title: 7 is not a string"}},
		{"array element", `[` + goodSession + `,{"id":1}]`, "[]session", []string{"x[1].id"}},
		{"not an array", goodSession, "[]session", []string{"is not an array"}},
		{"map values", `{"counts":{"pushed":1,"failed":"no"},"sha256":"` + strings.Repeat("ab", 32) + `","done":true}`, "summary", []string{"x.counts.failed"}},
		{"bool", `{"counts":{},"sha256":"` + strings.Repeat("ab", 32) + `","done":1}`, "summary", []string{"x.done: 1 is not true or false"}},
		{"sha256", `{"counts":{},"sha256":"abc","done":true}`, "summary", []string{`x.sha256: "abc" is not sha256|empty`}},
	} {
		errs := c.Check("x", decode(t, tt.json), tt.typ)
		got := fmt.Sprint(errs)
		for _, s := range tt.says {
			if !strings.Contains(got, s) {
				t.Errorf("%s: errors %q do not say %q", tt.name, got, s)
			}
		}
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
