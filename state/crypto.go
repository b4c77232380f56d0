package state

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"

	"golang.org/x/crypto/nacl/secretbox"
)

// UnsafePassword is the reference's password when none is set.
const UnsafePassword = "UNSAFE"

// Cipher encrypts state as the reference does: NaCl secretbox
// (XSalsa20-Poly1305) keyed by SHA-256 of the password, the nonce first,
// the whole in URL-safe base64 with padding.
type Cipher struct {
	key   [32]byte
	nonce [24]byte // the deterministic nonce of Soft
}

// NewCipher returns a cipher for password ("" means UnsafePassword).
func NewCipher(password string) *Cipher {
	if password == "" {
		password = UnsafePassword
	}
	c := &Cipher{key: sha256.Sum256([]byte(password))}
	copy(c.nonce[:], c.key[:24])
	return c
}

// Encrypt seals plaintext with a random nonce.
func (c *Cipher) Encrypt(plaintext []byte) (string, error) {
	var nonce [24]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	return c.seal(nonce, plaintext), nil
}

// Soft seals plaintext with the deterministic nonce, so the same text
// always gives the same result (used for path components).
func (c *Cipher) Soft(plaintext string) string {
	return c.seal(c.nonce, []byte(plaintext))
}

func (c *Cipher) seal(nonce [24]byte, plaintext []byte) string {
	out := secretbox.Seal(nonce[:], plaintext, &nonce, &c.key)
	return base64.URLEncoding.EncodeToString(out)
}

// ErrDecrypt means the data was not encrypted with this password.
var ErrDecrypt = errors.New("cannot decrypt: the data was encrypted with another password (check NANO_BOTS_ENCRYPTION_PASSWORD) or is damaged")

// Decrypt opens what Encrypt or Soft produced.
func (c *Cipher) Decrypt(s string) ([]byte, error) {
	data, err := base64.URLEncoding.DecodeString(s)
	if err != nil || len(data) < 24+secretbox.Overhead {
		return nil, ErrDecrypt
	}
	var nonce [24]byte
	copy(nonce[:], data[:24])
	out, ok := secretbox.Open(nil, data[24:], &nonce, &c.key)
	if !ok {
		return nil, ErrDecrypt
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// Check is the reference's self-test: encrypting "SAFE" must not give
// "SAFE", two encryptions must differ, and decryption must give it back.
func (c *Cipher) Check() bool {
	a, err1 := c.Encrypt([]byte("SAFE"))
	b, err2 := c.Encrypt([]byte("SAFE"))
	if err1 != nil || err2 != nil || a == "SAFE" || a == b {
		return false
	}
	back, err := c.Decrypt(a)
	return err == nil && string(back) == "SAFE"
}
