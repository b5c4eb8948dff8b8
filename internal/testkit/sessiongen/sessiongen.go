// Package sessiongen generates realistic panto session logs in the real
// line format (internal/sessionlog): varied prose, code blocks, tool calls
// and tool results, in batches like an agent writes them. bench/gencatalog
// uses it to build a benchmark catalog, and tests and benchmarks use it
// for realistic input. Output is deterministic for a given seed.
package sessiongen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/sessionlog"
)

// Generator generates sessions from a seeded random source.
type Generator struct{ r *rand.Rand }

// New returns a generator seeded with seed.
func New(seed uint64) *Generator { return &Generator{r: rand.New(rand.NewPCG(seed, 42))} }

// Rand is the generator's random source (for choices around it, such as
// session sizes, that should follow the same seed).
func (g *Generator) Rand() *rand.Rand { return g.r }

// Session encodes batches until the log reaches about target bytes.
func (g *Generator) Session(id string, target int, at time.Time) ([]byte, error) {
	return g.SessionIn(agent.Project{}, id, target, at)
}

// SessionIn is Session for a session started in project, which its
// header records (the scale benchmark spreads its sessions over projects,
// as a team's bucket holds them).
func (g *Generator) SessionIn(project agent.Project, id string, target int, at time.Time) ([]byte, error) {
	var out []byte
	model := []string{"claude-sonnet-4-5", "gpt-5.1", "qwen3-coder-480b", "claude-opus-4-1"}[g.r.IntN(4)]
	ident := agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://api.anthropic.com", Model: model}
	if strings.HasPrefix(model, "gpt") || strings.HasPrefix(model, "qwen") {
		ident = agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "https://api.openai.com/v1", Model: model}
	}
	first := []agent.PersistentMessage{
		{Message: agent.SystemText("You are panto, a coding agent. Work in "+g.path()+". Be concise.", agent.SystemReplace)},
		{Message: agent.UserText(g.prompt()), Identity: ident},
	}
	b, err := sessionlog.EncodeBatchIn(project, id, true, first, at)
	if err != nil {
		return nil, err
	}
	out = append(out, b...)
	for turn := 0; len(out) < target; turn++ {
		at = at.Add(time.Duration(5+g.r.IntN(90)) * time.Second)
		var batch []agent.PersistentMessage
		if g.r.IntN(4) > 0 { // a tool round: assistant call + tool result
			tid := fmt.Sprintf("toolu_%016x", g.r.Uint64())
			name, input := g.toolCall()
			call := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{
				agent.TextBlock(g.prose(1 + g.r.IntN(2))), agent.ToolUseBlock(tid, name, input)},
				Usage: g.usage()}
			res := agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock(tid, g.toolResult(name), g.r.IntN(20) == 0)}}
			batch = append(batch, agent.PersistentMessage{Message: call, Usage: call.Usage, Identity: ident}, agent.PersistentMessage{Message: res, Identity: ident})
		} else {
			reply := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.TextBlock(g.answer())}, Usage: g.usage()}
			batch = append(batch, agent.PersistentMessage{Message: reply, Usage: reply.Usage, Identity: ident})
			if len(out) < target {
				b, err := sessionlog.EncodeBatch(id, false, batch, at)
				if err != nil {
					return nil, err
				}
				out = append(out, b...)
				batch = []agent.PersistentMessage{{Message: agent.UserText(g.prompt()), Identity: ident}}
				at = at.Add(time.Duration(20+g.r.IntN(300)) * time.Second)
			}
		}
		b, err := sessionlog.EncodeBatch(id, false, batch, at)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// Catalog writes sessions session files into dir (made if missing),
// about totalBytes in all, with log-normal sizes: the catalog of
// bench/gencatalog and of the benchmarks that read one. It returns the
// bytes written.
func (g *Generator) Catalog(dir string, sessions int, totalBytes float64) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	sizes := make([]float64, sessions)
	var sum float64
	for i := range sizes {
		sizes[i] = math.Exp(g.r.NormFloat64() * 1.0)
		sum += sizes[i]
	}
	var written int64
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	for i, s := range sizes {
		target := int(s / sum * totalBytes)
		id := fmt.Sprintf("%016x%016x", g.r.Uint64(), g.r.Uint64()) // random like agent.NewSessionID, but seeded
		at := start.Add(time.Duration(i) * 7 * time.Minute)
		data, err := g.Session(id, target, at)
		if err != nil {
			return written, err
		}
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), data, 0o644); err != nil {
			return written, err
		}
		written += int64(len(data))
	}
	return written, nil
}

// AppendSome appends one user message (one batch) to frac of the
// sessions in dir, picked at random.
func (g *Generator) AppendSome(dir string, frac float64) (int, int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return 0, 0, err
	}
	sort.Strings(files)
	g.r.Shuffle(len(files), func(i, k int) { files[i], files[k] = files[k], files[i] })
	n := int(math.Round(frac * float64(len(files))))
	var bytes int64
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for _, f := range files[:n] {
		id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		b, err := sessionlog.EncodeBatch(id, false, []agent.PersistentMessage{{Message: agent.UserText(g.prompt())}}, at)
		if err != nil {
			return 0, 0, err
		}
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, 0, err
		}
		if _, err := fh.Write(b); err != nil {
			fh.Close()
			return 0, 0, err
		}
		if err := fh.Close(); err != nil {
			return 0, 0, err
		}
		bytes += int64(len(b))
	}
	return n, bytes, nil
}

var words = strings.Fields(`the a to of and in is that it for this we on with be as by can function file test error
value return should not are from or when if will need let me check now which but have then use code change update
session store segment bucket push pull manifest index append batch line hash length remote local write read fix build
run output failing passes context handler request response config option flag parse decode encode buffer cache retry
timeout goroutine channel mutex interface struct method package import module version compile type pointer slice map
nil err ctx string int bytes json yaml http server client database query table migration schema user admin token api
looks like here's what I found the issue is caused because instead so let's try first then after also note however`)

var idents = strings.Fields(`handler server store client cfg opts req resp buf data result items entry node tree cache
logger conn session manifest segment index reader writer parser token user account order invoice queue worker job`)

func (g *Generator) word() string {
	// Zipf-ish: low indices far more often.
	i := int(math.Floor(math.Pow(g.r.Float64(), 2.2) * float64(len(words))))
	return words[i]
}

func (g *Generator) sentence() string {
	n := 6 + g.r.IntN(18)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = g.word()
	}
	if g.r.IntN(5) == 0 {
		ws[g.r.IntN(n)] = "`" + g.ident() + "`"
	}
	s := strings.Join(ws, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func (g *Generator) prose(sentences int) string {
	var b strings.Builder
	for i := 0; i < sentences; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.sentence())
	}
	return b.String()
}

func (g *Generator) ident() string {
	a := idents[g.r.IntN(len(idents))]
	if g.r.IntN(2) == 0 {
		b := idents[g.r.IntN(len(idents))]
		return a + strings.ToUpper(b[:1]) + b[1:]
	}
	return a
}

func (g *Generator) path() string {
	dirs := []string{"cmd", "internal", "pkg", "store", "agent", "api", "web/src", "scripts"}
	return dirs[g.r.IntN(len(dirs))] + "/" + g.ident() + []string{".go", ".go", ".ts", ".py", "_test.go", ".md"}[g.r.IntN(6)]
}

func (g *Generator) code(lines int) string {
	var b strings.Builder
	indent := 0
	for i := 0; i < lines; i++ {
		k := g.r.IntN(9)
		if k == 6 && indent > 0 {
			indent--
			b.WriteString(strings.Repeat("\t", indent) + "}\n")
			continue
		}
		b.WriteString(strings.Repeat("\t", indent))
		switch k {
		case 0:
			fmt.Fprintf(&b, "func (%c *%s) %s(ctx context.Context, %s string) error {", g.ident()[0], g.ident(), strings.Title(g.ident()), g.ident())
			indent++
		case 1:
			fmt.Fprintf(&b, "if err := %s.%s(ctx, %s); err != nil {", g.ident(), strings.Title(g.ident()), g.ident())
			indent++
		case 2:
			fmt.Fprintf(&b, "return fmt.Errorf(\"%s %%s: %%w\", %s, err)", g.word()+" "+g.word(), g.ident())
		case 3:
			fmt.Fprintf(&b, "%s := make([]%s, 0, %d)", g.ident(), g.ident(), g.r.IntN(64))
		case 4:
			fmt.Fprintf(&b, "for _, %s := range %s.%s {", g.ident(), g.ident(), strings.Title(g.ident()))
			indent++
		case 5:
			fmt.Fprintf(&b, "// %s", g.sentence())
		default:
			fmt.Fprintf(&b, "%s.%s = %s(%q, %d)", g.ident(), strings.Title(g.ident()), g.ident(), g.word(), g.r.IntN(1000))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (g *Generator) prompt() string {
	switch g.r.IntN(4) {
	case 0:
		return g.prose(1 + g.r.IntN(3))
	case 1:
		return "In " + g.path() + ": " + g.prose(1+g.r.IntN(2)) + "\n\n```\n" + g.code(3+g.r.IntN(10)) + "```"
	case 2:
		return "The test fails:\n\n```\n--- FAIL: Test" + strings.Title(g.ident()) + " (0." + fmt.Sprint(g.r.IntN(99)) + "s)\n    " + g.path() + ":" + fmt.Sprint(g.r.IntN(400)) + ": " + g.sentence() + "\n```\n" + g.prose(1)
	default:
		return g.prose(1)
	}
}

func (g *Generator) answer() string {
	var b strings.Builder
	b.WriteString(g.prose(2 + g.r.IntN(4)))
	if g.r.IntN(2) == 0 {
		b.WriteString("\n\n```go\n" + g.code(5+g.r.IntN(25)) + "```\n\n" + g.prose(1+g.r.IntN(3)))
	}
	for i := 0; i < g.r.IntN(4); i++ {
		b.WriteString("\n- " + g.sentence())
	}
	return b.String()
}

func (g *Generator) toolCall() (string, json.RawMessage) {
	var name string
	var in any
	switch g.r.IntN(5) {
	case 0, 1:
		name, in = "read_file", map[string]any{"path": g.path()}
	case 2:
		name, in = "bash", map[string]any{"command": []string{"go test ./" + g.ident() + "/...", "grep -rn " + g.ident() + " .", "git diff --stat", "ls -la " + g.path()}[g.r.IntN(4)]}
	case 3:
		name, in = "edit_file", map[string]any{"path": g.path(), "old": g.code(2 + g.r.IntN(5)), "new": g.code(2 + g.r.IntN(8))}
	default:
		name, in = "search", map[string]any{"query": g.word() + " " + g.ident(), "max_results": 10}
	}
	b, _ := json.Marshal(in)
	return name, b
}

func (g *Generator) toolResult(name string) string {
	switch name {
	case "read_file":
		return g.code(20 + g.r.IntN(300))
	case "bash":
		var b strings.Builder
		for i := 0; i < 3+g.r.IntN(40); i++ {
			fmt.Fprintf(&b, "%s:%d: %s\n", g.path(), g.r.IntN(900), g.sentence())
		}
		if g.r.IntN(2) == 0 {
			fmt.Fprintf(&b, "ok  \tgithub.com/example/%s\t%d.%03ds\n", g.ident(), g.r.IntN(9), g.r.IntN(1000))
		}
		return b.String()
	case "edit_file":
		return "Edited " + g.path() + " (" + fmt.Sprint(1+g.r.IntN(40)) + " lines changed)."
	default:
		var b strings.Builder
		for i := 0; i < 10; i++ {
			fmt.Fprintf(&b, "%s:%d: %s\n", g.path(), g.r.IntN(900), g.code(1))
		}
		return b.String()
	}
}

func (g *Generator) usage() *agent.Usage {
	return &agent.Usage{InputTokens: int64(1000 + g.r.IntN(90000)), OutputTokens: int64(50 + g.r.IntN(4000)), CacheReadTokens: int64(g.r.IntN(80000))}
}
