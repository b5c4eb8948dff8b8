package project_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/panto-dev/panto/internal/project"
)

// FuzzNormalizeRemote: whatever the URL, an identity holds no control
// character, no query or fragment, no user information and no ".git"
// or "/" at its end, and normalising it again (as https://IDENTITY) is
// itself. The seed corpus is testdata/fuzz/FuzzNormalizeRemote.
func FuzzNormalizeRemote(f *testing.F) {
	for _, s := range []string{
		"git@host.test:team/proj.git", "https://user:tok@host.test:8443/team/proj/?a=b#c",
		"ssh://git@[::1]:22/team/proj", "/srv/git/proj.git", "file://localhost/x", "persistent-https::https://h/x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, ok := project.NormalizeRemote(raw)
		if !ok {
			if id != "" {
				t.Fatalf("NormalizeRemote(%q) = %q and not ok", raw, id)
			}
			return
		}
		if id == "" || strings.ContainsAny(id, "?#@") || strings.HasSuffix(id, "/") || strings.HasSuffix(id, ".git") && !strings.HasSuffix(id, "/.git") {
			t.Fatalf("NormalizeRemote(%q) = %q", raw, id)
		}
		for _, r := range id {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("NormalizeRemote(%q) = %q: a control character", raw, id)
			}
		}
		if strings.HasPrefix(id, "file:///") {
			if again, ok := project.NormalizeRemote(id); !ok || again != id {
				t.Fatalf("NormalizeRemote(%q) = %q, again %q", raw, id, again)
			}
			return
		}
		if again, ok := project.NormalizeRemote("https://" + id); !ok || again != id {
			t.Fatalf("NormalizeRemote(%q) = %q, as https %q", raw, id, again)
		}
	})
}

// FuzzRemoteSpellings: a repository on a host, spelled as scp, https with
// a user and password, and ssh with a port, is one identity, which holds
// neither the user nor the password. The seed corpus is
// testdata/fuzz/FuzzRemoteSpellings.
func FuzzRemoteSpellings(f *testing.F) {
	f.Add("host.test", "team/proj", "git", "s3cret-token")
	f.Add("Host.Test", "group/sub/proj.git", "oauth2", "glpat-xyz")
	f.Fuzz(func(t *testing.T, host, path, user, secret string) {
		if !plainHost(host) || !plainPath(path) || !plainUserinfo(user) || !plainUserinfo(secret) || len(secret) < 6 {
			return
		}
		want, ok := project.NormalizeRemote("git@" + host + ":" + path)
		if !ok {
			t.Fatalf("scp spelling of %q %q is no identity", host, path)
		}
		for _, spelling := range []string{
			user + "@" + host + ":" + path,
			"https://" + user + ":" + secret + "@" + host + "/" + path,
			"https://" + user + ":" + secret + "@" + host + "/" + path + "?token=" + secret,
			"ssh://" + user + "@" + host + ":2222/" + path + "/",
		} {
			got, ok := project.NormalizeRemote(spelling)
			if !ok || got != want {
				t.Errorf("%q = %q, %v; want %q", spelling, got, ok, want)
			}
			if strings.Contains(got, secret) && !strings.Contains(strings.ToLower(host)+"/"+path, secret) {
				t.Errorf("%q = %q: holds the password", spelling, got)
			}
		}
	})
}

func plainHost(h string) bool {
	if h == "" || len(h) == 1 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func plainPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return false
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '/') {
			return false
		}
	}
	return strings.Trim(strings.ReplaceAll(p, ".", ""), "/") != ""
}

func plainUserinfo(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// FuzzConfigValue: any config text reads without a panic, and a value
// written as git writes one (quoted, escaped) reads back. The seed corpus
// is testdata/fuzz/FuzzConfigValue.
func FuzzConfigValue(f *testing.F) {
	f.Add([]byte("[remote \"origin\"]\n\turl = git@host.test:team/proj.git\n"), "a:b")
	f.Add([]byte("[remote.origin]\nurl=\"x\\\" ; y\"\n"), "a \"quoted\" ; value")
	f.Fuzz(func(t *testing.T, config []byte, value string) {
		project.ConfigValue(config, "remote", "origin", "url")
		if !utf8.ValidString(value) || strings.ContainsAny(value, "\x00\n\r") {
			return
		}
		quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`, "\b", `\b`).Replace(value)
		text := "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = \"" + quoted + "\"\n"
		if got, ok := project.ConfigValue([]byte(text), "remote", "origin", "url"); !ok || got != value {
			t.Fatalf("%q: read %q, %v; want %q", text, got, ok, value)
		}
	})
}
