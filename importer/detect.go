package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Detect tells which agent wrote a log from its first complete line; ok
// is false for a log of none of them (panto's own logs included) or one
// with no complete line yet.
func Detect(data []byte) (Agent, bool) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return "", false
	}
	var first struct {
		Type      string          `json:"type"`
		Payload   json.RawMessage `json:"payload"`
		SessionID string          `json:"sessionId"`
		Timestamp json.RawMessage `json:"timestamp"`
		Created   json.RawMessage `json:"created"`
		CWD       string          `json:"cwd"`
	}
	if json.Unmarshal(bytes.TrimSpace(data[:i]), &first) != nil {
		return "", false
	}
	switch {
	case len(first.Payload) > 0 && first.Type != "":
		return Codex, true
	case first.Type == "session" && len(first.Created) == 0 && (len(first.Timestamp) > 0 || first.CWD != ""):
		return Pi, true
	case piEntryTypes[first.Type] && len(first.Timestamp) > 0 && first.SessionID == "":
		return Pi, true
	case first.SessionID != "" || first.Type == "summary" || first.Type == "file-history-snapshot" || first.Type == "queue-operation":
		return ClaudeCode, true
	}
	return "", false
}

// piEntryTypes are the types of pi's entries, for a part of a log that
// does not start with its header.
var piEntryTypes = map[string]bool{"message": true, "model_change": true, "thinking_level_change": true, "compaction": true, "branch_summary": true, "custom": true, "custom_message": true, "label": true, "session_info": true}

// Source is a foreign log found on disk, with the agent that wrote it
// when its location says so ("" when its content must tell).
type Source struct {
	Path  string
	Agent Agent
}

// DefaultDirs returns the directories agent a keeps its sessions in, by
// its own environment variables or under home: Claude Code
// ~/.claude/projects (CLAUDE_CONFIG_DIR), Codex ~/.codex/sessions and
// archived_sessions (CODEX_HOME), pi ~/.pi/agent/sessions
// (PI_CODING_AGENT_DIR).
func DefaultDirs(a Agent, getenv func(string) string) []string {
	home := getenv("HOME")
	or := func(v, def string) string {
		if d := getenv(v); d != "" {
			return d
		}
		return filepath.Join(home, def)
	}
	switch a {
	case ClaudeCode:
		return []string{filepath.Join(or("CLAUDE_CONFIG_DIR", ".claude"), "projects")}
	case Codex:
		base := or("CODEX_HOME", ".codex")
		return []string{filepath.Join(base, "sessions"), filepath.Join(base, "archived_sessions")}
	case Pi:
		return []string{filepath.Join(or("PI_CODING_AGENT_DIR", filepath.Join(".pi", "agent")), "sessions")}
	}
	return nil
}

// Find lists the logs under root (a file, or a directory searched
// recursively, root followed when it is a symbolic link), sorted: every .jsonl and .jsonl.zst file, the .zst one
// only when no .jsonl of the same name is beside it (Codex prefers the
// plain file when both exist). A missing root lists nothing when
// missingOK (an agent that was never used), and is an error otherwise.
func Find(root string, a Agent, missingOK bool) ([]Source, error) {
	fi, err := os.Stat(root)
	if err != nil {
		if missingOK && os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("find logs: %w", err)
	}
	if !fi.IsDir() {
		return []Source{{Path: root, Agent: a}}, nil
	}
	var paths []string
	err = WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && isLogName(p) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find logs under %s: %w", root, err)
	}
	have := map[string]bool{}
	for _, p := range paths {
		have[p] = true
	}
	var out []Source
	for _, p := range paths {
		if strings.HasSuffix(p, ".zst") && have[strings.TrimSuffix(p, ".zst")] {
			continue
		}
		out = append(out, Source{Path: p, Agent: a})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// WalkDir walks root as filepath.WalkDir does, except that directories
// that are symbolic links are followed, root itself (an agent's
// directory moved to another disk and linked back, ~/.claude/projects
// -> /data/claude) and those below it (a project's directory linked
// under another name, as Claude Code's users do when a work tree moves),
// and what is found through a link is named under the link, as the agent
// names it. A link to a directory inside root's own tree is passed over
// (the directory is walked under its own name), and each directory is
// walked once, by its first name in the walk's order: a loop of links,
// or a directory linked twice, cannot make it walk for ever or find a
// log twice. A link to a file, or to nothing, is passed over (as WalkDir
// passes it: a link).
func WalkDir(root string, fn fs.WalkDirFunc) error {
	w := linkWalk{fn: fn, seen: map[string]bool{}}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		w.tree = real
	}
	return w.walk(root)
}

// linkWalk is the state of a WalkDir: the real path of the tree it was
// asked for, and the real paths of the directories walked.
type linkWalk struct {
	fn   fs.WalkDirFunc
	tree string
	seen map[string]bool
}

// walk walks root, named so, and the directories linked below it.
func (w *linkWalk) walk(root string) error {
	target, err := filepath.EvalSymlinks(root)
	if err != nil {
		return filepath.WalkDir(root, w.fn) // which reports it
	}
	return filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		real := p
		if rel, rerr := filepath.Rel(target, p); rerr == nil {
			p = filepath.Join(root, rel)
		}
		if err != nil {
			return w.fn(p, d, err)
		}
		if d.IsDir() {
			if w.seen[real] {
				return filepath.SkipDir
			}
			w.seen[real] = true
			return w.fn(p, d, nil)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			to, err := filepath.EvalSymlinks(real)
			inTree := w.tree != "" && (to == w.tree || strings.HasPrefix(to, w.tree+string(filepath.Separator)))
			if err == nil && !inTree && !w.seen[to] {
				if fi, err := os.Stat(to); err == nil && fi.IsDir() {
					return w.walk(p)
				}
			}
		}
		return w.fn(p, d, nil)
	})
}

func isLogName(p string) bool {
	return strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".jsonl.zst")
}

// ReadSource reads a log, decompressed when its name ends in .zst.
func ReadSource(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(p, ".zst") {
		data, err = Decompress(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return data, nil
}
