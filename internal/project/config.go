package project

import (
	"strings"
)

// ConfigValue returns the first value of section.subsection.key in git
// config text (git-config(1) syntax: section and key names ignore case,
// a quoted subsection does not; values may be quoted, escaped, continued
// with a backslash and followed by a # or ; comment). A key given with
// no "=" (a boolean true) has no value and is skipped. Includes are not
// followed.
func ConfigValue(data []byte, section, subsection, key string) (string, bool) {
	p := configParser{s: string(data)}
	var curSection, curSub string
	for !p.done() {
		p.skipSpace()
		switch c := p.peek(); {
		case c == '\n':
			p.i++
		case c == '#' || c == ';':
			p.skipLine()
		case c == '[':
			sec, sub, ok := p.header()
			if !ok {
				return "", false // git refuses such a file
			}
			curSection, curSub = sec, sub
		default:
			name, value, hasValue, ok := p.variable()
			if !ok {
				return "", false
			}
			if hasValue && strings.EqualFold(curSection, section) && curSub == subsection && strings.EqualFold(name, key) {
				return value, true
			}
		}
	}
	return "", false
}

type configParser struct {
	s string
	i int
}

func (p *configParser) done() bool { return p.i >= len(p.s) }

func (p *configParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *configParser) skipSpace() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *configParser) skipLine() {
	if j := strings.IndexByte(p.s[p.i:], '\n'); j >= 0 {
		p.i += j + 1
		return
	}
	p.i = len(p.s)
}

// header reads [section], [section "subsection"] or the old
// [section.subsection] (whose subsection ignores case: lowered).
func (p *configParser) header() (section, subsection string, ok bool) {
	p.i++ // '['
	start := p.i
	for !p.done() && isNameByte(p.s[p.i], true) {
		p.i++
	}
	section = p.s[start:p.i]
	if section == "" {
		return "", "", false
	}
	if p.peek() == ' ' || p.peek() == '\t' {
		p.skipSpace()
		if p.peek() != '"' {
			return "", "", false
		}
		p.i++
		var b strings.Builder
		for {
			if p.done() || p.s[p.i] == '\n' {
				return "", "", false
			}
			c := p.s[p.i]
			p.i++
			if c == '"' {
				break
			}
			if c == '\\' {
				if p.done() || p.s[p.i] == '\n' {
					return "", "", false
				}
				c = p.s[p.i]
				p.i++
			}
			b.WriteByte(c)
		}
		subsection = b.String()
	} else if sec, sub, dotted := strings.Cut(section, "."); dotted {
		section, subsection = sec, strings.ToLower(sub)
	}
	if p.peek() != ']' {
		return "", "", false
	}
	p.i++
	return section, subsection, true
}

// variable reads name [= value] up to the end of its line (and of the
// lines a trailing backslash continues it onto).
func (p *configParser) variable() (name, value string, hasValue, ok bool) {
	start := p.i
	for !p.done() && isNameByte(p.s[p.i], false) {
		p.i++
	}
	name = p.s[start:p.i]
	if name == "" || !isLetter(name[0]) {
		return "", "", false, false
	}
	p.skipSpace()
	switch p.peek() {
	case '\n', 0:
		return name, "", false, true
	case '#', ';':
		p.skipLine()
		return name, "", false, true
	case '=':
		p.i++
	default:
		return "", "", false, false
	}
	value, ok = p.value()
	return name, value, true, ok
}

// value reads a value: blanks around it dropped, inner ones kept (each
// as a space), quotes removed, escapes decoded.
func (p *configParser) value() (string, bool) {
	var b strings.Builder
	quoted := false
	pending := 0 // unquoted blanks not yet known to be inner: each is a space, as git reads them
	for {
		if p.done() {
			return b.String(), !quoted
		}
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\n':
			return b.String(), !quoted
		case !quoted && (c == '#' || c == ';'):
			p.skipLine()
			return b.String(), true
		case !quoted && (c == ' ' || c == '\t' || c == '\r'):
			if b.Len() > 0 {
				pending++
			}
			continue
		}
		b.WriteString(strings.Repeat(" ", pending))
		pending = 0
		switch c {
		case '"':
			quoted = !quoted
		case '\\':
			if p.done() {
				return "", false
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '\n': // a continuation
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case '"', '\\':
				b.WriteByte(e)
			default:
				return "", false
			}
		default:
			b.WriteByte(c)
		}
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isNameByte: the bytes of a section name (with dots, for the old
// [section.subsection] form) or of a key.
func isNameByte(c byte, dots bool) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '-' || dots && c == '.'
}
