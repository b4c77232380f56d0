package feishu

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
)

// Decrypt opens an event the open platform encrypted with the app's
// Encrypt Key (the "encrypt" field of a callback's body): AES-256-CBC
// with the key's SHA-256 as the key, the first block as the IV, PKCS#7
// padding.
func Decrypt(encrypted, encryptKey string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return nil, errors.New("the encrypted event is not base64")
	}
	if len(raw) < 2*aes.BlockSize || len(raw)%aes.BlockSize != 0 {
		return nil, errors.New("the encrypted event has a wrong length")
	}
	key := sha256.Sum256([]byte(encryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	iv, body := raw[:aes.BlockSize], append([]byte(nil), raw[aes.BlockSize:]...)
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(body, body)
	pad := int(body[len(body)-1])
	if pad == 0 || pad > aes.BlockSize || pad > len(body) {
		return nil, errors.New("the event does not decrypt with channels.feishu.encryptKey")
	}
	for _, b := range body[len(body)-pad:] {
		if int(b) != pad {
			return nil, errors.New("the event does not decrypt with channels.feishu.encryptKey")
		}
	}
	return body[:len(body)-pad], nil
}

// Encrypt is Decrypt's inverse, with iv as the IV: the fake platform
// encrypts with it.
func Encrypt(plain []byte, encryptKey string, iv []byte) string {
	key := sha256.Sum256([]byte(encryptKey))
	block, _ := aes.NewCipher(key[:]) // a 32-byte key always makes a cipher
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	body := append(append([]byte(nil), plain...), make([]byte, pad)...)
	for i := len(plain); i < len(body); i++ {
		body[i] = byte(pad)
	}
	out := make([]byte, aes.BlockSize+len(body))
	copy(out, iv[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], body)
	return base64.StdEncoding.EncodeToString(out)
}

// Signature is the X-Lark-Signature of a callback request: the hex
// SHA-256 of its timestamp, nonce, the Encrypt Key and the body.
func Signature(timestamp, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp + nonce + encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func equalSecret(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
