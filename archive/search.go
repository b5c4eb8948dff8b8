package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/store"
)

// Query is what to search for.
type Query struct {
	// Pattern is text to find, case-insensitively; with the prefix "re:",
	// a regular expression (Go syntax), also case-insensitive unless it
	// says (?-i).
	Pattern string
	// Thinking searches thinking blocks too. They are left out by default:
	// they repeat what the answer says, and would drown its hits.
	Thinking bool
	// Limit ends the search after this many matches (0: no limit).
	Limit int
	// Sessions, when set, says which sessions are searched (say, one
	// project's).
	Sessions func(agent.SessionInfo) bool
	// Since: only the messages written at or after it (zero: all), and
	// the title of a session modified since. A session modified before
	// it is not read.
	Since time.Time
}

// Match is one message that matches: its first match, with some context
// on one line, and how many matches it holds.
type Match struct {
	Session agent.SessionInfo
	// Message is the message's number in its session, from 1 (the
	// numbering of panto show and panto fork --at); 0 for the title.
	Message int
	TS      time.Time
	Role    agent.Role
	// Block is the kind of block the first match is in: text, tool_use
	// (its name or its JSON input), tool_result or thinking, or title
	// (BlockTitle); Tool is the tool a tool_use block calls.
	Block agent.BlockType
	Tool  string
	// Before, Text and After are the snippet: the text matched and what
	// surrounds it, whitespace folded to single spaces.
	Before, Text, After string
	// Count is the number of matches in the message's searched blocks.
	Count int
}

// ErrBadQuery: the pattern is empty or not a valid regular expression.
var ErrBadQuery = errors.New("bad search query")

// snippetRunes is how much context a snippet shows on each side.
const snippetRunes = 60

// Search finds the messages of every session of st that match q, newest
// session first and in order within a session, and calls fn for each
// until q.Limit matches were found. A session's title is searched first
// (a match of Block BlockTitle, Message 0), then the text of its user
// and assistant messages, tool calls and results included; system
// messages and redacted thinking are not, thinking only with q.Thinking.
//
// Most lines hold no match, so a line's raw bytes are tested for a
// literal the pattern needs (prefilter) before the line is decoded.
func Search(ctx context.Context, st store.LogStore, q Query, o Options, fn func(Match) error) (Stats, error) {
	m, err := compile(q)
	if err != nil {
		return Stats{}, err
	}
	sessions, broken, err := listed(ctx, st, func(info agent.SessionInfo) bool {
		return (q.Since.IsZero() || !info.Modified.Before(q.Since)) && (q.Sessions == nil || q.Sessions(info))
	})
	if err != nil {
		return Stats{}, fmt.Errorf("search: %w", err)
	}
	found := 0
	stats, err := eachLog(ctx, st, sessions, o,
		func(ctx context.Context, info agent.SessionInfo, r io.Reader) ([]Match, error) {
			return m.session(ctx, info, r)
		},
		func(_ agent.SessionInfo, matches []Match) error {
			for _, mt := range matches {
				if err := fn(mt); err != nil {
					return err
				}
				if found++; q.Limit > 0 && found >= q.Limit {
					return errStop
				}
			}
			return nil
		})
	stats.Skipped = append(broken, stats.Skipped...)
	if err != nil {
		return stats, fmt.Errorf("search: %w", err)
	}
	return stats, nil
}

// matcher is a compiled query.
type matcher struct {
	re *regexp.Regexp
	// words are a plain query that is all ASCII, lowered, word by word
	// (one, the whole query, when it is one word): it is matched without
	// the regexp (whose case folding is several times slower than a byte
	// search) in a text free of wide, the words apart by any white space.
	words [][]byte
	wide  [][]byte
	pre   prefilter
	// lineLocal: no match of the regexp holds a newline or depends on
	// where the text begins or ends, so only the lines that hold its
	// literal need it run over them.
	lineLocal bool

	thinking bool
	limit    int
	since    time.Time
}

// findAll returns the spans of the matches in text, as the regexp's
// FindAllStringIndex (leftmost, not overlapping). For an ASCII literal
// the case folding of (?i) is ASCII's as long as text holds no non-ASCII
// rune that folds to one of its letters (the Kelvin sign, the long s).
func (m *matcher) findAll(scratch []byte, text string) ([][]int, []byte) {
	if m.words == nil {
		// A regexp: a text without the literal it needs (the
		// prefilter's, exact in a decoded text free of wide folds) cannot
		// match, and is cheaper to rule out than to run the regexp over.
		p := m.pre
		if p.lit == nil || containsAny(text, p.wide) {
			return m.re.FindAllStringIndex(text, -1), scratch
		}
		scratch = lowerASCII(scratch, []byte(text))
		if !m.lineLocal {
			if !bytes.Contains(scratch, p.lit) {
				return nil, scratch
			}
			return m.re.FindAllStringIndex(text, -1), scratch
		}
		var out [][]int
		for at := 0; at < len(text); {
			i := bytes.Index(scratch[at:], p.lit)
			if i < 0 {
				break
			}
			start := bytes.LastIndexByte(scratch[:at+i], '\n') + 1
			end := len(text)
			if j := bytes.IndexByte(scratch[at+i:], '\n'); j >= 0 {
				end = at + i + j
			}
			for _, loc := range m.re.FindAllStringIndex(text[start:end], -1) {
				out = append(out, []int{start + loc[0], start + loc[1]})
			}
			at = end + 1
		}
		return out, scratch
	}
	if containsAny(text, m.wide) {
		return m.re.FindAllStringIndex(text, -1), scratch
	}
	low := lowerASCII(scratch, []byte(text))
	var out [][]int
	first := m.words[0]
	for at := 0; ; {
		i := bytes.Index(low[at:], first)
		if i < 0 {
			return out, low
		}
		start := at + i
		if end, ok := wordsAfter(low, start+len(first), m.words[1:], textSpace); ok {
			out = append(out, []int{start, end})
			at = end
		} else {
			at = start + 1
		}
	}
}

// wordsAfter reports whether low holds words from at on, each after a
// run of white space, whose first character space says the length of
// (0: none), and where the last one ends.
func wordsAfter(low []byte, at int, words [][]byte, space func([]byte) int) (int, bool) {
	for _, w := range words {
		j := at
		for n := space(low[j:]); n > 0; n = space(low[j:]) {
			j += n
		}
		if j == at || !bytes.HasPrefix(low[j:], w) {
			return 0, false
		}
		at = j + len(w)
	}
	return at, true
}

// textSpace is 1 when text begins with white space as \s is (space,
// tab, newline, form feed, carriage return), else 0.
func textSpace(text []byte) int {
	if len(text) > 0 && (text[0] == ' ' || text[0] == '\t' || text[0] == '\n' || text[0] == '\f' || text[0] == '\r') {
		return 1
	}
	return 0
}

func containsAny(text string, subs [][]byte) bool {
	for _, w := range subs {
		if strings.Contains(text, string(w)) {
			return true
		}
	}
	return false
}

func compile(q Query) (*matcher, error) {
	expr, isRE := strings.CutPrefix(q.Pattern, "re:")
	if expr == "" {
		return nil, fmt.Errorf("%w: give something to find", ErrBadQuery)
	}
	lit, lineLocal, words := expr, false, strings.Fields(expr)
	switch {
	case isRE:
		parsed, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
		}
		lit = requiredLiteral(parsed.Simplify())
		lineLocal = !spansLines(parsed)
	case len(words) > 1:
		// Words apart by any white space, as a snippet shows them: a
		// phrase the text wraps onto the next line, or spaces twice,
		// is found ("connection refused" missed "connection\n
		// refused", which search printed as "connection refused").
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = regexp.QuoteMeta(w)
			if len(w) > len(lit) || i == 0 {
				lit = w
			}
		}
		expr = strings.Join(quoted, `\s+`)
	default:
		expr = regexp.QuoteMeta(expr)
	}
	re, err := regexp.Compile("(?i)" + expr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	pre := newPrefilter(lit)
	if !isRE && len(words) > 1 {
		pre = newPhrasePrefilter(words, lit)
	}
	m := &matcher{re: re, pre: pre, lineLocal: lineLocal, thinking: q.Thinking, limit: q.Limit, since: q.Since}
	if !isRE && isASCII(q.Pattern) {
		if len(words) <= 1 {
			words = []string{q.Pattern} // one word, as typed
		}
		for _, w := range words {
			low := lowerASCII(nil, []byte(w))
			m.words = append(m.words, low)
			for _, c := range low {
				for _, r := range wideFolds(rune(c)) {
					m.wide = append(m.wide, []byte(string(r)))
				}
			}
		}
	}
	return m, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// requiredLiteral returns a string every match of re contains (the
// longest one it finds cheaply), or "".
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best := ""
		for _, sub := range re.Sub {
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return ""
}

// spansLines reports whether a match of re may hold a newline, or
// depends on where the text begins or ends (^, $, \A, \z without (?m)):
// either would change if the regexp ran over each line on its own.
func spansLines(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpBeginText, syntax.OpEndText:
		return true
	case syntax.OpLiteral:
		if slices.Contains(re.Rune, '\n') {
			return true
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return true
			}
		}
	}
	return slices.ContainsFunc(re.Sub, spansLines)
}

// BlockTitle is the Block of a match in a session's title (Match).
const BlockTitle agent.BlockType = "title"

// session searches one session: its title, as the listing has it (the
// newest one; the name a user remembers a session by), then its log. A
// message line is decoded only when its raw bytes pass the prefilter.
func (m *matcher) session(ctx context.Context, info agent.SessionInfo, r io.Reader) ([]Match, error) {
	var out []Match
	var scratch, textScratch []byte
	if info.Title != "" {
		var locs [][]int
		locs, scratch = m.findAll(scratch, info.Title)
		for _, loc := range locs {
			if loc[0] == loc[1] {
				continue
			}
			if len(out) == 0 {
				mt := Match{Session: info, TS: info.Modified, Role: agent.RoleSystem, Block: BlockTitle, Text: fold(info.Title[loc[0]:loc[1]])}
				mt.Before, mt.After = context2(info.Title, loc[0], loc[1])
				out = append(out, mt)
			}
			out[0].Count++
		}
		if m.limit > 0 && len(out) >= m.limit {
			return out, nil
		}
	}
	d := sessionlog.Decoder{Name: info.ID}
	n := 0
	err := sessionlog.ReadLines(r, func(line []byte, last bool) error {
		if last {
			return nil // not committed (ReadLog returns none)
		}
		if d.Header == nil {
			_, _, err := d.DecodeEntry(line)
			return err
		}
		n++
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		var ok bool
		if scratch, ok = m.pre.candidate(scratch, line); !ok {
			return nil
		}
		mtext, ok := sessionlog.ScanMessageText(line)
		if !ok {
			// A line the fast scanner does not read: decode it (and
			// name it, if it is malformed).
			d.Line = n // the header is line 1: message n is line n+1
			e, _, err := d.DecodeEntry(line)
			if err != nil {
				return err
			}
			mtext = messageText(e)
		}
		if mtext.TS.Before(m.since) {
			return nil // written before --since
		}
		var mt Match
		if mt, textScratch, ok = m.message(textScratch, mtext, line, scratch); ok {
			mt.Session, mt.Message = info, n
			out = append(out, mt)
			if m.limit > 0 && len(out) >= m.limit {
				return errStop // no session yields more than the limit
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return out, nil
}

// within returns the part of low that lowers raw when raw is a part of
// line (as ScanMessageText's tokens are) and low lowers line.
func within(line, low, raw []byte) ([]byte, bool) {
	off := cap(line) - cap(raw)
	if len(low) != len(line) || off < 0 || off+len(raw) > len(line) || &line[off] != &raw[0] {
		return nil, false
	}
	return low[off : off+len(raw)], true
}

// messageText is a decoded entry as ScanMessageText gives a line.
func messageText(e sessionlog.Entry) sessionlog.MessageText {
	mt := sessionlog.MessageText{TS: e.TS, Role: e.Message.Role}
	for _, b := range e.Message.Content {
		tb := sessionlog.TextBlock{Type: b.Type, Input: b.Input}
		tb.Text, _ = json.Marshal(b.Text)
		tb.Name, _ = json.Marshal(b.ToolName)
		mt.Blocks = append(mt.Blocks, tb)
	}
	return mt
}

// message matches one message, read from line (whose lowered copy is
// low, when the prefilter made one); scratch is a buffer it may use,
// returned for the next call. Only the texts searched are unquoted.
// blockTexts returns the texts of block b of a message line (low is the
// line in lower case) that the prefilter lets through, unquoted: each is
// matched on its own, since a match across two would not be in the line
// as such, and the prefilter would miss it.
func (m *matcher) blockTexts(scratch []byte, b sessionlog.TextBlock, line, low []byte) ([]string, []byte) {
	var raws [][]byte
	switch b.Type {
	case agent.BlockText, agent.BlockToolResult:
		raws = [][]byte{b.Text}
	case agent.BlockToolUse:
		raws = [][]byte{b.Name, b.Input}
	case agent.BlockThinking:
		if m.thinking {
			raws = [][]byte{b.Text}
		}
	}
	var texts []string
	for k, raw := range raws {
		// What the prefilter rules out of a line it rules out of a part
		// of it, which then costs no unquoting.
		if len(raw) == 0 {
			continue
		}
		if lowRaw, ok := within(line, low, raw); ok {
			if !m.pre.passes(raw, lowRaw) {
				continue
			}
		} else {
			var pass bool
			if scratch, pass = m.pre.candidate(scratch, raw); !pass {
				continue
			}
		}
		if b.Type == agent.BlockToolUse && k == 1 {
			texts = append(texts, string(raw)) // the input is JSON as it is
		} else {
			texts = append(texts, sessionlog.Unquote(raw))
		}
	}
	return texts, scratch
}

func (m *matcher) message(scratch []byte, msg sessionlog.MessageText, line, low []byte) (Match, []byte, bool) {
	if msg.Role == agent.RoleSystem {
		return Match{}, scratch, false
	}
	var first Match
	count := 0
	for _, b := range msg.Blocks {
		var texts []string
		texts, scratch = m.blockTexts(scratch, b, line, low)
		for _, text := range texts {
			var locs [][]int
			locs, scratch = m.findAll(scratch, text)
			for _, loc := range locs {
				if loc[0] == loc[1] {
					continue // an empty match shows nothing
				}
				if count == 0 {
					first = Match{TS: msg.TS, Role: msg.Role, Block: b.Type, Text: fold(text[loc[0]:loc[1]])}
					if b.Type == agent.BlockToolUse {
						first.Tool = sessionlog.Unquote(b.Name)
					}
					first.Before, first.After = context2(text, loc[0], loc[1])
				}
				count++
			}
		}
	}
	first.Count = count
	return first, scratch, count > 0
}

// context2 returns up to snippetRunes runes before start and after end in
// text, folded, with an ellipsis where text goes on.
func context2(text string, start, end int) (before, after string) {
	b := start
	for i := 0; i < snippetRunes && b > 0; i++ {
		_, size := utf8.DecodeLastRuneInString(text[:b])
		b -= size
	}
	a := end
	for i := 0; i < snippetRunes && a < len(text); i++ {
		_, size := utf8.DecodeRuneInString(text[a:])
		a += size
	}
	before, after = foldKeepEdges(text[b:start]), foldKeepEdges(text[end:a])
	if b > 0 {
		before = "…" + strings.TrimLeft(before, " ")
	}
	if a < len(text) {
		after = strings.TrimRight(after, " ") + "…"
	}
	return before, after
}

// fold puts s on one line: runs of white space become one space. The
// result is a string of its own, never a part of s: a match keeps its
// snippet, not the message it was cut from (a session's matches are
// gathered before they are printed, and a large session's messages,
// held by the snippets of a common word, took hundreds of MB).
func fold(s string) string {
	f := strings.Fields(s)
	if len(f) == 1 {
		return strings.Clone(f[0]) // Join would return this part of s
	}
	return strings.Join(f, " ")
}

// foldKeepEdges is fold that keeps one space where s begins or ends with
// white space, so that the snippet's parts join as the text did.
func foldKeepEdges(s string) string {
	f := fold(s)
	if f == "" {
		if s != "" {
			return " "
		}
		return ""
	}
	if r, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(r) {
		f = " " + f
	}
	if r, _ := utf8.DecodeLastRuneInString(s); unicode.IsSpace(r) {
		f += " "
	}
	return f
}
