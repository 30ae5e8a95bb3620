package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/mcp"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// before runs f, then answers with next: a script step that changes the
// world between two model turns (the test's witness).
func before(f func(), next func(w http.ResponseWriter)) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { f(); next(w) }
}

// mcpWorld is the real npm filesystem and memory servers, trusted, on a
// worker with an OpenAI-compatible model.
type mcpWorld struct {
	dir, memFile string
	set          *mcp.Set
	c            client.Client
	tq           string
	fsScript     string
}

const mcpSecret = "sk-mcp-env-secret-93817"

func newMCPWorld(t *testing.T, f *fakeOpenAI, approve bool) *mcpWorld {
	node, fsScript := mcpServer(t, "server-filesystem")
	_, memScript := mcpServer(t, "server-memory")
	w := &mcpWorld{dir: t.TempDir(), fsScript: fsScript}
	w.memFile = filepath.Join(t.TempDir(), "memory.jsonl")
	set, err := mcp.Open(context.Background(), []mcp.Server{
		{Name: "fs", Command: []string{node, fsScript, w.dir}, Env: map[string]string{"TULIP_TEST_TOKEN": mcpSecret},
			Trust: true, ApproveDestructive: approve},
		{Name: "memory", Command: []string{node, memScript}, Env: map[string]string{"MEMORY_FILE_PATH": w.memFile}, Trust: true},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = set.Close() })
	w.set = set
	w.c = dial(t, server.Address())
	w.tq = taskQueue(t.Name())
	m, err := openaimodel.New(openaimodel.Options{BaseURL: f.URL + "/v1", Model: "gpt-test"})
	require.NoError(t, err)
	startWorker(t, w.c, w.tq, workerplugin.Options{Toolsets: workerplugin.PublicToolsets(set.Toolsets()), Models: map[string]activities.Model{"gpt": activities.PublicModel(m)}})
	return w
}

func (w *mcpWorld) path(name string) string { return filepath.Join(w.dir, name) }

func (w *mcpWorld) read(t *testing.T, name string) string {
	b, err := os.ReadFile(w.path(name))
	require.NoError(t, err)
	return string(b)
}

func (w *mcpWorld) write(t *testing.T, name, text string) {
	require.NoError(t, os.WriteFile(w.path(name), []byte(text), 0o644))
}

// killServer SIGKILLs the filesystem server's node process (a child of this
// test process): the next call must start it again.
func (w *mcpWorld) killServer(t *testing.T) {
	entries, _ := os.ReadDir("/proc")
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte(w.fsScript)) && bytes.Contains(cmd, []byte(w.dir)) {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			killed++
		}
	}
	require.Equal(t, 1, killed, "the filesystem server's process")
}

func outcomes(lines []agentrun.TraceLine) map[string]agentrun.Outcome {
	out := map[string]agentrun.Outcome{}
	for _, l := range lines {
		out[l.CallID] = l.Outcome
	}
	return out
}

// MCP tools on Temporal, against the real npm filesystem and memory
// servers, trusted: a repeated idempotent call (write_file, delete_entities)
// is served and its effect not redone, a repeated non-idempotent one
// (edit_file) runs again, each proved by what the servers did (files on
// disk, the memory graph's file) after the test changed them between
// turns. Killing the stdio server mid-run costs a reconnect, not the run.
// Every history replays on a worker with no MCP server at all (the tool
// list is in the history), and no server secret enters it.
func TestMCPToolsOnTemporal(t *testing.T) {
	var w *mcpWorld
	writeA := fmt.Sprintf(`{"path": %q, "content": "one"}`, "PLACEHOLDER_A")
	editB := `{"path": "PLACEHOLDER_B", "edits": [{"oldText": "x", "newText": "y"}]}`
	entity := `{"entities": [{"name": "E", "entityType": "thing", "observations": ["seen"]}]}`
	deleteE := `{"entityNames": ["E"]}`
	args := func(s string) string {
		s = strings.ReplaceAll(s, "PLACEHOLDER_A", w.path("a.txt"))
		return strings.ReplaceAll(s, "PLACEHOLDER_B", w.path("b.txt"))
	}
	// Argument text is fixed when the script is built, after w exists.
	var f *fakeOpenAI
	f = newFakeOpenAI(t,
		func(rw http.ResponseWriter) { toolCalls([3]string{"w1", "write_file", args(writeA)})(rw) },
		before(func() {
			w.write(t, "a.txt", "tampered") // a served write_file leaves this
			w.write(t, "b.txt", "x")
		}, func(rw http.ResponseWriter) {
			toolCalls([3]string{"w2", "write_file", args(writeA)}, [3]string{"e1", "edit_file", args(editB)})(rw)
		}),
		before(func() {
			assert.Equal(t, "y", w.read(t, "b.txt"), "the first edit ran")
			w.write(t, "b.txt", "x") // a second edit that runs changes it again
			w.killServer(t)
		}, func(rw http.ResponseWriter) {
			toolCalls([3]string{"e2", "edit_file", args(editB)}, [3]string{"m1", "create_entities", entity})(rw)
		}),
		toolCalls([3]string{"d1", "delete_entities", deleteE}),
		before(func() {
			// The entity comes back behind the run's back: a served
			// delete leaves it.
			require.NoError(t, os.WriteFile(w.memFile, []byte(`{"type":"entity","name":"E","entityType":"thing","observations":[]}`+"\n"), 0o644))
		}, func(rw http.ResponseWriter) { toolCalls([3]string{"d2", "delete_entities", deleteE})(rw) }),
		answer("done"),
	)
	w = newMCPWorld(t, f, false)
	h, res, err := runclient.Run(ctxT(t), w.c, runclient.RunOptions{TaskQueue: w.tq, Model: "gpt", Message: "work"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, map[string]agentrun.Outcome{
		"w1": agentrun.OutcomeExecuted, "w2": agentrun.OutcomeCached, "e1": agentrun.OutcomeExecuted,
		"e2": agentrun.OutcomeExecuted, "m1": agentrun.OutcomeExecuted, "d1": agentrun.OutcomeExecuted, "d2": agentrun.OutcomeCached,
	}, outcomes(res.Trace))
	assert.Equal(t, "tampered", w.read(t, "a.txt"), "the repeated write_file was served: the file was not written again")
	assert.Equal(t, "y", w.read(t, "b.txt"), "the repeated edit_file ran again (after the server was killed)")
	mem, err := os.ReadFile(w.memFile)
	require.NoError(t, err)
	assert.Contains(t, string(mem), `"name":"E"`, "the repeated delete_entities was served: the entity stays")
	for _, l := range res.Trace {
		assert.Nil(t, l.Error, "%s: %v", l.CallID, l.Error)
	}

	// The model saw the servers' tools; every history replays with no MCP
	// server configured; no server secret is in it.
	require.NotEmpty(t, f.requests())
	assert.Contains(t, mustJSON(f.requests()[0]["tools"]), "write_file")
	file := filepath.Join(t.TempDir(), "h.json")
	writeHistory(t, w.c, h, file)
	assert.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{}, workerplugin.ReplayOptions{}, file))
	text := payloadText(t, history(t, w.c, h.WorkflowID, h.RunID))
	assert.Contains(t, text, "write_file", "the payloads were decoded")
	assert.NotContains(t, text, mcpSecret)
}

// With approve_destructive, a destructive MCP tool waits for a person: the
// run is interrupted before write_file runs (no file yet), and after a
// resume that performs the held call it runs once.
func TestMCPDestructiveCallWaitsForApproval(t *testing.T) {
	var w *mcpWorld
	f := newFakeOpenAI(t,
		func(rw http.ResponseWriter) {
			toolCalls([3]string{"w1", "write_file", fmt.Sprintf(`{"path": %q, "content": "approved"}`, w.path("c.txt"))})(rw)
		},
		answer("done"),
	)
	w = newMCPWorld(t, f, true)
	h, res, err := runclient.Run(ctxT(t), w.c, runclient.RunOptions{TaskQueue: w.tq, Model: "gpt", Message: "write"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusInterrupted, res.Status)
	require.NotNil(t, res.Interrupt)
	assert.Equal(t, agentrun.ApprovalHook, res.Interrupt.Hook)
	assert.Contains(t, res.Interrupt.Reason, "write_file")
	_, err = os.Stat(w.path("c.txt"))
	assert.True(t, os.IsNotExist(err), "nothing written before the approval")

	_, err = runclient.Resume(ctxT(t), w.c, h.WorkflowID, agentrun.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true})
	require.NoError(t, err)
	res, err = runclient.Await(ctxT(t), w.c, h, res.Interrupt.ID)
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, "approved", w.read(t, "c.txt"))
	assert.Equal(t, agentrun.OutcomeDangling, outcomes(res.Trace)["w1"], "it ran once, as the held call")
}

// The CLI as a user meets it: 'tulip chat' pointed at the real filesystem
// server, trusted. A repeated write_file is served (the file keeps what the
// test wrote over it between turns) while a repeated edit_file runs every
// time (it edits the file again after the test reset it).
func TestCLIChatWithMCP(t *testing.T) {
	node, script := mcpServer(t, "server-filesystem")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	write := fmt.Sprintf(`{"path": %q, "content": "one"}`, a)
	edit := fmt.Sprintf(`{"path": %q, "edits": [{"oldText": "x", "newText": "y"}]}`, b)
	f := newFakeOpenAI(t,
		before(func() { require.NoError(t, os.WriteFile(b, []byte("x"), 0o644)) },
			toolCalls([3]string{"w1", "write_file", write}, [3]string{"e1", "edit_file", edit})),
		before(func() {
			require.NoError(t, os.WriteFile(a, []byte("tampered"), 0o644))
			require.NoError(t, os.WriteFile(b, []byte("x"), 0o644))
		}, toolCalls([3]string{"w2", "write_file", write}, [3]string{"e2", "edit_file", edit})),
		answer("Done."),
	)
	stdout, stderr, code := runCLI(t, "chat", "--base-url", f.URL+"/v1", "--model", "m", "--json", "--address", server.Address(),
		"--mcp", fmt.Sprintf("fs=%s %s %s", node, script, dir), "--mcp-trust", "fs", "write and edit")
	require.Equal(t, 0, code, stderr)
	lines, _ := parseTrace(t, stdout)
	got := map[string]string{}
	for _, l := range lines {
		got[l.CallID] = string(l.Outcome)
	}
	assert.Equal(t, map[string]string{"w1": "executed", "e1": "executed", "w2": "cached", "e2": "executed"}, got)
	text, err := os.ReadFile(a)
	require.NoError(t, err)
	assert.Equal(t, "tampered", string(text), "the repeated write_file was served")
	text, err = os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, "y", string(text), "the repeated edit_file ran again")
}
