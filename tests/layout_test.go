package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// The library's public surface stays small: at most 116 exported top-level
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
	// 113: 106, then package serve (the OpenAI-compatible API as an
	// http.Handler: 5), openaimodel's timeouts' defaults (1) and
	// agent.SaveHistory (1); 114: the type agent.Status (1); 116:
	// compaction's agent.Compaction and openaimodel.KnownWindows; 117:
	// agent.NondeterminismError.
	assert.LessOrEqual(t, total, 117, "exported top-level declarations across the public packages")
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

// internalStructAliases are the public aliases of internal struct types
// allowed to remain (docs/design.md, "Types documented where they are
// read"): go doc would show none of their fields. None remain, and the
// list only shrinks: a new alias fails the test, and so does one that is
// gone but still listed.
var internalStructAliases = map[string]bool{}

// A public package defines the structs a user fills in or reads, so that
// go doc and pkg.go.dev show their fields: an exported alias of an
// internal struct type fails, unless it is one of the remaining ones.
func TestNoAliasesOfInternalStructs(t *testing.T) {
	list := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}} {{.Name}}", "./...")
	list.Dir = ".."
	out, err := list.CombinedOutput()
	require.NoError(t, err, "%s", out)
	alias := regexp.MustCompile(`(?m)^type ([A-Z]\w*) = (\w+)\.(\w+)`)
	found := map[string]bool{}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, dir, name := f[0], f[1], f[2]
		if strings.Contains(pkg, "/internal/") {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			imports := map[string]string{} // local name -> import path
			for _, m := range regexp.MustCompile(`(?m)^\s*(?:import\s+)?(?:(\w+)\s+)?"([^"]+)"\s*$`).FindAllStringSubmatch(string(src), -1) {
				local := m[1]
				if local == "" {
					local = m[2][strings.LastIndex(m[2], "/")+1:]
				}
				imports[local] = m[2]
			}
			for _, m := range alias.FindAllStringSubmatch(string(src), -1) {
				path := imports[m[2]]
				if !strings.Contains(path, "/internal/") {
					continue
				}
				checked++
				doc, err := exec.Command("go", "doc", "-u", path, m[3]).CombinedOutput()
				require.NoError(t, err, "%s", doc)
				if !regexp.MustCompile(`(?m)^type ` + m[3] + ` struct`).Match(doc) {
					continue // an interface, a func or a named string: no fields to hide
				}
				id := name + "." + m[1]
				found[id] = true
				assert.True(t, internalStructAliases[id], "%s is an alias of internal struct %s.%s: define it in %s so go doc shows its fields", id, path, m[3], pkg)
			}
		}
	}
	assert.Greater(t, checked, 0, "sanity: aliases are found")
	for id := range internalStructAliases {
		assert.True(t, found[id], "%s is no longer an alias of an internal struct: take it off the list", id)
	}
	t.Logf("%d aliases of internal structs remain", len(found))
}

// Each room says what it holds, and the arrows between them run one way:
// clients (a run's start and reads, the Go API, the HTTP service, the
// CLI) read a thread's state through threadstate and speak protocol, and
// never import the activities; a thread's state and the names on the
// wire import none of the rooms above them.
func TestRooms(t *testing.T) {
	const mod = "github.com/tulip-temporal/tulip/"
	imports := func(pkg string) []string {
		cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, mod+pkg)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		pkg     string
		reads   string   // a room it must import: the listing is real
		refuses []string // rooms it must not import
	}{
		{"internal/runclient", "internal/threadstate", []string{"internal/activities", "internal/threadstore"}},
		{"agent", "internal/runclient", []string{"internal/activities", "internal/threadstore"}},
		{"serve", "agent", []string{"internal/activities", "internal/threadstore"}},
		{"cmd/cli", "internal/threadstate", []string{"internal/activities"}},
		{"internal/threadstate", "internal/protocol", []string{"internal/activities", "internal/threadstore", "internal/agentrun", "internal/workerplugin", "internal/runclient"}},
		{"internal/threadstore", "internal/threadstate", []string{"internal/activities", "internal/agentrun", "internal/workerplugin"}},
		{"internal/activities", "internal/threadstate", []string{"internal/agentrun", "internal/workerplugin", "internal/runclient"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			got := imports(tc.pkg)
			assert.Contains(t, got, mod+tc.reads)
			for _, r := range tc.refuses {
				assert.NotContains(t, got, mod+r, "%s imports %s", tc.pkg, r)
			}
		})
	}
	for _, imp := range imports("internal/protocol") {
		assert.False(t, strings.HasPrefix(imp, mod), "protocol, the names on the wire, imports %s", imp)
	}
}
