package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
)

// toolResults maps the tool results of a stored conversation by call id.
func toolResults(conv *agent.Conversation) map[string]agent.Block {
	out := map[string]agent.Block{}
	for _, m := range conv.Messages {
		for _, b := range m.Content {
			if b.Type == agent.BlockToolResult {
				out[b.ToolUseID] = b
			}
		}
	}
	return out
}

// offered lists the tool names of a recorded request, either wire style.
func offered(t *testing.T, req fakeprovider.Request) map[string]bool {
	t.Helper()
	var body struct {
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range body.Tools {
		names[tl.Name+tl.Function.Name] = true
	}
	return names
}

// TestWriteTools: the model writes and edits files in the working
// directory through both wire protocols, and is refused every way out of
// it and every edit that does not match once.
func TestWriteTools(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		t.Run(pc.style, func(t *testing.T) {
			t.Parallel()
			b := fsBackend(t)
			base := t.TempDir()
			work, outside := filepath.Join(base, "work"), filepath.Join(base, "outside")
			for _, d := range []string{work, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			secret := filepath.Join(outside, "secret.txt")
			writeFile(t, secret, "secret\n")
			writeFile(t, filepath.Join(work, "edit.txt"), "alpha\nbeta\ntwice\ntwice\n")
			if err := os.Symlink(outside, filepath.Join(work, "link_out")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(secret, filepath.Join(work, "file_link_out")); err != nil {
				t.Fatal(err)
			}
			type call struct{ id, tool, args, want string }
			calls := []call{
				{"w_new", "write_file", `{"path":"sub/new.txt","content":"hello\nworld\n"}`, "ok:wrote sub/new.txt: new file, +2 lines (12 bytes)"},
				{"e_one", "edit_file", `{"path":"edit.txt","old_text":"beta\n","new_text":"BETA\nGAMMA\n"}`, "ok:edited edit.txt: -1 +2 lines at line 2"},
				{"e_none", "edit_file", `{"path":"edit.txt","old_text":"omega","new_text":"x"}`, "error:old_text was not found in edit.txt"},
				{"e_many", "edit_file", `{"path":"edit.txt","old_text":"twice","new_text":"x"}`, "error:old_text occurs 2 times in edit.txt (at lines 4, 5)"},
				{"w_dotdot", "write_file", `{"path":"../outside/x.txt","content":"x"}`, "error:../outside/x.txt is outside the working directory"},
				{"w_abs", "write_file", `{"path":"` + filepath.Join(outside, "x.txt") + `","content":"x"}`, "error:" + filepath.Join(outside, "x.txt") + " is outside the working directory"},
				{"w_parent_link", "write_file", `{"path":"link_out/x.txt","content":"x"}`, "error:link_out/x.txt is outside the working directory"},
				{"w_final_link", "write_file", `{"path":"file_link_out","content":"x"}`, "error:file_link_out is outside the working directory"},
			}
			var tcs []fakeprovider.ToolCall
			for _, c := range calls {
				tcs = append(tcs, fakeprovider.ToolCall{ID: c.id, Name: c.tool, Args: c.args})
			}
			srv := fakeprovider.New(t, pc.style, pc.key, fakeprovider.Reply{ToolCalls: tcs}, fakeprovider.Reply{Text: "done"})
			r := runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "--allow-write", "change the files")...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
			}
			if got := readFile(t, filepath.Join(work, "sub", "new.txt")); got != "hello\nworld\n" {
				t.Errorf("sub/new.txt holds %q", got)
			}
			if got := readFile(t, filepath.Join(work, "edit.txt")); got != "alpha\nBETA\nGAMMA\ntwice\ntwice\n" {
				t.Errorf("edit.txt holds %q", got)
			}
			if got := readFile(t, secret); got != "secret\n" {
				t.Errorf("the file outside holds %q", got)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("outside holds %d entries", len(entries))
			}
			if fi, err := os.Lstat(filepath.Join(work, "file_link_out")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link was replaced: %v", err)
			}
			for _, line := range []string{"← wrote sub/new.txt: new file, +2 lines (12 bytes)\n", "← edited edit.txt: -1 +2 lines at line 2\n"} {
				if !strings.Contains(r.stderr, line) {
					t.Errorf("stderr lacks %q:\n%s", line, r.stderr)
				}
			}
			if names := offered(t, srv.Requests()[0]); !names["write_file"] || !names["edit_file"] {
				t.Errorf("offered %v", names)
			}
			_, conv := loadOnly(t, b)
			results := toolResults(conv)
			for _, c := range calls {
				res, ok := results[c.id]
				status, want, _ := strings.Cut(c.want, ":")
				if !ok || res.IsError != (status == "error") || !strings.HasPrefix(res.Text, want) {
					t.Errorf("%s: stored result %+v, want %s %q", c.id, res, status, want)
				}
				if sent := string(srv.Requests()[1].Body); !strings.Contains(sent, jsonText(want)) {
					t.Errorf("%s: the result was not sent back to the model", c.id)
				}
			}
		})
	}
}

// TestWriteToolsNeedAllowWrite: without --allow-write the tools are not
// offered, and a call is refused saying which flag allows it.
func TestWriteToolsNeedAllowWrite(t *testing.T) {
	t.Parallel()
	for _, pc := range providerCases {
		b := fsBackend(t)
		work := t.TempDir()
		srv := fakeprovider.New(t, pc.style, pc.key,
			fakeprovider.Reply{ToolCalls: []fakeprovider.ToolCall{{ID: "w1", Name: "write_file", Args: `{"path":"new.txt","content":"x"}`}}},
			fakeprovider.Reply{Text: "ok"})
		r := runPanto(t, work, pc.env(b), "", append(pc.flags(srv), "write it")...)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
		}
		if names := offered(t, srv.Requests()[0]); names["write_file"] || names["edit_file"] || !names["read_file"] {
			t.Errorf("%s: offered %v", pc.style, names)
		}
		_, conv := loadOnly(t, b)
		if res := toolResults(conv)["w1"]; !res.IsError || !strings.Contains(res.Text, "--allow-write") {
			t.Errorf("%s: result %+v", pc.style, res)
		}
		if _, err := os.Stat(filepath.Join(work, "new.txt")); !os.IsNotExist(err) {
			t.Errorf("%s: the file was written (%v)", pc.style, err)
		}
	}
	// PANTO_ALLOW_WRITE is the flag's variable.
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	r := runPanto(t, t.TempDir(), append(pc.env(fsBackend(t)), "PANTO_ALLOW_WRITE=1"), "", append(pc.flags(srv), "hi")...)
	if names := offered(t, srv.Requests()[0]); r.code != 0 || !names["write_file"] || !names["edit_file"] {
		t.Errorf("PANTO_ALLOW_WRITE=1: exit %d, offered %v", r.code, names)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	data, _ := json.Marshal(s)
	return string(data[1 : len(data)-1])
}
