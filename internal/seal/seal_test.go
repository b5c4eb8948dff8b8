package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 9, 58, 0, 0, time.UTC)

// testSecret is a fixed secret, so that the ids in this file are stable.
var testSecret = bytes.Repeat([]byte{0x5a}, SecretSize)

func testKey(t testing.TB, secret []byte) *Key {
	t.Helper()
	k, err := NewKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := testKey(t, testSecret)
	const name = "sessions/abc/seg/00000000000000000000.jsonl.zst"
	plain := []byte("the zstd frame of a segment")
	sealed := k.Seal(name, plain)
	if len(sealed) != len(plain)+Overhead || !IsSealed(sealed) {
		t.Fatalf("sealed %d bytes of %d (overhead %d)", len(sealed), len(plain), Overhead)
	}
	if bytes.Contains(sealed, plain) {
		t.Fatal("the plaintext is in the envelope")
	}
	if again := k.Seal(name, plain); bytes.Equal(again, sealed) {
		t.Fatal("two seals of the same plaintext are equal: the nonce is not random")
	}
	got, err := k.Open(name, bytes.Clone(sealed))
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %v %q", err, got)
	}
	empty, err := k.Open("x", k.Seal("x", nil))
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty plaintext: %v %q", err, empty)
	}

	// Every byte of the envelope is covered: the header by the associated
	// data, the rest by the tag.
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		_, err := k.Open(name, bad)
		switch {
		case i < len(magic):
			if !errors.Is(err, ErrNotSealed) {
				t.Fatalf("byte %d (magic) flipped: %v", i, err)
			}
		case i < len(magic)+len(ID{}):
			if !errors.Is(err, ErrWrongKey) {
				t.Fatalf("byte %d (key id) flipped: %v", i, err)
			}
		default:
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("byte %d flipped: %v", i, err)
			}
		}
	}
	// Another name: another session, another position.
	for _, other := range []string{"sessions/abd/seg/00000000000000000000.jsonl.zst", "sessions/abc/seg/00000000000000000001.jsonl.zst", ""} {
		if _, err := k.Open(other, bytes.Clone(sealed)); !errors.Is(err, ErrAuth) {
			t.Fatalf("opened under %q: %v", other, err)
		}
	}
	// Another key: said as such, with both ids, before any decryption.
	other := testKey(t, bytes.Repeat([]byte{0xa5}, SecretSize))
	_, err = other.Open(name, bytes.Clone(sealed))
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), k.ID().String()) || !strings.Contains(err.Error(), other.ID().String()) {
		t.Fatalf("another key: %v", err)
	}
	for _, short := range [][]byte{nil, []byte("{}"), sealed[:Overhead-1], []byte(magic)} {
		if _, err := k.Open(name, bytes.Clone(short)); !errors.Is(err, ErrNotSealed) {
			t.Fatalf("%d bytes: %v", len(short), err)
		}
	}
}

func TestKeyID(t *testing.T) {
	a, b := testKey(t, testSecret), testKey(t, testSecret)
	if a.ID() != b.ID() {
		t.Fatal("one secret, two ids")
	}
	c := testKey(t, bytes.Repeat([]byte{0xa5}, SecretSize))
	if a.ID() == c.ID() {
		t.Fatal("two secrets, one id")
	}
	// The id is derived under a label of its own: it is not the secret,
	// nor a prefix of the sealing key's derivation.
	if bytes.Contains(testSecret, a.id[:]) {
		t.Fatal("the id is part of the secret")
	}
	id, err := ParseID(a.ID().String())
	if err != nil || id != a.ID() {
		t.Fatalf("ParseID: %v %v", err, id)
	}
	for _, bad := range []string{"", "xyz", "00", strings.Repeat("0", 18)} {
		if _, err := ParseID(bad); err == nil {
			t.Fatalf("ParseID(%q) accepted", bad)
		}
	}
	if _, err := NewKey(testSecret[:16]); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("a short secret: %v", err)
	}
}

// TestKeyNeverPrints: no formatting of a key, or of what holds one,
// shows its secret or its cipher state.
func TestKeyNeverPrints(t *testing.T) {
	data, k, err := GenerateKeyFile(t0)
	if err != nil {
		t.Fatal(err)
	}
	secret := secretOf(t, data)
	holder := struct {
		Name string
		Key  *Key
		Val  Key
	}{"x", k, *k}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("open", "key", k, "val", *k)
	js, err := json.Marshal(holder)
	if err != nil {
		t.Fatal(err)
	}
	outputs := []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %q", k, k, k, k, k, k),
		fmt.Sprintf("%v %+v %#v", *k, *k, *k), fmt.Sprintf("%+v %#v", holder, holder),
		string(js), logged.String(),
	}
	for _, out := range outputs {
		for _, form := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret), string(secret)} {
			if strings.Contains(out, form) {
				t.Fatalf("the secret shows in %q", out)
			}
		}
		if strings.Contains(out, "aead") || strings.Contains(out, "0x") {
			t.Fatalf("the cipher state shows in %q", out)
		}
	}
	if !strings.Contains(fmt.Sprint(k), k.ID().String()) {
		t.Fatalf("a key prints as %q, not as its id", fmt.Sprint(k))
	}
}

func secretOf(t *testing.T, file []byte) []byte {
	t.Helper()
	i := bytes.Index(file, []byte(keyLinePrefix))
	if i < 0 {
		t.Fatalf("no key line in %q", file)
	}
	line, _, _ := bytes.Cut(file[i+len(keyLinePrefix):], []byte{'\n'})
	secret, err := base64.RawURLEncoding.DecodeString(string(line))
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func TestKeyFile(t *testing.T) {
	data, k, err := GenerateKeyFile(t0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("# key id: "+k.ID().String())) {
		t.Fatalf("the key file does not say its id:\n%s", data)
	}
	got, err := ParseKeyFile(data)
	if err != nil || got.ID() != k.ID() {
		t.Fatalf("parse: %v", err)
	}
	sealed := k.Seal("n", []byte("p"))
	if plain, err := got.Open("n", sealed); err != nil || string(plain) != "p" {
		t.Fatalf("the parsed key does not open what the generated one sealed: %v", err)
	}
	_, other, _ := GenerateKeyFile(t0)
	if other.ID() == k.ID() {
		t.Fatal("two generated keys share an id")
	}
	// Spaces, CRLF and comments are fine.
	crlf := bytes.ReplaceAll(data, []byte("\n"), []byte("  \r\n"))
	if got, err := ParseKeyFile(append([]byte("\n# mine\n"), crlf...)); err != nil || got.ID() != k.ID() {
		t.Fatalf("CRLF: %v", err)
	}

	secret := secretOf(t, data)
	enc := base64.RawURLEncoding.EncodeToString(secret)
	for _, c := range []struct{ name, file, want string }{
		{"empty", "", "no key line"},
		{"comments only", "# nothing\n\n", "no key line"},
		{"no prefix", enc + "\n", "line 1 is neither"},
		{"two keys", keyLinePrefix + enc + "\n" + keyLinePrefix + enc + "\n", "line 2 is a second key line"},
		{"short", keyLinePrefix + enc[:40] + "\n", "not 32 bytes"},
		{"long", keyLinePrefix + enc + "AAAA\n", "not 32 bytes"},
		{"padded", keyLinePrefix + base64.URLEncoding.EncodeToString(secret) + "\n", "not 32 bytes"},
		{"std alphabet", keyLinePrefix + strings.NewReplacer("-", "+", "_", "/").Replace(enc) + "+\n", "not 32 bytes"},
		{"huge", strings.Repeat("#", maxKeyFile+1), "a few lines"},
	} {
		_, err := ParseKeyFile([]byte(c.file))
		if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if strings.Contains(err.Error(), enc[:16]) || strings.Contains(err.Error(), enc[len(enc)-16:]) {
			t.Fatalf("%s: the error shows the key: %v", c.name, err)
		}
	}
}

func TestWriteKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bucket.key")
	k, err := WriteKeyFile(path, t0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	got, err := LoadKeyFile(path)
	if err != nil || got.ID() != k.ID() {
		t.Fatalf("load: %v", err)
	}
	before, _ := os.ReadFile(path)
	if _, err := WriteKeyFile(path, t0); !errors.Is(err, ErrKeyFileExists) {
		t.Fatalf("overwrite: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused keygen changed the file")
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "bad")); !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("a bad file: %v", err)
	}
}

// FuzzParseKeyFile: the parser never panics, what it accepts is a key
// whose file parses back to the same id, and its errors never hold the
// input's key line.
func FuzzParseKeyFile(f *testing.F) {
	data, _, _ := GenerateKeyFile(t0)
	f.Add(data)
	f.Add([]byte(keyLinePrefix + "\n"))
	f.Add([]byte("# only a comment\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKeyFile(data)
		if err != nil {
			if !errors.Is(err, ErrKeyFile) {
				t.Fatalf("error not wrapping ErrKeyFile: %v", err)
			}
			if i := bytes.Index(data, []byte(keyLinePrefix)); i >= 0 {
				line, _, _ := bytes.Cut(data[i+len(keyLinePrefix):], []byte{'\n'})
				if len(line) >= 8 && strings.Contains(err.Error(), string(line)) {
					t.Fatalf("the error holds the key line: %v", err)
				}
			}
			return
		}
		if _, err := k.Open("n", k.Seal("n", data)); err != nil {
			t.Fatalf("an accepted key does not open its own seal: %v", err)
		}
	})
}

// FuzzOpen: Open never panics and never opens what it did not seal
// (under that name), and every envelope it seals opens.
func FuzzOpen(f *testing.F) {
	k := testKey(f, testSecret)
	f.Add("sessions/abc/seg/00000000000000000000.jsonl.zst", k.Seal("sessions/abc/seg/00000000000000000000.jsonl.zst", []byte("frame")))
	f.Add("index/0.json.zst", k.Seal("index/0.json.zst", nil))
	f.Add("x", []byte(magic+"0123456789abcdef0123456789abcdef01234567"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		plain, err := k.Open(name, bytes.Clone(data))
		if err == nil {
			// Only what k sealed for name opens: sealing it again and
			// opening is the same plaintext.
			if got, err := k.Open(name, k.Seal(name, plain)); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("reseal: %v", err)
			}
		} else if !errors.Is(err, ErrNotSealed) && !errors.Is(err, ErrWrongKey) && !errors.Is(err, ErrAuth) {
			t.Fatalf("unexpected error %v", err)
		}
		if got, err := k.Open(name, k.Seal(name, data)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
