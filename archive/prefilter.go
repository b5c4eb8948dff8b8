package archive

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// prefilter decides from a line's raw JSON bytes whether its decoded
// texts may match, so that the lines that cannot (nearly all of them) are
// never decoded: what makes searching a catalog cost about a read of it.
//
// It looks for a literal every match must contain, in the line with ASCII
// letters lowered (for a plain query of several words, the words one
// after another, apart by white space as JSON spells it). That is exact only for what the JSON spells as itself,
// so the literal is the longest run of the pattern's characters that are:
// ASCII but for '"', '\' and control characters (which JSON escapes).
// Then a line whose text holds the literal holds its bytes, unless the
// text spells it another way, which a line that passes anyway covers:
//
//   - a non-ASCII rune that case-folds to a letter of the literal (the
//     Kelvin sign to k, the long s to s), raw or escaped;
//   - an escape that panto's encoder never writes but another may: \u00XX
//     for a printable character, \/ for '/'.
type prefilter struct {
	lit   []byte // lowered; nil: every line passes
	slash bool   // lit holds '/'
	// wide are the spellings, raw and escaped (lowered), of the non-ASCII
	// runes that fold to a letter of lit.
	wide [][]byte
	// words, when set, are the words of a plain query of several (lit
	// one of them), each spelled in JSON as itself: a line passes when
	// it holds them one after another, apart by white space as JSON
	// spells it, not for the one word alone (much more common).
	words [][]byte
}

// newPhrasePrefilter is the prefilter of a plain query of several
// words, apart by any white space in a match (lit is the longest).
func newPhrasePrefilter(words []string, lit string) prefilter {
	p := newPrefilter(lit)
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			if w[i] >= utf8.RuneSelf || !plainJSON(w[i]) {
				return p // spelled otherwise in JSON: the one word
			}
		}
	}
	if p.lit == nil {
		return p
	}
	for _, w := range words {
		low := lowerASCII(nil, []byte(w))
		p.words = append(p.words, low)
		// A word's letter spelled by a rune that folds to it (the long s
		// of "ſu" for "SU") is not found by bytes: such a line passes,
		// as for the literal.
		p.addWide(low)
		// So is a line that escapes a '/' one of them holds.
		p.slash = p.slash || bytes.IndexByte(low, '/') >= 0
	}
	return p
}

// phraseIn reports whether low holds words one after another, each after
// white space as JSON spells it in a string (jsonSpace).
func phraseIn(low []byte, words [][]byte) bool {
	for at := 0; ; {
		i := bytes.Index(low[at:], words[0])
		if i < 0 {
			return false
		}
		if _, ok := wordsAfter(low, at+i+len(words[0]), words[1:], jsonSpace); ok {
			return true
		}
		at += i + 1
	}
}

// jsonSpace is the length of the white space (\s) JSON spells at the
// start of low (lowered), 0 if none.
func jsonSpace(low []byte) int {
	switch {
	case len(low) == 0:
		return 0
	case low[0] == ' ':
		return 1
	case low[0] != '\\' || len(low) < 2:
		return 0
	}
	switch low[1] {
	case 'n', 't', 'r', 'f':
		return 2
	case 'u':
		for _, e := range []string{`\u000a`, `\u0009`, `\u000d`, `\u000c`, `\u0020`} {
			if bytes.HasPrefix(low, []byte(e)) {
				return len(e)
			}
		}
	}
	return 0
}

func newPrefilter(pattern string) prefilter {
	var best, run []byte
	for _, r := range pattern {
		if r < utf8.RuneSelf && plainJSON(byte(r)) {
			run = append(run, lowerByte(byte(r)))
			if len(run) > len(best) {
				best = run
			}
			continue
		}
		run = nil
	}
	if len(best) == 0 {
		return prefilter{}
	}
	p := prefilter{lit: best, slash: bytes.IndexByte(best, '/') >= 0}
	p.addWide(best)
	return p
}

// addWide adds to p.wide the spellings of the non-ASCII runes that fold
// to a letter of word.
func (p *prefilter) addWide(word []byte) {
	for _, c := range word {
		for _, r := range wideFolds(rune(c)) {
			raw := []byte(string(r))
			if !slices.ContainsFunc(p.wide, func(w []byte) bool { return bytes.Equal(w, raw) }) {
				p.wide = append(p.wide, raw, []byte(fmt.Sprintf(`\u%04x`, r)))
			}
		}
	}
}

// plainJSON reports whether encoding/json writes the ASCII byte c as
// itself in a string.
func plainJSON(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

// wideFolds returns the non-ASCII runes that fold to r.
func wideFolds(r rune) []rune {
	var out []rune
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f >= utf8.RuneSelf {
			out = append(out, f)
		}
	}
	return out
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// candidate reports whether line may hold a match; scratch is a buffer it
// may reuse, returned for the next call.
func (p *prefilter) candidate(scratch, line []byte) ([]byte, bool) {
	if p.lit == nil {
		return scratch, true
	}
	low := lowerASCII(scratch, line)
	return low, p.passes(line, low)
}

// passes is candidate for raw JSON whose lowered copy is low.
func (p *prefilter) passes(raw, low []byte) bool {
	if p.lit == nil || p.holds(low) || escapesPrintable(raw) || p.slash && bytes.Contains(raw, []byte(`\/`)) {
		return true
	}
	for _, w := range p.wide {
		if bytes.Contains(low, w) {
			return true
		}
	}
	return false
}

// holds reports whether low holds the literal, or the words.
func (p *prefilter) holds(low []byte) bool {
	if p.words != nil {
		return phraseIn(low, p.words)
	}
	return bytes.Contains(low, p.lit)
}

// escapesPrintable reports whether line holds a \u00XX escape of a
// printable ASCII character (panto's encoder escapes only control
// characters so).
func escapesPrintable(line []byte) bool {
	for {
		i := bytes.Index(line, []byte(`\u00`))
		if i < 0 || i+5 >= len(line) {
			return false
		}
		if c := line[i+4]; c >= '2' && c <= '7' {
			return true
		}
		line = line[i+4:]
	}
}

// lowerASCII returns src with A-Z lowered, in dst's storage; other bytes
// are kept. Eight bytes at a time: it runs over every byte searched.
func lowerASCII(dst, src []byte) []byte {
	if cap(dst) < len(src) {
		dst = make([]byte, len(src), len(src)+len(src)/4)
	}
	dst = dst[:len(src)]
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(src); i += 8 {
		w := binary.LittleEndian.Uint64(src[i:])
		low7 := w &^ highs
		// High bit of each byte: its low 7 bits are >= 'A', and > 'Z'
		// (no carry crosses a byte: both sums stay below 0x100).
		ge := low7 + ones*(0x80-'A')
		gt := low7 + ones*(0x80-'Z'-1)
		upper := ge &^ gt &^ w & highs
		binary.LittleEndian.PutUint64(dst[i:], w|upper>>2)
	}
	for ; i < len(src); i++ {
		dst[i] = lowerByte(src[i])
	}
	return dst
}
