package project

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kevinburke/ssh_config"

	"github.com/panto-dev/panto/agent"
)

// A remote reached over ssh may name its host through an alias of the
// user's ssh configuration, as people with two accounts on one forge do:
//
//	Host github-work
//	    HostName github.com
//	    IdentityFile ~/.ssh/work
//
// with the clone's origin git@github-work:team/proj.git. Its project is
// then the host's, github.com/team/proj, so that it is one project with
// every other clone of the repository (a colleague's, this user's other
// machine without the alias). The configuration is read with
// kevinburke/ssh_config (the parser go-git uses), without running ssh:
// Host and Match host blocks, Include, and HostName's %h. A configuration
// it cannot read (a Match exec, which would run a command) resolves no
// alias: the remote is then named as it is spelled, as before. Two
// mappings are not aliases and are left alone: a host pinned to an
// address (the name is what other clones use), and a forge's ssh
// endpoint on port 443 (ssh.github.com is github.com).

// maxSSHConfigBytes bounds the ssh configuration read: a larger one is
// not a user's.
const maxSSHConfigBytes = 1 << 20

// sshHosts are the host aliases of one ssh configuration; the zero value
// resolves none.
type sshHosts struct {
	cfg *ssh_config.Config
}

// userSSHConfig is the path of the user's ssh configuration,
// $HOME/.ssh/config ("" when there is no home).
func userSSHConfig() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".ssh", "config")
}

// loadSSHHosts reads the ssh configuration at path. A missing, unreadable
// or unparseable one resolves no alias: a project is then named by the
// remote as it is spelled, never an error that stops panto.
func loadSSHHosts(path string) sshHosts {
	if path == "" {
		return sshHosts{}
	}
	data, err := readBounded(path, maxSSHConfigBytes)
	if err != nil {
		return sshHosts{}
	}
	return decodeSSHHosts(data)
}

// decodeSSHHosts parses an ssh configuration. The parser re-panics on a
// runtime error of its own; a configuration it fails on resolves no alias
// rather than stop panto at its start.
func decodeSSHHosts(data []byte) (h sshHosts) {
	defer func() {
		if recover() != nil {
			h = sshHosts{}
		}
	}()
	cfg, err := ssh_config.DecodeBytes(data)
	if err != nil {
		return sshHosts{}
	}
	return sshHosts{cfg: cfg}
}

// hostName is the host that alias names (HostName, its %h expanded), in
// lower case; false when the configuration names none other than alias
// itself, or one that is not a host name or address.
func (h sshHosts) hostName(alias string) (name string, ok bool) {
	if h.cfg == nil {
		return "", false
	}
	defer func() {
		if recover() != nil {
			name, ok = "", false
		}
	}()
	v, err := h.cfg.Get(alias, "HostName")
	if err != nil || v == "" {
		return "", false
	}
	name, ok = expandHostTokens(v, alias)
	if !ok {
		return "", false
	}
	name = strings.ToLower(name)
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		// A host pinned to its address (Host git.corp / HostName
		// 10.0.0.5): the name is what the project's other clones use.
		return "", false
	}
	if forge, ok := sshOverHTTPSPort[name]; ok {
		name = forge
	}
	if name == alias || !validHost(name) {
		return "", false
	}
	return name, true
}

// sshOverHTTPSPort are the forges' ssh endpoints on port 443, for
// networks that block port 22, by the forge they serve: a configuration
// that sends github.com there (Host github.com / HostName ssh.github.com
// / Port 443, as GitHub documents) reaches github.com's repositories.
var sshOverHTTPSPort = map[string]string{
	"ssh.github.com":       "github.com",
	"altssh.gitlab.com":    "gitlab.com",
	"altssh.bitbucket.org": "bitbucket.org",
}

// expandHostTokens expands HostName's tokens: %h (the host as given) and
// %%. Any other token names something of the connection (the user, the
// port) and is not a host: false.
func expandHostTokens(v, host string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 >= len(v) {
			return "", false
		}
		i++
		switch v[i] {
		case 'h':
			b.WriteString(host)
		case '%':
			b.WriteByte('%')
		default:
			return "", false
		}
	}
	return b.String(), true
}

// sshHost is the host of a remote git reaches over ssh, as the URL
// spells it (an alias the configuration may resolve): [user@]host:path,
// ssh://, git+ssh:// and ssh+git://. False for any other transport
// (https, git, file, a remote helper's, a local path), whose host ssh
// never sees.
func sshHost(raw string) (string, bool) {
	s := strings.TrimSpace(raw)
	if i := strings.Index(s, "::"); i > 0 && isSchemeName(s[:i]) {
		return "", false // transport::address: a remote helper's
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok && isSchemeName(scheme) {
		switch strings.ToLower(scheme) {
		case "ssh", "git+ssh", "ssh+git":
		default:
			return "", false
		}
		authority, _, _ := strings.Cut(cutQuery(rest), "/")
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:]
		}
		host := withoutPort(authority)
		return host, host != ""
	}
	if strings.HasPrefix(s, "/") {
		return "", false
	}
	host, _, ok := scpParts(s)
	return host, ok && host != ""
}

// resolveAlias returns remote, the normalised form of raw (NormalizeRemote),
// with its host named as the ssh configuration hosts() resolves it, when
// raw reaches its host over ssh through an alias; else false. hosts is
// called only for a remote over ssh, so that no other reads the file.
func resolveAlias(raw, remote string, hosts func() sshHosts) (string, bool) {
	host, ok := sshHost(raw)
	if !ok || strings.HasPrefix(host, "[") {
		return "", false // an address is no alias
	}
	host = strings.ToLower(host) // as ssh matches it
	rest, ok := strings.CutPrefix(remote, host+"/")
	if !ok {
		return "", false
	}
	name, ok := hosts().hostName(host)
	if !ok {
		return "", false
	}
	return name + "/" + rest, true
}

// Aliases names the projects sessions recorded through an SSH host alias
// by the host the alias stands for, as Find names a clone now: the
// sessions a panto that predates resolving aliases recorded as
// github-work/team/proj are github.com/team/proj's. It reads the user's
// ssh configuration once, at its first use.
type Aliases struct {
	once  sync.Once
	hosts sshHosts
}

// Resolve returns p with the host of its remote resolved when the ssh
// configuration names it an alias of another (sshHosts.hostName); any
// other p as it is. A recorded remote no longer says its transport, so a
// remote over https to a host that is also an ssh alias is resolved too:
// a name the configuration gives another host for is one the two share.
func (a *Aliases) Resolve(p agent.Project) agent.Project {
	host, rest, ok := strings.Cut(p.Remote, "/")
	if !ok || host == "file:" || strings.HasPrefix(host, "[") {
		return p
	}
	a.once.Do(func() { a.hosts = loadSSHHosts(userSSHConfig()) })
	if name, ok := a.hosts.hostName(host); ok {
		p.Remote = name + "/" + rest
	}
	return p
}
