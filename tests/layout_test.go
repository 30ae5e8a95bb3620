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
	assert.NotContains(t, lib, "github.com/aws/", "the S3 stores live in the s3store module")
	for _, d := range strings.Split(deps("./internal/dedup"), "\n") {
		assert.False(t, strings.HasPrefix(d, "go.temporal.io/"), "dedup depends on %s", d)
	}
}

// The library's public surface stays small: at most 104 exported top-level
// declarations (as `go doc -short` lists them) across the packages a user
// can import (everything outside internal/), each with a package doc and
// a runnable example.
func TestPublicSurface(t *testing.T) {
	list := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Doc}}", "./...")
	list.Dir = ".." // the library module
	out, err := list.CombinedOutput()
	require.NoError(t, err, "%s", out)
	total := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, doc, _ := strings.Cut(line, " ")
		if strings.Contains(pkg, "/internal/") {
			continue
		}
		assert.NotEmpty(t, doc, "%s has no package doc", pkg)
		short, err := exec.Command("go", "doc", "-short", pkg).CombinedOutput()
		require.NotContains(t, pkg, "/tests", "sanity: only the library module")
		require.NoError(t, err, "%s", short)
		n := len(strings.Split(strings.TrimSpace(string(short)), "\n"))
		total += n
		examples, err := exec.Command("go", "test", "-list", "^Example", pkg).CombinedOutput()
		require.NoError(t, err, "%s", examples)
		assert.Contains(t, string(examples), "Example", "%s has no runnable example", pkg)
		t.Logf("%-45s %3d", pkg, n)
	}
	t.Logf("total %d", total)
	assert.LessOrEqual(t, total, 104, "exported top-level declarations across the public packages")
	assert.Greater(t, total, 50, "sanity: the count is real")
}

// The README's tour imports at most three tulip packages.
func TestTourImports(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	tour := string(readme)
	start := strings.Index(tour, "## A tour in four steps")
	require.Positive(t, start)
	tour = tour[start:]
	tour = tour[:strings.Index(tour, "\n## ")+1]
	pkgs := map[string]bool{}
	for _, f := range strings.Fields(tour) {
		f = strings.Trim(f, "\"`()")
		if strings.HasPrefix(f, "github.com/tulip-temporal/tulip") {
			pkgs[f] = true
		}
	}
	assert.NotEmpty(t, pkgs, "sanity: the tour imports tulip")
	assert.LessOrEqual(t, len(pkgs), 3, "%v", pkgs)
}

// The anthropicmodel module's own tests run with the README's test
// command too (it names the modules it tests; this one came later).
func TestAnthropicModelModule(t *testing.T) {
	cmd := exec.Command("go", "test", "-count=1", "./anthropicmodel/...")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "ok  \tgithub.com/tulip-temporal/tulip/anthropicmodel")
	t.Logf("%s", out)
}
