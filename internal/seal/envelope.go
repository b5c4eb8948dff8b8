package seal

import (
	"bytes"
	"crypto/rand"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// The sealed envelope (see the package doc):
//
//	magic (8) | key id (8) | nonce (24) | ciphertext | tag (16)
//
// The associated data is the header (magic, key id, nonce) followed by
// the object's name, so that neither the header nor the name can change
// without the tag failing.
const (
	magic      = "PNTSEAL1"
	headerSize = len(magic) + len(ID{}) + chacha20poly1305.NonceSizeX
	// Overhead is what sealing adds to a plaintext.
	Overhead = headerSize + chacha20poly1305.Overhead
)

// Seal returns plaintext sealed for the object called name (its key under
// the prefix: the name is bound to the ciphertext, not stored in it).
func (k *Key) Seal(name string, plaintext []byte) []byte {
	out := make([]byte, headerSize, headerSize+len(plaintext)+chacha20poly1305.Overhead)
	copy(out, magic)
	copy(out[len(magic):], k.id[:])
	nonce := out[len(magic)+len(k.id) : headerSize]
	// crypto/rand.Read never fails (it crashes the program rather than
	// return short), so a nonce is never reused for want of randomness.
	_, _ = rand.Read(nonce)
	return k.aead.Seal(out, nonce, plaintext, associated(out[:headerSize], name))
}

// Open returns the plaintext of sealed, the object called name. It
// decrypts in place: sealed's bytes are overwritten, and the plaintext
// shares its memory. The error wraps ErrNotSealed, ErrWrongKey or ErrAuth.
func (k *Key) Open(name string, sealed []byte) ([]byte, error) {
	if err := k.check(sealed); err != nil {
		return nil, err
	}
	header := sealed[:headerSize]
	nonce := header[len(magic)+len(k.id):]
	ct := sealed[headerSize:]
	plain, err := k.aead.Open(ct[:0], nonce, ct, associated(header, name))
	if err != nil {
		return nil, ErrAuth
	}
	return plain, nil
}

// check tells an envelope sealed with this key from anything else: what
// is not an envelope at all, and one sealed with another key, whose
// identifier it says.
func (k *Key) check(sealed []byte) error {
	if len(sealed) < Overhead || !bytes.HasPrefix(sealed, []byte(magic)) {
		return fmt.Errorf("%w: %d bytes without the envelope's header", ErrNotSealed, len(sealed))
	}
	var id ID
	copy(id[:], sealed[len(magic):])
	if id != k.id {
		return fmt.Errorf("%w: key %s, not %s", ErrWrongKey, id, k.id)
	}
	return nil
}

// IsSealed reports whether data starts like an envelope (any key's).
func IsSealed(data []byte) bool {
	return len(data) >= Overhead && bytes.HasPrefix(data, []byte(magic))
}

// associated is the associated data of an envelope with this header for
// the object name.
func associated(header []byte, name string) []byte {
	ad := make([]byte, 0, len(header)+len(name))
	return append(append(ad, header...), name...)
}
