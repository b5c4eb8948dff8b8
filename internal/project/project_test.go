package project_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
)

func TestNormalizeRemote(t *testing.T) {
	for _, tt := range []struct {
		raw, want string
	}{
		// One repository, every spelling.
		{"git@host.test:team/proj.git", "host.test/team/proj"},
		{"https://host.test/team/proj.git", "host.test/team/proj"},
		{"ssh://git@host.test/team/proj", "host.test/team/proj"},
		{"ssh://git@host.test:2222/team/proj.git", "host.test/team/proj"},
		{"git+ssh://git@host.test/team/proj", "host.test/team/proj"},
		{"git://host.test/team/proj.git/", "host.test/team/proj"},
		{"http://host.test//team//proj/", "host.test/team/proj"},
		{"HTTPS://Host.Test/team/proj", "host.test/team/proj"},
		{"  host.test:team/proj.git\n", "host.test/team/proj"},
		{"host.test:/team/proj", "host.test/team/proj"},
		{"persistent-https::https://host.test/team/proj", "host.test/team/proj"},
		// Credentials, tokens, ports, queries: never kept.
		{"https://user:s3cret@host.test/team/proj.git", "host.test/team/proj"},
		{"https://oauth2:glpat-abc123@host.test:8443/team/proj", "host.test/team/proj"},
		{"https://x-access-token:ghs_tok@host.test/team/proj.git", "host.test/team/proj"},
		{"https://user:p@ss@host.test/team/proj", "host.test/team/proj"},
		{"https://host.test/team/proj.git?private_token=tok", "host.test/team/proj"},
		{"https://host.test/team/proj#tok", "host.test/team/proj"},
		{"user:pass@host.test:team/proj", "host.test/team/proj"},
		// Case of the path is kept (hosts differ on it).
		{"git@host.test:Team/Proj.git", "host.test/Team/Proj"},
		// Nested groups, ~user paths, IPv6.
		{"git@host.test:group/sub/proj.git", "host.test/group/sub/proj"},
		{"ssh://host.test/~me/proj", "host.test/~me/proj"},
		{"ssh://git@[::1]:22/team/proj", "[::1]/team/proj"},
		{"git@[::1]:team/proj", "[::1]/team/proj"},
		// Local repositories: by path, never taken for a directory.
		{"/srv/git/proj.git", "file:///srv/git/proj"},
		{"file:///srv/git/proj.git", "file:///srv/git/proj"},
		{"file://localhost/srv/git/proj/", "file:///srv/git/proj"},
		// Not an identity.
		{"", ""},
		{"../proj.git", ""},
		{"proj", ""},
		{"C:\\src\\proj", ""},
		{"file://otherhost/srv/proj", ""},
		{"https://user:pa/ss@host.test/team/proj", ""}, // a password with a '/'
		{"user:pa/ss@host.test:team/proj", ""},
		{"https://host.test", ""},
		{"https://host.test/.git", "host.test/.git"},
		{"https://ho st/team/proj", ""},
		{"https://host.test/team/\x00proj", ""},
		{"git@host.test:", ""},
	} {
		got, ok := project.NormalizeRemote(tt.raw)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("NormalizeRemote(%q) = %q, %v; want %q", tt.raw, got, ok, tt.want)
		}
	}
}

func TestConfigValue(t *testing.T) {
	for _, tt := range []struct {
		name, config, want string
	}{
		{"as git writes it", "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@host.test:team/proj.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", "git@host.test:team/proj.git"},
		{"the first of several", "[remote \"origin\"]\n\turl = a:first\n\turl = a:second\n", "a:first"},
		{"another remote first", "[remote \"upstream\"]\n\turl = a:up\n[remote \"origin\"]\n\turl = a:mine\n", "a:mine"},
		{"case of section and key", "[Remote \"origin\"]\n\tURL = a:b\n", "a:b"},
		{"case of a quoted subsection counts", "[remote \"Origin\"]\n\turl = a:b\n", ""},
		{"old dotted subsection", "[remote.origin]\nurl=a:b\n", "a:b"},
		{"quoted, comment after", "[remote \"origin\"]\n\turl = \"a:b c\" ; a comment\n", "a:b c"},
		{"comment lines", "# [remote \"origin\"]\n; url = no\n[remote \"origin\"]\n# url = no\nurl = a:b # not this\n", "a:b"},
		{"escapes and continuation", "[remote \"origin\"]\n\turl = a:b\\\n/c\\\\d\n", "a:b/c\\d"},
		{"inner blanks kept, as spaces", "[remote \"origin\"]\n\turl = a:b \t c   \n", "a:b   c"},
		{"key on the header line", "[remote \"origin\"] url = a:b\n", "a:b"},
		{"escaped quote in subsection", "[remote \"or\\\"igin\"]\nurl = a:x\n[remote \"origin\"]\nurl = a:b\n", "a:b"},
		{"a boolean key is no value", "[remote \"origin\"]\n\turl\n\turl = a:b\n", "a:b"},
		{"CRLF", "[remote \"origin\"]\r\n\turl = a:b\r\n", "a:b"},
		{"no newline at the end", "[remote \"origin\"]\nurl = a:b", "a:b"},
		{"no origin", "[remote \"upstream\"]\n\turl = a:b\n", ""},
		{"broken header", "[remote \"origin\n\turl = a:b\n", ""},
		{"unterminated quote", "[remote \"origin\"]\n\turl = \"a:b\n", ""},
		{"empty", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := project.ConfigValue([]byte(tt.config), "remote", "origin", "url")
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("= %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// TestConfigValueAgreesWithGit: what git config --get reads, for the
// configs of TestConfigValue that git accepts.
func TestConfigValueAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: TestConfigValue covers the parser")
	}
	for _, config := range []string{
		"[remote \"origin\"]\n\turl = \"a:b c\" ; a comment\n",
		"[remote \"origin\"]\n\turl = a:b\\\n/c\\\\d\n",
		"[remote \"origin\"]\n\turl = a:b \t c   \n",
		"[remote.origin]\nurl=a:b\n",
		"[Remote \"origin\"] URL = a:b\n",
	} {
		path := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := gitCommand(t, git, "config", "--file", path, "--get", "remote.origin.url").Output()
		if err != nil {
			t.Fatalf("git config %q: %v", config, err)
		}
		want := string(out[:len(out)-1])
		if got, _ := project.ConfigValue([]byte(config), "remote", "origin", "url"); got != want {
			t.Errorf("%q: ConfigValue %q, git %q", config, got, want)
		}
	}
}

// TestDetect: a directory's project from git's files, without git.
func TestDetect(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ssh configuration: no alias
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(rel string) string {
		t.Helper()
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	remote := "[remote \"origin\"]\n\turl = https://tok@host.test/team/proj.git\n"
	write("clone/.git/config", remote)
	mkdir("clone/cmd/tool")
	write("bare-remote/.git/config", "[core]\n\tbare = false\n")
	mkdir("plain/sub")
	// A linked worktree: .git is a file; the config is the main one's.
	write("clone/.git/worktrees/wt/commondir", "../..\n")
	write("wt/.git", "gitdir: "+filepath.Join(base, "clone/.git/worktrees/wt")+"\n")
	// A submodule: .git points at a directory with a config of its own.
	write("clone/.git/modules/sub/config", "[remote \"origin\"]\n\turl = git@host.test:team/sub.git\n")
	write("clone/sub/.git", "gitdir: ../.git/modules/sub\n")
	if err := os.Symlink(filepath.Join(base, "clone/cmd"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir  string
		want agent.Project
	}{
		{"clone", agent.Project{Remote: "host.test/team/proj", Root: base + "/clone", Dir: base + "/clone"}},
		{"clone/cmd/tool", agent.Project{Remote: "host.test/team/proj", Root: base + "/clone", Path: "cmd/tool", Dir: base + "/clone/cmd/tool"}},
		{"link", agent.Project{Remote: "host.test/team/proj", Root: base + "/clone", Path: "cmd", Dir: base + "/clone/cmd"}},
		{"wt", agent.Project{Remote: "host.test/team/proj", Root: base + "/wt", Dir: base + "/wt"}},
		{"clone/sub", agent.Project{Remote: "host.test/team/sub", Root: base + "/clone/sub", Dir: base + "/clone/sub"}},
		{"bare-remote", agent.Project{Root: base + "/bare-remote", Dir: base + "/bare-remote"}},
		{"plain/sub", agent.Project{Dir: base + "/plain/sub"}},
	} {
		got, err := project.Detect(filepath.Join(base, tt.dir))
		if err != nil || got != tt.want {
			t.Errorf("Detect(%s) = %+v, %v; want %+v", tt.dir, got, err, tt.want)
		}
	}
}

// TestDetectAgreesWithGit: on a repository git made, Detect finds the
// root git reports and the remote git was given.
func TestDetectAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: TestDetect covers git's files")
	}
	t.Setenv("HOME", t.TempDir())
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := gitCommand(t, git, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	run("remote", "add", "origin", "ssh://git@host.test:2222/team/proj.git")
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := project.Detect(sub)
	want := agent.Project{Remote: "host.test/team/proj", Root: dir, Path: "a/b", Dir: sub}
	if err != nil || got != want {
		t.Errorf("Detect = %+v, %v; want %+v", got, err, want)
	}
	if top := run("rev-parse", "--show-toplevel"); top != dir+"\n" {
		t.Errorf("git's root %q, Detect's %q", top, got.Root)
	}
}

// gitCommand is git with a deadline: a hung git fails the test.
func gitCommand(t *testing.T, git string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
