package tools

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxEditFile bounds the size of a file edit_file rewrites.
const MaxEditFile = 16 << 20

// ErrOutsideWorkDir: a write_file or edit_file path, its symbolic links
// resolved, is not under the working directory.
var ErrOutsideWorkDir = errors.New("outside the working directory")

// confined is a path write_file or edit_file may change: rel, relative to
// the root (the working directory, its symbolic links resolved), with
// every symbolic link on the way resolved.
type confined struct {
	root *os.Root
	rel  string
}

// confine resolves path for a write: every symbolic link that exists on
// the way (parents and the final component) is resolved, and the result
// must be under the working directory's own resolution. It is a check
// that gives the model a clear refusal; the write itself goes through
// os.Root, which follows no link out of the root, so that a link made
// between this check and the write cannot lead it outside either.
func (b *Builtin) confine(path string) (confined, error) {
	if path == "" {
		return confined{}, errors.New("path is required")
	}
	// The system refuses it, but only at the write, after the missing
	// directories were made.
	if strings.IndexByte(path, 0) >= 0 {
		return confined{}, fmt.Errorf("%q holds a NUL byte: not a path", path)
	}
	// Cleaning the path below would make "a.go/" a.go, which the write
	// would replace: the system refuses such a path for a file, and so do
	// we.
	switch last := path[strings.LastIndexByte(path, filepath.Separator)+1:]; last {
	case "", ".", "..":
		return confined{}, fmt.Errorf("%s ends in '%s': give the path of a file", path, cmp.Or(last, "/"))
	}
	dir := b.opts.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return confined{}, fmt.Errorf("working directory: %w", err)
		}
		dir = wd
	}
	rootReal, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return confined{}, fmt.Errorf("working directory: %w", err)
	}
	if rootReal, err = filepath.Abs(rootReal); err != nil {
		return confined{}, fmt.Errorf("working directory: %w", err)
	}
	target := path
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	target = filepath.Clean(target)
	real, err := resolveExisting(target)
	if err != nil {
		return confined{}, fmt.Errorf("%s: %w", path, err)
	}
	rel, err := filepath.Rel(rootReal, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		how := ""
		if real != target {
			how = fmt.Sprintf(" (through a symbolic link it leads to %s)", real)
		}
		return confined{}, fmt.Errorf("%s is %w %s%s: only files under it can be written", path, ErrOutsideWorkDir, rootReal, how)
	}
	if rel == "." {
		return confined{}, fmt.Errorf("%s is the working directory itself, not a file", path)
	}
	root, err := os.OpenRoot(rootReal)
	if err != nil {
		return confined{}, fmt.Errorf("working directory: %w", err)
	}
	return confined{root: root, rel: rel}, nil
}

// resolveExisting resolves the symbolic links of the longest part of
// target that exists, and joins the rest to it: the path a write to
// target would reach, creating the missing directories. A dangling link
// on the way is refused, since what it would create is anywhere.
func resolveExisting(target string) (string, error) {
	rest := ""
	for p := target; ; p = filepath.Dir(p) {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			dest, _ := os.Readlink(p)
			return "", fmt.Errorf("%s is a symbolic link to %s, which does not exist: not followed", p, dest)
		}
		if parent := filepath.Dir(p); parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// read returns the file's contents; fs.ErrNotExist when there is none.
func (c confined) read(limit int64) ([]byte, fs.FileMode, error) {
	// Opening a named pipe would wait for a writer, for ever.
	if fi, err := c.root.Stat(c.rel); err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file (%s): not changed", c.rel, fileKind(fi.Mode()))
	}
	f, err := c.root.Open(c.rel)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if fi.IsDir() {
		return nil, 0, fmt.Errorf("%s is a directory", c.rel)
	}
	if fi.Size() > limit {
		return nil, 0, fmt.Errorf("%s is %d bytes, larger than the %d MiB this tool rewrites", c.rel, fi.Size(), limit>>20)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), fi.Mode().Perm(), nil
}

// write replaces the file with data atomically: a temporary file in the
// same directory, synced, renamed over it. A reader sees the old file or
// the new one, never part of it, and a crash leaves at most the
// temporary file. An existing file keeps its permissions (perm); a new
// one (perm 0) gets rw for everyone the umask lets through, as a shell's
// redirection makes it. The directories missing on the way are created.
func (c confined) write(data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(c.rel)
	if dir != "." {
		if err := c.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create directory %s: %w", dir, err)
		}
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(c.rel)+".panto-"+hex.EncodeToString(suffix[:])+".tmp")
	createMode := fs.FileMode(0o666)
	if perm != 0 {
		createMode = 0o600
	}
	f, err := c.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, createMode)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && perm != 0 {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.root.Rename(tmp, c.rel)
	}
	if err != nil {
		_ = c.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", c.rel, err)
	}
	// The rename is durable once the directory is.
	if d, err := c.root.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ErrReadOnly: write_file or edit_file was asked to change a file that
// no one may write.
var ErrReadOnly = errors.New("read-only")

// notReadOnly refuses a file whose mode lets no one write it. The write
// renames a new file over it, which needs only the directory writable:
// without this a file made read-only, to keep it as it is, would change
// as no editor or shell redirection would change it.
func notReadOnly(path string, perm fs.FileMode) error {
	if perm&0o222 == 0 {
		return fmt.Errorf("%s is %w (mode %04o): not changed; ask the user to make it writable if it should change", path, ErrReadOnly, perm)
	}
	return nil
}

func (b *Builtin) writeFile(path, content string) (string, error) {
	c, err := b.confine(path)
	if err != nil {
		return "", err
	}
	defer c.root.Close()
	old, perm, err := c.read(1 << 62)
	isNew := errors.Is(err, fs.ErrNotExist)
	switch {
	case isNew:
		perm = 0
	case err != nil:
		return "", err
	default:
		if err := notReadOnly(path, perm); err != nil {
			return "", err
		}
	}
	if err := c.write([]byte(content), perm); err != nil {
		return "", err
	}
	if isNew {
		return fmt.Sprintf("wrote %s: new file, +%d lines (%d bytes)", path, countLines(content), len(content)), nil
	}
	d := diffLines(string(old), content)
	if d.removed == 0 && d.added == 0 {
		return fmt.Sprintf("wrote %s: unchanged (%d lines)", path, countLines(content)), nil
	}
	return fmt.Sprintf("wrote %s: -%d +%d lines from line %d (%d lines, %d bytes)", path, d.removed, d.added, d.line, countLines(content), len(content)), nil
}

func (b *Builtin) editFile(path, oldText, newText string) (string, error) {
	if oldText == "" {
		return "", errors.New("old_text is empty: give the exact text to replace (to write a whole file, use write_file)")
	}
	if newText == oldText {
		// "edited" would tell the model a change was made.
		return "", errors.New("new_text is old_text: nothing to change")
	}
	c, err := b.confine(path)
	if err != nil {
		return "", err
	}
	defer c.root.Close()
	data, perm, err := c.read(MaxEditFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist (write_file creates a file)", path)
	}
	if err != nil {
		return "", err
	}
	if err := notReadOnly(path, perm); err != nil {
		return "", err
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return "", fmt.Errorf("%s is a binary file", path)
	}
	text := string(data)
	if usesCRLF(text) {
		// Models often give "\n" where the file has "\r\n" (they read it
		// through a JSON string, or normalise it): the text means the
		// file's lines, and what it puts in keeps their ending.
		oldText, newText = toCRLF(oldText), toCRLF(newText)
	}
	switch n := strings.Count(text, oldText); n {
	case 0:
		return "", fmt.Errorf("old_text was not found in %s%s; read the file and copy the text exactly", path, nearMiss(text, oldText))
	case 1:
	default:
		return "", fmt.Errorf("old_text occurs %d times in %s (at lines %s); include more of the surrounding text so that it matches once", n, path, matchLines(text, oldText, 10))
	}
	at := strings.Index(text, oldText)
	edited := text[:at] + newText + text[at+len(oldText):]
	if err := c.write([]byte(edited), perm); err != nil {
		return "", err
	}
	line := strings.Count(text[:at], "\n") + 1
	return fmt.Sprintf("edited %s: -%d +%d lines at line %d", path, countLines(oldText), countLines(newText), line), nil
}

// usesCRLF reports whether every line of text ends in "\r\n".
func usesCRLF(text string) bool {
	n := strings.Count(text, "\r\n")
	return n > 0 && n == strings.Count(text, "\n")
}

// toCRLF ends every line of s in "\r\n".
func toCRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// nearMiss says where text holds oldText with other whitespace, the
// commonest reason a model's old_text does not match.
func nearMiss(text, oldText string) string {
	want := strings.Fields(oldText)
	if len(want) == 0 {
		return ""
	}
	lines := strings.Split(text, "\n")
	for i := range lines {
		var got []string
		for j := i; j < len(lines) && len(got) < len(want); j++ {
			got = append(got, strings.Fields(lines[j])...)
		}
		if len(got) >= len(want) && strings.Join(got[:len(want)], " ") == strings.Join(want, " ") {
			return fmt.Sprintf(" (line %d holds it with different whitespace or indentation)", i+1)
		}
	}
	return ""
}

// matchLines lists the lines where the first max matches of sub start.
func matchLines(text, sub string, max int) string {
	var lines []string
	line, from := 1, 0
	for len(lines) < max {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			break
		}
		line += strings.Count(text[from:from+i], "\n")
		lines = append(lines, fmt.Sprint(line))
		line += strings.Count(sub, "\n")
		from += i + len(sub)
	}
	return strings.Join(lines, ", ")
}

// countLines counts the lines of s, a last one without "\n" included.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// lineDiff is the shape of a change: the lines removed and added between
// the common head and tail, from line (1-based).
type lineDiff struct{ removed, added, line int }

// diffLines compares old and new as a diff's summary would: the lines
// that differ between their longest common head and tail.
func diffLines(old, new string) lineDiff {
	a, b := strings.SplitAfter(old, "\n"), strings.SplitAfter(new, "\n")
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	d := lineDiff{line: head + 1}
	for _, l := range a[head : len(a)-tail] {
		if l != "" {
			d.removed++
		}
	}
	for _, l := range b[head : len(b)-tail] {
		if l != "" {
			d.added++
		}
	}
	return d
}
