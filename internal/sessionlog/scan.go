package sessionlog

// The fast path of SummarizeLine and ScanMessageText: a scanner for
// lines written the way EncodeBatch writes them, and unquote, the one
// reader of their string tokens. summary.go is the API over it.

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/panto-dev/panto/agent"
)

// unquote decodes a JSON string token that has been validated, as
// encoding/json decodes it into a Go string: escapes decoded, a lone
// surrogate and an invalid UTF-8 byte each become U+FFFD. It is a reader
// of every text a search decodes, so it does in one pass what
// json.Unmarshal does in three, and crosses plain ASCII eight bytes at a
// time (escapes are frequent: every line of code ends in \n).
func unquote(tok []byte) string {
	body := tok[1 : len(tok)-1]
	var out []byte // nil while body needs no decoding
	start := 0     // of the bytes not yet copied to out
	for i := 0; i < len(body); {
		for i+8 <= len(body) {
			if m := backslashOrHigh8(binary.LittleEndian.Uint64(body[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(body) && body[i] != '\\' && body[i] < utf8.RuneSelf {
			i++
		}
		if i >= len(body) {
			break
		}
		if c := body[i]; c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(body[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			out = append(out, body[start:i]...)
			out = utf8.AppendRune(out, utf8.RuneError) // an invalid byte
			i++
			start = i
			continue
		}
		// An escape.
		if out == nil {
			out = make([]byte, 0, len(body))
		}
		out = append(out, body[start:i]...)
		if e := body[i+1]; e != 'u' {
			out = append(out, unescape[e])
			i += 2
			start = i
			continue
		}
		r := hex4(body[i+2:])
		i += 6
		if utf16.IsSurrogate(r) {
			if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
				if pair := utf16.DecodeRune(r, hex4(body[i+2:])); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			} else {
				r = utf8.RuneError
			}
		}
		out = utf8.AppendRune(out, r)
		start = i
	}
	if out == nil {
		return string(body)
	}
	return string(append(out, body[start:]...))
}

// backslashOrHigh8 flags (bit 7 of each byte) the bytes of w, eight
// string bytes in little-endian order, that are a backslash or not
// ASCII; as special8, the lowest flag is exact.
func backslashOrHigh8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	backslash := w ^ (ones * '\\')
	return ((backslash-ones)&^backslash | w) & highs
}

// unescape is what a one-letter escape stands for.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 decodes the four hex digits that begin b (validated).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanSummary reads a line written the way EncodeBatch writes one: an
// object whose keys are those of entry, spelled exactly, each at most
// once, with no null values (and blocks likewise). It returns false for
// any other line, valid or not, without interpreting it; when it returns
// true the line is valid JSON and s holds what encoding/json would decode
// into summaryEntry.
func scanSummary(line []byte) (s summaryEntry, ok bool) {
	sc := scanner{b: line}
	sc.ws()
	if !sc.byte('{') {
		return s, false
	}
	var seen uint32
	first := true
	for {
		sc.ws()
		if sc.byte('}') {
			break
		}
		if !first && !(sc.byte(',') && sc.ws() == nil) {
			return s, false
		}
		first = false
		key, ok := sc.key()
		if !ok {
			return s, false
		}
		bit, ok := entryKeys[string(key)]
		if !ok || seen&bit != 0 {
			return s, false
		}
		seen |= bit
		switch string(key) {
		case "type":
			s.Type, ok = sc.str()
		case "role":
			var v string
			v, ok = sc.str()
			s.Role = agent.Role(v)
		case "api_style":
			var v string
			v, ok = sc.str()
			s.APIStyle = agent.APIStyle(v)
		case "base_url":
			s.BaseURL, ok = sc.str()
		case "model":
			s.Model, ok = sc.str()
		case "reasoning":
			var v string
			v, ok = sc.str()
			s.Reasoning = agent.ReasoningEffort(v)
		case "ts":
			var tok []byte
			if tok, ok = sc.strToken(); ok {
				ok = s.TS.UnmarshalJSON(tok) == nil
			}
		case "more":
			var n int64
			n, ok = sc.int()
			s.More = int(n)
		case "usage":
			s.Usage = &agent.Usage{}
			ok = sc.usage(s.Usage)
		case "stop_reason":
			_, ok = sc.strToken()
		case "metadata":
			start := sc.i
			if ok = sc.peek() == '{' && sc.value(0); ok {
				ok = json.Unmarshal(line[start:sc.i], &s.Metadata) == nil
			}
		case "content":
			s.Content, ok = sc.content()
		}
		if !ok {
			return s, false
		}
	}
	sc.ws()
	return s, sc.i == len(line)
}

var entryKeys = map[string]uint32{
	"type": 1 << 0, "ts": 1 << 1, "role": 1 << 2, "content": 1 << 3, "usage": 1 << 4, "metadata": 1 << 5,
	"api_style": 1 << 6, "base_url": 1 << 7, "model": 1 << 8, "reasoning": 1 << 9, "more": 1 << 10,
	"stop_reason": 1 << 11,
}

var blockKeys = map[string]uint32{
	"type": 1 << 0, "text": 1 << 1, "signature": 1 << 2, "tool_use_id": 1 << 3, "name": 1 << 4,
	"input": 1 << 5, "is_error": 1 << 6, "mode": 1 << 7, "data": 1 << 8,
}

var usageKeys = map[string]uint32{
	"input_tokens": 1 << 0, "output_tokens": 1 << 1, "cache_read_tokens": 1 << 2,
	"cache_write_tokens": 1 << 3, "reasoning_tokens": 1 << 4,
}

// scanner validates JSON the way encoding/json's scanner does (the same
// grammar; bytes of a string are not checked to be UTF-8, control
// characters are refused) over one line.
type scanner struct {
	b []byte
	i int
}

func (sc *scanner) ws() error {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return nil
		}
	}
	return nil
}

func (sc *scanner) peek() byte {
	if sc.i < len(sc.b) {
		return sc.b[sc.i]
	}
	return 0
}

func (sc *scanner) byte(c byte) bool {
	if sc.peek() == c {
		sc.i++
		return true
	}
	return false
}

// key reads an object key and its colon; only keys without escapes.
func (sc *scanner) key() ([]byte, bool) {
	tok, ok := sc.strToken()
	if !ok {
		return nil, false
	}
	for _, c := range tok {
		if c == '\\' {
			return nil, false
		}
	}
	sc.ws()
	if !sc.byte(':') {
		return nil, false
	}
	sc.ws()
	return tok[1 : len(tok)-1], true
}

// strToken reads a string, quotes included.
//
// It is most of the cost of a line (content strings are most of its
// bytes), so it skips the plain bytes eight at a time (see special8) and
// looks escapes up in a table; the grammar is encoding/json's.
func (sc *scanner) strToken() ([]byte, bool) {
	start := sc.i
	if !sc.byte('"') {
		return nil, false
	}
	b := sc.b
	i := sc.i
	for {
		// Plain bytes, eight at a time, then one at a time.
		for i+8 <= len(b) {
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(b) && !strSpecial[b[i]] {
			i++
		}
		// Escapes, which come in runs (indentation is \t\t\t...).
		for i+1 < len(b) && b[i] == '\\' {
			if simpleEscape[b[i+1]] {
				i += 2
				continue
			}
			if b[i+1] != 'u' || i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
				return nil, false
			}
			i += 6
		}
		if i >= len(b) {
			return nil, false
		}
		switch c := b[i]; {
		case c == '"':
			sc.i = i + 1
			return b[start:sc.i], true
		case c < 0x20, c == '\\': // a control character, or a backslash that ends the line
			return nil, false
		}
	}
}

// strSpecial marks the bytes that end a run of plain string bytes: the
// quote, the backslash and the control characters.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// simpleEscape marks the bytes that may follow a backslash, but for the
// u of \uXXXX.
var simpleEscape = func() (t [256]bool) {
	for _, c := range []byte{'"', '\\', '/', 'b', 'f', 'n', 'r', 't'} {
		t[c] = true
	}
	return t
}()

// special8 flags (bit 7 of each byte) the bytes of w, eight string
// bytes in little-endian order, that strSpecial marks. A flag may also
// be set on a byte above a flagged one (a borrow), never below: the
// lowest flag is exact.
func special8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (w-ones*0x20)&^w) & highs
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (sc *scanner) str() (string, bool) {
	tok, ok := sc.strToken()
	if !ok {
		return "", false
	}
	return unquote(tok), true
}

// number reads a JSON number and reports whether it is an integer
// (no fraction or exponent).
func (sc *scanner) number() (integer, ok bool) {
	b, i := sc.b, sc.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	sc.i = i
	return integer, true
}

// int reads an integer that fits an int64 without question (at most 18
// digits); anything else is left to encoding/json.
func (sc *scanner) int() (int64, bool) {
	start := sc.i
	integer, ok := sc.number()
	if !ok || !integer {
		return 0, false
	}
	tok := sc.b[start:sc.i]
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	if len(tok) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range tok {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func (sc *scanner) literal(lit string) bool {
	if len(sc.b)-sc.i >= len(lit) && string(sc.b[sc.i:sc.i+len(lit)]) == lit {
		sc.i += len(lit)
		return true
	}
	return false
}

// maxDepth bounds nesting; deeper values are left to encoding/json.
const maxDepth = 1000

// value skips any JSON value.
func (sc *scanner) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch sc.peek() {
	case '"':
		_, ok := sc.strToken()
		return ok
	case '{':
		sc.i++
		sc.ws()
		if sc.byte('}') {
			return true
		}
		for {
			if _, ok := sc.strToken(); !ok {
				return false
			}
			sc.ws()
			if !sc.byte(':') {
				return false
			}
			sc.ws()
			if !sc.value(depth + 1) {
				return false
			}
			sc.ws()
			if sc.byte('}') {
				return true
			}
			if !sc.byte(',') {
				return false
			}
			sc.ws()
		}
	case '[':
		sc.i++
		sc.ws()
		if sc.byte(']') {
			return true
		}
		for {
			if !sc.value(depth + 1) {
				return false
			}
			sc.ws()
			if sc.byte(']') {
				return true
			}
			if !sc.byte(',') {
				return false
			}
			sc.ws()
		}
	case 't':
		return sc.literal("true")
	case 'f':
		return sc.literal("false")
	case 'n':
		return sc.literal("null")
	default:
		_, ok := sc.number()
		return ok
	}
}

// object reads an object whose keys are in keys, each at most once,
// calling field for each value.
func (sc *scanner) object(keys map[string]uint32, field func(key string) bool) bool {
	if !sc.byte('{') {
		return false
	}
	var seen uint32
	sc.ws()
	if sc.byte('}') {
		return true
	}
	for {
		key, ok := sc.key()
		if !ok {
			return false
		}
		bit, ok := keys[string(key)]
		if !ok || seen&bit != 0 || !field(string(key)) {
			return false
		}
		seen |= bit
		sc.ws()
		if sc.byte('}') {
			return true
		}
		if !sc.byte(',') {
			return false
		}
		sc.ws()
	}
}

func (sc *scanner) usage(u *agent.Usage) bool {
	return sc.object(usageKeys, func(key string) bool {
		n, ok := sc.int()
		switch key {
		case "input_tokens":
			u.InputTokens = n
		case "output_tokens":
			u.OutputTokens = n
		case "cache_read_tokens":
			u.CacheReadTokens = n
		case "cache_write_tokens":
			u.CacheWriteTokens = n
		case "reasoning_tokens":
			u.ReasoningTokens = n
		}
		return ok
	})
}

func (sc *scanner) content() ([]summaryBlock, bool) {
	if !sc.byte('[') {
		return nil, false
	}
	blocks := []summaryBlock{}
	sc.ws()
	if sc.byte(']') {
		return blocks, true
	}
	for {
		var b summaryBlock
		ok := sc.object(blockKeys, func(key string) bool {
			switch key {
			case "type":
				v, ok := sc.str()
				b.Type = agent.BlockType(v)
				return ok
			case "text":
				tok, ok := sc.strToken()
				b.Text = tok
				return ok
			case "name":
				tok, ok := sc.strToken()
				b.ToolName = tok
				return ok
			case "input":
				start := sc.i
				ok := sc.value(1)
				b.input = sc.b[start:sc.i]
				return ok
			case "is_error":
				return sc.literal("true") || sc.literal("false")
			default: // signature, tool_use_id, name, mode, data
				_, ok := sc.strToken()
				return ok
			}
		})
		if !ok {
			return nil, false
		}
		blocks = append(blocks, b)
		sc.ws()
		if sc.byte(']') {
			return blocks, true
		}
		if !sc.byte(',') {
			return nil, false
		}
		sc.ws()
	}
}
