package project

import (
	"strings"
	"testing"
)

// FuzzSSHAlias: whatever the remote and the ssh configuration, a remote
// resolved through an alias is an identity of its own (normalising it
// again as https://IDENTITY is itself), keeps the path of the remote as
// spelled, and holds no user information. The seed corpus is
// testdata/fuzz/FuzzSSHAlias.
func FuzzSSHAlias(f *testing.F) {
	f.Add("git@github-work:team/proj.git", "Host github-work\n  HostName github.com\n")
	f.Add("ssh://u:p@a.corp:22/x/y", "Host *.corp\n HostName %h.example.net\n")
	f.Add("git@m:a/b", "Match host m\n\tHostName ::1\n")
	f.Add("git@github.com:a/b", "Host github.com\n\tHostName ssh.github.com\n\tPort 443\n")
	f.Add("git@h:a/b", "Include /nonexistent/*\nHost h\n HostName %%h%\n")
	f.Fuzz(func(t *testing.T, raw, config string) {
		remote, ok := NormalizeRemote(raw)
		if !ok {
			return
		}
		resolved, ok := resolveAlias(raw, remote, func() sshHosts { return decodeSSHHosts([]byte(config)) })
		if !ok {
			return
		}
		if again, ok := NormalizeRemote("https://" + resolved); !ok || again != resolved || strings.Contains(resolved, "@") {
			t.Fatalf("resolveAlias(%q) = %q, normalised again %q, %v", raw, resolved, again, ok)
		}
		_, path, _ := strings.Cut(remote, "/")
		if host, ok := strings.CutSuffix(resolved, "/"+path); !ok || strings.Contains(host, "/") {
			t.Fatalf("resolveAlias(%q) = %q: the path of %q is not kept", raw, resolved, remote)
		}
	})
}
