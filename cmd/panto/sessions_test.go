package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/panto-dev/panto/internal/fakeprovider"
	"github.com/panto-dev/panto/internal/miniotest"
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
			r := runPanto(t, t.TempDir(), pc.env(b), "", "sessions")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 0 || len(lines) != 3 || !strings.Contains(lines[1], "the newer prompt") || !strings.Contains(lines[2], "the older prompt") || !strings.Contains(lines[1], "fake-model") {
				t.Fatalf("exit %d, stdout:\n%s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			r = runPanto(t, t.TempDir(), pc.env(b), "", "sessions", "--json")
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
		{"--store", b.spec, "sessions"},
		{"sessions", "--store", b.spec},
		{"--store", empty, "sessions", "--store", b.spec},
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
		{"--endpoint", srvS3.Endpoint(), "sessions", "--store", spec},
		{"sessions", "--store", spec, "--endpoint", srvS3.Endpoint()},
	} {
		r := runPanto(t, t.TempDir(), creds, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "in the bucket") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	// A misconfigured store is one line that says what to fix.
	for _, args := range [][]string{
		{"sessions", "--store", "s3://no-such-bucket-here", "--endpoint", srvS3.Endpoint()},
		{"sessions", "--store", "s3://" + bucket, "--endpoint", "http://127.0.0.1:1"},
		{"sessions", "--store", "ftp://x"},
	} {
		r := runPanto(t, t.TempDir(), creds, "", args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code == 0 || line == "" || strings.Contains(line, "\n") {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

func listIDs(t *testing.T, b backend) []string {
	t.Helper()
	r := runPanto(t, t.TempDir(), nil, "", "sessions", "--json", "--store", b.spec)
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
