package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/store"
)

func TestShow(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			pc := providerCases[1]
			work := t.TempDir()
			if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("alpha"), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := fakeprovider.New(t, pc.style, pc.key,
				fakeprovider.Reply{Thinking: "look first", Signature: "s1", ToolCalls: []fakeprovider.ToolCall{{ID: "t1", Name: "read_file", Args: `{"path":"a.txt"}`}}},
				fakeprovider.Reply{Text: "It says alpha."},
			)
			r := runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "read a.txt")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			id := sessionLine.FindStringSubmatch(r.stderr)[1]
			r = runPanto(t, work, pc.env(b), "", "show", id[:5])
			if r.code != 0 {
				t.Fatalf("show: exit %d: %s", r.code, r.stderr)
			}
			for _, want := range []string{"session " + id, "── #1 user\nread a.txt", "[thinking] look first", `→ read_file {"path":"a.txt"}`, "── #2 assistant · tool_use\n[thinking] look first", "── #3 tool\n← alpha", "── #4 assistant · end_turn\nIt says alpha."} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("show lacks %q:\n%s", want, r.stdout)
				}
			}
			r = runPanto(t, work, pc.env(b), "", "show", "--json", id)
			var out struct {
				Session  sessionJSON   `json:"session"`
				Messages []messageJSON `json:"messages"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("show --json: %v: %s", err, r.stdout)
			}
			if out.Session.ID != id || len(out.Messages) != 4 || out.Messages[1].Content[0].Signature != "s1" || out.Messages[2].Content[0].Type != agent.BlockToolResult ||
				out.Messages[3].StopReason != "end_turn" || out.Messages[3].Stop != agent.StopComplete || out.Messages[0].StopReason != "" {
				t.Errorf("show --json = %+v", out)
			}
			for _, args := range [][]string{{"show"}, {"show", "zzzz"}, {"show", "../etc"}} {
				r = runPanto(t, work, pc.env(b), "", args...)
				if r.code == 0 || strings.Count(strings.TrimSuffix(r.stderr, "\n"), "\n") != 0 {
					t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
				}
			}
		})
	}
}

// A tool's result (a file's text) shown by show or as it runs cannot
// send escape sequences to the terminal.
func TestClipControlCharacters(t *testing.T) {
	t.Parallel()
	in := "hello \x1b]0;pwned\x07 \x1b[31mred\x1b[0m\x00 end"
	if got, want := clip(in, 100), "hello \uFFFD]0;pwned\uFFFD \uFFFD[31mred\uFFFD[0m\uFFFD end"; got != want {
		t.Errorf("clip = %q, want %q", got, want)
	}
}

// TestShowJSONStreamed: show --json, written a message at a time, is the
// document one json.Encoder writes of the session's info and all its
// messages, byte for byte: with one message and with several, HTML
// characters and non-ASCII text unescaped, tool calls, results, usage
// and a title among them.
func TestShowJSONStreamed(t *testing.T) {
	t.Parallel()
	st := openStoreForTest(t, filepath.Join(t.TempDir(), "sessions"), "")
	ls, ok := store.AsLogStore(st)
	if !ok {
		t.Fatal("a directory store is not a LogStore")
	}
	answer := agent.AssistantText("a <b> & \"c\" — ünïcode\n\tend")
	answer.Usage = &agent.Usage{InputTokens: 12, OutputTokens: 3}
	answer.StopReason = "end_turn"
	call := agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{agent.ToolUseBlock("t1", "read_file", json.RawMessage(`{"path":"a<b>.txt"}`))}}
	result := agent.Message{Role: agent.RoleUser, Content: []agent.Block{agent.ToolResultBlock("t1", "line 1\nline <2>", false)}}
	for _, msgs := range [][]agent.Message{
		{agent.UserText("one & only")},
		{agent.UserText("read a<b>.txt"), call, result, answer, agent.TitleMessage("A <title>")},
	} {
		sess := st.Create()
		var pms []agent.PersistentMessage
		for _, m := range msgs {
			pms = append(pms, agent.PersistentMessage{Message: m, Usage: m.Usage})
		}
		if err := sess.Append(t.Context(), pms); err != nil {
			t.Fatal(err)
		}
		info, err := st.Resolve(t.Context(), sess.Info.ID)
		if err != nil {
			t.Fatal(err)
		}
		var want, got bytes.Buffer
		doc := struct {
			Session  sessionJSON   `json:"session"`
			Messages []messageJSON `json:"messages"`
		}{Session: toSessionJSON(info.Info)}
		for _, m := range msgs {
			doc.Messages = append(doc.Messages, toMessageJSON(m))
		}
		if err := writeJSON(&want, doc); err != nil {
			t.Fatal(err)
		}
		if err := showSession(t.Context(), &got, ls, info.Info, true, ""); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("show --json of %d messages:\n%s\nwant:\n%s", len(msgs), got.String(), want.String())
		}
	}
}
