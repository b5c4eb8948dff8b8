package project_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
)

// sshConfig is a user's ssh configuration with the aliases people keep:
// a second account on a forge, a host pattern, an included file, a Match
// host block, addresses and a forge's ssh on port 443.
const sshConfig = `Include INCLUDED

# two accounts on one forge
Host github-work
    HostName github.com
    IdentityFile ~/.ssh/work
    User git

Host gl
  HostName GitLab.com

Host *.corp
    HostName %h.example.net

Match host forge-m
    HostName forge.example.org

Host local6
    HostName ::1

Host pinned.lan
    HostName 10.0.0.5

# GitHub's ssh on port 443, for a network that blocks 22
Host github.com
    HostName ssh.github.com
    Port 443

Host gh-443
    HostName SSH.GitHub.com

Host nohostname
    User me

Host badtoken
    HostName %r.example.net
`

// homeWithSSHConfig makes a home whose ~/.ssh/config is config (INCLUDED
// replaced by the path of a file holding an alias of its own) and points
// HOME at it.
func homeWithSSHConfig(t *testing.T, config string) string {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	included := filepath.Join(dir, "config.d-work")
	if err := os.WriteFile(included, []byte("Host inc-alias\n    HostName included.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config = strings.ReplaceAll(config, "INCLUDED", included)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	return home
}

// TestFindRemoteThroughSSHAlias: a remote over ssh through a host alias
// of ~/.ssh/config is the project of the host the alias names, with the
// spelling a panto that predates aliases recorded kept beside it; any
// other transport, and a host the configuration does not rename, is
// named as it is spelled.
func TestFindRemoteThroughSSHAlias(t *testing.T) {
	homeWithSSHConfig(t, sshConfig)
	for _, tt := range []struct {
		raw, want, spelled string
	}{
		{"git@github-work:team/proj.git", "github.com/team/proj", "github-work/team/proj"},
		{"ssh://git@github-work/team/proj", "github.com/team/proj", "github-work/team/proj"},
		{"git+ssh://github-work:2222/team/proj.git", "github.com/team/proj", "github-work/team/proj"},
		{"GitHub-Work:team/proj", "github.com/team/proj", "github-work/team/proj"},
		{"git@gl:group/sub/proj.git", "gitlab.com/group/sub/proj", "gl/group/sub/proj"},
		{"git@build.corp:ops/tools", "build.corp.example.net/ops/tools", "build.corp/ops/tools"},
		{"git@forge-m:a/b", "forge.example.org/a/b", "forge-m/a/b"},
		{"git@inc-alias:a/b", "included.example/a/b", "inc-alias/a/b"},
		{"git@gh-443:team/proj", "github.com/team/proj", "gh-443/team/proj"},
		// Not aliases: a host pinned to its address, a forge's port 443.
		{"git@local6:a/b", "local6/a/b", ""},
		{"git@pinned.lan:a/b", "pinned.lan/a/b", ""},
		{"git@github.com:team/proj.git", "github.com/team/proj", ""},
		// Not over ssh, or not an alias: as spelled.
		{"https://github-work/team/proj.git", "github-work/team/proj", ""},
		{"git://github-work/team/proj.git", "github-work/team/proj", ""},
		{"git@nohostname:a/b", "nohostname/a/b", ""},
		{"git@badtoken:a/b", "badtoken/a/b", ""},
		{"ssh://git@[::1]/a/b", "[::1]/a/b", ""},
		{"/srv/git/proj.git", "file:///srv/git/proj", ""},
	} {
		got, ok := project.FindRemote(tt.raw)
		want := project.Found{Project: agent.Project{Remote: tt.want}}
		if tt.spelled != "" {
			want.Spelled = agent.Project{Remote: tt.spelled}
		}
		if !ok || got != want {
			t.Errorf("FindRemote(%q) = %+v, %v; want %+v", tt.raw, got, ok, want)
		}
	}
}

// TestFindThroughSSHAlias: a clone through an alias is the host's
// project, its work tree and path as ever; an ssh configuration that is
// missing, or that the parser cannot read, resolves no alias and stops
// nothing.
func TestFindThroughSSHAlias(t *testing.T) {
	home := homeWithSSHConfig(t, sshConfig)
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(base, "proj")
	sub := filepath.Join(clone, "cmd")
	if err := os.MkdirAll(filepath.Join(clone, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, ".git", "config"), []byte("[remote \"origin\"]\n\turl = git@github-work:team/proj.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := agent.Project{Root: clone, Path: "cmd", Dir: sub}
	resolved, spelled := tree, tree
	resolved.Remote, spelled.Remote = "github.com/team/proj", "github-work/team/proj"
	got, err := project.Find(sub)
	if want := (project.Found{Project: resolved, Spelled: spelled}); err != nil || got != want {
		t.Errorf("Find = %+v, %v; want %+v", got, err, want)
	}
	if p, err := project.Detect(sub); err != nil || p != resolved {
		t.Errorf("Detect = %+v, %v; want %+v", p, err, resolved)
	}
	// Both spellings hold a session: a session recorded before aliases
	// were resolved is the project's.
	if !got.Holds(spelled) || !got.Holds(resolved) || got.Holds(agent.Project{Remote: "github.com/team/other"}) {
		t.Errorf("Found.Holds: the spelled %v, the resolved %v, another %v", got.Holds(spelled), got.Holds(resolved), got.Holds(agent.Project{Remote: "github.com/team/other"}))
	}

	for name, config := range map[string]string{
		"none":       "",
		"match exec": "Match exec \"true\"\n    HostName github.com\n" + sshConfig,
		"garbage":    "Host\n\x00\x01 = = =\n",
	} {
		if config == "" {
			if err := os.Remove(filepath.Join(home, ".ssh", "config")); err != nil {
				t.Fatal(err)
			}
		} else {
			homeWithSSHConfig(t, config)
		}
		asSpelled := spelled
		if got, err := project.Find(sub); err != nil || got != (project.Found{Project: asSpelled}) {
			t.Errorf("%s: Find = %+v, %v; want %+v", name, got, err, asSpelled)
		}
	}
}

// TestSSHAliasAgreesWithSSH: for each alias of sshConfig, the host Find
// names is the one ssh -G connects to (not for an address or a forge's
// port 443, which Find leaves alone on purpose).
func TestSSHAliasAgreesWithSSH(t *testing.T) {
	ssh, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("ssh is not installed: TestFindRemoteThroughSSHAlias covers the configuration")
	}
	home := homeWithSSHConfig(t, sshConfig)
	for _, alias := range []string{"github-work", "gl", "build.corp", "forge-m", "inc-alias", "nohostname"} {
		cmd := gitCommand(t, ssh, "-G", "-F", filepath.Join(home, ".ssh", "config"), alias)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ssh -G %s: %v", alias, err)
		}
		var hostname string
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "hostname "); ok {
				hostname = v
			}
		}
		got, ok := project.FindRemote("git@" + alias + ":team/proj")
		if want := strings.ToLower(hostname) + "/team/proj"; !ok || got.Remote != want {
			t.Errorf("%s: Find names %q, ssh connects to %q", alias, got.Remote, want)
		}
	}
}

// TestAliasesResolve: a recorded project whose remote's host is an alias
// of the ssh configuration is named by the host; any other is as it is.
func TestAliasesResolve(t *testing.T) {
	homeWithSSHConfig(t, sshConfig)
	var a project.Aliases
	for _, tt := range []struct{ remote, want string }{
		{"github-work/team/proj", "github.com/team/proj"},
		{"build.corp/ops/tools", "build.corp.example.net/ops/tools"},
		{"github.com/team/proj", "github.com/team/proj"},
		{"pinned.lan/a/b", "pinned.lan/a/b"},
		{"file:///srv/git/proj", "file:///srv/git/proj"},
		{"[::1]/a/b", "[::1]/a/b"},
		{"", ""},
	} {
		p := agent.Project{Remote: tt.remote, Root: "/r", Dir: "/r"}
		want := p
		want.Remote = tt.want
		if got := a.Resolve(p); got != want {
			t.Errorf("Resolve(%q) = %+v, want %+v", tt.remote, got, want)
		}
	}
}
