package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
)

func TestSessions(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := kind.make(t)
			pc := providerCases[0]
			srv := fakeprovider.New(t, pc.style, pc.key)
			for _, p := range []string{"the older prompt", "the newer prompt"} {
				if r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), p)...); r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
			}
			r := runPanto(t, t.TempDir(), pc.env(b), "", "sessions", "--all")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 0 || len(lines) != 3 || !strings.Contains(lines[1], "the newer prompt") || !strings.Contains(lines[2], "the older prompt") || !strings.Contains(lines[1], "fake-model") {
				t.Fatalf("exit %d, stdout:\n%s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			r = runPanto(t, t.TempDir(), pc.env(b), "", "sessions", "--all", "--json")
			var list []sessionJSON
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
				t.Fatalf("--json: %v, %q", err, r.stdout)
			}
			if list[0].LastUserMessage != "the newer prompt" || list[0].Messages != 2 || list[0].BaseURL != srv.BaseURL() || len(list[0].ID) != 32 || list[0].Modified.Before(list[1].Modified) {
				t.Errorf("--json = %+v", list)
			}
		})
	}
}

// TestStoreFlagPlacement: --store and --endpoint work before and after
// the subcommand, and override the environment.
func TestStoreFlagPlacement(t *testing.T) {
	t.Parallel()
	b := fsBackend(t)
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key)
	if r := runPanto(t, t.TempDir(), pc.env(b), "", append(pc.flags(srv), "stored here")...); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	empty := t.TempDir()
	env := []string{"PANTO_STORE=" + empty}
	for _, args := range [][]string{
		{"--store", b.spec, "sessions", "--all"},
		{"sessions", "--all", "--store", b.spec},
		{"--store", empty, "sessions", "--store", b.spec, "--all"},
		{"--store", "file://" + b.spec, "show", "--json", "--store", "file://" + b.spec, "x"},
	} {
		if args[len(args)-1] == "x" {
			id := listIDs(t, b)[0]
			args[len(args)-1] = id[:6]
		}
		r := runPanto(t, t.TempDir(), env, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "stored here") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	r := runPanto(t, t.TempDir(), env, "", "sessions")
	if r.code != 0 || strings.Contains(r.stdout, "stored here") || !strings.Contains(r.stderr, "no sessions yet") {
		t.Errorf("PANTO_STORE: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// --endpoint, before and after, reaches MinIO without AWS_ENDPOINT_URL_S3.
	srvS3 := miniotest.Shared(t)
	bucket := srvS3.NewBucket(t)
	creds := []string{"AWS_ACCESS_KEY_ID=" + srvS3.AccessKey(), "AWS_SECRET_ACCESS_KEY=" + srvS3.SecretKey(), "AWS_REGION=" + miniotest.Region, "AWS_EC2_METADATA_DISABLED=true", pc.keyVar + "=" + pc.key}
	spec := "s3://" + bucket
	if r := runPanto(t, t.TempDir(), creds, "", append(pc.flags(srv), "--store", spec, "--endpoint", srvS3.Endpoint(), "in the bucket")...); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--endpoint", srvS3.Endpoint(), "sessions", "--all", "--store", spec},
		{"sessions", "--store", spec, "--endpoint", srvS3.Endpoint(), "--all"},
	} {
		r := runPanto(t, t.TempDir(), creds, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "in the bucket") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestMisconfiguredStore: a store panto cannot use fails in one line that
// names the problem and the fix (what to set, create or give), and
// writes nothing: a bad spec, a bucket missing or misnamed, credentials
// rejected or absent, an endpoint that does not answer or is not S3, a
// key file that is not one, or is missing.
func TestMisconfiguredStore(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	creds := minioEnv(srv) // AWS_ENDPOINT_URL_S3 included: --endpoint overrides it
	noCreds := []string{"AWS_REGION=" + miniotest.Region, "AWS_ENDPOINT_URL_S3=" + srv.Endpoint(), "AWS_EC2_METADATA_DISABLED=true"}
	wrongSecret := append(slices.Clone(creds), "AWS_SECRET_ACCESS_KEY=not-the-secret")
	notS3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>not here</html>", http.StatusNotFound)
	}))
	t.Cleanup(notS3.Close)
	dir := t.TempDir()
	notAKey := filepath.Join(dir, "not-a.key")
	if err := os.WriteFile(notAKey, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "a-file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		says []string
	}{
		{"unknown scheme", creds, []string{"--store", "ftp://x"}, []string{`"ftp://x"`, "unknown scheme", "s3://BUCKET[/PREFIX]", "file://DIR"}},
		{"no bucket in the URL", creds, []string{"--store", "s3://"}, []string{"want s3://BUCKET[/PREFIX]"}},
		{"relative file URL", creds, []string{"--store", "file://relative"}, []string{"want file:///absolute/dir"}},
		{"a file for a directory", creds, []string{"--store", aFile}, []string{aFile, "not a directory"}},
		{"missing bucket", creds, []string{"--store", "s3://no-such-bucket-here"}, []string{`bucket "no-such-bucket-here" does not exist at ` + srv.Endpoint(), "create it", "fix the bucket name"}},
		{"invalid bucket name", creds, []string{"--store", "s3://ux"}, []string{`"ux" is not a valid bucket name`, "3 to 63"}},
		{"credentials rejected", wrongSecret, []string{"--store", "s3://" + bucket}, []string{"credentials rejected by " + srv.Endpoint(), "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}},
		{"no credentials", noCreds, []string{"--store", "s3://" + bucket}, []string{"no AWS credentials found", "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"}},
		{"unreachable endpoint, direct", creds, []string{"--store", "s3://" + bucket, "--direct", "--endpoint", "http://127.0.0.1:1"}, []string{"cannot reach the S3 endpoint http://127.0.0.1:1", "--endpoint", "the server is running"}},
		{"not an S3 endpoint", creds, []string{"--store", "s3://" + bucket, "--endpoint", notS3.URL}, []string{notS3.URL + " did not answer as an S3 server", "--endpoint", "the bucket name"}},
		{"not a key file", creds, []string{"--store", "s3://" + bucket, "--key-file", notAKey}, []string{notAKey, "not a panto key file", "panto-sync keygen"}},
		{"missing key file", creds, []string{"--store", "s3://" + bucket, "--key-file", filepath.Join(dir, "none.key")}, []string{"none.key", "no such file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runPanto(t, t.TempDir(), tt.env, "", append([]string{"sessions"}, tt.args...)...)
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code != 1 || r.stdout != "" || !strings.HasPrefix(line, "panto: ") || strings.Contains(line, "\n") {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 1 and one line", r.code, r.stdout, r.stderr)
			}
			for _, s := range tt.says {
				if !strings.Contains(line, s) {
					t.Errorf("%q does not say %q", line, s)
				}
			}
			if strings.Contains(line, "hunter2") || strings.Contains(line, srv.SecretKey()) || strings.Contains(line, "not-the-secret") {
				t.Errorf("%q shows a secret", line)
			}
		})
	}
	// Nothing was written: the bucket the failed runs named is empty
	// (checked once the parallel subtests are done).
	t.Cleanup(func() {
		if objs := srv.Objects(t, bucket); len(objs) != 0 {
			t.Errorf("a failed open wrote %d objects", len(objs))
		}
	})
}

func listIDs(t *testing.T, b backend) []string {
	t.Helper()
	r := runPanto(t, t.TempDir(), b.env, "", "sessions", "--all", "--json", "--store", b.spec)
	var list []sessionJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("sessions --json: %v: %s %s", err, r.stdout, r.stderr)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestReadersSendNoProbe: a command that only reads a bucket (sessions,
// show) sends no conditional-write probe, on a machine that never
// probed it, local-first or --direct; one that writes (title) probes.
func TestReadersSendNoProbe(t *testing.T) {
	t.Parallel()
	s3 := miniotest.Shared(t)
	remote := "s3://" + s3.NewBucket(t) + "/readers"
	id := agent.NewSessionID()
	if err := bucketOf(t, s3, remote).AppendMessages(t.Context(), id, []agent.PersistentMessage{{Message: agent.UserText("hello")}}); err != nil {
		t.Fatal(err)
	}
	env := minioEnv(s3)
	for _, args := range [][]string{
		{"sessions", "--all"},
		{"--direct", "sessions", "--all"},
		{"show", id},
		{"--direct", "show", id},
	} {
		r := runPanto(t, t.TempDir(), env, "", append([]string{"-v", "--store", remote}, args...)...)
		if r.code != 0 {
			t.Fatalf("panto %v: exit %d: %s", args, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "panto-probe") {
			t.Errorf("panto %v, a reader, sent the probe:\n%s", args, r.stderr)
		}
	}
	r := runPanto(t, t.TempDir(), env, "", "-v", "--store", remote, "--direct", "title", id, "a title")
	if r.code != 0 || !strings.Contains(r.stderr, "panto-probe") {
		t.Errorf("panto title, a writer: exit %d, and no probe in its trace:\n%s", r.code, r.stderr)
	}
}

// TestReadingNewPrefixSays: a command that only reads, run on a bucket
// prefix that held no panto store (a mistyped --store), says so once,
// local-first and --direct: it said "no sessions yet" or "0 matches" and
// nothing else, and its Open made an empty store there. The second run
// finds that store, and says nothing of it.
func TestReadingNewPrefixSays(t *testing.T) {
	t.Parallel()
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t)
	for i, args := range [][]string{
		{"sessions", "--all"},
		{"search", "--direct", "anything"},
		{"usage"},
	} {
		env := append(srv.AWSEnv(), fmt.Sprintf("PANTO_STORE=s3://%s/typo%d", bucket, i))
		for run := range 2 {
			r := runPanto(t, t.TempDir(), env, "", args...)
			if said := strings.Contains(r.stderr, "holds no panto store") && strings.Contains(r.stderr, "check --store"); r.code != 0 || !said {
				t.Errorf("%q, run %d: exit %d, said it %v: %q", args, run+1, r.code, said, r.stderr)
			}
		}
	}
	// A read writes nothing: the mistyped prefixes are as they were.
	if data := bucketBytes(srv, bucket)(t); len(data) != 0 {
		t.Errorf("the reading commands wrote %d bytes to the bucket", len(data))
	}
}
