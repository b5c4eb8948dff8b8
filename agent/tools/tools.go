// Package tools is panto's built-in tool set, an agent.ToolSource:
//
//   - read_file: a text file's contents (optionally a range of lines);
//   - list_dir: a directory's entries, directories (and links to one)
//     marked with '/';
//   - run_shell: a shell command's combined output and exit status, only
//     when the user allowed it (--allow-shell);
//   - write_file and edit_file: write a whole file, or replace one exact
//     occurrence of a text in it, only when the user allowed it
//     (--allow-write). They change files under the working directory
//     only, symbolic links resolved (write.go), and write atomically; the
//     result is a diff-like summary line ("edited a.go: -1 +2 lines at
//     line 14").
//
// Every result is bounded (MaxOutput bytes, cut with a note saying so),
// so a large file or a chatty command cannot flood the context. Relative
// paths are taken from the working directory the source was made with.
package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/panto-dev/panto/agent"
)

// MaxOutput bounds the bytes of one tool result.
const MaxOutput = 64 << 10

// MaxDirEntries bounds the entries list_dir reports.
const MaxDirEntries = 1000

// DefaultShellTimeout bounds a run_shell command that sets no timeout.
const DefaultShellTimeout = 2 * time.Minute

// Options configure the tool set.
type Options struct {
	// Dir is the directory relative paths start from ("" = the process's
	// working directory).
	Dir string
	// AllowShell offers run_shell.
	AllowShell bool
	// AllowWrite offers write_file and edit_file.
	AllowWrite bool
}

// Names returns the names of every built-in tool, offered or not: no
// other source may take them (agent.ToolRegistry.Reserve).
func Names() []string {
	return []string{"read_file", "list_dir", "run_shell", "write_file", "edit_file"}
}

// Builtin is the built-in tool set.
type Builtin struct{ opts Options }

var _ agent.ToolSource = (*Builtin)(nil)

// New returns the built-in tool set.
func New(opts Options) *Builtin { return &Builtin{opts: opts} }

// Tools declares the tools on offer.
func (b *Builtin) Tools() []agent.ToolDecl {
	decls := []agent.ToolDecl{
		{
			Name:        "read_file",
			Description: fmt.Sprintf("Read a text file. Returns at most %d KiB; use offset and limit (line numbers, 1-based) to page through larger files.", MaxOutput>>10),
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path":   map[string]any{"type": "string", "description": "file path, absolute or relative to the working directory"},
					"offset": map[string]any{"type": "integer", "description": "first line to return (1-based, default 1)"},
					"limit":  map[string]any{"type": "integer", "description": "number of lines to return (default: all that fit)"},
				},
				"required": []any{"path"},
			},
		},
		{
			Name:        "list_dir",
			Description: "List a directory's entries, one per line; directories, and links to one, end with '/'.",
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path": map[string]any{"type": "string", "description": "directory path (default: the working directory)"},
				},
			},
		},
	}
	if b.opts.AllowShell {
		decls = append(decls, agent.ToolDecl{
			Name:        "run_shell",
			Description: "Run a command with /bin/sh -c in the working directory. Returns the combined stdout and stderr and the exit status.",
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"command":         map[string]any{"type": "string", "description": "the shell command"},
					"timeout_seconds": map[string]any{"type": "integer", "description": fmt.Sprintf("time limit (default %d)", int(DefaultShellTimeout.Seconds()))},
				},
				"required": []any{"command"},
			},
		})
	}
	if b.opts.AllowWrite {
		decls = append(decls, writeDecls()...)
	}
	return decls
}

func writeDecls() []agent.ToolDecl {
	return []agent.ToolDecl{
		{
			Name:        "write_file",
			Description: "Write a file under the working directory with the given content, replacing it if it exists (missing directories are created). Prefer edit_file to change part of an existing file.",
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path":    map[string]any{"type": "string", "description": "file path, relative to the working directory (or absolute, inside it)"},
					"content": map[string]any{"type": "string", "description": "the file's whole new content"},
				},
				"required": []any{"path", "content"},
			},
		},
		{
			Name:        "edit_file",
			Description: "Replace one exact occurrence of old_text with new_text in a file under the working directory. old_text must match the file exactly (whitespace included) and occur exactly once: include enough surrounding lines to make it unique.",
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path":     map[string]any{"type": "string", "description": "file path, relative to the working directory (or absolute, inside it)"},
					"old_text": map[string]any{"type": "string", "description": "the exact text to replace"},
					"new_text": map[string]any{"type": "string", "description": "the text to put in its place"},
				},
				"required": []any{"path", "old_text", "new_text"},
			},
		},
	}
}

// Call runs tool name with input.
func (b *Builtin) Call(ctx context.Context, name string, input json.RawMessage) (string, error) {
	switch name {
	case "read_file":
		var in struct {
			Path          string
			Offset, Limit int
		}
		if err := decode(input, &in); err != nil {
			return "", err
		}
		return b.readFile(ctx, in.Path, in.Offset, in.Limit)
	case "list_dir":
		var in struct{ Path string }
		if err := decode(input, &in); err != nil {
			return "", err
		}
		return b.listDir(in.Path)
	case "run_shell":
		if !b.opts.AllowShell {
			return "", errors.New("run_shell is disabled: the user did not pass --allow-shell")
		}
		var in struct {
			Command        string
			TimeoutSeconds int `json:"timeout_seconds"`
		}
		if err := decode(input, &in); err != nil {
			return "", err
		}
		return b.runShell(ctx, in.Command, time.Duration(in.TimeoutSeconds)*time.Second)
	case "write_file", "edit_file":
		if !b.opts.AllowWrite {
			return "", fmt.Errorf("%s is disabled: the user did not pass --allow-write", name)
		}
		var in struct {
			Path    string
			Content *string
			OldText string  `json:"old_text"`
			NewText *string `json:"new_text"`
		}
		if err := decode(input, &in); err != nil {
			return "", err
		}
		if name == "write_file" {
			if in.Content == nil {
				return "", errors.New("write_file: content is required (an empty string writes an empty file)")
			}
			return b.writeFile(in.Path, *in.Content)
		}
		if in.NewText == nil {
			return "", errors.New("edit_file: new_text is required (an empty string deletes old_text)")
		}
		return b.editFile(in.Path, in.OldText, *in.NewText)
	}
	return "", fmt.Errorf("no tool named %q", name)
}

func decode(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, v); err != nil {
		return fmt.Errorf("arguments are not a JSON object of the declared shape: %v", err)
	}
	return nil
}

func (b *Builtin) path(p string) string {
	if p == "" {
		p = "."
	}
	if filepath.IsAbs(p) || b.opts.Dir == "" {
		return p
	}
	return filepath.Join(b.opts.Dir, p)
}

func (b *Builtin) readFile(ctx context.Context, path string, offset, limit int) (string, error) {
	if path == "" {
		return "", errors.New("read_file: path is required")
	}
	// Stat before opening: opening a named pipe waits for a writer, and a
	// device (/dev/zero) never ends; neither could be stopped.
	fi, err := os.Stat(b.path(path))
	switch {
	case err != nil:
		return "", err
	case fi.IsDir():
		return "", fmt.Errorf("%s is a directory; use list_dir", path)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s): not read", path, fileKind(fi.Mode()))
	}
	f, err := os.Open(b.path(path))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if offset <= 0 && limit <= 0 {
		data, err := io.ReadAll(io.LimitReader(f, MaxOutput+1))
		if err != nil {
			return "", err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return "", fmt.Errorf("%s is a binary file", path)
		}
		if len(data) > MaxOutput {
			return cut(data, MaxOutput) + fmt.Sprintf("\n[truncated at %d KiB; read on with offset and limit]", MaxOutput>>10), nil
		}
		return string(data), nil
	}
	return readLines(ctx, f, path, max(offset, 1), limit)
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// readLines returns limit lines (0: as many as fit in MaxOutput) from
// line offset on, reading the file as a stream, so that its size bounds
// nothing but the time (ctx stops it between lines). A line longer than
// MaxOutput is cut, and the note says to go on after it: the offset of a
// line that does not fit would return the same cut line again.
func readLines(ctx context.Context, f io.Reader, path string, offset, limit int) (string, error) {
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; n < offset; n++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if _, _, err := readLine(r, 0); err == io.EOF {
			return "", fmt.Errorf("%s has %d lines; offset %d is past the end", path, n-1, offset)
		} else if err != nil {
			return "", err
		}
	}
	var out bytes.Buffer
	note := ""
	for n := offset; limit <= 0 || n < offset+limit; n++ {
		room := MaxOutput - out.Len()
		line, size, err := readLine(r, room+1)
		if err == io.EOF && n == offset && offset > 1 {
			return "", fmt.Errorf("%s has %d lines; offset %d is past the end", path, n-1, offset)
		}
		if err != nil && err != io.EOF {
			return "", err
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return "", fmt.Errorf("%s is a binary file", path)
		}
		if size > room {
			note = fmt.Sprintf("\n[truncated at %d KiB; continue with offset %d]", MaxOutput>>10, n)
			if n == offset {
				out.Write(line[:room])
				note = fmt.Sprintf("\n[line %d is %d bytes, cut at %d KiB; continue with offset %d]", n, size, MaxOutput>>10, n+1)
			}
			break
		}
		out.Write(line)
		if err == io.EOF {
			break
		}
	}
	return cut(out.Bytes(), MaxOutput) + note, nil
}

// readLine reads one line, "\n" included, and returns its first keep
// bytes (0 to skip it) and its whole size. A last line without "\n"
// comes without error; err is io.EOF once the file has no more lines.
func readLine(r *bufio.Reader, keep int) (line []byte, size int, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if n := min(len(chunk), keep-len(line)); n > 0 {
			line = append(line, chunk[:n]...)
		}
		size += len(chunk)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && size > 0:
			return line, size, nil
		}
		return line, size, err
	}
}

func (b *Builtin) listDir(path string) (string, error) {
	dir := b.path(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || (e.Type()&fs.ModeSymlink != 0 && linksToDir(filepath.Join(dir, n))) {
			n += "/"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	more := ""
	if len(names) > MaxDirEntries {
		more = fmt.Sprintf("\n[%d more entries not shown]", len(names)-MaxDirEntries)
		names = names[:MaxDirEntries]
	}
	if len(names) == 0 {
		return "(empty directory)", nil
	}
	return strings.Join(names, "\n") + more, nil
}

// linksToDir reports whether the symbolic link at path leads to a
// directory: the model lists and reads through it as through one (ls -F
// marks it so too, with -L). A dangling link leads nowhere: false.
func linksToDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func (b *Builtin) runShell(ctx context.Context, command string, timeout time.Duration) (string, error) {
	if strings.TrimSpace(command) == "" {
		return "", errors.New("run_shell: command is required")
	}
	if timeout <= 0 {
		timeout = DefaultShellTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = b.opts.Dir
	cmd.WaitDelay = time.Second
	var out boundedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return "", fmt.Errorf("command timed out after %s; output so far:\n%s", timeout, text)
		}
		return "", ctxErr
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return fmt.Sprintf("%s\n[exit status %d]", text, exit.ExitCode()), nil
	case errors.Is(err, exec.ErrWaitDelay):
		// The shell exited, 0, but a process it left in the background
		// ("server &") holds the output open: what came until the wait
		// gave up is the result.
		return fmt.Sprintf("%s\n[exit status 0; output read for %s after the exit: a background process still holds it]", text, cmd.WaitDelay), nil
	case err != nil:
		return "", err
	}
	return text + "\n[exit status 0]", nil
}

// boundedBuffer keeps the first MaxOutput bytes written to it.
type boundedBuffer struct {
	buf     bytes.Buffer
	dropped int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := MaxOutput - b.buf.Len()
	if room < len(p) {
		if room > 0 {
			b.buf.Write(p[:room])
		}
		b.dropped += len(p) - max(room, 0)
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) String() string {
	s := cut(b.buf.Bytes(), MaxOutput)
	if b.dropped > 0 {
		s += fmt.Sprintf("\n[output truncated: %d more bytes]", b.dropped)
	}
	return s
}

// cut returns data cut to at most n bytes, as valid UTF-8 (a rune split
// by the cut becomes U+FFFD), so that a store can encode it as JSON text.
func cut(data []byte, n int) string {
	if len(data) > n {
		data = data[:n]
	}
	return strings.ToValidUTF8(string(data), "\uFFFD")
}
