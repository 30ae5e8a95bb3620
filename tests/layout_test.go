package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The library never pulls in the Temporal server, and dedup imports nothing
// from Temporal at all.
func TestLibraryDependencies(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	assert.NotContains(t, string(mod), "go.temporal.io/server")

	deps := func(pkgs ...string) string {
		cmd := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	lib := deps("./...")
	assert.Contains(t, lib, "go.temporal.io/sdk/workflow", "sanity: the listing is real")
	assert.NotContains(t, lib, "go.temporal.io/server")
	assert.NotContains(t, lib, "go.opentelemetry.io/otel/sdk", "OpenTelemetry lives in the otel module")
	assert.NotContains(t, lib, "github.com/prometheus/", "Prometheus lives in the CLI's module")
	for _, d := range strings.Split(deps("./internal/dedup"), "\n") {
		assert.False(t, strings.HasPrefix(d, "go.temporal.io/"), "dedup depends on %s", d)
	}
}
