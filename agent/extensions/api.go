package extensions

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Names the providers accept for a tool, and the names of commands.
var (
	toolName    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	commandName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
)

// maxDepth bounds the nesting of a table turned into JSON (a table that
// holds itself would never end).
const maxDepth = 64

// openAPI puts the panto table in the file's state, sends print to the
// host's log and takes os.exit away.
func (h *Host) openAPI(f *File) {
	L := f.state
	api := L.NewTable()
	L.SetField(api, "tool", L.NewFunction(func(L *lua.LState) int { return defineTool(L, f) }))
	L.SetField(api, "command", L.NewFunction(func(L *lua.LState) int { return defineCommand(L, f) }))
	L.SetGlobal("panto", api)
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		parts := make([]string, L.GetTop())
		for i := range parts {
			parts[i] = lua.LVAsString(L.ToStringMeta(L.Get(i + 1)))
		}
		fmt.Fprintln(h.opts.Log, strings.Join(parts, "\t"))
		return 0
	}))
	if osLib, ok := L.GetGlobal("os").(*lua.LTable); ok {
		L.SetField(osLib, "exit", L.NewFunction(func(L *lua.LState) int {
			L.RaiseError("os.exit is not available to panto extensions: raise an error instead")
			return 0
		}))
	}
}

// line is the line of the Lua code that called the Go function running.
func line(L *lua.LState) int {
	if dbg, ok := L.GetStack(1); ok {
		if _, err := L.GetInfo("l", dbg, lua.LNil); err == nil {
			return dbg.CurrentLine
		}
	}
	return 0
}

// spec reads the table panto.tool or panto.command was called with.
func spec(L *lua.LState, f *File, what string) (name, description string, run *lua.LFunction, tb *lua.LTable) {
	if f.loaded {
		// Tools are offered and commands listed once, after the load: one
		// defined later would be neither.
		L.RaiseError("panto.%s works at the top level of the file, as it loads, not in a run function", what)
	}
	tb = L.CheckTable(1)
	name = strings.TrimPrefix(stringField(L, tb, what, "name"), "/")
	description = stringField(L, tb, what, "description")
	fn, ok := L.GetField(tb, "run").(*lua.LFunction)
	if !ok {
		L.RaiseError("%s %q: run must be a function", what, name)
	}
	return name, description, fn, tb
}

func stringField(L *lua.LState, tb *lua.LTable, what, field string) string {
	v := L.GetField(tb, field)
	s, ok := v.(lua.LString)
	if !ok {
		L.RaiseError("panto.%s: %s must be a string, not %s", what, field, v.Type())
	}
	return string(s)
}

func defineTool(L *lua.LState, f *File) int {
	name, description, run, tb := spec(L, f, KindTool)
	if !toolName.MatchString(name) {
		L.RaiseError("panto.tool: name %q: use 1 to 64 letters, digits, _ or -", name)
	}
	params := map[string]any{"type": "object", "properties": map[string]any{}}
	if v := L.GetField(tb, "parameters"); v != lua.LNil {
		ptb, ok := v.(*lua.LTable)
		if !ok {
			L.RaiseError("panto.tool %q: parameters must be a table (a JSON schema)", name)
		}
		g, err := fromLua(ptb, "", 0)
		if err != nil {
			L.RaiseError("panto.tool %q: parameters: %v", name, err)
		}
		m, ok := g.(map[string]any)
		if !ok || m["type"] != "object" {
			L.RaiseError(`panto.tool %q: parameters must be an object schema: { type = "object", properties = {...} }`, name)
		}
		params = m
	}
	for _, t := range f.tools {
		if t.Name == name {
			L.RaiseError("panto.tool: %q is defined twice in this file", name)
		}
	}
	f.tools = append(f.tools, &tool{Item: Item{Name: name, Kind: KindTool, Description: description, File: f.Path, Line: line(L)}, file: f, params: params, run: run})
	return 0
}

func defineCommand(L *lua.LState, f *File) int {
	name, description, run, _ := spec(L, f, KindCommand)
	if !commandName.MatchString(name) {
		L.RaiseError("panto.command: name %q: use lower-case letters, digits, _ or - (at most 32)", name)
	}
	for _, c := range f.cmds {
		if c.Name == name {
			L.RaiseError("panto.command: %q is defined twice in this file", name)
		}
	}
	f.cmds = append(f.cmds, &command{Item: Item{Name: name, Kind: KindCommand, Description: description, File: f.Path, Line: line(L)}, file: f, run: run})
	return 0
}

// toLua converts a decoded JSON value: objects and arrays become tables
// (arrays from index 1), null becomes nil.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		// By index, not Append, which skips nil: a null must leave its
		// hole, or the elements after it move down one place.
		tb := L.CreateTable(len(v), 0)
		for i, e := range v {
			tb.RawSetInt(i+1, toLua(L, e))
		}
		return tb
	case map[string]any:
		tb := L.CreateTable(0, len(v))
		for k, e := range v {
			tb.RawSetString(k, toLua(L, e))
		}
		return tb
	}
	return lua.LString(fmt.Sprint(v))
}

// fromLua converts a Lua value for JSON. A table is an array when it
// looks like one (arrayLen), its holes null; any other an object (an
// empty one too, except as the value of "required", which a JSON schema
// wants as an array).
func fromLua(v lua.LValue, key string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("tables nested too deep (or a table that holds itself)")
	}
	switch v := v.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(v), nil
	case lua.LNumber:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", f)
		}
		return f, nil
	case lua.LString:
		return string(v), nil
	case *lua.LTable:
		n, count := arrayLen(v)
		if count == 0 && key == "required" {
			return []any{}, nil
		}
		if n > 0 {
			arr := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				e, err := fromLua(v.RawGetInt(i), "", depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, e)
			}
			return arr, nil
		}
		obj := map[string]any{}
		var err error
		v.ForEach(func(k, e lua.LValue) {
			if err != nil {
				return
			}
			ks := lua.LVAsString(k)
			if _, ok := k.(lua.LString); !ok {
				if _, isNum := k.(lua.LNumber); !isNum {
					err = fmt.Errorf("a table key of type %s cannot be JSON", k.Type())
					return
				}
			}
			obj[ks], err = fromLua(e, ks, depth+1)
		})
		return obj, err
	}
	return nil, fmt.Errorf("a %s cannot be JSON", v.Type())
}

// arrayLen is n when tb is an array of n elements, else 0, and count
// the number of tb's keys. Lua cannot tell {1, nil, 3} from a table
// with the keys 1 and 3, so the rule is on the keys alone: every key is
// a whole number from 1 to n, and at least half of 1..n are there (n <=
// 2*count). So an array with holes, as a null in an array arrives
// (toLua), stays an array, and a table keyed by a few scattered numbers
// ({[1] = a, [1000] = b}) is an object, not a thousand nulls.
func arrayLen(tb *lua.LTable) (n, count int) {
	array, highest := true, 0.0
	tb.ForEach(func(k, _ lua.LValue) {
		count++
		i, ok := k.(lua.LNumber)
		if !ok || float64(i) < 1 || float64(i) != math.Trunc(float64(i)) {
			array = false
			return
		}
		highest = max(highest, float64(i))
	})
	if !array || highest > 2*float64(count) {
		return 0, count
	}
	return int(highest), count
}

// sessionTable is the session a command sees: id, messages (role, text;
// tool results have the role "tool") and info.
func sessionTable(L *lua.LState, s SessionView) *lua.LTable {
	tb := L.NewTable()
	L.SetField(tb, "id", lua.LString(s.Info.ID))
	msgs := L.CreateTable(len(s.Messages), 0)
	for _, m := range s.Messages {
		role := string(m.Role)
		if m.IsToolResult() {
			role = "tool"
		}
		mt := L.NewTable()
		L.SetField(mt, "role", lua.LString(role))
		L.SetField(mt, "text", lua.LString(m.Text()))
		msgs.Append(mt)
	}
	L.SetField(tb, "messages", msgs)
	info := map[string]any{
		"id": s.Info.ID, "title": s.Info.Title, "model": s.Info.Model, "api_style": string(s.Info.APIStyle),
		"base_url": s.Info.BaseURL, "reasoning": string(s.Info.Reasoning), "message_count": float64(s.Info.MessageCount),
		"parent": s.Info.Parent, "created": timeText(s.Info.Created), "modified": timeText(s.Info.Modified),
		"input_tokens": float64(s.Info.Usage.InputTokens), "output_tokens": float64(s.Info.Usage.OutputTokens),
	}
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	it := L.NewTable()
	for _, k := range keys {
		L.SetField(it, k, toLua(L, info[k]))
	}
	L.SetField(tb, "info", it)
	return tb
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
