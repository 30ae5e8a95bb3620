package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// tulipBinary builds the tulip CLI once per test binary (the soak's
// package, tests/soak, has its own copy: packages share no test code).
var (
	soakBinOnce sync.Once
	soakBin     string
	soakBinErr  error
	soakBinDir  string
)

// tulipBinary builds the tulip binary once for the soak tests.
func tulipBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL, SIGSTOP and process groups: Linux only")
	}
	soakBinOnce.Do(func() {
		soakBinDir, soakBinErr = os.MkdirTemp("", "tulip-soak-bin-")
		if soakBinErr != nil {
			return
		}
		soakBin = filepath.Join(soakBinDir, "tulip")
		var out []byte
		out, soakBinErr = exec.Command("go", "build", "-o", soakBin, "github.com/tulip-temporal/tulip/cmd/tulip").CombinedOutput()
		if soakBinErr != nil {
			soakBinErr = &buildError{out: string(out), err: soakBinErr}
		}
	})
	require.NoError(t, soakBinErr)
	return soakBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// runSoak runs `tulip soak ARGS --json` and returns its summary, its stderr
// and its exit code.
