package main

import (
	"bufio"
	_ "embed"
	"html/template"
	"strings"

	"github.com/panto-dev/panto/agent"
)

// The HTML export is one file that needs nothing else: the styles are
// inline, there is no script, and nothing is fetched. Tool calls, tool
// results and thinking are <details> (folded, and unfolded with a tap);
// code blocks scroll sideways rather than widen the page, so that it
// reads on a phone. html/template escapes every text of the session.

//go:embed export.html.tmpl
var exportHTMLSource string

var exportHTML = template.Must(template.New("export").Funcs(template.FuncMap{
	"time":     exportTime,
	"stop":     stopText,
	"usage":    usageLine,
	"deref":    func(u *agent.Usage) agent.Usage { return *u },
	"totals":   totalsText,
	"identity": identityText,
	"parent":   parentLine,
	"json":     prettyJSON,
	"segments": textSegments,
	"lines":    func(s string) string { return plural(strings.Count(strings.TrimRight(s, "\n"), "\n")+1, "line") },
	"size":     func(s string) string { return byteSize(int64(len(s))) },
	"title":    func(m agent.Message) (string, error) { t, _ := m.Title(); return t, nil },
	"isTitle":  func(m agent.Message) bool { _, ok := m.Title(); return ok },
	"headline": func(info agent.SessionInfo) string {
		if info.Title != "" {
			return info.Title
		}
		return "Session " + shortID(info.ID)
	},
}).Parse(exportHTMLSource))

// htmlExport writes the HTML export a message at a time: the template's
// "head" (given the exportHead), its "message" for each, its "tail".
type htmlExport struct{}

func (htmlExport) head(w *bufio.Writer, h exportHead) error {
	return exportHTML.ExecuteTemplate(w, "head", h)
}

func (htmlExport) message(w *bufio.Writer, m exportMessage) error {
	return exportHTML.ExecuteTemplate(w, "message", m)
}

func (htmlExport) tail(w *bufio.Writer, h exportHead) error {
	return exportHTML.ExecuteTemplate(w, "tail", h)
}

// segment is a run of a text: prose, or a fenced code block.
type segment struct {
	Code bool
	Lang string
	Text string
}

// textSegments cuts a text at its ``` fences (Markdown code blocks), so
// that code keeps its lines and scrolls on a narrow screen. An unclosed
// fence runs to the end.
func textSegments(text string) []segment {
	var out []segment
	var cur strings.Builder
	inCode, lang := false, ""
	flush := func() {
		if s := strings.Trim(cur.String(), "\n"); s != "" || inCode {
			out = append(out, segment{Code: inCode, Lang: lang, Text: s})
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			flush()
			if inCode {
				inCode, lang = false, ""
			} else {
				inCode, lang = true, strings.TrimSpace(strings.TrimLeft(trimmed, "`"))
			}
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return out
}
