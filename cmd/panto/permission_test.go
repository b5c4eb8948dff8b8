package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/cmdtest"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
	"github.com/panto-dev/panto/store"
	"github.com/panto-dev/panto/store/fsjsonl"
	"github.com/panto-dev/panto/store/objstore"
)

// README.md's "Permissions on a shared bucket": three roles, each a
// policy the README shows (read from it here, so that the policies a
// user pastes are the ones tested), and a table of which command needs
// which permission, rendered from permissionRows (TestPermissionTable
// keeps the README's copy equal to it).

// permissionRole is one of the README's policies, with the permissions it
// grants on the prefix.
type permissionRole struct {
	name  string
	perms []string
}

var permissionRoles = []permissionRole{
	{"writer", []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}},
	{"reader", []string{"s3:GetObject"}},
	{"administrator", []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"}},
}

// permFixture is a role's bucket: the prefix team/alice, seeded by the
// root user, and what the rows run on.
type permFixture struct {
	spec       string // s3://BUCKET/team/alice
	env        []string
	keep, gone string // sessions: one to read and write, one to rm
	local      string // a local catalog with one session, to push
	provider   *fakeprovider.Server
	pc         providerCase
}

// permissionRow is a row of the table: a command, what it needs, and how
// to run it.
type permissionRow struct {
	command string
	needs   []string
	run     func(t *testing.T, f *permFixture) result
}

func (r permissionRow) worksFor(role permissionRole) bool {
	for _, p := range r.needs {
		if !slices.Contains(role.perms, p) {
			return false
		}
	}
	return true
}

var (
	read      = []string{"s3:GetObject"}
	write     = []string{"s3:GetObject", "s3:PutObject"}
	del       = []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
	listRead  = []string{"s3:GetObject", "s3:ListBucket"}
	listWrite = []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"}
)

func pantoRow(command string, needs []string, args func(f *permFixture) []string) permissionRow {
	return permissionRow{command, needs, func(t *testing.T, f *permFixture) result {
		env := append([]string{"PANTO_STORE=" + f.spec, f.pc.keyVar + "=" + f.pc.key}, f.env...)
		return runPanto(t, t.TempDir(), env, "", append(f.pc.flags(f.provider), args(f)...)...)
	}}
}

func syncRow(command string, needs []string, args func(f *permFixture) []string) permissionRow {
	return permissionRow{command, needs, func(t *testing.T, f *permFixture) result {
		return runSyncAs(t, f.env, args(f)...)
	}}
}

// permissionRows are the table's rows, in the order each role runs them
// on its bucket: reads first, then writes, deletions last.
var permissionRows = []permissionRow{
	pantoRow("`panto sessions`", read, func(f *permFixture) []string { return []string{"sessions", "--all"} }),
	pantoRow("`panto show ID`", read, func(f *permFixture) []string { return []string{"show", f.keep} }),
	pantoRow("`panto search QUERY`", read, func(f *permFixture) []string { return []string{"search", "hello"} }),
	pantoRow("`panto export ID`", read, func(f *permFixture) []string { return []string{"export", f.keep} }),
	pantoRow("`panto usage`", read, func(f *permFixture) []string { return []string{"usage"} }),
	syncRow("`panto-sync pull`", read, func(f *permFixture) []string {
		return []string{"pull", "--dir", filepath.Join(os.TempDir(), "pull-"+randomSuffix()), f.spec}
	}),
	syncRow("`panto-sync status`", read, func(f *permFixture) []string { return []string{"status", "--dir", f.local, f.spec} }),
	syncRow("`panto-sync ls`", read, func(f *permFixture) []string { return []string{"ls", f.spec} }),
	syncRow("`panto-sync verify STORE ID`", read, func(f *permFixture) []string { return []string{"verify", f.spec, f.keep} }),
	pantoRow("`panto PROMPT`, `-c`, `-r ID`", write, func(f *permFixture) []string { return []string{"-r", f.keep, "hello again"} }),
	pantoRow("`panto title ID TEXT`", write, func(f *permFixture) []string { return []string{"title", f.keep, "a title"} }),
	pantoRow("`panto fork ID`", write, func(f *permFixture) []string { return []string{"fork", f.keep} }),
	syncRow("`panto-sync push`", write, func(f *permFixture) []string { return []string{"push", "--dir", f.local, f.spec} }),
	syncRow("`panto-sync compact`", del, func(f *permFixture) []string { return []string{"compact", f.spec} }),
	pantoRow("`panto rm ID`", del, func(f *permFixture) []string { return []string{"rm", "--yes", f.gone} }),
	pantoRow("`panto prune --older-than D`", del, func(f *permFixture) []string { return []string{"prune", "--yes", "--older-than", "365d"} }),
	syncRow("`panto-sync verify STORE`", listRead, func(f *permFixture) []string { return []string{"verify", f.spec} }),
	syncRow("`panto-sync repair`", listWrite, func(f *permFixture) []string { return []string{"repair", f.spec} }),
}

// renderPermissionTable is the README's table.
func renderPermissionTable() string {
	var b strings.Builder
	b.WriteString("| command | needs on the prefix |")
	for _, r := range permissionRoles {
		b.WriteString(" " + r.name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(permissionRoles)) + "\n")
	for _, row := range permissionRows {
		fmt.Fprintf(&b, "| %s | %s |", row.command, "`"+strings.Join(row.needs, "`, `")+"`")
		for _, r := range permissionRoles {
			if row.worksFor(r) {
				b.WriteString(" yes |")
			} else {
				b.WriteString(" **no** |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

const (
	tableStart = "<!-- permission table: generated by cmd/panto/permission_test.go -->\n"
	tableEnd   = "<!-- end of permission table -->"
)

// TestPermissionTable: the README's permission table is the one the
// tests run.
func TestPermissionTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), tableStart)
	table, _, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		t.Fatalf("README.md has no %q ... %q", tableStart, tableEnd)
	}
	if want := renderPermissionTable(); table != want {
		t.Errorf("README.md's permission table differs from the tested one; put this between the markers:\n%s", want)
	}
}

// readmePolicy is the README's policy of role, for bucket.
func readmePolicy(t *testing.T, role, bucket string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- policy: " + role + " -->\n```json\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md shows no policy for the %s", role)
	}
	return strings.ReplaceAll(string(m[1]), "team-bucket", bucket)
}

// TestPermissions: each role, a MinIO user with the README's policy,
// runs every row of the table: what the table says works exits 0; what
// it says is refused exits 1 with one line naming a permission the row
// needs and the role lacks, none of the SDK's dump, and leaves every
// object of the bucket as it was.
func TestPermissions(t *testing.T) {
	t.Parallel()
	for _, role := range permissionRoles {
		t.Run(role.name, func(t *testing.T) {
			t.Parallel()
			srv := miniotest.Shared(t)
			f, bucket := newPermFixture(t, srv)
			f.env = srv.AsUser(t, readmePolicy(t, role.name, bucket)).AWSEnv()
			for _, row := range permissionRows {
				before := srv.Objects(t, bucket)
				r := row.run(t, f)
				works := row.worksFor(role)
				switch {
				case works && r.code != 0:
					t.Errorf("%s as the %s: exit %d, want 0; stderr %s", row.command, role.name, r.code, r.stderr)
				case works:
				case r.code != 1:
					t.Errorf("%s as the %s: exit %d, want 1; stderr %s", row.command, role.name, r.code, r.stderr)
				default:
					checkRefusal(t, row, role, r)
					if after := srv.Objects(t, bucket); !maps.EqualFunc(before, after, bytes.Equal) {
						t.Errorf("%s as the %s was refused and changed the bucket: %v", row.command, role.name, changedKeys(before, after))
					}
				}
			}
			if !slices.Contains(role.perms, "s3:PutObject") {
				// -v keeps the details: the trace shows the refused request.
				r := pantoRow("", nil, func(f *permFixture) []string { return []string{"-v", "title", f.keep, "traced"} }).run(t, f)
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				if r.code != 1 || !strings.Contains(r.stderr, "method=PUT") || !strings.Contains(r.stderr, "status=403") || !strings.Contains(lines[len(lines)-1], "grant s3:PutObject") {
					t.Errorf("panto -v title as the %s: exit %d, stderr:\n%s", role.name, r.code, r.stderr)
				}
			}
		})
	}
}

// checkRefusal checks a refused run: one line on stderr, naming a
// permission the row needs and the role lacks, without the SDK's dump;
// said once, however many sessions were refused.
func checkRefusal(t *testing.T, row permissionRow, role permissionRole, r result) {
	t.Helper()
	line := strings.TrimSpace(r.stderr)
	if strings.Contains(line, "\n") {
		t.Errorf("%s as the %s: stderr is not one line:\n%s", row.command, role.name, r.stderr)
	}
	if n := strings.Count(r.stdout, "grant "); n > 1 {
		t.Errorf("%s as the %s: the refusal is said %d times:\n%s", row.command, role.name, n, r.stdout)
	}
	named := false
	for _, p := range row.needs {
		if !slices.Contains(role.perms, p) && strings.Contains(line, "grant "+p+" on arn:aws:s3:::") {
			named = true
		}
	}
	if !named {
		t.Errorf("%s as the %s: %q names no permission it lacks (%v)", row.command, role.name, line, row.needs)
	}
	for _, dump := range []string{"RequestID", "HostID", "https response error", "operation error"} {
		if strings.Contains(line, dump) {
			t.Errorf("%s as the %s: %q holds the SDK's %q", row.command, role.name, line, dump)
		}
	}
}

func changedKeys(before, after map[string][]byte) []string {
	var keys []string
	for k, v := range after {
		if !bytes.Equal(before[k], v) {
			keys = append(keys, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// newPermFixture is a fresh bucket on srv whose prefix team/alice the
// root user seeds: a session of two segments to read and write, one to
// rm, one two years old to prune; and a local catalog of three sessions
// to push.
func newPermFixture(t *testing.T, srv *miniotest.Server) (*permFixture, string) {
	t.Helper()
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	pc := providerCases[0]
	f := &permFixture{spec: "s3://" + bucket + "/team/alice", provider: fakeprovider.New(t, pc.style, pc.key), pc: pc}
	open := func(clock func() time.Time) *objstore.Store {
		st, err := objstore.Open(ctx, f.spec, objstore.WithEndpoint(srv.Endpoint()), objstore.WithS3Options(srv.SetCredentials), objstore.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(time.Now)
	f.keep, f.gone = agent.NewSessionID(), agent.NewSessionID()
	for _, id := range []string{f.keep, f.keep, f.gone} {
		if err := st.AppendMessages(ctx, id, []agent.PersistentMessage{{Message: agent.UserText("hello")}, {Message: agent.AssistantText("hi")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeOldSession(t, func(t *testing.T, clock func() time.Time) agent.SessionStore { return open(clock) }, "from two years ago", time.Now().AddDate(-2, 0, 0))
	f.local = filepath.Join(t.TempDir(), "local")
	local, err := fsjsonl.Open(f.local)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // refused, each: said once
		if err := local.AppendMessages(ctx, agent.NewSessionID(), []agent.PersistentMessage{{Message: agent.UserText("pushed")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Flush(ctx, local); err != nil {
		t.Fatal(err)
	}
	return f, bucket
}

// runSyncAs runs panto-sync with env (the AWS variables of a user) and
// returns what it did, failed or not.
func runSyncAs(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), processTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, syncBin, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, cmdtest.Stderr(t, "panto-sync", &errb)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("panto-sync %q: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

func randomSuffix() string { return agent.NewSessionID()[:12] }
