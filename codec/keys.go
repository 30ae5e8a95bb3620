package codec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// KeySize is the length of an AES-256 key in bytes.
const KeySize = 32

// Key is one AES-256 key and the id written beside every payload it
// encrypts.
type Key struct {
	// ID names the key in payload metadata: printable, no spaces, at most
	// 64 bytes.
	ID string
	// Secret is the key itself: KeySize bytes.
	Secret []byte
}

// Keyring holds keys by id; the first one encrypts. It is safe for
// concurrent use.
type Keyring struct {
	ids []string
	// aead holds each key's cipher under Cipher: AES-256-GCM keyed by a
	// key derived from the secret (HKDF-SHA-256, labelled). legacy holds
	// the cipher of payloads written before (CipherLegacy), keyed by the
	// secret itself: they stay readable.
	aead, legacy map[string]cipher.AEAD
	// nonceKey derives the encrypting key's nonces (see Encode): a second
	// key derived from the first secret, under another label.
	nonceKey []byte
}

// Labels of the keys derived from each secret (HKDF-SHA-256 info).
const (
	labelAES   = "tulip codec aes-256-gcm v2"
	labelNonce = "tulip codec nonce v2"
)

// NewKeyring checks the keys (at least one; ids unique and well-formed;
// secrets KeySize bytes) and returns a keyring whose first key encrypts.
func NewKeyring(keys ...Key) (*Keyring, error) {
	k := newKeyring()
	for _, key := range keys {
		if reason := k.add(key); reason != "" {
			return nil, &KeyFileError{Reason: reason}
		}
	}
	if len(k.ids) == 0 {
		return nil, &KeyFileError{Reason: noKeys}
	}
	return k, nil
}

const noKeys = "no keys: give at least one \"KEY_ID BASE64_OF_32_BYTES\" line"

// add checks key and adds it last; it says what is wrong, or "".
func (k *Keyring) add(key Key) string {
	if reason := checkID(key.ID); reason != "" {
		return reason
	}
	if _, dup := k.aead[key.ID]; dup {
		return fmt.Sprintf("key id %q appears twice", key.ID)
	}
	if len(key.Secret) != KeySize {
		return fmt.Sprintf("key %q is %d bytes; AES-256 needs %d", key.ID, len(key.Secret), KeySize)
	}
	legacy, err := newGCM(bytes.Clone(key.Secret))
	if err != nil {
		return err.Error()
	}
	aesKey, err := hkdf.Key(sha256.New, key.Secret, nil, labelAES, KeySize)
	if err != nil {
		return err.Error()
	}
	gcm, err := newGCM(aesKey)
	if err != nil {
		return err.Error()
	}
	k.ids = append(k.ids, key.ID)
	k.aead[key.ID], k.legacy[key.ID] = gcm, legacy
	if k.nonceKey == nil {
		if k.nonceKey, err = hkdf.Key(sha256.New, key.Secret, nil, labelNonce, sha256.Size); err != nil {
			return err.Error()
		}
	}
	return ""
}

func newKeyring() *Keyring {
	return &Keyring{aead: map[string]cipher.AEAD{}, legacy: map[string]cipher.AEAD{}}
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func checkID(id string) string {
	switch {
	case id == "":
		return "a key id is empty"
	case len(id) > 64:
		return fmt.Sprintf("key id %.20q... is longer than 64 bytes", id)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Sprintf("key id %q holds a space or an unprintable character", id)
		}
	}
	return ""
}

// ParseKeys reads a key file's text: one "KEY_ID BASE64_OF_32_BYTES" per
// line (standard or URL base64, padded or not); blank lines and lines
// starting with # are skipped. name is used in errors.
func ParseKeys(r io.Reader, name string) (*Keyring, error) {
	k := newKeyring()
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, &KeyFileError{File: name, Line: n, Reason: fmt.Sprintf("want \"KEY_ID BASE64_OF_32_BYTES\", found %d fields", len(fields))}
		}
		secret, err := decodeBase64(fields[1])
		if err != nil {
			return nil, &KeyFileError{File: name, Line: n, Reason: fmt.Sprintf("key %q is not base64", fields[0])}
		}
		if reason := k.add(Key{ID: fields[0], Secret: secret}); reason != "" {
			return nil, &KeyFileError{File: name, Line: n, Reason: reason}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{File: name, Reason: err.Error()}
	}
	if len(k.ids) == 0 {
		return nil, &KeyFileError{File: name, Reason: noKeys}
	}
	return k, nil
}

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("not base64")
}

// LoadKeyFile reads and checks a key file (see ParseKeys). A file others
// may read is read all the same (tulip warns).
func LoadKeyFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &KeyFileError{File: path, Reason: "cannot be read: " + unwrapPath(err)}
	}
	defer f.Close()
	return ParseKeys(f, path)
}

func unwrapPath(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// KeyIDs lists the key ids, the encrypting one first.
func (k *Keyring) KeyIDs() []string { return append([]string(nil), k.ids...) }
