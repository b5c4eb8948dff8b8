package project

import (
	"strings"
)

// NormalizeRemote returns the identity of a git remote URL: host/path,
// the host in lower case, without scheme, user, password or token, port,
// query or fragment, and the path without a trailing "/" or ".git". So
//
//	git@host:team/proj.git
//	https://host/team/proj.git
//	ssh://git@host/team/proj
//	https://user:TOKEN@host:8443/team/proj/?x=y
//
// are all "host/team/proj". A local remote (/srv/git/proj.git,
// file:///srv/git/proj) is "file:///srv/git/proj", never a plain path,
// so it cannot be taken for a directory. A relative path, or anything
// that is not a remote URL, is not an identity (false): a relative
// remote names another repository from each clone's place.
//
// It never returns a byte of the URL's user information, however the URL
// is spelled: a '@' in what would be the path (a password holding a '/')
// makes the URL no identity rather than risk one.
func NormalizeRemote(raw string) (string, bool) {
	s := strings.TrimSpace(raw)
	if s == "" || hasControl(s) {
		return "", false
	}
	// A remote helper's "transport::address" (persistent-https::https://…).
	if i := strings.Index(s, "::"); i > 0 && isSchemeName(s[:i]) {
		s = s[i+2:]
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok && isSchemeName(scheme) {
		if strings.EqualFold(scheme, "file") {
			return localRemote(rest)
		}
		return urlRemote(rest)
	}
	if strings.HasPrefix(s, "/") {
		return localRemote(s)
	}
	return scpRemote(s)
}

// urlRemote reads what follows "scheme://": [user[:password]@]host[:port]/path.
func urlRemote(rest string) (string, bool) {
	rest = cutQuery(rest)
	authority, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	return hostPath(withoutPort(authority), path)
}

// scpRemote reads git's scp-like syntax, [user@]host:path, where the
// colon comes before any slash.
func scpRemote(s string) (string, bool) {
	host, path, ok := scpParts(s)
	if !ok {
		return "", false
	}
	return hostPath(host, path)
}

// scpParts splits git's scp-like syntax into its host and path.
func scpParts(s string) (host, path string, ok bool) {
	s = cutQuery(s)
	slash := strings.IndexByte(s, '/')
	if slash < 0 {
		slash = len(s)
	}
	at := strings.LastIndexByte(s[:slash], '@')
	span := s[at+1 : slash] // host:first-component
	colon := strings.IndexByte(span, ':')
	if strings.HasPrefix(span, "[") { // [v6]:path
		end := strings.IndexByte(span, ']')
		if end < 0 || end+1 >= len(span) || span[end+1] != ':' {
			return "", "", false
		}
		colon = end + 1
	}
	if colon < 0 {
		return "", "", false // a relative path
	}
	if colon == 1 && at < 0 {
		return "", "", false // a drive letter (C:\…), not a host
	}
	return span[:colon], s[at+1+colon+1:], true
}

// localRemote is a repository on this machine, by its absolute path
// (the rest of a file:// URL, or a path).
func localRemote(p string) (string, bool) {
	p = cutQuery(p)
	if !strings.HasPrefix(p, "/") {
		// file://host/path: only this machine's are local.
		host, rest, _ := strings.Cut(p, "/")
		if !strings.EqualFold(host, "localhost") {
			return "", false
		}
		p = "/" + rest
	}
	path := cleanPath(p)
	if path == "" {
		return "", false
	}
	return "file:///" + path, true
}

// hostPath is the identity of a remote on host. A path holding a '@' is
// refused: in a URL whose password holds a '/' (or a ':' of scp syntax),
// what looks like the path starts inside the password.
func hostPath(host, path string) (string, bool) {
	host = strings.ToLower(host)
	if !validHost(host) || strings.Contains(path, "@") {
		return "", false
	}
	path = cleanPath(path)
	if path == "" {
		return "", false
	}
	return host + "/" + path, true
}

// cleanPath drops empty and "." components and a ".git" suffix of the
// last one, and joins the rest with "/".
func cleanPath(p string) string {
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	last := &parts[len(parts)-1]
	if t := strings.TrimSuffix(*last, ".git"); t != "" {
		*last = t
	}
	return strings.Join(parts, "/")
}

// cutQuery drops a query or fragment (a token may hide in either).
func cutQuery(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i]
	}
	return s
}

func withoutPort(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		if i := strings.IndexByte(hostport, ']'); i >= 0 {
			return hostport[:i+1]
		}
		return hostport
	}
	host, _, _ := strings.Cut(hostport, ":")
	return host
}

// validHost: a DNS name or an address, possibly a bracketed IPv6 one.
func validHost(h string) bool {
	if h == "" {
		return false
	}
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") || len(h) < 3 {
			return false
		}
		for _, c := range h[1 : len(h)-1] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == ':' || c == '.' || c == '%') {
				return false
			}
		}
		return true
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

func isSchemeName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
