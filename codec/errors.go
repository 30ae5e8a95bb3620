package codec

import "fmt"

// errorType is the stable type string of a *KeyError (tulip.CodecKey).
const errorType = "tulip.CodecKey"

// KeyError says why a payload could not be decrypted: its key id is not in
// the keyring, or the key with that id does not open it (a wrong key under
// a reused id, or a payload changed after it was written).
type KeyError struct {
	// KeyID is the key id written in the payload's metadata.
	KeyID string
	// Unknown is true when the keyring holds no key with that id.
	Unknown bool
	// NoKeys is true when no key was given at all (a nil Keyring).
	NoKeys bool
}

func (e *KeyError) Error() string {
	if e.NoKeys {
		return fmt.Sprintf("payload is encrypted with key %q: give the key file (--codec-key-file or TULIP_CODEC_KEY_FILE)", e.KeyID)
	}
	if e.Unknown {
		return fmt.Sprintf("payload is encrypted with key %q, which the key file does not hold", e.KeyID)
	}
	return fmt.Sprintf("key %q does not decrypt this payload (a different key under the same id, or the payload was altered)", e.KeyID)
}

// Type is its stable type string, "tulip.CodecKey" (tulip.CodecKey).
func (e *KeyError) Type() string { return errorType }

// KeyFileError is a key file (or key) that cannot be used.
type KeyFileError struct {
	// File is the key file's path, "" when the keys did not come from a file.
	File string
	// Line is the 1-based line number, 0 when the error is not one line's.
	Line int
	// Reason says what is wrong, in words.
	Reason string
}

func (e *KeyFileError) Error() string {
	where := "codec key file"
	if e.File != "" {
		where += " " + e.File
	}
	if e.Line > 0 {
		where += fmt.Sprintf(", line %d", e.Line)
	}
	return where + ": " + e.Reason
}
