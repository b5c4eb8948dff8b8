package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/panto-dev/panto/internal/fakeprovider"
	"github.com/panto-dev/panto/internal/miniotest"
	"github.com/panto-dev/panto/internal/seal"
)

// TestEncryptedBucket: panto on an encrypted bucket creates a session,
// continues it (-c), resumes it by id prefix (-r), titles, lists and
// shows it, as on a plaintext one; the bucket holds none of its texts.
// Without the key, or with another, every command fails in one line that
// says which.
func TestEncryptedBucket(t *testing.T) {
	t.Parallel()
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key,
		fakeprovider.Reply{Text: "the first answer, sealed"},
		fakeprovider.Reply{Text: "the second answer, sealed"},
		fakeprovider.Reply{Text: "the third answer, sealed"},
		fakeprovider.Reply{Text: "a local answer"},
	)
	s3 := miniotest.Shared(t)
	bucket := s3.NewBucket(t)
	remote := "s3://" + bucket + "/private"
	keys := t.TempDir()
	keyFile, otherFile := filepath.Join(keys, "bucket.key"), filepath.Join(keys, "other.key")
	key, err := seal.WriteKeyFile(keyFile, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := seal.WriteKeyFile(otherFile, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	creds := append(minioEnv(s3), pc.keyVar+"="+pc.key)
	withKey := append([]string{"PANTO_KEY_FILE=" + keyFile}, creds...)

	r := runPanto(t, t.TempDir(), creds, "", append(pc.flags(srv), "--store", remote, "--key-file", keyFile, "the first prompt: my token is tk-ENCRYPTED-1")...)
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("create: exit %d: %s", r.code, r.stderr)
	}
	id, prefix := m[1], m[2]
	r = runPanto(t, t.TempDir(), withKey, "", append(pc.flags(srv), "--store", remote, "-c", "the second prompt, continued")...)
	if r.code != 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("continue: exit %d: %s", r.code, r.stderr)
	}
	r = runPanto(t, t.TempDir(), withKey, "", append(pc.flags(srv), "--store", remote, "-r", prefix, "the third prompt, resumed")...)
	if r.code != 0 || !strings.Contains(r.stderr, id) {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	if body := string(srv.Requests()[2].Body); !strings.Contains(body, "tk-ENCRYPTED-1") || !strings.Contains(body, "the second answer, sealed") {
		t.Errorf("the resumed session did not send its history: %s", body)
	}
	const title = "An encrypted title"
	if r := runPanto(t, t.TempDir(), withKey, "", "title", "--store", remote, prefix, title); r.code != 0 {
		t.Fatalf("title: exit %d: %s", r.code, r.stderr)
	}
	r = runPanto(t, t.TempDir(), withKey, "", "show", "--store", remote, prefix)
	for _, want := range []string{"session " + id, "tk-ENCRYPTED-1", "the third answer, sealed", title} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q (exit %d):\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	r = runPanto(t, t.TempDir(), withKey, "", "sessions", "--json", "--store", remote)
	var list []sessionJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].ID != id || list[0].Title != title || list[0].LastUserMessage != "the third prompt, resumed" {
		t.Fatalf("sessions --json: %v %+v %s", err, list, r.stderr)
	}

	data := bucketBytes(s3, bucket)(t)
	for _, secret := range []string{"tk-ENCRYPTED-1", "the second prompt", "the third answer", title, pc.key} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the bucket shows %q", secret)
		}
	}

	for _, c := range []struct {
		env  []string
		args []string
		says []string
	}{
		{creds, []string{"sessions", "--store", remote}, []string{"is encrypted", key.ID().String(), "--key-file"}},
		{creds, append(pc.flags(srv), "--store", remote, "-c", "no key"), []string{"is encrypted"}},
		{append([]string{"PANTO_KEY_FILE=" + otherFile}, creds...), []string{"show", "--store", remote, prefix}, []string{key.ID().String(), other.ID().String()}},
		{creds, []string{"sessions", "--store", remote, "--key-file", filepath.Join(keys, "none.key")}, []string{"none.key"}},
	} {
		r := runPanto(t, t.TempDir(), c.env, "", c.args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		if r.code != 1 || strings.Contains(line, "\n") {
			t.Errorf("%q: exit %d, stderr %q", c.args, r.code, r.stderr)
		}
		for _, s := range c.says {
			if !strings.Contains(line, s) {
				t.Errorf("%q: %q does not say %q", c.args, line, s)
			}
		}
	}
	if len(srv.Requests()) != 3 {
		t.Errorf("a refused run reached the provider: %d requests", len(srv.Requests()))
	}
	// A directory ignores the key: the local catalog stays plaintext.
	dir := filepath.Join(t.TempDir(), "local")
	r = runPanto(t, t.TempDir(), withKey, "", append(pc.flags(srv), "--store", dir, "a local prompt")...)
	if r.code != 0 {
		t.Fatalf("a directory with PANTO_KEY_FILE set: exit %d: %s", r.code, r.stderr)
	}
	if local := dirBytes(dir)(t); !bytes.Contains(local, []byte("a local prompt")) {
		t.Error("the local catalog is not plaintext")
	}
	if _, err := os.Stat(keyFile); err != nil {
		t.Fatal(err)
	}
}
