package main

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/panto-dev/panto/internal/seal"
	"github.com/panto-dev/panto/internal/testkit/fakeprovider"
	"github.com/panto-dev/panto/internal/testkit/miniotest"
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
	r = runPanto(t, t.TempDir(), withKey, "", append(pc.flags(srv), "--store", remote, "-c", "--any", "the second prompt, continued")...)
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
	r = runPanto(t, t.TempDir(), withKey, "", "sessions", "--all", "--json", "--store", remote)
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

// TestEncryptedBucketHoldsNoKey: the bucket key, given as a user gives it
// (made by panto-sync keygen; PANTO_KEY_FILE and --key-file, to both
// commands), is in no stored byte of the bucket in any spelling — the key
// file, its key line, the secret raw, in hex, in base64 (standard and
// URL, padded and not), its sha256 raw and in hex, the key derived from
// it to seal — nor in any output; and no text of the sessions is. Every
// object is read back (miniotest.Server.Objects) and scanned as stored,
// decompressed, and through every string of a JSON document, base64
// strings decoded. The scan is shown to find each spelling planted, and
// the texts in a plaintext prefix of the same catalog.
func TestEncryptedBucketHoldsNoKey(t *testing.T) {
	t.Parallel()
	pc := providerCases[0]
	srv := fakeprovider.New(t, pc.style, pc.key,
		fakeprovider.Reply{Text: "answer-one: the db password is pw-ALPHA-7731"},
		fakeprovider.Reply{Text: "answer-two: rotate tk-BRAVO-5519 monthly"},
		fakeprovider.Reply{Text: "answer-three: continued in the bucket, tk-CHARLIE-2207"},
		fakeprovider.Reply{Text: "answer-four: a session begun in the bucket, pw-DELTA-9043"},
	)
	s3 := miniotest.Shared(t)
	bucket := s3.NewBucket(t)
	private, plain := "s3://"+bucket+"/private", "s3://"+bucket+"/plain"
	keyFile := filepath.Join(t.TempDir(), "bucket.key")
	var outputs []string
	outputs = append(outputs, runSyncEnv(t, s3, nil, "keygen", "--json", keyFile))
	keyID := jsonObject(t, outputs[0])["key_id"].(string)
	withKey := []string{"PANTO_KEY_FILE=" + keyFile}
	creds := append(minioEnv(s3), pc.keyVar+"="+pc.key)
	panto := func(env []string, args ...string) result {
		t.Helper()
		r := runPanto(t, t.TempDir(), append(slices.Clone(creds), env...), "", args...)
		if r.code != 0 {
			t.Fatalf("panto %q: exit %d: %s", args, r.code, r.stderr)
		}
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}

	// A local catalog, pushed with the key in the environment (and to a
	// plaintext prefix, for the scan to prove it sees the texts).
	local := filepath.Join(t.TempDir(), "local")
	texts := []string{"prompt-one: my api token is tk-ECHO-4410", "prompt-two: the server is vault-FOXTROT-3388"}
	for _, p := range texts {
		panto(nil, append(pc.flags(srv), "--store", local, p)...)
	}
	outputs = append(outputs,
		runSyncEnv(t, s3, withKey, "push", "--dir", local, private),
		runSyncEnv(t, s3, nil, "push", "--dir", local, plain))
	// panto on the bucket: the key by flag, then by the environment.
	const title = "title-GOLF: the rotation plan"
	texts = append(texts, "prompt-three: continued, tk-HOTEL-6672", "prompt-four: begun in the bucket, pw-INDIA-1185", title,
		"answer-one: the db password is pw-ALPHA-7731", "answer-two: rotate tk-BRAVO-5519", "answer-three: continued", "answer-four: a session begun")
	r := panto(nil, append(pc.flags(srv), "--store", private, "--key-file", keyFile, "-c", "--any", "prompt-three: continued, tk-HOTEL-6672")...)
	id := sessionLine.FindStringSubmatch(r.stderr)[1]
	panto(nil, "title", "--store", private, "--key-file", keyFile, id, title)
	panto(withKey, append(pc.flags(srv), "--store", private, "prompt-four: begun in the bucket, pw-INDIA-1185")...)
	panto(withKey, "sessions", "--all", "--store", private)
	// Back down, and compacted (merged segments are objects too).
	into := filepath.Join(t.TempDir(), "pulled")
	outputs = append(outputs,
		runSyncEnv(t, s3, withKey, "pull", "--dir", into, private),
		runSyncEnv(t, s3, nil, "compact", "--key-file", keyFile, private),
		runSyncEnv(t, s3, nil, "verify", "--key-file", keyFile, private))
	if pulled := dirBytes(into)(t); !bytes.Contains(pulled, []byte(title)) || !bytes.Contains(pulled, []byte("pw-INDIA-1185")) {
		t.Fatal("the pulled catalog lacks the bucket's sessions: the run did not go as planned")
	}

	keyNeedles := keySpellings(t, keyFile, keyID)
	// The scan sees each spelling wherever it could hide: planted in an
	// object as stored, compressed, and inside a JSON document's bytes
	// (a []byte field is base64 there, at any alignment).
	for name, n := range keyNeedles {
		doc, _ := json.Marshal(map[string][]byte{"sealed": append([]byte("xy"), n...)})
		for _, planted := range [][]byte{append([]byte("before "), n...), compress(t, append([]byte("before "), n...)), doc, compress(t, doc)} {
			if !bytes.Contains(bytes.Join(objectViews(planted), nil), n) {
				t.Fatalf("the scan cannot see the %s planted in %.40q", name, planted)
			}
		}
	}
	objects := s3.Objects(t, bucket)
	scan := func(prefix string, needles map[string][]byte) (hits []string, n int) {
		for key, data := range objects {
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			n++
			views := bytes.Join(objectViews(data), []byte{0})
			for name, needle := range needles {
				if bytes.Contains(views, needle) {
					hits = append(hits, fmt.Sprintf("%s holds the %s", key, name))
				}
			}
		}
		slices.Sort(hits)
		return hits, n
	}
	textNeedles := map[string][]byte{}
	for _, s := range texts {
		textNeedles[fmt.Sprintf("text %q", s)] = []byte(s)
	}
	if hits, _ := scan("plain/", textNeedles); len(hits) == 0 {
		t.Fatal("the scan finds no text in the plaintext prefix: it is blind")
	}
	all := maps.Clone(keyNeedles)
	maps.Copy(all, textNeedles)
	hits, n := scan("private/", all)
	t.Logf("scanned %d objects of the encrypted prefix", n)
	for _, h := range hits {
		t.Error(h)
	}
	if n < 10 {
		t.Errorf("the encrypted prefix holds %d objects: the scan covers too little", n)
	}
	out := strings.Join(outputs, "\n")
	for name, needle := range keyNeedles {
		if strings.Contains(out, string(needle)) {
			t.Errorf("an output shows the %s", name)
		}
	}
	if !strings.Contains(out, keyID) {
		t.Error("no output names the key id: the outputs scanned are not the commands'")
	}
}

// keySpellings is every way the key of keyFile could be written: the file,
// its key line, the secret and its sha256 in every encoding, and the key
// derived from it to seal (HKDF-SHA256, as internal/seal derives it: the
// derivation is checked against the key id).
func keySpellings(t *testing.T, keyFile, keyID string) map[string][]byte {
	t.Helper()
	file, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(file), "\n") {
		if strings.HasPrefix(l, "PANTO-BUCKET-KEY-1:") {
			line = l
		}
	}
	secret, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(line, "PANTO-BUCKET-KEY-1:"))
	if err != nil || len(secret) != seal.SecretSize {
		t.Fatalf("key file %s: key line %q: %v", keyFile, line, err)
	}
	if id, _ := hkdf.Key(sha256.New, secret, nil, "panto bucket key v1: key id", 8); hex.EncodeToString(id) != keyID {
		t.Fatalf("the derivation here gives key id %x, keygen said %s: the test derives another key", id, keyID)
	}
	sealKey, err := hkdf.Key(sha256.New, secret, nil, "panto bucket key v1: seal", 32)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(secret)
	out := map[string][]byte{"key file": file, "key line": []byte(line)}
	for name, raw := range map[string][]byte{"secret": secret, "sha256 of the secret": sum[:], "sealing key": sealKey} {
		out[name+", raw"] = raw
		out[name+", hex"] = []byte(hex.EncodeToString(raw))
		out[name+", HEX"] = []byte(strings.ToUpper(hex.EncodeToString(raw)))
		out[name+", base64"] = []byte(base64.StdEncoding.EncodeToString(raw))
		out[name+", base64 unpadded"] = []byte(base64.RawStdEncoding.EncodeToString(raw))
		out[name+", base64url"] = []byte(base64.URLEncoding.EncodeToString(raw))
		out[name+", base64url unpadded"] = []byte(base64.RawURLEncoding.EncodeToString(raw))
	}
	return out
}

// objectViews is data as stored, decompressed when it is zstd, and every
// string of it that is a JSON document, with each string's base64
// decoding (standard or URL, padded or not) where it has one.
func objectViews(data []byte) [][]byte {
	views := [][]byte{data}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	if raw, err := dec.DecodeAll(data, nil); err == nil {
		views = append(views, raw)
	}
	for _, v := range slices.Clone(views) {
		var doc any
		if json.Unmarshal(v, &doc) == nil {
			views = append(views, jsonStrings(doc)...)
		}
	}
	return views
}

// jsonStrings is every string of a decoded JSON value, keys included, and
// the base64 decodings of each.
func jsonStrings(v any) [][]byte {
	var out [][]byte
	add := func(s string) {
		out = append(out, []byte(s))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil {
				out = append(out, b)
			}
		}
	}
	switch v := v.(type) {
	case string:
		add(v)
	case []any:
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
	case map[string]any:
		for k, e := range v {
			add(k)
			out = append(out, jsonStrings(e)...)
		}
	}
	return out
}

func compress(t *testing.T, data []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(data, nil)
}
