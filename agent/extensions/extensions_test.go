package extensions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/agent/extensions"
)

// writeExt writes a Lua file into dir and returns its path.
func writeExt(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const toolsLua = `
local function count(s)
  local n = 0
  for _ in s:gmatch("%S+") do n = n + 1 end
  return n
end
panto.tool {
  name = "word_count",
  description = "Count the words of a text",
  parameters = { type = "object", properties = { text = { type = "string" } }, required = { "text" } },
  run = function(input) return "words=" .. count(input.text) end,
}
panto.tool {
  name = "shape",
  description = "a table result",
  run = function(input) return { n = #input.list, first = input.list[1], nested = { ok = true } } end,
}
panto.tool { name = "boom", description = "fails", run = function(input) error("it broke") end }
panto.tool { name = "refuse", description = "fails politely", run = function(input) return nil, "not today" end }
panto.tool { name = "spin", description = "never ends", run = function(input) while true do end end }
panto.tool { name = "say", description = "prints", run = function(input) print("hello", 42) return "said" end }
`

func TestTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeExt(t, dir, "tools.lua", toolsLua)
	var log bytes.Buffer
	h := extensions.New(extensions.Options{Timeout: 100 * time.Millisecond, Log: &log})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	f := h.Files()[0]
	decls := f.Tools()
	if len(decls) != 6 || decls[0].Name != "word_count" || decls[0].Description != "Count the words of a text" {
		t.Fatalf("decls %+v", decls)
	}
	schema, _ := json.Marshal(decls[0].InputSchema)
	if string(schema) != `{"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"}` {
		t.Errorf("schema %s", schema)
	}
	if s, _ := json.Marshal(decls[1].InputSchema); string(s) != `{"properties":{},"type":"object"}` {
		t.Errorf("default schema %s", s)
	}
	tests := []struct {
		tool, input string
		want        string
		wantErr     string
	}{
		{"word_count", `{"text":"one two  three"}`, "words=3", ""},
		{"shape", `{"list":["a","b"]}`, `{"first":"a","n":2,"nested":{"ok":true}}`, ""},
		{"boom", `{}`, "", "tool boom failed: " + path + ":18: it broke"},
		{"refuse", `{}`, "", "tool refuse: not today"},
		{"spin", `{}`, "", "tool spin stopped after 100ms (the tool timeout, --tool-timeout)"},
		{"word_count", `{"text":"still works after a timeout"}`, "words=5", ""},
		{"word_count", `{}`, "", "attempt to index a non-table object(nil)"},
		{"say", `{}`, "said", ""},
		{"nope", `{}`, "", `no tool named "nope"`},
	}
	for _, tt := range tests {
		got, err := f.Call(context.Background(), tt.tool, json.RawMessage(tt.input))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s %s: %q, %v; want error %q", tt.tool, tt.input, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s %s: %q, %v; want %q", tt.tool, tt.input, got, err, tt.want)
		}
	}
	if log.String() != "hello\t42\n" {
		t.Errorf("print wrote %q", log.String())
	}

	// A cancelled caller (Ctrl-C) gets its own error back.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	slow := extensions.New(extensions.Options{Timeout: time.Hour})
	defer slow.Close()
	slow.Load(context.Background(), path)
	if _, err := slow.Files()[0].Call(ctx, "spin", json.RawMessage(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled spin: %v", err)
	}
}

func TestLoadFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      string // the failure line after the path
	}{
		{"syntax.lua", "panto.tool {\n  name = 'x',\n  run = function() return 1 end\n  oops\n}\n", ":4: syntax error near 'oops'"},
		{"unclosed.lua", "panto.tool {\n", ":1: syntax error: '{' is not closed: '}' expected before the end of the file"},
		{"noend.lua", "local n = 0\nlocal function f(s)\n  for _ in s:gmatch('end') do\n    n = n + 1\n  end\n  if n > 1 then return n end\n", ":2: syntax error: 'function' is not closed: 'end' expected before the end of the file"},
		{"runnotclosed.lua", "panto.tool { name = 'x', description = 'd', run = function(input)\n  while true do\n    repeat\n    until (true)\n  end\n  return 1\nend\n", ":1: syntax error: '{' is not closed: '}' expected before the end of the file"},
		{"repeat.lua", "repeat\n  local x = {1, 2}\n", ":1: syntax error: 'repeat' is not closed: 'until' expected before the end of the file"},
		{"incomplete.lua", "local x =\n", ": syntax error at the end of the file"},
		{"string.lua", "local x = [[abc\n", ": unterminated multiline string at the end of the file"},
		{"runtime.lua", "local x = nil\n\nx.y = 1\n", ":3: attempt to index a non-table object(nil) with key 'y'"},
		{"error.lua", "\nerror('no config')\n", ":2: no config"},
		{"badname.lua", "panto.tool { name = 'a b', description = 'd', run = function() end }\n", `:1: panto.tool: name "a b": use 1 to 64 letters, digits, _ or -`},
		{"norun.lua", "\npanto.command { name = 'c', description = 'd' }\n", `:2: command "c": run must be a function`},
		{"params.lua", "panto.tool { name = 't', description = 'd', parameters = { type = 'string' }, run = function() end }\n", ":1: panto.tool \"t\": parameters must be an object schema"},
		{"loop.lua", "while true do end\n", ":1: loading stopped after 100ms (the tool timeout, --tool-timeout)"},
		{"exit.lua", "os.exit(3)\n", ":1: os.exit is not available to panto extensions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeExt(t, t.TempDir(), tt.name, tt.src)
			h := extensions.New(extensions.Options{Timeout: 100 * time.Millisecond})
			defer h.Close()
			fails := h.Load(context.Background(), path)
			if len(fails) != 1 || len(h.Files()) != 0 || len(h.Loaded()) != 0 {
				t.Fatalf("failures %v, files %d", fails, len(h.Files()))
			}
			if got := fails[0].String(); !strings.HasPrefix(got, path+tt.want) || strings.Contains(got, "\n") {
				t.Errorf("failure %q, want %q", got, path+tt.want)
			}
		})
	}
	h := extensions.New(extensions.Options{})
	if fails := h.Load(context.Background(), filepath.Join(t.TempDir(), "missing.lua")); len(fails) != 1 || !strings.Contains(fails[0].Err, "no such file") {
		t.Errorf("missing file: %v", fails)
	}
}

func TestClashes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := writeExt(t, dir, "a.lua", `
panto.tool { name = "read_file", description = "mine", run = function() return "a" end }
panto.tool { name = "shared", description = "first", run = function() return "a" end }
panto.command { name = "help", description = "mine", run = function() return "a" end }
panto.command { name = "stats", description = "first", run = function() return "a" end }
`)
	b := writeExt(t, dir, "b.lua", `
panto.tool { name = "shared", description = "second", run = function() return "b" end }
panto.tool { name = "own", description = "b's", run = function() return "b" end }
panto.command { name = "stats", description = "second", run = function() return "b" end }
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	fails := h.Load(context.Background(), a, b)
	reg := agent.NewToolRegistry()
	reg.Reserve("built-in", reg, "read_file")
	fails = append(fails, h.Register(reg)...)
	fails = append(fails, h.ReserveCommands("help", "quit")...)
	var got []string
	for _, f := range fails {
		got = append(got, f.String())
	}
	want := []string{
		b + ":2: tool shared is already defined by " + a + ":3",
		b + ":4: command stats is already defined by " + a + ":5",
		a + ":2: tool read_file refused: the name is taken by built-in",
		a + ":4: command /help refused: panto has its own /help",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var names []string
	for _, d := range reg.Tools() {
		names = append(names, d.Name+"@"+filepath.Base(reg.Origin(d.Name)))
	}
	if strings.Join(names, ",") != "shared@a.lua,own@b.lua" {
		t.Errorf("registry holds %v", names)
	}
	var loaded []string
	for _, it := range h.Loaded() {
		loaded = append(loaded, it.Kind+":"+it.Name+"@"+filepath.Base(it.File))
	}
	if strings.Join(loaded, ",") != "tool:shared@a.lua,command:stats@a.lua,tool:own@b.lua" {
		t.Errorf("loaded %v", loaded)
	}
}

func TestCommand(t *testing.T) {
	t.Parallel()
	path := writeExt(t, t.TempDir(), "stats.lua", `
panto.command {
  name = "stats",
  description = "count this session's messages",
  run = function(args, session)
    local roles = {}
    for _, m in ipairs(session.messages) do roles[#roles + 1] = m.role .. "=" .. m.text end
    return "session " .. session.id .. " holds " .. #session.messages .. " messages (" .. table.concat(roles, ", ") ..
      ") titled " .. session.info.title .. " on " .. session.info.model .. " args " .. args
  end,
}
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	if cmds := h.Commands(); len(cmds) != 1 || cmds[0].Name != "stats" || cmds[0].Description != "count this session's messages" {
		t.Fatalf("commands %+v", cmds)
	}
	view := extensions.SessionView{
		Info:     agent.SessionInfo{ID: "abc", Title: "T", Model: "m1"},
		Messages: []agent.Message{agent.UserText("hi"), {Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock("hello")}}},
	}
	got, err := h.RunCommand(context.Background(), "stats", "x y", view)
	if want := "session abc holds 2 messages (user=hi, assistant=hello) titled T on m1 args x y"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := h.RunCommand(context.Background(), "nope", "", view); !errors.Is(err, extensions.ErrNoCommand) {
		t.Errorf("unknown command: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"b.lua", "a.lua", "notes.txt"} {
		writeExt(t, dir, n, "")
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.lua"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := extensions.Discover(dir)
	if err != nil || len(files) != 2 || filepath.Base(files[0]) != "a.lua" || filepath.Base(files[1]) != "b.lua" {
		t.Errorf("files %v, %v", files, err)
	}
	if files, err := extensions.Discover(filepath.Join(dir, "missing")); err != nil || len(files) != 0 {
		t.Errorf("missing dir: %v %v", files, err)
	}
	env := map[string]string{"XDG_CONFIG_HOME": "/cfg", "HOME": "/home/u"}
	if d := extensions.Dir(func(k string) string { return env[k] }); d != "/cfg/panto/extensions" {
		t.Errorf("dir %s", d)
	}
	delete(env, "XDG_CONFIG_HOME")
	if d := extensions.Dir(func(k string) string { return env[k] }); d != "/home/u/.config/panto/extensions" {
		t.Errorf("dir %s", d)
	}
}

// A file named twice, the extension directory's and again through a
// link or another path (panto extensions --extension to check one
// installed), loads once instead of clashing with itself.
func TestLoadSameFileOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeExt(t, dir, "a.lua", `panto.tool { name = "t", description = "d", run = function() return "a" end }
panto.command { name = "c", description = "d", run = function() return "a" end }
`)
	link := filepath.Join(t.TempDir(), "link.lua")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path, filepath.Join(dir, ".", "a.lua"), link); len(fails) != 0 {
		t.Errorf("failures %v", fails)
	}
	if len(h.Files()) != 1 || len(h.Loaded()) != 2 {
		t.Errorf("%d files, loaded %v", len(h.Files()), h.Loaded())
	}
}

// A null in an array arrives as a hole at its place, as Lua writes
// {1, nil, 3}: the elements after it keep their indexes.
func TestNullInArray(t *testing.T) {
	t.Parallel()
	path := writeExt(t, t.TempDir(), "pick.lua", `
panto.tool { name = "pick", description = "d", run = function(input)
  return tostring(input.row[1]) .. "," .. tostring(input.row[2]) .. "," .. tostring(input.row[3])
end }
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	got, err := h.Files()[0].Call(context.Background(), "pick", json.RawMessage(`{"row":["a",null,"c"]}`))
	if err != nil || got != "a,nil,c" {
		t.Errorf("got %q, %v; want a,nil,c", got, err)
	}
}

// A table is an array when its keys are whole numbers from 1 to n and at
// least half of 1..n are there, its holes null: an array with a null in
// it comes back as it went in. Any other table is an object.
func TestArrayWithHoles(t *testing.T) {
	t.Parallel()
	path := writeExt(t, t.TempDir(), "arrays.lua", `
panto.tool { name = "same", description = "d", run = function(input) return input.row end }
panto.tool { name = "holes", description = "d", run = function() return { 1, nil, 3, nil, 5 } end }
panto.tool { name = "nested", description = "d", run = function() return { rows = { { "a", nil, "c" } } } end }
panto.tool { name = "half", description = "d", run = function() return { [2] = "b" } end }
panto.tool { name = "sparse", description = "d", run = function() return { [1] = "a", [10] = "b" } end }
panto.tool { name = "mixed", description = "d", run = function() return { 1, 2, x = 3 } end }
panto.tool { name = "fraction", description = "d", run = function() return { [1] = "a", [1.5] = "b" } end }
panto.tool { name = "dense", description = "d", run = function() return { 1, 2, 3 } end }
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	for _, tt := range []struct{ tool, input, want string }{
		{"same", `{"row":["a",null,"c"]}`, `["a",null,"c"]`},
		{"holes", `{}`, `[1,null,3,null,5]`},
		{"nested", `{}`, `{"rows":[["a",null,"c"]]}`},
		{"half", `{}`, `[null,"b"]`},
		{"sparse", `{}`, `{"1":"a","10":"b"}`},
		{"mixed", `{}`, `{"1":1,"2":2,"x":3}`},
		{"fraction", `{}`, `{"1":"a","1.5":"b"}`},
		{"dense", `{}`, `[1,2,3]`},
	} {
		got, err := h.Files()[0].Call(context.Background(), tt.tool, json.RawMessage(tt.input))
		if err != nil || got != tt.want {
			t.Errorf("%s: %s, %v; want %s", tt.tool, got, err, tt.want)
		}
	}
}

// What run returns or raises, of every type, is text the model can use.
func TestResultTypes(t *testing.T) {
	t.Parallel()
	path := writeExt(t, t.TempDir(), "types.lua", `
panto.tool { name = "number", description = "d", run = function() return 42.5 end }
panto.tool { name = "bool", description = "d", run = function() return false end }
panto.tool { name = "nothing", description = "d", run = function() end }
panto.tool { name = "func", description = "d", run = function() return print end }
panto.tool { name = "bad_table", description = "d", run = function() return { f = print } end }
panto.tool { name = "error_table", description = "d", run = function() error({ code = 7, why = "no" }) end }
panto.tool { name = "error_string", description = "d", run = function() error("plain", 0) end }
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	tests := []struct{ tool, want, wantErr string }{
		{"number", "42.5", ""},
		{"bool", "false", ""},
		{"nothing", "", ""},
		{"func", "", "tool func: run returned a function: return a string or a table"},
		{"bad_table", "", "tool bad_table: the result table cannot be JSON: a function cannot be JSON"},
		{"error_table", "", `tool error_table failed: {"code":7,"why":"no"}`},
		{"error_string", "", "tool error_string failed: plain"},
	}
	for _, tt := range tests {
		got, err := h.Files()[0].Call(context.Background(), tt.tool, json.RawMessage(`{}`))
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s: %q, %v; want error %q", tt.tool, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.tool, got, err, tt.want)
		}
	}
}

// A tool's result is bounded as the built-in tools' are: it is sent
// again with every later request.
func TestResultBounded(t *testing.T) {
	t.Parallel()
	path := writeExt(t, t.TempDir(), "big.lua", `
panto.tool { name = "big", description = "d", run = function() return ("é"):rep(100000) end }
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	got, err := h.Files()[0].Call(context.Background(), "big", json.RawMessage(`{}`))
	note := "\n[result cut at 64 KiB of its 200000 bytes]"
	if err != nil || !strings.HasSuffix(got, note) || len(got) > extensions.MaxResult+len(note) || !utf8.ValidString(got) {
		t.Errorf("%d bytes ending %q, %v", len(got), got[max(0, len(got)-60):], err)
	}
}

// panto.tool in a run function is an error: a tool defined after the
// load would never be offered.
func TestDefineAfterLoad(t *testing.T) {
	t.Parallel()
	path := writeExt(t, t.TempDir(), "late.lua", `
panto.tool { name = "definer", description = "d", run = function()
  panto.tool { name = "late", description = "d", run = function() return "late" end }
  return "defined"
end }
`)
	h := extensions.New(extensions.Options{})
	defer h.Close()
	if fails := h.Load(context.Background(), path); len(fails) != 0 {
		t.Fatal(fails)
	}
	got, err := h.Files()[0].Call(context.Background(), "definer", json.RawMessage(`{}`))
	if err == nil || !strings.Contains(err.Error(), "panto.tool works at the top level of the file, as it loads, not in a run function") {
		t.Errorf("got %q, %v", got, err)
	}
}
