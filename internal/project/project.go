// Package project finds the project a session is started in: the
// working directory, and when that is inside a git work tree, the
// repository's identity (its origin remote, normalised so that every
// spelling of one remote is one project, and never with the credentials
// a URL may hold), the work tree's root and the path inside it.
//
// It reads git's own files (the .git directory or file, its config)
// instead of running git: a panto starts in milliseconds, and a machine
// without git finds the same project. What it leaves to git: GIT_DIR
// and GIT_WORK_TREE, url.<base>.insteadOf rewriting and config includes
// (a remote set through one of those is not seen: the project is then
// the work tree's root, which still tells repositories apart on one
// machine). What it takes from ssh: a host alias of the user's ssh
// configuration, which names the remote's real host (sshalias.go).
//
// The project is recorded in a session's header (internal/sessionlog)
// and compared by agent.Project.Key: the remote when there is one, so a
// clone at another path or on another machine is the same project; else
// the work tree's root; else the directory.
package project

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/panto-dev/panto/agent"
)

// maxConfigBytes bounds the git config read: a remote is in its first
// lines, and a config larger than this is not one git wrote.
const maxConfigBytes = 1 << 20

// Found is a project as Find finds it.
type Found struct {
	agent.Project
	// Spelled, when the origin remote reaches its host over ssh through
	// an alias of the user's ssh configuration (sshalias.go), is Project
	// with the remote as the alias spells it (github-work/team/proj, where
	// Project's is github.com/team/proj): what a panto that predates
	// resolving aliases recorded, so that the sessions it recorded are
	// still found as the project's. Zero otherwise.
	Spelled agent.Project
}

// Holds reports whether a session started in project s belongs to f:
// to its project (agent.Project.Holds) or to its alias's spelling.
func (f Found) Holds(s agent.Project) bool {
	return f.Project.Holds(s) || f.Spelled != (agent.Project{}) && f.Spelled.Holds(s)
}

// Detect returns the project of directory dir: Find's, without the
// spelling of an alias.
func Detect(dir string) (agent.Project, error) {
	f, err := Find(dir)
	return f.Project, err
}

// Find returns the project of directory dir (made absolute, symbolic
// links resolved). A directory inside no git work tree is a project of
// its own. An unreadable git config is not an error: the work tree is
// then known by its root. A remote over ssh through a host alias of
// $HOME/.ssh/config is named by the host the alias stands for.
func Find(dir string) (Found, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Found{}, fmt.Errorf("project of %s: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	p := agent.Project{Dir: abs}
	root, gitDir, ok := findWorkTree(abs)
	if !ok {
		return Found{Project: p}, nil
	}
	p.Root = root
	if rel, err := filepath.Rel(root, abs); err == nil && rel != "." {
		p.Path = filepath.ToSlash(rel)
	}
	url, ok := originURL(gitDir)
	if !ok {
		return Found{Project: p}, nil
	}
	p.Remote, _ = NormalizeRemote(url)
	return withAlias(p, url), nil
}

// FindRemote is the project of a git remote URL in any spelling
// (NormalizeRemote), a host alias resolved as Find resolves it.
func FindRemote(raw string) (Found, bool) {
	remote, ok := NormalizeRemote(raw)
	if !ok {
		return Found{}, false
	}
	return withAlias(agent.Project{Remote: remote}, raw), true
}

// withAlias is p, whose remote is raw normalised, with the remote's host
// alias resolved (the spelling kept in Spelled).
func withAlias(p agent.Project, raw string) Found {
	if p.Remote == "" {
		return Found{Project: p}
	}
	resolved, ok := resolveAlias(raw, p.Remote, func() sshHosts { return loadSSHHosts(userSSHConfig()) })
	if !ok {
		return Found{Project: p}
	}
	spelled := p
	p.Remote = resolved
	return Found{Project: p, Spelled: spelled}
}

// findWorkTree walks up from dir to the first directory holding a .git
// entry: the work tree's root, and the git directory it names (the .git
// directory itself, or the one a .git file points at, as a linked
// worktree's or a submodule's does).
func findWorkTree(dir string) (root, gitDir string, ok bool) {
	for d := dir; ; {
		dotGit := filepath.Join(d, ".git")
		if fi, err := os.Stat(dotGit); err == nil {
			if fi.IsDir() {
				return d, dotGit, true
			}
			if g, ok := readGitFile(dotGit); ok {
				return d, g, true
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", false
		}
		d = parent
	}
}

// readGitFile reads a .git file ("gitdir: PATH", PATH relative to the
// file's directory).
func readGitFile(path string) (string, bool) {
	data, err := readBounded(path, 4096)
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	g, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok || strings.TrimSpace(g) == "" {
		return "", false
	}
	g = strings.TrimSpace(g)
	if !filepath.IsAbs(g) {
		g = filepath.Join(filepath.Dir(path), g)
	}
	return g, true
}

// originURL is remote.origin.url of the repository whose git directory
// is gitDir. A linked worktree's config is its main repository's (the
// "commondir" file says where that is).
func originURL(gitDir string) (string, bool) {
	common := gitDir
	if data, err := readBounded(filepath.Join(gitDir, "commondir"), 4096); err == nil {
		if c := strings.TrimSpace(string(data)); c != "" {
			if !filepath.IsAbs(c) {
				c = filepath.Join(gitDir, c)
			}
			common = c
		}
	}
	data, err := readBounded(filepath.Join(common, "config"), maxConfigBytes)
	if err != nil {
		return "", false
	}
	return ConfigValue(data, "remote", "origin", "url")
}

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, limit)
	}
	return data, nil
}
