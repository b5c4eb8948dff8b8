// Package extensions hosts Lua extensions (gopher-lua): files that add
// tools the model can call and /commands the user can type, through a
// table named panto:
//
//	panto.tool { name = ..., description = ..., parameters = {JSON schema}, run = function(input) ... end }
//	panto.command { name = ..., description = ..., run = function(args, session) ... end }
//
// Each file runs in its own Lua state, once, when it is loaded; its run
// functions are called later, one at a time per file. A tool's input is
// its decoded JSON arguments; what run returns is the result (a string,
// or a table encoded as JSON); a Lua error, or a nil result with an error
// message (return nil, "why"), is a failed result the model sees. Every
// call runs under a context, cancelled by the caller (Ctrl-C) or after
// Options.Timeout, which interrupts Lua's loop; a Go function an
// extension called (os.execute) runs to its end first.
//
// A file that fails to load (syntax, a runtime error at the top level, a
// bad panto.tool call) is a Failure naming file:line, and the host goes
// on without it; a tool or command whose name another file took is
// refused the same way, the rest of its file kept.
//
// Extensions are the user's own code and are trusted as such, like a
// shell's rc file: the Lua standard library is open (io, os and
// os.execute included), except os.exit, which would end panto without
// storing the session. print writes to Options.Log, never to the
// answer's stream.
//
// The host is one source of tools among others: File is an
// agent.ToolSource, added to an agent.ToolRegistry by Register, which
// refuses names taken there (the built-in tools).
package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/panto-dev/panto/agent"
)

// DefaultTimeout bounds a tool call or command run when Options.Timeout
// is 0.
const DefaultTimeout = 2 * time.Minute

// Kinds of what an extension defines.
const (
	KindTool    = "tool"
	KindCommand = "command"
)

// Options configure a Host.
type Options struct {
	// Timeout bounds each load, tool call and command run (0:
	// DefaultTimeout).
	Timeout time.Duration
	// Log receives what extensions print (nil: discarded).
	Log io.Writer
}

// Item is a tool or command an extension defined.
type Item struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Description string `json:"description"`
	File        string `json:"file"`
	// Line is where it was defined.
	Line int `json:"-"`
}

// Failure is a file that did not load, or an item refused.
type Failure struct {
	File string `json:"file"`
	// Line is 0 when the error names no line.
	Line int `json:"line,omitempty"`
	// Kind and Name are set for a refused item.
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	Err  string `json:"error"`
}

// String is the failure as one line: file:line: error.
func (f Failure) String() string {
	if f.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Err)
	}
	return fmt.Sprintf("%s: %s", f.File, f.Err)
}

// Host holds the loaded extensions.
type Host struct {
	opts     Options
	files    []*File
	commands map[string]*command
	tools    map[string]*tool
	failures []Failure
	// seen are the files Load was given, so that a file named twice (the
	// extension directory's, and again with --extension to check it)
	// loads once instead of clashing with itself.
	seen []os.FileInfo
}

// File is one loaded extension file: its Lua state and what it defined.
// It is an agent.ToolSource of its tools.
type File struct {
	Path  string
	host  *Host
	mu    sync.Mutex // the Lua state runs one call at a time
	state *lua.LState
	tools []*tool
	cmds  []*command
	// loaded: the file's top level has run; what it defines is fixed.
	loaded bool
}

type tool struct {
	Item
	file   *File
	params map[string]any
	run    *lua.LFunction
}

type command struct {
	Item
	file *File
	run  *lua.LFunction
}

var _ agent.ToolSource = (*File)(nil)

// New returns an empty host.
func New(opts Options) *Host {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	return &Host{opts: opts, commands: map[string]*command{}, tools: map[string]*tool{}}
}

// Dir is the directory extensions load from: $XDG_CONFIG_HOME/panto/extensions,
// else ~/.config/panto/extensions ("" when neither is known).
func Dir(getenv func(string) string) string {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "panto", "extensions")
	}
	home := getenv("HOME")
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "panto", "extensions")
}

// Discover lists the *.lua files of dir, sorted; a missing dir holds none.
func Discover(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list extensions: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".lua") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(files)
	return files, nil
}

// Load runs each file in order; a file already given, under this name
// or another, is skipped. A file that fails is recorded (Failures) and
// left out; Load returns the failures of these files.
func (h *Host) Load(ctx context.Context, paths ...string) []Failure {
	from := len(h.failures)
	for _, p := range paths {
		if h.given(p) {
			continue
		}
		h.load(ctx, p)
	}
	return append([]Failure(nil), h.failures[from:]...)
}

// given reports whether the file at path was given to Load before, and
// records it. A path that cannot be read is never the same file: load
// reports why.
func (h *Host) given(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	for _, prev := range h.seen {
		if os.SameFile(prev, fi) {
			return true
		}
	}
	h.seen = append(h.seen, fi)
	return false
}

func (h *Host) load(ctx context.Context, path string) {
	f := &File{Path: path, host: h}
	L := lua.NewState()
	f.state = L
	h.openAPI(f)
	fn, err := L.LoadFile(path)
	if err != nil {
		L.Close()
		h.failures = append(h.failures, loadFailure(path, err))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	L.SetContext(ctx)
	err = L.CallByParam(lua.P{Fn: fn, NRet: 0, Protect: true})
	L.RemoveContext()
	f.loaded = true
	if err != nil {
		L.Close()
		fail := loadFailure(path, err)
		if ctx.Err() != nil {
			fail.Err = fmt.Sprintf("loading stopped after %s (the tool timeout, --tool-timeout)", h.opts.Timeout)
		}
		h.failures = append(h.failures, fail)
		return
	}
	// Only a file that loaded whole defines anything.
	for _, t := range f.tools {
		if prev, ok := h.tools[t.Name]; ok {
			h.refuse(t.Item, "tool "+t.Name+" is already defined by "+where(prev.Item))
			continue
		}
		h.tools[t.Name] = t
	}
	for _, c := range f.cmds {
		if prev, ok := h.commands[c.Name]; ok {
			h.refuse(c.Item, "command "+c.Name+" is already defined by "+where(prev.Item))
			continue
		}
		h.commands[c.Name] = c
	}
	h.files = append(h.files, f)
}

func where(it Item) string { return fmt.Sprintf("%s:%d", it.File, it.Line) }

func (h *Host) refuse(it Item, why string) {
	h.failures = append(h.failures, Failure{File: it.File, Line: it.Line, Kind: it.Kind, Name: it.Name, Err: why})
}

// luaPosition is the "file:line:" gopher-lua puts before a runtime error.
var luaPosition = regexp.MustCompile(`^(.*?):(\d+): ?`)

// loadFailure turns a gopher-lua error into file:line and a message.
func loadFailure(path string, err error) Failure {
	fail := Failure{File: path}
	var apiErr *lua.ApiError
	if !errors.As(err, &apiErr) {
		fail.Err = oneLine(err.Error())
		return fail
	}
	var perr *parse.Error
	if errors.As(apiErr.Cause, &perr) {
		fail.Line = perr.Pos.Line
		fail.Err = strings.TrimSpace(perr.Message)
		switch {
		case perr.Pos.Line == parse.EOF:
			fail.Line = 0
			fail.Err += " at the end of the file"
			if msg, line, ok := unclosedIn(path); ok {
				fail.Err, fail.Line = "syntax error: "+msg, line
			}
		case perr.Token != "":
			fail.Err = fmt.Sprintf("%s near '%s'", fail.Err, perr.Token)
		}
		return fail
	}
	if apiErr.Cause != nil {
		fail.Err = oneLine(apiErr.Cause.Error())
		return fail
	}
	fail.Err, fail.Line = splitPosition(path, apiErr.Object.String())
	return fail
}

// unclosedIn is unclosedAtEOF of the file at path.
func unclosedIn(path string) (msg string, line int, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	return unclosedAtEOF(f, path)
}

// splitPosition takes the position of file out of a Lua error message.
func splitPosition(path, msg string) (string, int) {
	msg = oneLine(msg)
	if m := luaPosition.FindStringSubmatch(msg); m != nil && m[1] == path {
		var line int
		fmt.Sscan(m[2], &line)
		return msg[len(m[0]):], line
	}
	return msg, 0
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Files are the files that loaded.
func (h *Host) Files() []*File { return h.files }

// Failures are the files that did not load and the items refused, in the
// order they happened.
func (h *Host) Failures() []Failure { return append([]Failure(nil), h.failures...) }

// Loaded lists the tools and commands on offer, file by file.
func (h *Host) Loaded() []Item {
	var items []Item
	for _, f := range h.files {
		for _, t := range f.tools {
			if h.tools[t.Name] == t {
				items = append(items, t.Item)
			}
		}
		for _, c := range f.cmds {
			if h.commands[c.Name] == c {
				items = append(items, c.Item)
			}
		}
	}
	return items
}

// Register adds every file's tools to reg under the file's path; a tool
// whose name reg holds already (a built-in) is refused, and the refusals
// are returned.
func (h *Host) Register(reg *agent.ToolRegistry) []Failure {
	from := len(h.failures)
	for _, f := range h.files {
		reg.Add(f.Path, f)
		for _, t := range f.tools {
			if h.tools[t.Name] == t && reg.Origin(t.Name) != f.Path {
				delete(h.tools, t.Name)
				h.refuse(t.Item, fmt.Sprintf("tool %s refused: the name is taken by %s", t.Name, reg.Origin(t.Name)))
			}
		}
	}
	return append([]Failure(nil), h.failures[from:]...)
}

// ReserveCommands refuses the commands named like one of names (the
// REPL's own, without the slash) and returns the refusals.
func (h *Host) ReserveCommands(names ...string) []Failure {
	from := len(h.failures)
	for _, f := range h.files {
		for _, c := range f.cmds {
			for _, n := range names {
				if c.Name == n && h.commands[n] == c {
					delete(h.commands, n)
					h.refuse(c.Item, fmt.Sprintf("command /%s refused: panto has its own /%s", n, n))
				}
			}
		}
	}
	return append([]Failure(nil), h.failures[from:]...)
}

// Commands lists the commands on offer, sorted by name.
func (h *Host) Commands() []Item {
	var items []Item
	for _, c := range h.commands {
		items = append(items, c.Item)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return items
}

// Close closes every Lua state.
func (h *Host) Close() {
	for _, f := range h.files {
		f.state.Close()
	}
}

// Tools declares the file's tools on offer.
func (f *File) Tools() []agent.ToolDecl {
	var decls []agent.ToolDecl
	for _, t := range f.tools {
		if f.host.tools[t.Name] == t {
			decls = append(decls, agent.ToolDecl{Name: t.Name, Description: t.Description, InputSchema: t.params})
		}
	}
	return decls
}

// ErrNoCommand: RunCommand was asked for a command no extension defines.
var ErrNoCommand = errors.New("no such extension command")

// Call runs the file's tool name with the JSON input.
func (f *File) Call(ctx context.Context, name string, input json.RawMessage) (string, error) {
	t, ok := f.host.tools[name]
	if !ok || t.file != f {
		return "", fmt.Errorf("no tool named %q", name)
	}
	var in any = map[string]any{}
	if len(input) > 0 {
		if err := json.Unmarshal(input, &in); err != nil {
			return "", fmt.Errorf("%s: arguments are not JSON: %v", name, err)
		}
	}
	out, err := f.call(ctx, t.Item, t.run, func(L *lua.LState) []lua.LValue {
		return []lua.LValue{toLua(L, in)}
	})
	return boundResult(out), err
}

// MaxResult bounds the bytes of a tool's result, as the built-in tools
// bound theirs (tools.MaxOutput): a result is stored in the session and
// sent again with every later request, so one too large for the model's
// context would break every turn after it.
const MaxResult = 64 << 10

// boundResult cuts a result to MaxResult bytes of valid UTF-8, with a
// note saying so.
func boundResult(s string) string {
	if len(s) <= MaxResult {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := strings.ToValidUTF8(s[:MaxResult], "\uFFFD")
	return fmt.Sprintf("%s\n[result cut at %d KiB of its %d bytes]", cut, MaxResult>>10, len(s))
}

// SessionView is what a command sees of the session it runs in.
type SessionView struct {
	Info     agent.SessionInfo
	Messages []agent.Message
}

// RunCommand runs the command name with the text after it and returns
// what it returned, to be shown to the user.
func (h *Host) RunCommand(ctx context.Context, name, args string, s SessionView) (string, error) {
	c, ok := h.commands[name]
	if !ok {
		return "", fmt.Errorf("/%s: %w", name, ErrNoCommand)
	}
	return c.file.call(ctx, c.Item, c.run, func(L *lua.LState) []lua.LValue {
		return []lua.LValue{lua.LString(args), sessionTable(L, s)}
	})
}

// call runs fn in the file's Lua state under ctx and the host's timeout,
// and turns what it returns into a result.
func (f *File) call(ctx context.Context, it Item, fn *lua.LFunction, args func(*lua.LState) []lua.LValue) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	L := f.state
	callCtx, cancel := context.WithTimeout(ctx, f.host.opts.Timeout)
	defer cancel()
	L.SetContext(callCtx)
	defer L.RemoveContext()
	err := L.CallByParam(lua.P{Fn: fn, NRet: 2, Protect: true}, args(L)...)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", fmt.Errorf("%s %s: %w", it.Kind, it.Name, ctxErr)
		}
		if callCtx.Err() != nil {
			return "", fmt.Errorf("%s %s stopped after %s (the tool timeout, --tool-timeout) and gave no result", it.Kind, it.Name, f.host.opts.Timeout)
		}
		msg := err.Error()
		var apiErr *lua.ApiError
		if errors.As(err, &apiErr) {
			msg = errorText(apiErr.Object)
		}
		return "", fmt.Errorf("%s %s failed: %s", it.Kind, it.Name, oneLine(msg))
	}
	ret, why := L.Get(-2), L.Get(-1)
	L.Pop(2)
	if ret == lua.LNil && why != lua.LNil {
		return "", fmt.Errorf("%s %s: %s", it.Kind, it.Name, lua.LVAsString(L.ToStringMeta(why)))
	}
	text, err := resultText(ret)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", it.Kind, it.Name, err)
	}
	return text, nil
}

// errorText is a Lua error value as text: error{...} raises a table,
// which says more as JSON than as its address.
func errorText(v lua.LValue) string {
	if tb, ok := v.(*lua.LTable); ok {
		if g, err := fromLua(tb, "", 0); err == nil {
			if data, err := json.Marshal(g); err == nil {
				return string(data)
			}
		}
	}
	return v.String()
}

// resultText is what run returned as text: a string as it is, a number
// or a boolean as Lua writes it, a table as JSON, nil as nothing. Any
// other value (a function) is an error: its text would be an address.
func resultText(v lua.LValue) (string, error) {
	switch v := v.(type) {
	case *lua.LNilType:
		return "", nil
	case lua.LString:
		return string(v), nil
	case lua.LNumber, lua.LBool:
		return v.String(), nil
	case *lua.LTable:
		g, err := fromLua(v, "", 0)
		if err != nil {
			return "", fmt.Errorf("the result table cannot be JSON: %w", err)
		}
		data, err := json.Marshal(g)
		if err != nil {
			return "", fmt.Errorf("the result table cannot be JSON: %w", err)
		}
		return string(data), nil
	}
	return "", fmt.Errorf("run returned a %s: return a string or a table", v.Type())
}
