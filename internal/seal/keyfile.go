package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// A key file is text: comment lines starting with #, blank lines, and
// one key line, the prefix and the secret in unpadded base64url:
//
//	# panto bucket key, created 2026-12-01T09:58:00Z
//	# key id: 3f9a12c4d5e6f708
//	PANTO-BUCKET-KEY-1:q1Xn...43 characters...
//
// The key id in the comment is for people; the parser ignores it and
// derives the id from the secret.
const keyLinePrefix = "PANTO-BUCKET-KEY-1:"

// maxKeyFile bounds what ParseKeyFile reads: a key file is a few lines.
const maxKeyFile = 64 << 10

// GenerateKeyFile returns the content of a key file holding a new random
// key, and that key.
func GenerateKeyFile(now time.Time) ([]byte, *Key, error) {
	secret := make([]byte, SecretSize)
	defer clear(secret)
	_, _ = rand.Read(secret) // never fails: see Seal
	k, err := NewKey(secret)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# panto bucket key, created %s\n", now.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "# key id: %s\n", k.ID())
	b.WriteString("# Keep it secret, and keep a copy: without it the sessions sealed with it cannot be read.\n")
	b.WriteString(keyLinePrefix)
	b.WriteString(base64.RawURLEncoding.EncodeToString(secret))
	b.WriteString("\n")
	return b.Bytes(), k, nil
}

// ParseKeyFile reads the key of a key file's content. Its errors wrap
// ErrKeyFile and say which line is wrong and how, never what it holds.
func ParseKeyFile(data []byte) (*Key, error) {
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%w: %d bytes, a key file is a few lines", ErrKeyFile, len(data))
	}
	var secret []byte
	defer func() { clear(secret) }()
	line := 0
	for rest := data; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		line++
		l = bytes.TrimSpace(l)
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		if !bytes.HasPrefix(l, []byte(keyLinePrefix)) {
			return nil, fmt.Errorf("%w: line %d is neither a comment (#) nor the key line (%s...)", ErrKeyFile, line, keyLinePrefix)
		}
		if secret != nil {
			return nil, fmt.Errorf("%w: line %d is a second key line; a key file holds one", ErrKeyFile, line)
		}
		enc := l[len(keyLinePrefix):]
		secret = make([]byte, base64.RawURLEncoding.DecodedLen(len(enc)))
		n, err := base64.RawURLEncoding.Decode(secret, enc)
		if err != nil || n != SecretSize {
			return nil, fmt.Errorf("%w: line %d: the key is not %d bytes of unpadded base64url", ErrKeyFile, line, SecretSize)
		}
		secret = secret[:n]
	}
	if secret == nil {
		return nil, fmt.Errorf("%w: no key line (%s...)", ErrKeyFile, keyLinePrefix)
	}
	return NewKey(secret)
}

// LoadKeyFile reads the key file at path.
func LoadKeyFile(path string) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer clear(data)
	k, err := ParseKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// ErrKeyFileExists: WriteKeyFile would overwrite a file.
var ErrKeyFileExists = errors.New("file exists")

// WriteKeyFile writes a new key file at path, mode 0600, and returns its
// key. It never overwrites a file: the key it held may be the only way
// into a bucket.
func WriteKeyFile(path string, now time.Time) (*Key, error) {
	data, k, err := GenerateKeyFile(now)
	if err != nil {
		return nil, err
	}
	defer clear(data)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s: %w: a key file is never overwritten (a bucket sealed with its key would be lost); choose another name", path, ErrKeyFileExists)
	}
	if err != nil {
		return nil, fmt.Errorf("write key file: %w", err)
	}
	// The mode asked for went through the umask: make it exactly 0600.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("write key file %s: %w", path, err)
	}
	return k, nil
}
