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

// WalkDir walks root as filepath.WalkDir does, except that root itself
// is followed when it is a symbolic link (an agent's directory moved to
// another disk and linked back, ~/.claude/projects -> /data/claude), and
// what is found under it is named under root's own spelling, as the
// agent names it. Links below root are not followed, as WalkDir's are
// not: a loop cannot make it walk for ever.
func WalkDir(root string, fn fs.WalkDirFunc) error {
	target, err := filepath.EvalSymlinks(root)
	if err != nil || target == root {
		return filepath.WalkDir(root, fn)
	}
	return filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		if rel, rerr := filepath.Rel(target, p); rerr == nil {
			p = filepath.Join(root, rel)
		}
		return fn(p, d, err)
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
