package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
)

// namedTools offers tools that answer with their source's name.
type namedTools struct {
	source string
	names  []string
}

func (n namedTools) Tools() []agent.ToolDecl {
	var decls []agent.ToolDecl
	for _, name := range n.names {
		decls = append(decls, agent.ToolDecl{Name: name})
	}
	return decls
}

func (n namedTools) Call(_ context.Context, name string, _ json.RawMessage) (string, error) {
	return n.source + ":" + name, nil
}

func TestToolRegistry(t *testing.T) {
	r := agent.NewToolRegistry()
	builtin := namedTools{"builtin", []string{"read_file"}}
	r.Reserve("built-in", builtin, "read_file", "write_file")
	if errs := r.Add("built-in", builtin); len(errs) != 0 {
		t.Fatal(errs)
	}
	errs := r.Add("a.lua", namedTools{"a", []string{"word_count", "write_file", "read_file"}})
	if len(errs) != 2 || !errors.Is(errs[0], agent.ErrToolNameTaken) || !strings.Contains(errs[0].Error(), "tool write_file of a.lua: tool name taken by built-in") {
		t.Fatalf("clashes: %v", errs)
	}
	if errs := r.Add("b.lua", namedTools{"b", []string{"word_count", "other"}}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "taken by a.lua") {
		t.Fatalf("clash between extensions: %v", errs)
	}
	var names []string
	for _, d := range r.Tools() {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, ","); got != "read_file,word_count,other" {
		t.Errorf("tools %s", got)
	}
	for name, want := range map[string]string{"read_file": "builtin:read_file", "word_count": "a:word_count", "other": "b:other", "write_file": "builtin:write_file"} {
		if got, err := r.Call(context.Background(), name, nil); err != nil || got != want {
			t.Errorf("call %s: %q %v, want %q", name, got, err, want)
		}
	}
	if _, err := r.Call(context.Background(), "nope", nil); err == nil {
		t.Error("an unknown tool ran")
	}
	if r.Origin("word_count") != "a.lua" {
		t.Errorf("origin %q", r.Origin("word_count"))
	}
}
