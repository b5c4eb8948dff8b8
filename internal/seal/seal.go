// Package seal encrypts and authenticates what panto stores in an
// encrypted bucket prefix (store/objstore): the bucket key and its key
// file, the key identifier the prefix's format marker records, and the
// sealed envelope that every object's content travels in. docs/DESIGN.md
// ("Encryption") specifies the formats; this package is their one
// implementation.
//
// # The construction
//
// A bucket key is 32 random bytes, kept in a key file (keyfile.go). Two
// values are derived from it with HKDF-SHA256 (crypto/hkdf), each under a
// label of its own, so that neither says anything of the other or of the
// key: the sealing key, and the key identifier (8 bytes, printed as 16 hex
// digits), which the marker records so that a wrong key is told from a
// damaged object before anything is read or written.
//
// An object is sealed with XChaCha20-Poly1305
// (golang.org/x/crypto/chacha20poly1305) under the sealing key, with a
// random 24-byte nonce, and with associated data that binds it to its
// place: the envelope's header and the object's name under the prefix,
// such as sessions/<id>/seg/<start>.jsonl.zst. A segment's name holds its
// session and its raw offset (a merged segment's, its range), so a
// segment moved to another session or position, or a document moved to
// another name, fails authentication like a flipped byte does, and never
// decrypts into the wrong place. The envelope (envelope.go) is
//
//	magic "PNTSEAL1" (8) | key id (8) | nonce (24) | ciphertext | Poly1305 tag (16)
//
// 56 bytes over the plaintext, which is already compressed (zstd comes
// first: ciphertext does not compress).
//
// # Why this and not age
//
// filippo.io/age is well kept and would do, but it is made for files sent
// to recipients, and panto's objects are many and small (a segment is
// often one message, a few hundred bytes compressed). Every age object
// carries a header with a recipient stanza and its own MAC (about 200
// bytes, and an X25519 exchange to write or read each one), and age has
// no associated data: binding an object to its name would take a copy of
// the name inside the plaintext and a check of our own after decryption.
// Its recipients, the one thing a single symmetric key cannot do (writing
// without being able to read), buy nothing here: a writer reads the
// manifest it appends after (its hash and summary state), so every writer
// holds the secret anyway. XChaCha20-Poly1305 gives associated data for
// free, 56 bytes of overhead, no public-key operation per object, and a
// nonce long enough to be drawn at random by any number of writers that
// share a bucket without locks or counters (AES-GCM's 96-bit nonces would
// need either care or a bound on the number of objects).
//
// What stays readable in an encrypted prefix, and what an attacker who
// can write to the bucket can still do (delete objects, or put back an
// older copy of one under its own name), is in the README and
// docs/DESIGN.md.
//
// # Key material
//
// A Key keeps its secret to itself: it prints, formats and marshals as
// its identifier only, and no error of this package holds a byte of a
// key or of a key file's content.
package seal

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/crypto/chacha20poly1305"
)

// Scheme names this package's construction in a prefix's format marker.
const Scheme = "xchacha20poly1305-hkdf-sha256"

// SecretSize is the size of a bucket key's secret.
const SecretSize = 32

// HKDF labels of the derived values. Changing one changes every sealed
// object: these are part of the format.
const (
	labelSeal  = "panto bucket key v1: seal"
	labelKeyID = "panto bucket key v1: key id"
)

// ID identifies a bucket key without revealing anything of it: derived
// from the secret by HKDF under a label of its own.
type ID [8]byte

// String is the identifier as 16 hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses 16 hex digits.
func ParseID(s string) (ID, error) {
	var id ID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return ID{}, fmt.Errorf("key id %q: want %d hex digits", s, 2*len(id))
	}
	copy(id[:], b)
	return id, nil
}

// Key is a bucket key, ready to seal and open objects. It is safe for
// concurrent use. It prints (fmt, slog, JSON) as its identifier only.
type Key struct {
	aead cipher.AEAD
	id   ID
}

// NewKey derives a Key from a secret of SecretSize bytes. The caller may
// wipe secret afterwards: the Key keeps only what was derived from it.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("%w: a key is %d bytes, this one %d", ErrKeyFile, SecretSize, len(secret))
	}
	sealKey, err := hkdf.Key(sha256.New, secret, nil, labelSeal, chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("derive the sealing key: %w", err)
	}
	defer clear(sealKey)
	idBytes, err := hkdf.Key(sha256.New, secret, nil, labelKeyID, len(ID{}))
	if err != nil {
		return nil, fmt.Errorf("derive the key id: %w", err)
	}
	aead, err := chacha20poly1305.NewX(sealKey)
	if err != nil {
		return nil, fmt.Errorf("XChaCha20-Poly1305: %w", err)
	}
	k := &Key{aead: aead}
	copy(k.id[:], idBytes)
	return k, nil
}

// ID is the key's identifier.
func (k *Key) ID() ID { return k.id }

// String is how a Key prints: its identifier, never its secret.
func (k Key) String() string { return "panto bucket key " + k.id.String() }

// GoString keeps %#v from printing the key's internals.
func (k Key) GoString() string { return k.String() }

// Format prints the Key as String for every verb (%v, %+v, %#v, %s, %x,
// ...), so that no formatting of a Key, of a pointer to one or of a
// struct holding one prints its cipher state.
func (k Key) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// LogValue makes slog log the identifier only.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalText (and so JSON) writes the identifier only.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

var (
	// ErrKeyFile: a key file (or a secret) is not a panto bucket key. The
	// message says what is wrong with it, never what it holds.
	ErrKeyFile = errors.New("not a panto key file")
	// ErrNotSealed: an object is not a sealed envelope (too short, or
	// without the magic): in an encrypted prefix, plaintext that nobody
	// sealed.
	ErrNotSealed = errors.New("not sealed (plaintext, or not panto's, where only sealed objects may be)")
	// ErrWrongKey: an object was sealed with another key (its header
	// names that key's identifier).
	ErrWrongKey = errors.New("sealed with another key")
	// ErrAuth: an object fails authentication: a byte of it was changed,
	// or it was moved from another name (another session, or another
	// position in one).
	ErrAuth = errors.New("fails authentication (altered, or moved from another session or position)")
)
