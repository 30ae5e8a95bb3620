package tests

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// portedBase is the commit whose API testdata/ported/old is written
// against: the last one before v1 (docs/migrating.md's tables list its
// identifiers).
const portedBase = "5dc7792"

// docs/migrating.md is complete for a real service: a small app that uses
// every package of the pre-v1 API (testdata/ported/old: Go tools, a
// scripted model, hooks, a thread store, an OpenAI model, encryption and
// a blob store in the client options, the plugin on a worker, a client
// that starts, awaits, resumes and reads a run, and a test in the SDK's
// test environment) compiles against that API, and the same app ported by
// the doc (testdata/ported/new) compiles against this tree. Each is built
// as a user's module of its own (GOWORK=off, a replace to the tree) in a
// temporary directory; the repository is not written. The control: the
// old app does not build against this tree, so the two builds compile
// against different APIs.
func TestPortedApp(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)

	t.Run("new", func(t *testing.T) {
		out, err := vetPorted(t, "testdata/ported/new", root, false)
		require.NoError(t, err, "the ported app does not build against this tree:\n%s", out)
	})

	t.Run("old", func(t *testing.T) {
		if err := exec.Command("git", "-C", root, "cat-file", "-e", portedBase+"^{commit}").Run(); err != nil {
			t.Skipf("commit %s (the pre-v1 API) is not in this clone's history (a shallow clone?)", portedBase)
		}
		tree := t.TempDir()
		extractCommit(t, root, portedBase, tree)
		out, err := vetPorted(t, "testdata/ported/old", tree, false)
		require.NoError(t, err, "the old app does not build against %s:\n%s", portedBase, out)

		// The control: the old API is gone from this tree (no module
		// lookup: GOPROXY=off keeps the failure the tree's own).
		out, err = vetPorted(t, "testdata/ported/old", root, true)
		require.Error(t, err, "the old app built against this tree:\n%s", out)
		assert.Contains(t, out, "does not contain package github.com/tulip-temporal/tulip/activities", "%s", out)
		assert.Contains(t, out, "does not contain package github.com/tulip-temporal/tulip/workflow", "%s", out)
	})
}

// vetPorted copies the app in dir into a module of its own in a temporary
// directory, its tulip replaced by the tree at tree (whose go.sum it takes),
// and runs go vet there. It returns go's output.
func vetPorted(t *testing.T, dir, tree string, offline bool) (string, error) {
	t.Helper()
	mod := t.TempDir()
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	copied := 0
	for _, f := range files {
		if !f.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(mod, f.Name()), data, 0o644))
		copied++
	}
	require.Positive(t, copied, "sanity: %s holds the app", dir)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.True(t, errors.Is(err, os.ErrNotExist), "%s must hold no go.mod: the test writes one", dir)

	treeMod, err := os.ReadFile(filepath.Join(tree, "go.mod"))
	require.NoError(t, err)
	sdk := regexp.MustCompile(`(?m)^\s*go\.temporal\.io/sdk (v\S+)`).FindSubmatch(treeMod)
	require.NotNil(t, sdk, "the tree's go.mod requires the Temporal SDK")
	goMod := fmt.Sprintf("module ported\n\ngo 1.26.8\n\nrequire (\n\tgithub.com/tulip-temporal/tulip v0.0.0\n\tgo.temporal.io/sdk %s\n)\n\nreplace github.com/tulip-temporal/tulip => %s\n", sdk[1], tree)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte(goMod), 0o644))
	sum, err := os.ReadFile(filepath.Join(tree, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644))

	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off")
	if offline {
		cmd.Env = append(cmd.Env, "GOPROXY=off")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// extractCommit writes the files of commit (git archive) into dir.
func extractCommit(t *testing.T, repo, commit, dir string) {
	t.Helper()
	var stderr bytes.Buffer
	archive := exec.Command("git", "-C", repo, "archive", "--format=tar", commit)
	archive.Stderr = &stderr
	data, err := archive.Output()
	require.NoError(t, err, "git archive %s: %s", commit, stderr.String())
	r := tar.NewReader(bytes.NewReader(data))
	files := 0
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			continue // directories are made below; git archive's global header, links
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		body, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, body, 0o644))
		files++
	}
	require.Positive(t, files, "sanity: %s has files", commit)
	_, err = os.Stat(filepath.Join(dir, "activities"))
	require.NoError(t, err, "sanity: %s has the pre-v1 packages", commit)
}
