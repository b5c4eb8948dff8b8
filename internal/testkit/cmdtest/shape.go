package cmdtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Shapes name the JSON objects a command prints, as a script reads them:
// each shape maps every field name to its type. The tests decode a
// command's --json output into plain maps and slices (never into the
// command's own structs, whose renamed field would rename the test's too)
// and check it against its shape, so that a renamed, retyped, dropped or
// undocumented field fails.
//
// A type is one of
//
//	string, number, integer, bool, object (any object), any
//	time      an RFC 3339 string
//	id        a session id: 32 lowercase hex digits
//	sha256    64 lowercase hex digits
//	NAME      an object of the shape NAME
//	[]TYPE    an array of TYPE
//	map:TYPE  an object whose values are all TYPE (keys are data)
//	empty     the empty string
//	A|B       an A or a B
//
// and a "?" after it marks a field that may be absent (omitempty); every
// other field must be there.
type Shapes map[string]map[string]string

// A ShapeChecker checks values against Shapes and remembers which fields
// it has seen, so that a test can tell its outputs showed every field:
// a field no output ever holds is one the test cannot see renamed.
type ShapeChecker struct {
	shapes Shapes
	seen   map[string]map[string]bool
}

// NewShapeChecker checks against shapes.
func NewShapeChecker(shapes Shapes) *ShapeChecker {
	return &ShapeChecker{shapes: shapes, seen: map[string]map[string]bool{}}
}

// CheckJSON decodes data as a script would (json.Unmarshal into any) and
// checks it is a typ. A typ of "lines:TYPE" is output of one JSON value
// per line, each a TYPE.
func (c *ShapeChecker) CheckJSON(t testing.TB, where string, data []byte, typ string) {
	t.Helper()
	if elem, ok := strings.CutPrefix(typ, "lines:"); ok {
		lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
		if len(lines) == 0 || len(lines[0]) == 0 {
			t.Errorf("%s: no JSON lines", where)
			return
		}
		for i, line := range lines {
			c.CheckJSON(t, fmt.Sprintf("%s line %d", where, i+1), line, elem)
		}
		return
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		t.Errorf("%s: not JSON: %v: %s", where, err, data)
		return
	}
	if dec.More() {
		t.Errorf("%s: more than one JSON value: %s", where, data)
		return
	}
	for _, err := range c.Check(where, v, typ) {
		t.Error(err)
	}
}

var (
	idPattern     = regexp.MustCompile(`^[0-9a-f]{32}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Check returns what is wrong with v as a typ, each error naming where
// (a path like `sessions[0].usage.input_tokens`).
func (c *ShapeChecker) Check(where string, v any, typ string) []error {
	wrong := func(want string) []error {
		return []error{fmt.Errorf("%s: %s is not %s", where, describe(v), want)}
	}
	if a, b, ok := strings.Cut(typ, "|"); ok {
		errs := c.Check(where, v, a)
		if errs == nil {
			return nil
		}
		if c.Check(where, v, b) == nil {
			return nil
		}
		return wrong(typ)
	}
	if elem, ok := strings.CutPrefix(typ, "[]"); ok {
		a, ok := v.([]any)
		if !ok {
			return wrong("an array")
		}
		var errs []error
		for i, e := range a {
			errs = append(errs, c.Check(fmt.Sprintf("%s[%d]", where, i), e, elem)...)
		}
		return errs
	}
	if elem, ok := strings.CutPrefix(typ, "map:"); ok {
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, c.Check(where+"."+k, m[k], elem)...)
		}
		return errs
	}
	s, isString := v.(string)
	n, isNumber := v.(float64)
	switch typ {
	case "any":
		return nil
	case "empty":
		if s != "" || !isString {
			return wrong("empty")
		}
	case "string":
		if !isString {
			return wrong("a string")
		}
	case "number":
		if !isNumber {
			return wrong("a number")
		}
	case "integer":
		if !isNumber || n != math.Trunc(n) {
			return wrong("an integer")
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return wrong("true or false")
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return wrong("an object")
		}
	case "time":
		if _, err := time.Parse(time.RFC3339Nano, s); !isString || err != nil {
			return wrong("an RFC 3339 time")
		}
	case "id":
		if !isString || !idPattern.MatchString(s) {
			return wrong("a session id (32 hex digits)")
		}
	case "sha256":
		if !isString || !sha256Pattern.MatchString(s) {
			return wrong("a sha256 (64 hex digits)")
		}
	default:
		return c.checkObject(where, v, typ)
	}
	return nil
}

// checkObject checks v against the shape name: every field it requires
// is there, every field is one of it, each of its type.
func (c *ShapeChecker) checkObject(where string, v any, name string) []error {
	shape, ok := c.shapes[name]
	if !ok {
		return []error{fmt.Errorf("%s: no shape or type %q (test bug)", where, name)}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []error{fmt.Errorf("%s: %s is not an object (%s)", where, describe(v), name)}
	}
	if c.seen[name] == nil {
		c.seen[name] = map[string]bool{}
	}
	var errs []error
	for _, field := range slices.Sorted(maps.Keys(shape)) {
		typ, optional := strings.CutSuffix(shape[field], "?")
		val, ok := m[field]
		if !ok {
			if !optional {
				errs = append(errs, fmt.Errorf("%s: no field %q (%s has %v)", where, field, name, slices.Sorted(maps.Keys(m))))
			}
			continue
		}
		c.seen[name][field] = true
		errs = append(errs, c.Check(where+"."+field, val, typ)...)
	}
	for _, field := range slices.Sorted(maps.Keys(m)) {
		if _, ok := shape[field]; !ok {
			errs = append(errs, fmt.Errorf("%s: field %q is not one of %s's %v: renamed, or new and undocumented here", where, field, name, slices.Sorted(maps.Keys(shape))))
		}
	}
	return errs
}

// Unseen returns "shape.field" for every field of the shapes named that
// no checked value held (all shapes when none is named).
func (c *ShapeChecker) Unseen(names ...string) []string {
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(c.shapes))
	}
	var out []string
	for _, name := range names {
		for _, field := range slices.Sorted(maps.Keys(c.shapes[name])) {
			if !c.seen[name][field] {
				out = append(out, name+"."+field)
			}
		}
	}
	return out
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 80 {
		return fmt.Sprintf("a %T", v)
	}
	return string(b)
}
