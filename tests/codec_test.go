package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/cmd/cli"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// encryptedClient dials addr with keys and a blob store for large payloads
// (nil: none), as tulip's commands do.
func encryptedClient(t *testing.T, addr, keyFile string, blobs blobstore.Store) client.Client {
	t.Helper()
	keys, err := codec.LoadKeyFile(keyFile)
	require.NoError(t, err)
	opts := client.Options{HostPort: addr, Logger: quietLogger()}
	if blobs != nil {
		opts.ExternalStorage = blobstore.ExternalStorage(blobs, 64<<10)
	}
	keys.ClientOptions(&opts)
	c, err := client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// With a codec key, the server's SQLite database (and the blob store)
// hold no plain text of any tool argument, result or user message, while
// inspect, history + replay show them decoded. No key, or a wrong key,
// fails in one line naming the key id. A rotated key file (new key first,
// old kept) continues the thread and reads the old histories.
func TestEncryptedRuns(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tulip.db")
	srv, err := devserver.Start(devserver.Options{DBFile: db})
	require.NoError(t, err)
	defer srv.Stop()
	addr := srv.Address()
	k1 := codec.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
	k2 := codec.Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)}
	keys1 := keyFile(t, k1)

	// 1. The demo, encrypted end to end.
	stdout, stderr, code := runCLI(t, "demo", "--address", addr, "--codec-key-file", keys1)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Refunds billing actually made: 1")
	demoThread := regexp.MustCompile(`run 1: starting (\S+)`).FindStringSubmatch(stderr + stdout)
	require.NotNil(t, demoThread, stdout+stderr)

	// 2. A run of our own: a secret user message, an idempotent refund and
	// a 192 KB argument that goes to the blob store.
	blobs, err := blobstore.NewDir(filepath.Join(dir, "blobs"))
	require.NoError(t, err)
	big := strings.Repeat("BLOB-SECRET ", 16000) // 192 KB: over the blob threshold, under the default argument limit
	first := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.Turn > 1 {
			return activities.ModelResponse{Text: "done"}, nil
		}
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{
			{ID: "r1", Name: "issue_refund", Arguments: `{"order_id": "ord-7310", "amount": 42.5}`},
			{ID: "a1", Name: "audit_append", Arguments: fmt.Sprintf(`{"note": %q}`, big)},
		}}, nil
	})
	again := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.Turn > 1 {
			return activities.ModelResponse{Text: "done"}, nil
		}
		return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "r2", Name: "issue_refund", Arguments: `{"amount": 42.5, "order_id": "ord-7310"}`}}}, nil
	})
	c1 := encryptedClient(t, addr, keys1, blobs)
	tb := demo.NewToolbox()
	tq1 := taskQueue(t.Name())
	w1 := startWorker(t, c1, tq1, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), PayloadLimit: -1,
		Models: map[string]activities.Model{"first": first}})
	thread := threadID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, res, err := runclient.Run(ctx, c1, runclient.RunOptions{TaskQueue: tq1, Model: "first", ThreadID: thread, Message: "Mme Tulipe wants her refund"})
	require.NoError(t, err)
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	recs, err := runclient.ThreadLog(ctx, c1, thread, "")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Contains(t, recs[1].Arguments, "BLOB-SECRET", "the client reads it decrypted")
	blobFiles, err := filepath.Glob(filepath.Join(dir, "blobs", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, blobFiles, "the large argument went to the blob store")

	// 3. The bytes on disk: database, its write-ahead log, the blobs.
	secrets := []string{"ord-4821", "ord-7310", "refund_id", "rf-1", "case-1", "Mme Tulipe", "BLOB-SECRET", "shipped"}
	onDisk := map[string][]byte{}
	for _, f := range []string{db, db + "-wal"} {
		if b, err := os.ReadFile(f); err == nil {
			onDisk[f] = b
		}
	}
	require.NoError(t, filepath.Walk(filepath.Join(dir, "blobs"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, err := os.ReadFile(p)
			onDisk[p] = b
			return err
		}
		return err
	}))
	all := bytes.Join(func() [][]byte {
		var out [][]byte
		for _, b := range onDisk {
			out = append(out, b)
		}
		return out
	}(), nil)
	require.True(t, bytes.Contains(all, []byte(thread)), "the files hold the runs (their ids are plain)")
	for _, s := range secrets {
		for f, b := range onDisk {
			assert.False(t, bytes.Contains(b, []byte(s)), "%s holds %q in plain text", f, s)
		}
	}
	t.Logf("searched %d files, %d bytes: none of %d secrets in plain text", len(onDisk), len(all), len(secrets))

	// 4. inspect decrypts with the key; without it, or with another key
	// under the same id, it fails in one line naming the key id.
	stdout, stderr, code = runCLI(t, "inspect", demoThread[1], "--address", addr, "--codec-key-file", keys1)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "ord-4821")
	assert.Contains(t, stdout, "refund_id")
	wrong := keyFile(t, codec.Key{ID: "k1", Secret: bytes.Repeat([]byte{9}, 32)})
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, `payload is encrypted with key "k1": give the key file`},
		{[]string{"--codec-key-file", wrong}, `key "k1" does not decrypt this payload`},
		{[]string{"--codec-key-file", keyFile(t, k2)}, `payload is encrypted with key "k1", which the key file does not hold`},
	} {
		stdout, stderr, code = runCLI(t, append([]string{"inspect", demoThread[1], "--address", addr}, c.args...)...)
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout, "nothing undecrypted is shown")
		assert.Contains(t, stderr, c.want)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	}

	// 5. history writes decrypted (or, with --encoded, as stored); replay
	// reads both with the key; an encrypted file without the key fails
	// naming it.
	plainFile, encFile := filepath.Join(dir, "h.json"), filepath.Join(dir, "h-enc.json")
	_, stderr, code = runCLI(t, "history", demoThread[1], "-o", plainFile, "--address", addr, "--codec-key-file", keys1)
	require.Equal(t, 0, code, stderr)
	_, stderr, code = runCLI(t, "history", demoThread[1], "-o", encFile, "--encoded", "--address", addr, "--codec-key-file", keys1)
	require.Equal(t, 0, code, stderr)
	plainText, _ := os.ReadFile(plainFile)
	encText, _ := os.ReadFile(encFile)
	assert.Contains(t, decodedJSONPayloads(t, plainText), "ord-4821")
	assert.NotContains(t, decodedJSONPayloads(t, encText), "ord-4821")
	_, stderr, code = runCLI(t, "replay", encFile, plainFile, "--codec-key-file", keys1)
	assert.Equal(t, 0, code, stderr)
	_, stderr, code = runCLI(t, "replay", plainFile)
	assert.Equal(t, 0, code, stderr)
	_, stderr, code = runCLI(t, "replay", encFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `"k1"`)

	// 6. Rotation: k2 encrypts, k1 still decrypts. The thread's workers
	// move to the rotated file (the thread stays on its task queue: its
	// runs hold its large content and answer for it there), and the thread
	// continues: its refund is served from the log the k1 run wrote.
	keys21 := keyFile(t, k2, k1)
	w1.Stop()
	c2 := encryptedClient(t, addr, keys21, blobs)
	startWorker(t, c2, tq1, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), PayloadLimit: -1,
		Models: map[string]activities.Model{"first": first, "again": again}})
	h2, res, err := runclient.Run(ctx, c2, runclient.RunOptions{TaskQueue: tq1, Model: "again", ThreadID: thread, Message: "again"})
	require.NoError(t, err)
	require.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome, "the k1 log was read")
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
	newRun := history(t, dial(t, addr), h2.WorkflowID, h2.RunID)
	assert.Contains(t, keyIDs(newRun), "k2")
	assert.NotContains(t, keyIDs(newRun), "k1", "new payloads are written with the new key")

	t.Setenv("TULIP_BLOB_DIR", filepath.Join(dir, "blobs")) // the large argument's blob
	stdout, stderr, code = runCLI(t, "inspect", thread, "--address", addr, "--codec-key-file", keys21)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "3 records")
	_, stderr, code = runCLI(t, "replay", encFile, "--codec-key-file", keys21)
	assert.Equal(t, 0, code, "old histories replay after rotation: %s", stderr)
	// The thread's large content stays where the k1 run wrote it; the
	// workers (which keep k1) read it and answer in k2: a client with k2
	// alone reads the thread. The old histories still need k1.
	stdout, stderr, code = runCLI(t, "inspect", thread, "--address", addr, "--codec-key-file", keyFile(t, k2))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "3 records")
	_, stderr, code = runCLI(t, "replay", encFile, "--codec-key-file", keyFile(t, k2))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `payload is encrypted with key "k1", which the key file does not hold`)
}

// decodedJSONPayloads is the payload data of a history JSON file.
func decodedJSONPayloads(t *testing.T, file []byte) string {
	t.Helper()
	var h historypb.History
	require.NoError(t, temporalproto.CustomJSONUnmarshalOptions{}.Unmarshal(file, &h))
	return payloadText(t, &h)
}

// keyIDs lists the codec key ids of a history's payloads.
func keyIDs(h *historypb.History) []string {
	seen := map[string]bool{}
	_ = proxy.VisitPayloads(context.Background(), h, proxy.VisitPayloadsOptions{
		Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			for _, p := range ps {
				if id, ok := p.GetMetadata()[codec.MetadataKeyID]; ok {
					seen[string(id)] = true
				}
			}
			return ps, nil
		},
	})
	return slices.Sorted(maps.Keys(seen))
}

// A worker without the run's key cannot read it: the run does not fail and
// nothing runs on garbage; once a worker with the key polls, it goes on.
func TestWorkerWithoutKey(t *testing.T) {
	k1 := keyFile(t, codec.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)})
	k2 := keyFile(t, codec.Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)})
	blobs := &blobstore.Memory{}
	keyed := encryptedClient(t, server.Address(), k1, blobs)
	other := encryptedClient(t, server.Address(), k2, blobs)
	tb := demo.NewToolbox()
	model := demo.RefundStory().Runs[0].Model()
	tq := taskQueue(t.Name())
	w := startWorker(t, other, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"demo": model}})
	h, err := runclient.Start(ctxT(t), keyed, runclient.RunOptions{TaskQueue: tq, Model: "demo", ThreadID: threadID(t), Message: "refund"})
	require.NoError(t, err)
	time.Sleep(3 * time.Second)
	desc, err := keyed.DescribeWorkflowExecution(ctxT(t), h.WorkflowID, h.RunID)
	require.NoError(t, err)
	t.Logf("status with only the wrong key: %v", desc.GetWorkflowExecutionInfo().GetStatus())
	assert.Equal(t, "Running", desc.GetWorkflowExecutionInfo().GetStatus().String())
	assert.Zero(t, tb.Invocations()["issue_refund"], "no tool ran")
	assert.Contains(t, eventTypes(history(t, keyed, h.WorkflowID, h.RunID)), "WorkflowTaskFailed",
		"the wrong-key worker took the task and failed it (not the run)")
	w.Stop()

	startWorker(t, keyed, tq, workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: map[string]activities.Model{"demo": model}})
	res, err := runclient.Await(ctxT(t), keyed, h, "")
	require.NoError(t, err)
	assert.Equal(t, agentrun.StatusCompleted, res.Status)
	assert.Equal(t, 1, tb.Invocations()["issue_refund"])
}

// `tulip keygen` makes a key file line; `tulip codec-server` serves the
// codec endpoint with it over real HTTP, for the UI's origin only.
func TestCLICodecServer(t *testing.T) {
	line, stderr, code := runCLI(t, "keygen", "2026-12")
	require.Equal(t, 0, code, stderr)
	f := writeFile(t, "keys.txt", line)
	keys, err := codec.LoadKeyFile(f)
	require.NoError(t, err)
	enc, err := keys.DataConverter(nil).ToPayload(map[string]string{"order_id": "ord-4821"})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{enc}})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"codec-server", "--port", "0", "--codec-key-file", f, "--allow-origin", "http://127.0.0.1:8233"}, &out, &errb)
	}()
	defer func() {
		cancel()
		assert.Equal(t, 0, <-done, errb.String())
	}()
	var url string
	require.Eventually(t, func() bool {
		if m := regexp.MustCompile(`codec server: (\S+)`).FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	}, 10*time.Second, 10*time.Millisecond, errb.String())

	post := func(origin string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"/decode", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, text := post("http://127.0.0.1:8233")
	require.Equal(t, http.StatusOK, status, text)
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(text), &got))
	assert.JSONEq(t, `{"order_id":"ord-4821"}`, string(got.Payloads[0].GetData()))
	status, _ = post("http://elsewhere.example")
	assert.Equal(t, http.StatusForbidden, status)
	resp, err := http.Post(url+"/encode", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "/encode is off unless asked for")
	assert.Contains(t, errb.String(), "warning: key file "+f+" has mode 0644", "a key file others can read is named")
}

// `tulip keygen -o FILE` appends a fresh key to a key file of mode 0600;
// `tulip history` writes its file 0600 (it holds prompts and results).
func TestCLIPrivateFiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "keys.txt")
	for _, id := range []string{"k1", "k2"} {
		_, stderr, code := runCLI(t, "keygen", id, "-o", f)
		require.Equal(t, 0, code, stderr)
		assert.NotContains(t, stderr, "warning")
	}
	fi, err := os.Stat(f)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	keys, err := codec.LoadKeyFile(f)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2"}, keys.KeyIDs())

	c := dial(t, server.Address())
	h, res := runScript(t, c, demo.NewToolbox(), scenario.Run{Turns: []scenario.Turn{turn(call("c1", "lookup_order", `{"order_id": "o"}`))}}, runclient.RunOptions{})
	require.Equal(t, agentrun.StatusCompleted, res.Status)
	out := filepath.Join(t.TempDir(), "h.json")
	require.NoError(t, os.WriteFile(out, nil, 0o644))
	_, stderr, code := runCLI(t, "history", h.WorkflowID, "-o", out, "--address", server.Address())
	require.Equal(t, 0, code, stderr)
	fi, err = os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "even over a file that was 0644")
}

// Replaying an encrypted thread whose large payloads are in a blob store,
// through the library: a history exported decrypted still needs the key
// (its blobs stay ciphertext), and without it ReplayHistories names the
// key before any replay; with the worker's key file and blob store
// (ReplayOptions.Keys, Blobs) it replays. 'tulip history' without the key
// refuses in one line instead of writing ciphertext in silence.
func TestReplayEncryptedBlobHistory(t *testing.T) {
	blobs, err := blobstore.NewDir(t.TempDir())
	require.NoError(t, err)
	k1 := codec.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
	keyPath := keyFile(t, k1)
	c := encryptedClient(t, server.Address(), keyPath, blobs)
	tb := demo.NewToolbox()
	big := scenario.Run{Turns: []scenario.Turn{turn(call("a1", "audit_append", fmt.Sprintf(`{"note": %q}`, strings.Repeat("z", 100<<10))))}}
	tq := scriptWorker(t, c, tb, map[string]activities.Model{"m": big.Model()}, func(o *workerplugin.Options) { o.PayloadLimit = -1 })
	h, _, err := runclient.Run(ctxT(t), c, runclient.RunOptions{TaskQueue: tq, Model: "m", Message: "go"})
	require.NoError(t, err)

	file := filepath.Join(t.TempDir(), "h.json")
	_, stderr, code := runCLI(t, "history", h.WorkflowID, "-o", file, "--address", server.Address(), "--codec-key-file", keyPath)
	require.Equal(t, 0, code, stderr)
	keys, err := codec.LoadKeyFile(keyPath)
	require.NoError(t, err)
	opts := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks()}

	// Without the blob store (with or without the key): the event, the
	// driver, the blob and the option, before any replay; never "did not
	// run", which would blame the code.
	for _, ro := range []workerplugin.ReplayOptions{{}, {Keys: keys}} {
		err = workerplugin.ReplayHistories(opts, ro, file)
		var mp *workerplugin.MissingPayloadError
		require.ErrorAs(t, err, &mp, "%v", err)
		assert.Equal(t, "tulip-blobs", mp.Driver)
		assert.NotEmpty(t, mp.Key)
		assert.Greater(t, mp.EventID, int64(0))
		assert.Nil(t, mp.Err)
		assert.Contains(t, err.Error(), "ReplayOptions.Blobs")
		assert.NotContains(t, err.Error(), "did not run")
		t.Log(err)
	}
	// A store that lacks the blob names it and the store's error.
	empty, err := blobstore.NewDir(t.TempDir())
	require.NoError(t, err)
	err = workerplugin.ReplayHistories(opts, workerplugin.ReplayOptions{Keys: keys, Blobs: empty}, file)
	var mp *workerplugin.MissingPayloadError
	require.ErrorAs(t, err, &mp, "%v", err)
	assert.ErrorIs(t, err, blobstore.ErrNotFound)

	err = workerplugin.ReplayHistories(opts, workerplugin.ReplayOptions{Blobs: blobs}, file)
	var ke *codec.KeyError
	require.ErrorAs(t, err, &ke, "the blob is ciphertext: %v", err)
	assert.Equal(t, file+`: replay failed: payload is encrypted with key "k1": give the key file (--codec-key-file or TULIP_CODEC_KEY_FILE)`, err.Error())
	assert.NoError(t, workerplugin.ReplayHistories(opts, workerplugin.ReplayOptions{Keys: keys, Blobs: blobs}, file))

	stdout, stderr, code := runCLI(t, "history", h.WorkflowID, "-o", filepath.Join(t.TempDir(), "x.json"), "--address", server.Address())
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, `tulip: history of `+h.WorkflowID+`: payload is encrypted with key "k1": give the key file (--codec-key-file or TULIP_CODEC_KEY_FILE) (or --encoded to write it as stored)`, strings.TrimSpace(stderr))
}
