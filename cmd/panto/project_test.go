package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/project"
	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
)

// gitClone makes dir a git work tree whose origin is remote (git's own
// files, as git clone leaves them: panto reads them, it runs no git), or
// with no remote when remote is empty.
func gitClone(t *testing.T, dir, remote string) string {
	t.Helper()
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	if remote != "" {
		config += "[remote \"origin\"]\n\turl = " + remote + "\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	}
	for name, data := range map[string]string{"config": config, "HEAD": "ref: refs/heads/main\n"} {
		if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".git", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// mkdirs makes dir (and its parents) and returns it, symbolic links
// resolved as panto resolves the directory it runs in.
func mkdirs(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// writeProjectSession stores a session started in project p, with an
// answer that cost tokens, straight into b's store.
func writeProjectSession(t *testing.T, b backend, p agent.Project, prompt string) string {
	t.Helper()
	st := b.open(t)
	s := st.Create()
	s.Info.Project = p
	answer := agent.AssistantText("ok")
	answer.Usage = &agent.Usage{InputTokens: 3, OutputTokens: 1}
	if err := s.Append(context.Background(), []agent.PersistentMessage{{Message: agent.UserText(prompt)}, {Message: answer, Usage: answer.Usage}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Flush(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return s.Info.ID
}

// projectDirs are the places TestProjects runs panto in: two clones of
// one repository (its remote spelled two ways) at two paths, a
// subdirectory of the second, an unrelated repository, a repository
// without a remote and a plain directory.
type projectDirs struct {
	clone1, clone2, clone2Sub, other, local, plain, empty string
}

func makeProjectDirs(t *testing.T) projectDirs {
	base := t.TempDir()
	d := projectDirs{
		clone1: gitClone(t, mkdirs(t, filepath.Join(base, "work", "proj")), "git@host.test:team/proj.git"),
		clone2: gitClone(t, mkdirs(t, filepath.Join(base, "laptop", "src", "proj-copy")), "https://ci-token@host.test/team/proj"),
		other:  gitClone(t, mkdirs(t, filepath.Join(base, "work", "other")), "ssh://git@host.test:2222/team/other.git"),
		local:  gitClone(t, mkdirs(t, filepath.Join(base, "work", "scratch")), ""),
		plain:  mkdirs(t, filepath.Join(base, "notes")),
		empty:  mkdirs(t, filepath.Join(base, "elsewhere")),
	}
	d.clone2Sub = mkdirs(t, filepath.Join(d.clone2, "cmd", "tool"))
	return d
}

// TestProjects: sessions belong to the project they were started in. -c
// in a second clone of a repository, at another path and through another
// spelling of its remote, continues the first clone's session; an
// unrelated repository, a repository without a remote and a plain
// directory each continue their own; -c --any the latest of all.
// sessions lists the current project's (--all every one, with a PROJECT
// column; older sessions as "(no project)"), --json carries the project,
// and usage sums by project; search and export filter by it.
func TestProjects(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key)
			d := makeProjectDirs(t)
			old := writeOldSession(t, b.openAt, "from before projects", time.Now().Add(-time.Hour))
			chat := func(dir string, args ...string) result {
				t.Helper()
				r := runPanto(t, dir, pc.env(b), "", append(pc.flags(srv), args...)...)
				if r.code != 0 {
					t.Fatalf("panto %q in %s: exit %d: %s", args, dir, r.code, r.stderr)
				}
				return r
			}
			idOf := func(r result) string {
				t.Helper()
				m := sessionLine.FindStringSubmatch(r.stderr)
				if m == nil {
					t.Fatalf("no session in %q", r.stderr)
				}
				return m[1]
			}
			proj := idOf(chat(d.clone1, "started in clone one"))
			other := idOf(chat(d.other, "started in other"))
			local := idOf(chat(d.local, "started in scratch"))
			plain := idOf(chat(d.plain, "started in notes"))

			// -c: each place continues its project's latest session.
			for _, c := range []struct{ dir, want, prompt string }{
				{d.clone2Sub, proj, "continued from clone two"},
				{d.other, other, "continued in other"},
				{d.local, local, "continued in scratch"},
				{d.plain, plain, "continued in notes"},
				{d.clone1, proj, "back in clone one"},
			} {
				if got := idOf(chat(c.dir, "-c", c.prompt)); got != c.want {
					t.Errorf("-c in %s continued %s, want %s", c.dir, got, c.want)
				}
			}
			body := string(srv.Requests()[4].Body)
			if !strings.Contains(body, "started in clone one") || !strings.Contains(body, "continued from clone two") {
				t.Errorf("-c in the second clone did not send the first clone's history: %s", body)
			}
			// A directory with no session of its own: -c says so, -c --any
			// takes the latest of all (clone one's, just continued).
			r := runPanto(t, d.empty, pc.env(b), "", append(pc.flags(srv), "-c", "nothing here")...)
			if line := strings.TrimSuffix(r.stderr, "\n"); r.code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, "no session of project "+d.empty) || !strings.Contains(line, "-c --any") {
				t.Errorf("-c without a session of the project: exit %d, %q", r.code, r.stderr)
			}
			if got := idOf(chat(d.empty, "-c", "--any", "anything")); got != proj {
				t.Errorf("-c --any continued %s, want the latest, %s", got, proj)
			}

			// sessions: this project's; --all every one, with its project.
			r = pantoIn(t, b, d.clone2, "sessions")
			if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], proj[:8]) || strings.Contains(lines[0], "PROJECT") {
				t.Errorf("sessions in the second clone:\n%s", r.stdout)
			}
			r = pantoIn(t, b, d.empty, "sessions")
			if r.stdout != "" || !strings.Contains(r.stderr, "no sessions of project "+d.empty) || !strings.Contains(r.stderr, "--all lists every project's") {
				t.Errorf("sessions of a project without any: %q %q", r.stdout, r.stderr)
			}
			r = pantoIn(t, b, d.empty, "sessions", "--all")
			for _, want := range []string{"PROJECT", "host.test/team/proj ", "host.test/team/other ", "/work/scratch ", "/notes ", "(no project)  ", old[:8]} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("sessions --all lacks %q:\n%s", want, r.stdout)
				}
			}
			byID := map[string]sessionJSON{}
			var list []sessionJSON
			if err := json.Unmarshal([]byte(pantoIn(t, b, d.empty, "sessions", "--all", "--json").stdout), &list); err != nil || len(list) != 5 {
				t.Fatalf("sessions --all --json: %v, %d sessions", err, len(list))
			}
			for _, s := range list {
				byID[s.ID] = s
			}
			wantProject := map[string]projectJSON{
				proj:  {Key: "host.test/team/proj", Remote: "host.test/team/proj", Root: d.clone1, Dir: d.clone1},
				other: {Key: "host.test/team/other", Remote: "host.test/team/other", Root: d.other, Dir: d.other},
				local: {Key: d.local, Root: d.local, Dir: d.local},
				plain: {Key: d.plain, Dir: d.plain},
			}
			for id, want := range wantProject {
				if got := byID[id].Project; got == nil || *got != want {
					t.Errorf("sessions --json: %s's project %+v, want %+v", id, got, want)
				}
			}
			if byID[old].Project != nil {
				t.Errorf("a session from before projects has project %+v", byID[old].Project)
			}
			list = nil
			if err := json.Unmarshal([]byte(pantoIn(t, b, d.clone2Sub, "sessions", "--json").stdout), &list); err != nil || len(list) != 1 || list[0].ID != proj {
				t.Errorf("sessions --json in a clone: %v %+v", err, list)
			}
			list = nil
			if err := json.Unmarshal([]byte(pantoIn(t, b, d.empty, "sessions", "--json", "--project", "https://host.test/team/other.git").stdout), &list); err != nil || len(list) != 1 || list[0].ID != other {
				t.Errorf("sessions --project REMOTE: %v %+v", err, list)
			}

			if r := pantoIn(t, b, d.empty, "show", proj[:8]); !strings.Contains(r.stdout, "\nproject host.test/team/proj, started in "+d.clone1+"\n") {
				t.Errorf("show does not say the project:\n%s", r.stdout)
			}

			// usage by project: each project its answers.
			var u struct {
				By       string `json:"by"`
				Projects []struct {
					Project string `json:"project"`
					Answers int    `json:"answers"`
				} `json:"projects"`
			}
			if err := json.Unmarshal([]byte(pantoIn(t, b, d.empty, "usage", "--by", "project", "--json").stdout), &u); err != nil {
				t.Fatal(err)
			}
			answers := map[string]int{}
			for _, p := range u.Projects {
				answers[p.Project] = p.Answers
			}
			// The fake provider reports usage on each answer; writeOldSession's has none.
			if want := map[string]int{"host.test/team/proj": 4, "host.test/team/other": 2, d.local: 2, d.plain: 2}; u.By != "project" || !sameCounts(answers, want) {
				t.Errorf("usage --by project: %s %v, want %v", u.By, answers, want)
			}
			r = pantoIn(t, b, d.empty, "usage", "--by", "project")
			if !strings.HasPrefix(r.stdout, "PROJECT ") || !strings.Contains(r.stdout, "host.test/team/proj ") {
				t.Errorf("usage --by project:\n%s", r.stdout)
			}
			if r := pantoIn(t, b, d.clone1, "usage", "--by", "day", "--project", "."); !strings.HasPrefix(r.stdout, "DAY ") || !strings.Contains(r.stdout, time.Now().Format("2006-01-02")) {
				t.Errorf("usage --by day --project .:\n%s", r.stdout)
			}

			// search and export, by project.
			r = pantoIn(t, b, d.clone2, "search", "--project", ".", "started in")
			if !strings.Contains(r.stdout, "started in clone one") || strings.Contains(r.stdout, "started in other") || !strings.Contains(r.stderr, "in 1 session") {
				t.Errorf("search --project .: %q %q", r.stdout, r.stderr)
			}
			r = pantoIn(t, b, d.empty, "export", "--project", d.other)
			if !strings.Contains(r.stdout, "continued in other") {
				t.Errorf("export --project DIR: %q", r.stdout)
			}
			r = runPanto(t, d.clone1, b.storeEnv(), "", "export", "--project", ".", other[:8])
			if r.code != 1 || !strings.Contains(r.stderr, "is of project host.test/team/other") {
				t.Errorf("export of another project's session: exit %d, %q", r.code, r.stderr)
			}
		})
	}
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// pantoIn runs panto in dir against b's store and fails t unless it
// exits 0.
func pantoIn(t *testing.T, b backend, dir string, args ...string) result {
	t.Helper()
	r := runPanto(t, dir, b.storeEnv(), "", args...)
	if r.code != 0 {
		t.Fatalf("panto %q in %s: exit %d; stderr %s", args, dir, r.code, r.stderr)
	}
	return r
}

// TestProjectSync: the project is part of a session's bytes, so it
// survives push, pull and copy, and -c in a clone elsewhere (another
// "machine") continues the session from the bucket; in an encrypted
// prefix it is sealed: neither the remote nor the paths are in any
// object in clear.
func TestProjectSync(t *testing.T) {
	t.Parallel()
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	s3 := miniotest.Shared(t)
	bucket := s3.NewBucket(t)
	plainRemote, sealedRemote := "s3://"+bucket+"/plain", "s3://"+bucket+"/sealed"
	keyFile := filepath.Join(t.TempDir(), "bucket.key")
	if _, err := seal.WriteKeyFile(keyFile, time.Now()); err != nil {
		t.Fatal(err)
	}
	d := makeProjectDirs(t)
	machineA := filepath.Join(t.TempDir(), "a-sessions")
	machineB := filepath.Join(t.TempDir(), "b-sessions")
	key := pc.keyVar + "=" + pc.key
	r := runPanto(t, d.clone1, []string{key}, "", append(pc.flags(srv), "--store", machineA, "started on machine A")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("machine A: exit %d: %s", r.code, r.stderr)
	}
	id := m[1]
	runSync(t, s3, "push", "--dir", machineA, plainRemote)
	runSync(t, s3, "pull", "--dir", machineB, plainRemote)
	runSyncEnv(t, s3, nil, "copy", "--dst-key-file", keyFile, plainRemote, sealedRemote)

	want := projectJSON{Key: "host.test/team/proj", Remote: "host.test/team/proj", Root: d.clone1, Dir: d.clone1}
	withKey := append(minioEnv(s3), "PANTO_KEY_FILE="+keyFile)
	for _, st := range []struct {
		name, spec string
		env        []string
	}{
		{"machine A", machineA, nil},
		{"the bucket", plainRemote, minioEnv(s3)},
		{"machine B", machineB, nil},
		{"the encrypted copy", sealedRemote, withKey},
	} {
		r := runPanto(t, d.clone2, st.env, "", "sessions", "--json", "--store", st.spec)
		var list []sessionJSON
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].ID != id || list[0].Project == nil || *list[0].Project != want {
			t.Errorf("%s: sessions --json in the other clone: %v %+v (%s)", st.name, err, list, r.stderr)
		}
	}
	// Machine B, in its clone at another path, continues from the
	// encrypted bucket and from its pulled directory.
	for _, spec := range []struct {
		spec string
		env  []string
	}{{sealedRemote, withKey}, {machineB, nil}} {
		r = runPanto(t, d.clone2Sub, append([]string{key}, spec.env...), "", append(pc.flags(srv), "--store", spec.spec, "-c", "continued on machine B")...)
		if r.code != 0 || !strings.Contains(r.stderr, id) {
			t.Errorf("-c on machine B (%s): exit %d: %s", spec.spec, r.code, r.stderr)
		}
	}

	// Every object of the encrypted prefix, and what a zstd frame of it
	// decompresses to (an index base is the zstd of its skeleton).
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	var sealed []byte
	for name, data := range s3.Objects(t, bucket) {
		if strings.HasPrefix(name, "sealed/") {
			sealed = append(sealed, data...)
			if raw, err := dec.DecodeAll(data, nil); err == nil {
				sealed = append(sealed, raw...)
			}
		}
	}
	if len(sealed) == 0 {
		t.Fatal("the encrypted prefix holds no object")
	}
	for _, secret := range []string{"host.test", "team/proj", d.clone1, filepath.Base(d.clone1), `"project"`} {
		if bytes.Contains(sealed, []byte(secret)) {
			t.Errorf("the encrypted prefix shows %q", secret)
		}
	}
	if plainBytes := bucketBytes(s3, bucket)(t); !bytes.Contains(plainBytes, []byte(`"remote":"host.test/team/proj"`)) {
		t.Error("the plaintext prefix does not hold the project: the scan of the encrypted one cannot fail")
	}
}

// TestProjectFlag: what --project accepts, and how a list is narrowed
// and ordered by a project.
func TestProjectFlag(t *testing.T) {
	d := makeProjectDirs(t)
	for _, tt := range []struct {
		value   string
		wantKey string
		bad     bool
	}{
		{d.clone2Sub, "host.test/team/proj", false},
		{d.plain, d.plain, false},
		{d.local, d.local, false},
		{"git@host.test:team/proj.git", "host.test/team/proj", false},
		{"https://tok@host.test/team/proj/", "host.test/team/proj", false},
		{"host.test/team/proj", "host.test/team/proj", false},
		{"/gone/away/", "/gone/away", false},
		{"", "", true},
		{"no such thing", "", true},
	} {
		p, err := projectOf(tt.value)
		if (err != nil) != tt.bad || p.Key() != tt.wantKey {
			t.Errorf("projectOf(%q) = %+v (key %q), %v; want key %q", tt.value, p, p.Key(), err, tt.wantKey)
		}
	}
	mine := project.Found{Project: agent.Project{Remote: "host.test/team/proj", Dir: "/a"}}
	list := []agent.SessionInfo{
		{ID: "1", Project: agent.Project{Dir: "/elsewhere"}},
		{ID: "2", Project: agent.Project{Remote: "host.test/team/proj", Dir: "/b"}},
		{ID: "3"},
		{ID: "4", Project: mine.Project},
	}
	var first, only []string
	for _, s := range projectFirst(list, mine) {
		first = append(first, s.ID)
	}
	for _, s := range inProject(list, mine) {
		only = append(only, s.ID)
	}
	if strings.Join(first, ",") != "2,4,1,3" || strings.Join(only, ",") != "2,4" {
		t.Errorf("projectFirst %v, inProject %v", first, only)
	}
	if got := inProject(list, project.Found{}); len(got) != 0 {
		t.Errorf("sessions of no project: %+v", got)
	}
	for _, tt := range []struct {
		p    agent.Project
		want string
	}{
		{agent.Project{}, noProject},
		{agent.Project{Remote: "host.test/team/proj", Root: "/home/me/proj"}, "host.test/team/proj"},
		{agent.Project{Root: "/home/me/proj", Dir: "/home/me/proj/x"}, "~/proj"},
		{agent.Project{Dir: "/home/meme"}, "/home/meme"},
	} {
		if got := projectName(tt.p, "/home/me"); got != tt.want {
			t.Errorf("projectName(%+v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

// TestSameProjectOfAnImport: a session that knows only its directory (an
// import of another agent's log) belongs to the work tree holding that
// directory, and to that directory outside git; never to a sibling.
func TestSameProjectOfAnImport(t *testing.T) {
	repo := agent.Project{Remote: "host.test/team/proj", Root: "/src/proj", Path: "cmd", Dir: "/src/proj/cmd"}
	plain := agent.Project{Dir: "/tmp/notes"}
	for _, tt := range []struct {
		session agent.Project
		here    agent.Project
		want    bool
	}{
		{agent.Project{Dir: "/src/proj"}, repo, true},
		{agent.Project{Dir: "/src/proj/internal/x"}, repo, true},
		{agent.Project{Dir: "/src/proj2"}, repo, false},
		{agent.Project{Dir: "/src"}, repo, false},
		{agent.Project{Dir: "/tmp/notes"}, plain, true},
		{agent.Project{Dir: "/tmp/notes/sub"}, plain, false},
		{agent.Project{}, repo, false},
		{agent.Project{Root: "/src/proj", Dir: "/src/proj"}, repo, false}, // a remote-less work tree is its root's project
	} {
		if got := sameProject(tt.session, project.Found{Project: tt.here}); got != tt.want {
			t.Errorf("sameProject(%+v, %+v) = %v, want %v", tt.session, tt.here, got, tt.want)
		}
	}
}

// TestProjectThroughSSHAlias: a clone whose origin reaches its host
// through an alias of ~/.ssh/config (git@forge-work:team/proj.git, Host
// forge-work → HostName host.test) is the project of host.test/team/proj,
// one with a clone of https://host.test/team/proj; the sessions a panto
// recorded under the alias's spelling before it resolved aliases are
// still the project's: -c continues them, sessions lists them, search
// and --project find them, and usage counts them in the host's project.
func TestProjectThroughSSHAlias(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			b := kind.make(t)
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key)
			base := t.TempDir()
			home := filepath.Join(base, "home")
			aliased := gitClone(t, mkdirs(t, filepath.Join(base, "work", "proj")), "git@forge-work:team/proj.git")
			plain := gitClone(t, mkdirs(t, filepath.Join(base, "laptop", "proj")), "https://host.test/team/proj")
			env := append(pc.env(b), "HOME="+home)
			chat := func(dir string, args ...string) string {
				t.Helper()
				r := runPanto(t, dir, env, "", append(pc.flags(srv), args...)...)
				m := sessionLine.FindStringSubmatch(r.stderr)
				if r.code != 0 || m == nil {
					t.Fatalf("panto %q in %s: exit %d: %s", args, dir, r.code, r.stderr)
				}
				return m[1]
			}
			list := func(dir string, args ...string) []sessionJSON {
				t.Helper()
				r := runPanto(t, dir, append(b.storeEnv(), "HOME="+home), "", append([]string{"sessions", "--json"}, args...)...)
				var out []sessionJSON
				if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil {
					t.Fatalf("sessions %q in %s: exit %d, %v: %s", args, dir, r.code, err, r.stderr)
				}
				return out
			}
			remotes := func(l []sessionJSON) map[string]string {
				m := map[string]string{}
				for _, s := range l {
					if s.Project != nil {
						m[s.ID] = s.Project.Remote
					}
				}
				return m
			}

			// Before the alias is there (or before panto resolved it).
			before := chat(aliased, "recorded under the alias")
			if got := remotes(list(aliased))[before]; got != "forge-work/team/proj" {
				t.Fatalf("without the ssh configuration the remote is %q", got)
			}
			if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host forge-work\n    HostName host.test\n    IdentityFile ~/.ssh/work\n"), 0o600); err != nil {
				t.Fatal(err)
			}

			// -c in the aliased clone continues the session recorded under
			// the alias's spelling.
			if got := chat(aliased, "-c", "continued through the alias"); got != before {
				t.Errorf("-c through the alias continued %s, want %s", got, before)
			}
			// A new session there is host.test's: the other clone continues it.
			after := chat(aliased, "new after the alias is resolved")
			if got := remotes(list(aliased))[after]; got != "host.test/team/proj" {
				t.Errorf("a new session through the alias records %q, want host.test/team/proj", got)
			}
			if got := chat(plain, "-c", "continued in the https clone"); got != after {
				t.Errorf("-c in the https clone continued %s, want %s", got, after)
			}
			// Both spellings are listed in the aliased clone, newest first;
			// the https clone knows no alias.
			for _, c := range []struct {
				dir  string
				args []string
				want []string
			}{
				{aliased, nil, []string{after, before}},
				{plain, nil, []string{after}},
				{plain, []string{"--project", "git@forge-work:team/proj.git"}, []string{after, before}},
				{aliased, []string{"--limit", "1"}, []string{after}},
			} {
				var got []string
				for _, s := range list(c.dir, c.args...) {
					got = append(got, s.ID)
				}
				if strings.Join(got, ",") != strings.Join(c.want, ",") {
					t.Errorf("sessions %q in %s: %v, want %v", c.args, c.dir, got, c.want)
				}
			}
			r := runPanto(t, aliased, append(b.storeEnv(), "HOME="+home), "", "search", "--project", ".", "recorded under")
			if r.code != 0 || !strings.Contains(r.stdout, "recorded under the alias") {
				t.Errorf("search --project . through the alias: exit %d, %q %q", r.code, r.stdout, r.stderr)
			}
			// usage by project: the repository's cost is one row.
			r = runPanto(t, plain, append(b.storeEnv(), "HOME="+home), "", "usage", "--by", "project", "--json")
			var u struct {
				Projects []struct {
					Project string `json:"project"`
					Answers int    `json:"answers"`
				} `json:"projects"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &u); r.code != 0 || err != nil || len(u.Projects) != 1 || u.Projects[0].Project != "host.test/team/proj" || u.Projects[0].Answers != 4 {
				t.Errorf("usage --by project: exit %d, %v: %+v", r.code, err, u.Projects)
			}
		})
	}
}
