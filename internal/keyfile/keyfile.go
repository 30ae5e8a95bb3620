// Package keyfile writes codec key files for the CLI's keygen: a line
// with a fresh key, appended to a file of mode 0600, and a warning for a
// key file others can read.
package keyfile

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/tulip-temporal/tulip/codec"
)

// NewLine returns a key file line "ID BASE64" with a fresh random key of
// codec.KeySize bytes; a bad id is a *codec.KeyFileError.
func NewLine(id string) (string, error) {
	secret := make([]byte, codec.KeySize)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	if _, err := codec.NewKeyring(codec.Key{ID: id, Secret: secret}); err != nil {
		return "", err
	}
	return id + " " + base64.StdEncoding.EncodeToString(secret), nil
}

// Warning is a one-line warning when the key file at path may be read (or
// written) by users other than its owner ("" otherwise): keys belong in a
// file of mode 0600.
func Warning(path string) string {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("warning: key file %s has mode %04o: others can read its keys (chmod 600 %s)", path, fi.Mode().Perm(), path)
}

// Append appends line to the key file at path, creating it with mode 0600
// when it does not exist.
func Append(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return &codec.KeyFileError{File: path, Reason: "cannot be written: " + reason(err)}
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return &codec.KeyFileError{File: path, Reason: "cannot be written: " + reason(err)}
	}
	return f.Close()
}

func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
