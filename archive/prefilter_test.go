package archive

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp/syntax"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
	"github.com/panto-dev/panto/internal/testkit/sessiongen"
)

// oddLog is a log whose texts are spelled in ways panto's encoder never
// writes, or hold runes that fold to ASCII letters: what the prefilter
// must not miss.
const oddLog = `{"type":"session","version":1,"id":"odd","created":"2026-01-01T00:00:00Z"}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"\u0041BC \u002Fpath \/x caf\u00e9 \u0022q\u0022"}]}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"text","text":"` + "\u212a" + `ELVIN ` + "\u017f" + `top and \u212aing \u017Fun"}]}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"tool_result","tool_use_id":"t","text":"tab\there\nnew line \\ back \"quoted\" \u001b[0m del` + "\x7f" + `"}]}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"assistant","content":[{"type":"tool_use","tool_use_id":"t","name":"run","input":{"cmd":"ls \"a b\"","n":[1,2]}}]}
{"type":"message","ts":"2026-01-01T00:00:00Z","content":[{"type":"thinking","text":"Straße ǅ ΣΑΣ"}],"role":"assistant"}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"in dir\/file"}]}
{"type":"message","ts":"2026-01-01T00:00:00Z","role":"user","content":[{"type":"text","text":"a\/b separated"}]}
`

// TestPrefilterNeverMisses: searching with the prefilter (and the byte
// search of ASCII literals) finds exactly what decoding every line and
// matching it with the regexp finds, for queries cut from the texts
// themselves (case flipped at random), tricky literals, and regular
// expressions, over realistic logs and odd spellings.
func TestPrefilterNeverMisses(t *testing.T) {
	logs := map[string][]byte{"odd": []byte(oddLog)}
	var texts []string
	for seed := range uint64(6) {
		id := fmt.Sprintf("gen%d", seed)
		log, err := sessiongen.New(seed).Session(id, 20_000, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		logs[id] = log
	}
	for id, log := range logs {
		parsed, err := sessionlog.Parse(id, log)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for _, m := range parsed.Messages {
			for _, b := range m.Content {
				texts = append(texts, b.Text, b.ToolName+" "+string(b.Input))
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	queries := []string{"dir/file", "abc", "/path", "/x", "café", `"q"`, "kelvin", "KING", "stop", "sun", "k", "s", `"quoted"`, "nG SU", "king SUN", "a/b separated",
		"tab\there", "new line", `\ back`, "\x1b[0m", "del\x7f", `ls "a b"`, `"n":[1,2]`, "strasse", "straße", "ǆ", "σας", "ΣΑΣ",
		`re:\bk\w+`, `re:s(top|un)`, `re:(?-i)ELVIN`, `re:[a-c]{3} /`, `re:tab\s+here`, `re:x*`,
		`re:func \w+`, `re:^abc`, `re:(?m)^in dir`, `re:(?m)ing$`, `re:ing$`, `re:ere[^x]new`, `re:a.c`, `re:(?s)ab.`, `re:err\b`}
	for range 80 {
		text := texts[r.IntN(len(texts))]
		if text == "" || !utf8.ValidString(text) {
			continue
		}
		runes := []rune(text)
		i := r.IntN(len(runes))
		j := min(len(runes), i+1+r.IntN(12))
		q := []rune(string(runes[i:j]))
		for k := range q {
			if r.IntN(2) == 0 {
				q[k] = []rune(strings.ToUpper(string(q[k])))[0]
			}
		}
		queries = append(queries, string(q))
	}
	passed := 0
	for _, q := range queries {
		for _, thinking := range []bool{false, true} {
			m, err := compile(Query{Pattern: q, Thinking: thinking})
			if err != nil {
				t.Fatalf("%q: %v", q, err)
			}
			brute := *m
			brute.pre, brute.words = prefilter{}, nil // every line decoded, every text through the regexp
			for id, log := range logs {
				info := agent.SessionInfo{ID: id}
				got, err := m.session(t.Context(), info, bytes.NewReader(log))
				if err != nil {
					t.Fatal(err)
				}
				want, err := brute.session(t.Context(), info, bytes.NewReader(log))
				if err != nil {
					t.Fatal(err)
				}
				if a, b := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); a != b {
					t.Fatalf("query %q (thinking %v) in %s:\nprefiltered %s\n      brute %s", q, thinking, id, a, b)
				}
				passed += len(want)
			}
		}
	}
	if passed < len(queries) {
		t.Fatalf("only %d matches over %d queries: the test proves little", passed, len(queries))
	}
	// The odd spellings are found at all (not only equally missed).
	for _, q := range []string{"abc", "/path", "kelvin", "stop", "\"q\"", "dir/file", "a/b separated", "ng su"} {
		m, _ := compile(Query{Pattern: q})
		if got, _ := m.session(t.Context(), agent.SessionInfo{ID: "odd"}, strings.NewReader(oddLog)); len(got) == 0 {
			t.Errorf("%q is not found in the odd log", q)
		}
	}
}

// TestLowerASCII: the eight-at-a-time lowering is the byte loop's, for
// every byte value at every offset.
func TestLowerASCII(t *testing.T) {
	var src []byte
	for c := range 256 {
		src = append(src, byte(c))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		src = append(src, byte(r.IntN(256)))
	}
	for off := range 9 {
		in := src[off:]
		got := lowerASCII(nil, in)
		for i, c := range in {
			if got[i] != lowerByte(c) {
				t.Fatalf("offset %d, byte %d (%#x): %#x, want %#x", off, i, c, got[i], lowerByte(c))
			}
		}
	}
}

// TestPrefilterLiteral: the literal is the longest run of characters that
// JSON writes as themselves, and it knows the runes that fold into it.
func TestPrefilterLiteral(t *testing.T) {
	tests := []struct {
		pattern, lit string
		wide         int
	}{
		{"Hello World", "hello world", 0},
		{`say "hi there" now`, "hi there", 0},
		{"tab\tseparated", "separated", 1}, // s: the long s
		{"é", "", 0},
		{"Kö", "k", 1},
		{"path/to", "path/to", 0},
	}
	for _, tt := range tests {
		p := newPrefilter(tt.pattern)
		if string(p.lit) != tt.lit || len(p.wide) != 2*tt.wide {
			t.Errorf("%q: literal %q with %d wide spellings, want %q with %d", tt.pattern, p.lit, len(p.wide), tt.lit, 2*tt.wide)
		}
	}
	if p := newPrefilter("path/to"); !p.slash {
		t.Error("a literal with '/' does not look for \\/")
	}
}

func TestSpansLines(t *testing.T) {
	for expr, want := range map[string]bool{
		`func \w+`: false, `a.c`: false, `(?m)^x$`: false, `\bword\b`: false, `[a-z]+`: false,
		`^x`: true, `x$`: true, `\Ax`: true, `a\nb`: true, `a\sb`: true, `[^a]`: true, `(?s)a.b`: true, `x|y\n`: true,
	} {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := spansLines(re); got != want {
			t.Errorf("%s: spansLines %v, want %v", expr, got, want)
		}
	}
}
