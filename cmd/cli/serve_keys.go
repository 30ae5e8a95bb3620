package cli

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/tulip-temporal/tulip/serve"
)

// The files 'tulip serve' reads its secrets from: the clients' bearer
// tokens (--api-key-file) and the id key (--id-key-file).

var tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// readAPIKeys reads --api-key-file: one token a line ("TOKEN", of the
// default tenant, or "TENANT TOKEN"); blank lines and lines starting with
// # are skipped.
func readAPIKeys(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--api-key-file: %v", err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		tenant, token := serve.DefaultTenant, fields[0]
		switch len(fields) {
		case 1:
		case 2:
			tenant, token = fields[0], fields[1]
		default:
			return nil, usageError{fmt.Sprintf("--api-key-file line %d: TOKEN or TENANT TOKEN", n)}
		}
		if !tenantRE.MatchString(tenant) {
			return nil, usageError{fmt.Sprintf("--api-key-file line %d: a tenant name is 1-64 of A-Z a-z 0-9 . _ -", n)}
		}
		if len(token) < 8 {
			return nil, usageError{fmt.Sprintf("--api-key-file line %d: a token has at least 8 characters", n)}
		}
		if _, dup := keys[token]; dup {
			return nil, usageError{fmt.Sprintf("--api-key-file line %d: a token given twice", n)}
		}
		keys[token] = tenant
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--api-key-file: %v", err)
	}
	if len(keys) == 0 {
		return nil, usageError{"--api-key-file holds no token"}
	}
	return keys, nil
}

// loadIDKey reads the id key at path, making it (32 random bytes, hex,
// mode 0600) when the file does not exist; "" gives a key for this process
// only.
func loadIDKey(path string) ([]byte, error) {
	if path == "" {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		return key, nil
	}
	text, err := readKeyFile("--id-key-file", path)
	if err == nil {
		key, err := hex.DecodeString(text)
		if err != nil || len(key) < 16 {
			return nil, fmt.Errorf("--id-key-file %s: not a key (at least 32 hex digits)", path)
		}
		return key, nil
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadIDKey(path) // made meanwhile by another server
	}
	if err != nil {
		return nil, fmt.Errorf("--id-key-file: %v", err)
	}
	if _, err := fmt.Fprintln(f, hex.EncodeToString(key)); err != nil {
		f.Close()
		return nil, fmt.Errorf("--id-key-file: %v", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("--id-key-file: %v", err)
	}
	return key, f.Close()
}
