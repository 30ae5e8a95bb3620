package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// docBlock is one fenced code block of a Markdown file, with the label of
// the `<!-- example: KIND key=value ... -->` comment on the line before it.
type docBlock struct {
	file  string
	line  int // the fence's line
	lang  string
	kind  string // "" when unlabelled
	attrs map[string]string
	body  string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.kind) }

var (
	labelRe = regexp.MustCompile(`^<!-- example: ([\w-]+)((?:\s+\w+=(?:"[^"]*"|'[^']*'|\S+))*)\s*-->$`)
	attrRe  = regexp.MustCompile(`(\w+)=(?:"([^"]*)"|'([^']*)'|(\S+))`)
	printRe = regexp.MustCompile(`//\s*prints:\s*(.*?)\s*$`)
)

// docBlocks reads the fenced blocks of a Markdown file, in order.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []docBlock
	var cur *docBlock
	var body strings.Builder
	prev := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{file: filepath.Base(path), line: n, lang: strings.TrimPrefix(line, "```"), attrs: map[string]string{}}
			if m := labelRe.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.kind = m[1]
				for _, a := range attrRe.FindAllStringSubmatch(m[2], -1) {
					cur.attrs[a[1]] = a[2] + a[3] + a[4]
				}
			} else if strings.Contains(prev, "<!-- example") {
				t.Errorf("%s:%d: a malformed example label: %s", path, n-1, prev)
			}
			body.Reset()
		case cur != nil && line == "```":
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		}
		prev = line
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: a block is not closed", path)
	return out
}

// docRunner runs the examples of the docs against `tulip dev`, through the
// validating proxy.
type docRunner struct {
	t       *testing.T
	c       client.Client
	proxy   *wireProxy
	node    string
	project string // the TypeScript project the ts examples run in
	built   map[string]string
}

// The build and install steps of docs/protocol.md's clients/ts section,
// as the test performs them.
const (
	docBuildClient   = "cd clients/ts && npm ci && npm run build"
	docInstallClient = "npm install @temporalio/client@1.24.0 --install-links /path/to/tulip/clients/ts"
)

// TestProtocolDocExamples runs every example of docs/protocol.md (and the
// labelled ones of the README and of the other docs/*.md pages), extracted
// from the files, against `tulip
// dev` (in process) through a proxy that validates every payload the
// clients receive against docs/schemas. Every fenced block of
// docs/protocol.md must carry a label naming what it is (`<!-- example:
// KIND ... -->`): JSON run inputs are started (and must complete, be
// interrupted, or fail with the type and message the label gives; the
// schema must accept exactly the inputs the run accepts), resume and hooks
// inputs are sent as updates, page requests as tulip.page queries, the
// Temporal CLI command is run (or, without the temporal binary, its flags
// are started through the Go client), and TypeScript examples are
// type-checked with tsc --strict and run with node in a project where
// clients/ts is installed as the docs say: each line they print must be
// their `// prints:` comment.
func TestProtocolDocExamples(t *testing.T) {
	node, clientDir := tsClient(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)

	blocks := docBlocks(t, filepath.Join(root, "docs", "protocol.md"))
	for _, b := range blocks {
		if b.kind == "" {
			t.Errorf("%s: every block of docs/protocol.md is labelled with what it is (<!-- example: KIND -->) and run", b)
		}
	}
	// The other pages (the README and every docs/*.md but protocol.md)
	// contribute only their labelled blocks.
	others, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	slices.Sort(others)
	others = slices.DeleteFunc(others, func(p string) bool { return filepath.Base(p) == "protocol.md" })
	for _, path := range append([]string{filepath.Join(root, "README.md")}, others...) {
		for _, b := range docBlocks(t, path) {
			if b.kind != "" {
				blocks = append(blocks, b)
			}
		}
	}
	kinds := map[string]int{}
	for _, b := range blocks {
		kinds[b.kind]++
	}
	for _, k := range []string{"run-input", "resume-input", "hooks-input", "page-request", "ts", "temporal-cli", "build-client", "install-client"} {
		require.Positive(t, kinds[k], "no %s example", k)
	}

	addr, _, _ := devUp(t, "--port", "0", "--headless")
	proxy := startWireProxy(t, addr)
	r := &docRunner{t: t, c: dial(t, proxy.addr), proxy: proxy, node: node, built: map[string]string{}}
	r.setupProject(root, clientDir, blocks)

	start := time.Now()
	for _, b := range blocks {
		ok := t.Run(fmt.Sprintf("%s:%d:%s", b.file, b.line, b.kind), func(t *testing.T) { r.run(t, b) })
		if !ok {
			t.Logf("%s failed; the examples after it may fail for its sake", b)
		}
	}
	t.Logf("%d examples ran in %s", len(blocks), time.Since(start).Round(time.Millisecond))

	assert.Empty(t, proxy.Violations(), "payloads that do not validate against docs/schemas")
	seen := proxy.Seen()
	for _, kind := range []string{
		"result", "failure tulip.BadInput", "memo tulip_interrupt",
		"query tulip.state", "query tulip.log", "query tulip.thread", "query tulip.page",
		"update tulip.resume", "update tulip.resume refused tulip.StaleInterrupt", "update tulip.hooks",
		"update " + streams.PollUpdate, "stream item tulip.calls", "stream item tulip.text",
	} {
		assert.Positive(t, seen[kind], "no example received a %s (checked: %v)", kind, slices.Sorted(mapKeysOf(seen)))
	}
	// The validator is real: it refuses an unknown field and a wrong type.
	assert.NoError(t, proxy.schemas.validate("run-result", []byte(`{"status":"completed","agent":"a","turns":1,"trace":[]}`)))
	assert.Error(t, proxy.schemas.validate("run-result", []byte(`{"status":"completed","agent":"a","turns":1,"trace":[],"traces":[]}`)))
	assert.Error(t, proxy.schemas.validate("page", []byte(`{"from":0,"next":"1","total":1}`)))
}

// setupProject makes the project the TypeScript examples run in: clients/ts
// installed as its install step says, the examples compiled by tsc
// --strict (with clients/ts's typescript and node types).
func (r *docRunner) setupProject(root, clientDir string, blocks []docBlock) {
	t := r.t
	r.project = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(r.project, "package.json"), []byte(`{"private": true, "type": "module"}`+"\n"), 0o644))
	for _, b := range blocks {
		if b.kind != "install-client" {
			continue
		}
		require.Equal(t, docInstallClient, strings.TrimSpace(b.body), "%s", b)
		cmd := exec.CommandContext(ctxT(t), "bash", "-c", strings.ReplaceAll(strings.TrimSpace(b.body), "/path/to/tulip", root)+
			" --no-audit --no-fund --prefer-offline --loglevel=error")
		cmd.Dir = r.project
		if out, err := cmd.CombinedOutput(); err != nil {
			tsMissing(t, "installing clients/ts in a project: "+strings.TrimSpace(string(out)))
		}
	}
	var files []string
	for _, b := range blocks {
		if b.kind != "ts" {
			continue
		}
		name := fmt.Sprintf("%s-%d", strings.TrimSuffix(b.file, ".md"), b.line)
		require.NoError(t, os.WriteFile(filepath.Join(r.project, name+".ts"), []byte(b.body), 0o644))
		files = append(files, name+".ts")
		r.built[b.String()] = filepath.Join(r.project, name+".js")
	}
	tsconfig, err := json.Marshal(map[string]any{
		"compilerOptions": map[string]any{
			"target": "es2022", "module": "nodenext", "moduleResolution": "nodenext", "strict": true,
			"skipLibCheck": true, "types": []string{"node"}, "typeRoots": []string{filepath.Join(clientDir, "node_modules", "@types")},
		},
		"files": files,
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(r.project, "tsconfig.json"), tsconfig, 0o644))
	cmd := exec.CommandContext(ctxT(t), r.node, filepath.Join(clientDir, "node_modules", "typescript", "bin", "tsc"), "-p", ".")
	cmd.Dir = r.project
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the TypeScript examples do not compile (file NAME-LINE.ts is the block at LINE):\n%s", out)
}

func (r *docRunner) run(t *testing.T, b docBlock) {
	ctx := ctxT(t)
	switch b.kind {
	case "run-input":
		r.runInput(ctx, t, b)
	case "resume-input":
		r.update(ctx, t, b, agentrun.UpdateResume, "resume-input")
	case "hooks-input":
		r.update(ctx, t, b, agentrun.UpdateHooks, "hooks-input")
	case "page-request":
		r.pageRequest(ctx, t, b)
	case "temporal-cli":
		r.temporalCLI(ctx, t, b)
	case "ts":
		r.ts(ctx, t, b)
	case "build-client":
		// tsClient did it: npm ci (when clients/ts's packages are not
		// installed yet) and npm run build.
		assert.Equal(t, docBuildClient, strings.TrimSpace(b.body))
	case "install-client":
		// Done by setupProject, before the examples that need it.
	case "serve-curl":
		// Run by TestServeDocExamples against 'tulip serve'.
	default:
		t.Fatalf("%s: unknown example kind %q: the test does not know how to run it", b, b.kind)
	}
}

// jsonBlock parses a JSON example and checks it against its schema.
func (r *docRunner) jsonBlock(t *testing.T, b docBlock, schema string, valid bool) map[string]any {
	require.Equal(t, "json", b.lang, "%s", b)
	var in map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.body), &in), "%s is not JSON", b)
	err := r.proxy.schemas.validate(schema, []byte(b.body))
	if valid {
		require.NoError(t, err, "%s does not validate against %s.json", b, schema)
	} else {
		require.Error(t, err, "%s: the run refuses it, but %s.json accepts it", b, schema)
	}
	return in
}

func (r *docRunner) runInput(ctx context.Context, t *testing.T, b docBlock) {
	expect := b.attrs["expect"]
	require.NotEmpty(t, expect, "%s: say what the run does (expect=completed, interrupted or a failure type)", b)
	in := r.jsonBlock(t, b, "run-input", expect == "completed" || expect == "interrupted")
	id := b.attrs["workflow"]
	if id == "" {
		id, _ = in["thread_id"].(string)
	}
	require.NotEmpty(t, id, "%s: name the workflow (a thread_id, or workflow=ID)", b)
	run, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: cli.DevTaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, agentrun.WorkflowName, json.RawMessage(b.body))
	require.NoError(t, err)
	switch expect {
	case "completed":
		var res agentrun.RunResult
		require.NoError(t, run.Get(ctx, &res))
		assert.Equal(t, agentrun.StatusCompleted, res.Status)
		checkTrace(t, b, &res)
	case "interrupted":
		id := r.awaitInterrupt(ctx, t, id)
		v, err := r.c.QueryWorkflow(ctx, run.GetID(), "", agentrun.QueryState)
		require.NoError(t, err)
		var st agentrun.RunResult
		require.NoError(t, v.Get(&st))
		assert.Equal(t, agentrun.StatusInterrupted, st.Status)
		require.NotNil(t, st.Interrupt)
		assert.Equal(t, id, st.Interrupt.ID)
	default:
		err := run.Get(ctx, nil)
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app, "%s: the run did not fail", b)
		assert.Equal(t, expect, app.Type())
		if msg, ok := b.attrs["message"]; ok {
			assert.Equal(t, msg, app.Message())
		}
	}
}

// awaitInterrupt waits for the tulip_interrupt memo of a workflow's run.
func (r *docRunner) awaitInterrupt(ctx context.Context, t *testing.T, workflowID string) string {
	for {
		desc, err := r.c.DescribeWorkflowExecution(ctx, workflowID, "")
		require.NoError(t, err)
		info := desc.GetWorkflowExecutionInfo()
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, info.GetStatus(), "the run closed without an interrupt")
		if p := info.GetMemo().GetFields()[agentrun.MemoInterrupt]; p != nil {
			var id string
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &id))
			if id != "" {
				return id
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no interrupt")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *docRunner) update(ctx context.Context, t *testing.T, b docBlock, name, schema string) {
	r.jsonBlock(t, b, schema, true)
	id := b.attrs["workflow"]
	require.NotEmpty(t, id, "%s: name the workflow to send it to (workflow=ID)", b)
	h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name,
		Args: []any{json.RawMessage(b.body)}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	if name == agentrun.UpdateResume {
		var out agentrun.ResumeResult
		require.NoError(t, h.Get(ctx, &out))
		assert.False(t, out.Duplicate, "the resume took effect")
	} else {
		require.NoError(t, h.Get(ctx, nil))
	}
	if b.attrs["expect"] == "completed" {
		var res agentrun.RunResult
		require.NoError(t, r.c.GetWorkflow(ctx, id, "").Get(ctx, &res))
		assert.Equal(t, agentrun.StatusCompleted, res.Status)
		checkTrace(t, b, &res)
	}
}

// checkTrace compares a run's trace with the label's trace="TOOL:OUTCOME ...".
func checkTrace(t *testing.T, b docBlock, res *agentrun.RunResult) {
	want, ok := b.attrs["trace"]
	if !ok {
		return
	}
	var got []string
	for _, l := range res.Trace {
		got = append(got, l.Tool+":"+string(l.Outcome))
	}
	assert.Equal(t, strings.Fields(want), got, "%s: the run's trace", b)
}

func (r *docRunner) pageRequest(ctx context.Context, t *testing.T, b docBlock) {
	r.jsonBlock(t, b, "page-request", true)
	id := b.attrs["workflow"]
	require.NotEmpty(t, id, "%s: name the workflow to ask (workflow=ID)", b)
	v, err := r.c.QueryWorkflow(ctx, id, "", agentrun.QueryPage, json.RawMessage(b.body))
	require.NoError(t, err)
	var p agentrun.Page
	require.NoError(t, v.Get(&p))
	assert.Empty(t, p.Holder)
	assert.Greater(t, p.Next, p.From, "a page with items")
	assert.Len(t, slices.Concat(anySlice(p.Messages), anySlice(p.Records), anySlice(p.Trace)), p.Next-p.From)
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// temporalCLI runs the Temporal CLI command of the docs; without the
// temporal binary it starts the same workflow, from the same flags,
// through the Go client.
func (r *docRunner) temporalCLI(ctx context.Context, t *testing.T, b docBlock) {
	args, err := shellWords(strings.ReplaceAll(b.body, "\\\n", " "))
	require.NoError(t, err, "%s", b)
	require.GreaterOrEqual(t, len(args), 3)
	require.Equal(t, []string{"temporal", "workflow", "start"}, args[:3], "%s", b)
	flags := map[string]string{}
	for i := 3; i < len(args); i += 2 {
		require.True(t, strings.HasPrefix(args[i], "--") && i+1 < len(args), "%s: flag %q", b, args[i])
		flags[args[i]] = args[i+1]
	}
	assert.Equal(t, agentrun.WorkflowName, flags["--type"])
	assert.Equal(t, cli.DevTaskQueue, flags["--task-queue"])
	require.NoError(t, r.proxy.schemas.validate("run-input", []byte(flags["--input"])), "%s: --input", b)
	if bin, err := exec.LookPath("temporal"); err == nil {
		cmd := exec.CommandContext(ctx, bin, append(args[1:], "--address", r.proxy.addr)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	} else {
		t.Logf("no temporal binary: starting %s from its flags through the Go client", b)
		_, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: flags["--workflow-id"], TaskQueue: flags["--task-queue"],
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE},
			flags["--type"], json.RawMessage(flags["--input"]))
		require.NoError(t, err)
	}
	var res agentrun.RunResult
	require.NoError(t, r.c.GetWorkflow(ctx, flags["--workflow-id"], "").Get(ctx, &res))
	assert.Equal(t, b.attrs["expect"], res.Status)
	checkTrace(t, b, &res)
}

// shellWords splits a command line as sh would (spaces, single and double
// quotes; no expansions).
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, errors.New("unclosed quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

func (r *docRunner) ts(ctx context.Context, t *testing.T, b docBlock) {
	require.Equal(t, "ts", b.lang)
	var want []string
	for _, line := range strings.Split(b.body, "\n") {
		if m := printRe.FindStringSubmatch(line); m != nil {
			want = append(want, m[1])
		}
	}
	require.NotEmpty(t, want, "%s: say what it prints (// prints: ...)", b)
	cmd := exec.CommandContext(ctx, r.node, r.built[b.String()])
	cmd.Dir = r.project
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+r.proxy.addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s:\n%s%s", b, out, stderr.String())
	assert.Equal(t, want, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"), "%s: what it prints (stderr: %s)", b, stderr.String())
}
