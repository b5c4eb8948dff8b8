package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// ErrToolNameTaken: a tool was added under a name another source (a
// built-in, or an extension loaded earlier) already holds or reserved.
var ErrToolNameTaken = errors.New("tool name taken")

// ToolRegistry is a ToolSource made of other sources: the built-in tools,
// extensions, anything an embedder adds. It may be filled after the Agent
// that consumes it is built (the agent asks it for its tools at every
// provider call), so that extensions load into a running agent; a name
// is served by the first source that claimed it. It is safe for
// concurrent use.
type ToolRegistry struct {
	mu      sync.Mutex
	order   []string
	entries map[string]registryEntry
	// reserved names belong to a source even when it does not offer them
	// now (write_file without --allow-write), so that no other source can
	// take them and change meaning when a flag changes.
	reserved map[string]registryEntry
}

type registryEntry struct {
	decl   ToolDecl
	source ToolSource
	origin string
}

var _ ToolSource = (*ToolRegistry)(nil)

// NewToolRegistry returns an empty registry.
func NewToolRegistry() *ToolRegistry {
	return &ToolRegistry{entries: map[string]registryEntry{}, reserved: map[string]registryEntry{}}
}

// Reserve claims names for src without offering them; a call to one is
// still passed to src, which says why it is not on offer.
func (r *ToolRegistry) Reserve(origin string, src ToolSource, names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if _, ok := r.reserved[n]; !ok {
			r.reserved[n] = registryEntry{source: src, origin: origin}
		}
	}
}

// Add offers every tool src declares now, under origin (a name shown to
// people: "built-in", a file). A tool whose name is taken (ErrToolNameTaken)
// is left out and reported; the others are added.
func (r *ToolRegistry) Add(origin string, src ToolSource) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, d := range src.Tools() {
		owner, taken := r.reserved[d.Name]
		if e, ok := r.entries[d.Name]; ok {
			owner, taken = e, true
		}
		if taken && owner.origin != origin {
			errs = append(errs, fmt.Errorf("tool %s of %s: %w by %s", d.Name, origin, ErrToolNameTaken, owner.origin))
			continue
		}
		if _, ok := r.entries[d.Name]; !ok {
			r.order = append(r.order, d.Name)
		}
		r.entries[d.Name] = registryEntry{decl: d, source: src, origin: origin}
	}
	return errs
}

// Tools declares every tool added, in the order they were added.
func (r *ToolRegistry) Tools() []ToolDecl {
	r.mu.Lock()
	defer r.mu.Unlock()
	decls := make([]ToolDecl, 0, len(r.order))
	for _, n := range r.order {
		decls = append(decls, r.entries[n].decl)
	}
	return decls
}

// Origin returns the origin of the source serving or reserving tool name,
// "" when no source does.
func (r *ToolRegistry) Origin(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[name]; ok {
		return e.origin
	}
	return r.reserved[name].origin
}

// Call runs tool name on the source that serves or reserved it.
func (r *ToolRegistry) Call(ctx context.Context, name string, input json.RawMessage) (string, error) {
	r.mu.Lock()
	e, ok := r.entries[name]
	if !ok {
		e, ok = r.reserved[name]
	}
	r.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no tool named %q", name)
	}
	return e.source.Call(ctx, name, input)
}
