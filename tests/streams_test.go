package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	wf "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/streams"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// slowModel is a loopback OpenAI-compatible endpoint that streams its
// answers slowly (server-sent events, one piece every gap). Its answer
// depends on the turn (the assistant messages in the request), not on the
// request count, so a retried model call gets the same answer: turns 1 to
// tools-1 say a few words and call report_case; the last answers in pieces.
type slowModel struct {
	*httptest.Server
	tool    string // the tool it calls (zero: report_case)
	tools   int
	gap     time.Duration
	started chan int // the turn of each stream, once its first piece is out
	streams atomic.Int64
}

func newSlowModel(t *testing.T, tools int, gap time.Duration) *slowModel {
	m := &slowModel{tools: tools, gap: gap, started: make(chan int, 64)}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

// pieces is what turn k streams.
func (m *slowModel) pieces(turn int) []string {
	if turn < m.tools {
		return []string{"Checking ", fmt.Sprintf("case %d", turn), "… "}
	}
	return []string{"All ", "cases ", "are ", "reported, ", "and ", "nothing ", "ran ", "twice."}
}

func (m *slowModel) text(turn int) string { return strings.Join(m.pieces(turn), "") }

func (m *slowModel) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream {
		http.Error(w, "this endpoint streams only", http.StatusBadRequest)
		return
	}
	turn := 1
	for _, msg := range body.Messages {
		if msg.Role == "assistant" {
			turn++
		}
	}
	m.streams.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(chunk any) bool {
		b, _ := json.Marshal(chunk)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	for i, p := range m.pieces(turn) {
		if !send(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"content": p}}}}) {
			return
		}
		if i == 0 {
			select {
			case m.started <- turn:
			default:
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(m.gap):
		}
	}
	if turn < m.tools {
		name, args := "report_case", fmt.Sprintf(`{"case": "case-%d"}`, turn)
		if m.tool != "" {
			name, args = m.tool, fmt.Sprintf(`{"order_id": "ord-%d"}`, turn)
		}
		send(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": fmt.Sprintf("c%d", turn), "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}}}}})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// reportCase is the tool the slow model calls.
func reportCase() *activities.Tool {
	return activities.MustTool(protocol.ToolSpec{Name: "report_case", Idempotent: true},
		func(ctx context.Context, a struct {
			Case string `json:"case"`
		}) (map[string]string, error) {
			return map[string]string{"reported": a.Case}, nil
		})
}

// received is what a subscriber got, in order.
type received struct {
	mu    sync.Mutex
	items []streams.Item
	at    []time.Time
}

func (r *received) add(it streams.Item) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items, r.at = append(r.items, it), append(r.at, time.Now())
	return nil
}

func (r *received) snapshot() ([]streams.Item, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]streams.Item(nil), r.items...), append([]time.Time(nil), r.at...)
}

// A run's stream, read with the Go subscriber: every decision on
// tulip.calls in trace order, the answer's pieces on tulip.text while the
// model still streams (before the run closes), offsets contiguous across
// continue-as-new, and the subscriber ends when the chain closes. A run
// nobody subscribes to has exactly the history of a run with the stream
// off.
func TestStreamGoSubscriber(t *testing.T) {
	c, model, h := startStreamingRun(t, 5, 80*time.Millisecond)
	var got received
	subErr := make(chan error, 1)
	go func() {
		subErr <- streams.Subscribe(ctxT(t), c, h.WorkflowID, streams.SubscribeOptions{RunID: h.RunID}, got.add)
	}()
	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	require.Equal(t, 2, res.ContinuedAsNew)
	select {
	case err := <-subErr:
		require.NoError(t, err, "the subscriber ends with the chain")
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber did not end when the run closed")
	}
	items, at := got.snapshot()
	desc, err := c.DescribeWorkflowExecution(ctxT(t), h.WorkflowID, "")
	require.NoError(t, err)
	closed := desc.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
	trace, err := runclient.Trace(ctxT(t), c, h, res)
	require.NoError(t, err)
	checkStream(t, items, trace, model, res.Answer)
	var early int
	runs := map[string]bool{}
	for i, it := range items {
		runs[it.RunID] = true
		if it.Topic == protocol.TopicText && at[i].Before(closed) {
			early++
		}
	}
	assert.Len(t, runs, 3, "items from each run of the chain")
	assert.GreaterOrEqual(t, early, 10, "pieces arrive while the run goes on")

	// The history cost of a stream nobody reads: none.
	plain := func(stream *agentrun.StreamOptions) int {
		tq := taskQueue(t.Name() + fmt.Sprint(stream == nil))
		startWorker(t, c, tq, workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks(), Models: demo.RefundStory().Models(tq)})
		h, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: fmt.Sprintf("scenario:%s:run-1", tq), Message: "go", Stream: stream})
		require.NoError(t, err)
		return len(history(t, c, h.WorkflowID, h.RunID).GetEvents())
	}
	assert.Equal(t, plain(&agentrun.StreamOptions{Off: true}), plain(nil), "an unread stream adds no event")
}

// startStreamingRun starts a run on a worker of its own whose model (a
// slow OpenAI-compatible endpoint) calls report_case in each of its first
// tools turns and streams each answer in pieces gap apart; the run continues
// as new every 2 turns and streams its text in 50 ms pieces.
func startStreamingRun(t *testing.T, tools int, gap time.Duration) (client.Client, *slowModel, runclient.Handle) {
	t.Helper()
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	model := newSlowModel(t, tools, gap)
	oai, err := openaimodel.New(openaimodel.Options{BaseURL: model.URL + "/v1", Model: "fake"})
	require.NoError(t, err)
	startWorker(t, c, tq, workerplugin.Options{Tools: []*activities.Tool{reportCase()}, Models: map[string]activities.Model{"stream": activities.PublicModel(oai)}})
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "stream", Message: "report the cases",
		ContinueAfterTurns: 2, Stream: &agentrun.StreamOptions{Text: true, BatchMillis: 50}})
	require.NoError(t, err)
	return c, model, h
}

// checkStream checks a subscriber's items against the run's trace and
// answers: offsets from 0 with no gap or repeat, one calls item per trace
// line in order, and for each turn a Done item whose attempt's pieces make
// the turn's text.
func checkStream(t *testing.T, items []streams.Item, trace []agentrun.TraceLine, model *slowModel, answer string) {
	t.Helper()
	var calls []agentrun.CallItem
	pieces := map[[2]int][]string{} // turn, attempt
	seen := map[[3]int]bool{}
	done := map[int]protocol.TextItem{}
	for i, it := range items {
		require.Equal(t, int64(i), it.Offset, "offsets from 0, no gap, no repeat")
		switch it.Topic {
		case protocol.TopicCalls:
			var ci agentrun.CallItem
			require.NoError(t, it.Decode(&ci))
			calls = append(calls, ci)
		case protocol.TopicText:
			var ti protocol.TextItem
			require.NoError(t, it.Decode(&ti))
			if ti.Done {
				_, dup := done[ti.Turn]
				require.False(t, dup, "one Done per turn")
				if ti.Delta == "" {
					require.Equal(t, ti.Seq, len(pieces[[2]int{ti.Turn, ti.Attempt}]), "turn %d: Done comes after its attempt's pieces", ti.Turn)
				}
				done[ti.Turn] = ti
				continue
			}
			_, after := done[ti.Turn]
			require.False(t, after, "turn %d: piece %d of attempt %d after the turn's Done", ti.Turn, ti.Seq, ti.Attempt)
			k := [3]int{ti.Turn, ti.Attempt, ti.Seq}
			require.False(t, seen[k], "piece %v twice", k)
			seen[k] = true
			require.Equal(t, len(pieces[[2]int{ti.Turn, ti.Attempt}]), ti.Seq, "pieces in order")
			pieces[[2]int{ti.Turn, ti.Attempt}] = append(pieces[[2]int{ti.Turn, ti.Attempt}], ti.Delta)
		default:
			t.Fatalf("item on topic %q", it.Topic)
		}
	}
	require.Len(t, calls, len(trace))
	for i, l := range trace {
		assert.Equal(t, l.CallID, calls[i].CallID)
		assert.Equal(t, l.Outcome, calls[i].Outcome)
		assert.Empty(t, calls[i].Arguments, "no arguments unless asked")
	}
	require.Len(t, done, model.tools)
	for turn := 1; turn <= model.tools; turn++ {
		d := done[turn]
		if d.Delta != "" { // the pieces could not all be sent: Done has the text
			assert.Equal(t, model.text(turn), d.Delta, "turn %d", turn)
			continue
		}
		assert.Equal(t, model.text(turn), strings.Join(pieces[[2]int{turn, d.Attempt}], ""), "turn %d: the pieces of attempt %d", turn, d.Attempt)
	}
	assert.Equal(t, model.text(model.tools), answer)
}

// Temporal's official TypeScript Workflow Streams client
// (@temporalio/workflow-streams) subscribes to a tulip run served by a
// worker process, on the embedded server, while a slow OpenAI-compatible
// endpoint streams the answers. The worker is killed with SIGKILL while the
// model streams, and a new one takes over: the subscriber still gets every
// decision and the pieces of every answer, in order, with no offset twice
// and none missing across the two continue-as-new steps, the pieces of the
// answers while the run goes on, and a Done item per turn naming the
// attempt whose pieces make its text. The run's histories then replay with
// the plugin.
func TestStreamTypeScriptClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGKILL of a child process: Linux only")
	}
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed for the TypeScript streams test")
	dir := npmModules(t, "@temporalio/workflow-streams")
	bin := crashWorker(t)
	model := newSlowModel(t, 5, 150*time.Millisecond)
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	worker := func() *exec.Cmd {
		return startWorkerProcess(t, bin, "-address", server.Address(), "-task-queue", tq, "-billing", "http://127.0.0.1:1", "-openai", model.URL+"/v1")
	}
	first := worker()
	defer func() { _ = first.Process.Kill(); _ = first.Wait() }()

	// The subscriber connects first (node takes a while to start), then
	// the run starts, then the subscriber is told its workflow id.
	sub := exec.CommandContext(ctxT(t), node, filepath.Join(dir, "streams.mjs"), server.Address())
	sub.Dir = dir
	var subErr syncBuffer
	sub.Stderr = &subErr
	out, err := sub.StdoutPipe()
	require.NoError(t, err)
	in, err := sub.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, sub.Start())
	outR := bufio.NewReader(out)
	ready, err := outR.ReadString('\n')
	require.NoError(t, err, "the subscriber did not start: %s", subErr.String())
	require.Equal(t, "ready\n", ready)
	h, err := runclient.Start(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "stream", Message: "report the cases",
		ContinueAfterTurns: 2, Stream: &agentrun.StreamOptions{Text: true, BatchMillis: 50}})
	require.NoError(t, err)
	_, err = fmt.Fprintln(in, h.WorkflowID)
	require.NoError(t, err)
	require.NoError(t, in.Close())
	type line struct {
		Topic  string          `json:"topic"`
		Offset int64           `json:"offset"`
		Data   json.RawMessage `json:"data"`
		At     int64           `json:"at"`
		End    bool            `json:"end"`
	}
	lines := make(chan line, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			}
		}
	}()

	// Kill the worker while the model streams turn 3 (in the second run
	// of the chain): the endpoint says when its first piece is out.
	var got []line
	deadline := time.After(2 * time.Minute)
	for killed := false; !killed; {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the subscriber ended early: %s", subErr.String())
			got = append(got, l)
		case turn := <-model.started:
			if turn == 3 {
				require.NoError(t, first.Process.Kill())
				_ = first.Wait()
				killed = true
			}
		case <-deadline:
			t.Fatalf("turn 3 never streamed; got %d items; stderr: %s", len(got), subErr.String())
		}
	}
	second := worker()
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()

	res, err := runclient.Await(ctxT(t), c, h, "")
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	require.Equal(t, 2, res.ContinuedAsNew)
	ended := false
	for !ended {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the subscriber stopped without its end line: %s", subErr.String())
			if l.End {
				ended = true
				break
			}
			got = append(got, l)
		case <-deadline:
			for _, run := range chainRuns(t, c, h.WorkflowID) {
				d, _ := c.DescribeWorkflowExecution(ctxT(t), h.WorkflowID, run)
				i := d.GetWorkflowExecutionInfo()
				t.Logf("run %s: %s %s → %s", run, i.GetStatus(), i.GetStartTime().AsTime().Format(time.RFC3339Nano), i.GetCloseTime().AsTime().Format(time.RFC3339Nano))
			}
			t.Fatalf("the subscriber did not end after the run closed; stderr: %s", clip([]byte(subErr.String())))
		}
	}
	require.NoError(t, sub.Wait(), subErr.String())
	t.Logf("the subscriber's polls:\n%s", clip([]byte(subErr.String())))

	// The same checks as the Go subscriber's, on what TypeScript decoded.
	items := make([]streams.Item, len(got))
	for i, l := range got {
		data, err := streams.Encode(l.Data)
		require.NoError(t, err)
		items[i] = streams.Item{Topic: l.Topic, Data: data, Offset: l.Offset}
	}
	trace, err := runclient.Trace(ctxT(t), c, h, res)
	require.NoError(t, err)
	checkStream(t, items, trace, model, res.Answer)
	desc, err := c.DescribeWorkflowExecution(ctxT(t), h.WorkflowID, "")
	require.NoError(t, err)
	closed := desc.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
	early, retried := 0, false
	for _, l := range got {
		var ti protocol.TextItem
		if l.Topic == protocol.TopicText && json.Unmarshal(l.Data, &ti) == nil {
			if !ti.Done && time.UnixMilli(l.At).Before(closed) {
				early++
			}
			if ti.Done && ti.Turn == 3 && ti.Attempt > 1 {
				retried = true
			}
		}
	}
	assert.GreaterOrEqual(t, early, 10, "pieces arrive while the run goes on")
	assert.True(t, retried, "turn 3's answer is a later attempt's, after the kill")

	// Replay every run of the chain (signals and updates included).
	runs := chainRuns(t, c, h.WorkflowID)
	require.Len(t, runs, 3)
	dirH := t.TempDir()
	var files []string
	for i, run := range runs {
		f := filepath.Join(dirH, fmt.Sprintf("run-%d.json", i))
		writeHistory(t, c, runclient.Handle{WorkflowID: h.WorkflowID, RunID: run}, f)
		files = append(files, f)
	}
	replayModel, err := openaimodel.New(openaimodel.Options{BaseURL: model.URL + "/v1", Model: "fake"})
	require.NoError(t, err)
	require.NoError(t, workerplugin.ReplayHistories(workerplugin.Options{Tools: []*activities.Tool{reportCase()},
		Models: map[string]activities.Model{"stream": activities.PublicModel(replayModel)}}, workerplugin.ReplayOptions{}, files...))
}

// chainRuns lists the runs of a workflow's continue-as-new chain, oldest
// first, from its latest run back.
func chainRuns(t *testing.T, c client.Client, workflowID string) []string {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(ctxT(t), workflowID, "")
	require.NoError(t, err)
	var runs []string
	for runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); runID != ""; {
		runs = append([]string{runID}, runs...)
		runID = history(t, c, workflowID, runID).Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	return runs
}

// timedWriter keeps what is written, with when.
type timedWriter struct {
	mu     sync.Mutex
	chunks []string
	at     []time.Time
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.chunks, w.at = append(w.chunks, string(p)), append(w.at, time.Now())
	return len(p), nil
}

func (w *timedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.chunks, "")
}

// firstAt is when the output first held s.
func (w *timedWriter) firstAt(s string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sb strings.Builder
	for i, c := range w.chunks {
		sb.WriteString(c)
		if strings.Contains(sb.String(), s) {
			return w.at[i], true
		}
	}
	return time.Time{}, false
}

// 'tulip chat' shows the run as it goes: its first call line and the
// model's first words are on stdout while the run is still going, the
// answer streams in pieces, and a summary ends it; with --json the same
// trace lines come as they happen, each call once.
func TestCLIChatLive(t *testing.T) {
	model := newSlowModel(t, 4, 150*time.Millisecond)
	model.tool = "lookup_order"
	var out, errb timedWriter
	code := cli.Main(ctxT(t), []string{"chat", "--base-url", model.URL + "/v1", "--model", "m", "--address", server.Address(),
		"look up my orders"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	text := out.String()
	t.Logf("stdout:\n%s", text)
	wid := regexp.MustCompile(`(?m)^Run 1 \((\S+)\)`).FindStringSubmatch(text)
	if wid == nil { // the summary names no run: find it by the chat's id
		wid = regexp.MustCompile(`tulip-chat-[0-9a-f]+`).FindStringSubmatch(errb.String() + text)
	}
	c := dial(t, server.Address())
	first, ok := out.firstAt("[turn 1] lookup_order")
	require.True(t, ok, "a line per call")
	words, ok := out.firstAt("Checking case 1")
	require.True(t, ok)
	end, ok := out.firstAt("nothing ran twice.")
	require.True(t, ok, "the answer")
	assert.Contains(t, text, "lookup_order  3 of 3 calls", "the summary")
	// The run ended after the first line and words were out: a streamed
	// answer takes 8 pieces of 150 ms.
	assert.Greater(t, end.Sub(first), 1500*time.Millisecond, "the first call line long before the answer")
	assert.True(t, words.Before(first), "the model's words before its call")
	var pieces int
	for _, ch := range out.chunks {
		if strings.Contains("All cases are reported, and nothing ran twice.", strings.TrimSpace(ch)) && strings.TrimSpace(ch) != "" {
			pieces++
		}
	}
	assert.GreaterOrEqual(t, pieces, 4, "the answer comes in pieces")
	_ = c
	_ = wid

	var jout, jerr timedWriter
	code = cli.Main(ctxT(t), []string{"chat", "--base-url", model.URL + "/v1", "--model", "m", "--json", "--address", server.Address(),
		"look up my orders"}, &jout, &jerr)
	require.Equal(t, 0, code, jerr.String())
	lines, sum := parseTrace(t, jout.String())
	require.Len(t, lines, 3, "each call once")
	assert.Equal(t, 3, sum.BodyInvocations["lookup_order"])
	firstJSON, ok := jout.firstAt(`"call_id":"c1"`)
	require.True(t, ok)
	last, _ := jout.firstAt(`"summary"`)
	assert.Greater(t, last.Sub(firstJSON), 1500*time.Millisecond, "lines as they happen")
}

// tulip watch prints a run another client started, live: each call's line
// while the run goes on, the answer's text, and it ends when the run
// closes (across continue-as-new). A closed run is refused in one line.
func TestCLIWatch(t *testing.T) {
	c, model, h := startStreamingRun(t, 4, 150*time.Millisecond)

	var out, errb timedWriter
	code := cli.Main(ctxT(t), []string{"watch", h.WorkflowID, "--address", server.Address()}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	desc, err := c.DescribeWorkflowExecution(ctxT(t), h.WorkflowID, "")
	require.NoError(t, err)
	closed := desc.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
	text := out.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", text, errb.String())
	first, ok := out.firstAt("[turn 1] report_case")
	require.True(t, ok, "a line per call")
	assert.True(t, first.Before(closed), "the first call's line while the run went on")
	assert.Equal(t, 3, strings.Count(text, "report_case"), "each call once, across continue-as-new")
	assert.Contains(t, text, model.text(4), "the answer")
	assert.Contains(t, errb.String(), "completed")

	_, stderr, code := runCLI(t, "watch", h.WorkflowID, "--address", server.Address())
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "its run is closed (completed)")
}

// syncOffsetWorkflow starts a stream, waits for "finish", syncs and
// returns the stream's offset: how many published batches' items Sync saw.
func syncOffsetWorkflow(ctx wf.Context) (int64, error) {
	s, err := streams.New(ctx, nil, streams.Options{})
	if err != nil {
		return 0, err
	}
	wf.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	s.Sync()
	return s.Offset(), nil
}

// A batch published in the same workflow task as what the workflow
// publishes after Sync comes first: with the worker stopped, a publish
// signal and the signal the workflow waits for land in one task, and Sync
// sees the batch (a signal coroutine blocked in Receive would be handed it
// where Sync cannot see it, and a turn's last piece came after its Done).
func TestStreamSyncSeesTheSameTask(t *testing.T) {
	c := dial(t, server.Address())
	tq := taskQueue(t.Name())
	start := func() sdkworker.Worker {
		w := sdkworker.New(c, tq, sdkworker.Options{})
		w.RegisterWorkflow(syncOffsetWorkflow)
		require.NoError(t, w.Start())
		return w
	}
	w := start()
	run, err := c.ExecuteWorkflow(ctxT(t), client.StartWorkflowOptions{TaskQueue: tq}, syncOffsetWorkflow)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the first task is done: both coroutines wait
		return len(history(t, c, run.GetID(), run.GetRunID()).GetEvents()) >= 4
	}, 10*time.Second, 20*time.Millisecond)
	w.Stop()
	data, err := streams.Encode("piece")
	require.NoError(t, err)
	require.NoError(t, c.SignalWorkflow(ctxT(t), run.GetID(), run.GetRunID(), streams.PublishSignal,
		streams.PublishInput{PublisherID: "p", Sequence: 1, Items: []streams.PublishEntry{{Topic: "t", Data: data}}}))
	require.NoError(t, c.SignalWorkflow(ctxT(t), run.GetID(), run.GetRunID(), "finish", nil))
	defer start().Stop()
	var offset int64
	require.NoError(t, run.Get(ctxT(t), &offset))
	assert.Equal(t, int64(1), offset, "Sync saw the batch of its own task")
}

// The public client's reader of the live stream: agent.Run.Watch sees
// every call decision of a run that continues as new twice, in trace
// order with the trace's outcomes; a reader that stops after its second
// event and watches again from the next offset misses nothing and sees
// nothing twice.
func TestRunWatch(t *testing.T) {
	c, _, h := startStreamingRun(t, 5, 150*time.Millisecond)
	run := agent.Attach(c, h.WorkflowID, h.RunID)
	var events []agent.Event
	stop := errors.New("stop")
	done := make(chan error, 1)
	go func() {
		err := run.Watch(ctxT(t), 0, func(ev agent.Event) error {
			events = append(events, ev)
			if len(events) == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) {
			done <- err
			return
		}
		done <- run.Watch(ctxT(t), events[1].Offset+1, func(ev agent.Event) error { events = append(events, ev); return nil })
	}()
	res, err := run.Await(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, agent.Completed, res.Status)
	select {
	case err := <-done:
		require.NoError(t, err, "Watch ends with the chain")
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not end when the run closed")
	}
	var calls []agent.Outcome
	for i, ev := range events {
		if i > 0 {
			require.Greater(t, ev.Offset, events[i-1].Offset, "in offset order, none twice")
		}
		if ev.Call != nil {
			calls = append(calls, ev.Call.Outcome)
		}
	}
	var want []agent.Outcome
	for _, l := range res.Trace {
		want = append(want, l.Outcome)
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, calls, "every decision, in trace order, with its outcome (Trace is whole)")
}
