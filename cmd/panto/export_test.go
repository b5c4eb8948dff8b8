package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/store/storetest"
)

// exportSeed is the round-trip session (every block kind) with a title.
func exportSeed(t *testing.T, b backend) {
	t.Helper()
	seed(t, b, roundTripID, storetest.RoundTripMessages()...)
	pantoOn(t, b, "title", roundTripID, "Every <kind> of block")
}

// What every export of the round-trip session must show: each block
// kind, each assistant's stop reason and what it means.
var exportMust = []string{
	"Please fix the bug in main.go",  // user text, with markup to escape
	"Let me look at the file first.", // thinking
	"[redacted thinking]",
	"I'll read it.",
	"read_file", "go test ./...", // tool calls
	"package main", "exit status 1", // tool results
	"You are a careful assistant.", // system prompt
	"stop: tool_use (tool_use)", "stop: end_turn (complete)", "stop: length (truncated)", "stop: a_future_reason (unknown)",
	"no stop reason recorded", // the empty assistant message
	"1,200 input",             // usage of a turn
	"Every <kind> of block",   // the title
}

func TestExportMarkdownAndJSON(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			exportSeed(t, b)
			md := pantoOn(t, b, "export", roundTripID[:6]).stdout
			for _, w := range append(exportMust, "## 4 · assistant", "<details><summary>Thinking</summary>", "**Tool call `read_file`** (`toolu_01`)", "**Error of `toolu_02`**", "```json\n{\n  \"path\": \"main.go\"") {
				if !strings.Contains(md, w) {
					t.Errorf("Markdown lacks %q", w)
				}
			}
			if strings.Contains(md, "EmwKAhgB") {
				t.Error("Markdown holds the redacted thinking's opaque data")
			}

			out := filepath.Join(t.TempDir(), "s.json")
			r := pantoOn(t, b, "export", roundTripID, "-o", out) // the format from the extension
			if !strings.Contains(r.stderr, "written to "+out) {
				t.Errorf("export -o: stderr %q", r.stderr)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			// Private like the session, and written whole under its name
			// (nothing else is left beside it).
			if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("export -o: %v, mode %v", err, fi.Mode())
			}
			if ents, err := os.ReadDir(filepath.Dir(out)); err != nil || len(ents) != 1 {
				t.Errorf("export -o left %d entries beside it: %v", len(ents), err)
			}
			doc := jsonObject(t, string(data))
			if !sameKeys(keys(doc), []string{"messages", "session"}) {
				t.Errorf("export JSON fields %v", keys(doc))
			}
			msgs := doc["messages"].([]any)
			if len(msgs) != 10 {
				t.Fatalf("%d messages exported, want 10", len(msgs))
			}
			call := msgs[3].(map[string]any)
			want := []string{"api_style", "base_url", "content", "kind", "metadata", "model", "n", "reasoning", "role", "stop", "stop_reason", "ts", "usage"}
			if !sameKeys(keys(call), want) {
				t.Errorf("an answer's fields %v, want %v", keys(call), want)
			}
			usage := call["usage"].(map[string]any)
			if call["n"] != float64(4) || call["kind"] != "assistant" || call["stop_reason"] != "tool_use" || call["stop"] != "tool_use" ||
				call["model"] != "model-a" || usage["input_tokens"] != float64(1200) || usage["reasoning_tokens"] != float64(89) {
				t.Errorf("message 4: %v", call)
			}
			redacted := call["content"].([]any)[1].(map[string]any)
			if redacted["type"] != "redacted_thinking" || redacted["text"] != "[redacted thinking]" || redacted["data"] != nil {
				t.Errorf("redacted thinking exported as %v", redacted)
			}
			if m := msgs[6].(map[string]any); m["stop"] != "truncated" || m["stop_reason"] != "length" {
				t.Errorf("message 7: %v", m)
			}
			if m := msgs[9].(map[string]any); m["kind"] != "title" || m["title"] != "Every <kind> of block" {
				t.Errorf("message 10: %v", m)
			}
			if s := doc["session"].(map[string]any); s["title"] != "Every <kind> of block" || s["id"] != roundTripID {
				t.Errorf("session %v", s)
			}
			pantoFails(t, b, "want md, html, json, claude-code, codex or pi", "export", "--format", "pdf", roundTripID)
			pantoFails(t, b, "give a session id", "export")
		})
	}
}

// TestExportHTMLInBrowser renders the HTML export in a real headless
// Chromium at a phone's width: the page shows the conversation (the DOM
// holds every text, the folded parts folded) and the screenshot is not
// blank. PANTO_TEST_SCREENSHOTS=DIR keeps the pages and their screenshots.
func TestExportHTMLInBrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			exportSeed(t, b)
			dir := t.TempDir()
			page := filepath.Join(dir, "session.html")
			pantoOn(t, b, "export", "--format", "html", "-o", page, roundTripID)
			html, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			// Self-contained: nothing to fetch, nothing to run.
			for _, bad := range []string{"<script", "<link", " src=", "url(", "@import"} {
				if bytes.Contains(html, []byte(bad)) {
					t.Errorf("the page holds %q", bad)
				}
			}
			if bytes.Contains(html, []byte("<b>&</b>")) {
				t.Error("the page does not escape the session's markup")
			}

			dom := runBrowser(t, browser, dir, "--dump-dom", "file://"+page)
			for _, w := range exportMust {
				if !strings.Contains(dom, htmlEscape(w)) {
					t.Errorf("the rendered page lacks %q", w)
				}
			}
			for _, w := range []string{`<details class="thinking">`, `<details class="call">`, `<details class="result error">`, `id="m4"`, `<meta name="viewport"`} {
				if !strings.Contains(dom, w) {
					t.Errorf("the rendered page lacks %q", w)
				}
			}
			if strings.Contains(dom, "<details open") {
				t.Error("a tool call, result or thinking is not folded")
			}

			shot := filepath.Join(dir, "session.png")
			runBrowser(t, browser, dir, "--screenshot="+shot, "--window-size=412,900", "file://"+page)
			checkNotBlank(t, shot)
			if keep := os.Getenv("PANTO_TEST_SCREENSHOTS"); keep != "" {
				data, _ := os.ReadFile(shot)
				if err := os.WriteFile(filepath.Join(keep, "export-"+kind.name+".png"), data, 0o644); err != nil {
					t.Error(err)
				}
				if err := os.WriteFile(filepath.Join(keep, "export-"+kind.name+".html"), html, 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// chromium finds Debian's chromium; its absence fails the test, saying
// how to install it (CI must have it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed, and the HTML export is checked in a real browser: install it with apt-get install -y chromium")
	return ""
}

// runBrowser runs headless Chromium with a fresh profile and returns its
// stdout.
func runBrowser(t *testing.T, browser, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "profile-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, browser, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %q: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// checkNotBlank fails unless the PNG at path shows something: many pixels
// that are not the background.
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bounds := img.Bounds()
	bg := img.At(bounds.Min.X, bounds.Min.Y)
	differ, total := 0, 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			total++
			if !sameColor(img, x, y, bg) {
				differ++
			}
		}
	}
	if bounds.Dx() != 412 || differ*100 < total*3 {
		t.Fatalf("the screenshot (%v) is blank or nearly: %d of %d sampled pixels are not the background", bounds, differ, total)
	}
}

func sameColor(img image.Image, x, y int, c interface{ RGBA() (r, g, b, a uint32) }) bool {
	r1, g1, b1, _ := img.At(x, y).RGBA()
	r2, g2, b2, _ := c.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2
}
