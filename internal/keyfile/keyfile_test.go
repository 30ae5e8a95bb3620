package keyfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/codec"
)

// A fresh line loads as a key file; a bad id is refused; a key file others
// can read gets a warning; Append writes 0600.
func TestKeyFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "keys")
	line, err := NewLine("2026-12")
	require.NoError(t, err)
	require.NoError(t, Append(f, line))
	fi, err := os.Stat(f)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Empty(t, Warning(f))
	require.NoError(t, os.Chmod(f, 0o644))
	assert.Equal(t, fmt.Sprintf("warning: key file %s has mode 0644: others can read its keys (chmod 600 %s)", f, f), Warning(f))
	k, err := codec.LoadKeyFile(f)
	require.NoError(t, err, "read all the same")
	assert.Equal(t, []string{"2026-12"}, k.KeyIDs())

	_, err = NewLine("has space")
	var kfe *codec.KeyFileError
	assert.True(t, errors.As(err, &kfe), "%v", err)

	err = Append(filepath.Join(t.TempDir(), "no", "dir"), line)
	assert.True(t, errors.As(err, &kfe), "%v", err)
}
