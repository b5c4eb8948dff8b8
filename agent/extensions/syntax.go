package extensions

import (
	"fmt"
	"io"

	"github.com/yuin/gopher-lua/parse"
)

// opener is a token that a later one must close: a bracket, or a keyword
// that starts a block.
type opener struct {
	text, closer string
	line         int
	// header: a while or for whose do has not come yet (that do opens
	// nothing of its own).
	header bool
}

// openers are the tokens that open, by token type, with what closes them.
var openers = map[int]struct{ text, closer string }{
	'{': {"{", "}"}, '(': {"(", ")"}, '[': {"[", "]"},
	parse.TFunction: {"function", "end"}, parse.TIf: {"if", "end"}, parse.TWhile: {"while", "end"},
	parse.TFor: {"for", "end"}, parse.TDo: {"do", "end"}, parse.TRepeat: {"repeat", "until"},
}

// closerTexts are the tokens that close, by token type.
var closerTexts = map[int]string{'}': "}", ')': ")", ']': "]", parse.TEnd: "end", parse.TUntil: "until"}

// unclosedAtEOF says what a file whose syntax error is at its end left
// open: gopher-lua's parser says only "syntax error at EOF", where Lua's
// own says which bracket or block wants closing and where it began. It is
// the innermost opener not closed, as "'{' is not closed: '}' expected
// before the end of the file", and its line; ok is false when the tokens
// do not show one (a lexical error, a closer that does not match).
func unclosedAtEOF(src io.Reader, path string) (msg string, line int, ok bool) {
	sc := parse.NewScanner(src, path)
	lx := &parse.Lexer{}
	var stack []opener
	for {
		tok, err := sc.Scan(lx)
		if err != nil {
			return "", 0, false
		}
		if tok.Type == parse.EOF {
			break
		}
		lx.PrevTokenType = tok.Type
		top := len(stack) - 1
		if tok.Type == parse.TDo && top >= 0 && stack[top].header {
			stack[top].header = false
			continue
		}
		if o, ok := openers[tok.Type]; ok {
			header := tok.Type == parse.TWhile || tok.Type == parse.TFor
			stack = append(stack, opener{text: o.text, closer: o.closer, line: tok.Pos.Line, header: header})
			continue
		}
		if c, ok := closerTexts[tok.Type]; ok {
			if top < 0 || stack[top].closer != c {
				return "", 0, false
			}
			stack = stack[:top]
		}
	}
	if len(stack) == 0 {
		return "", 0, false
	}
	o := stack[len(stack)-1]
	return fmt.Sprintf("'%s' is not closed: '%s' expected before the end of the file", o.text, o.closer), o.line, true
}
