package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// DevTaskQueue is the task queue of the worker 'tulip dev' runs.
const DevTaskQueue = "tulip"

func (e *env) dev(args []string) error {
	fs := e.flags("dev")
	db := fs.String("db", "", "keep the server's state in this SQLite file (default: in memory)")
	port := fs.Int("port", 7233, "frontend gRPC port (0: a free one)")
	ns := fs.String("namespace", "default", "namespace to create")
	uiPort := fs.Int("ui-port", 0, "Web UI port (default: --port + 1000, 8233 for 7233; a free one when --port is 0)")
	headless := fs.Bool("headless", false, "serve no Web UI")
	metricsPort := fs.Int("metrics-port", -1, "serve Prometheus /metrics for the demo worker on 127.0.0.1:N (0: a free port; default: off)")
	retention := fs.Duration("retention", devserver.DefaultRetention, "how long the namespace keeps closed runs' histories (at least 24h); threads outlive it in the thread store beside --db")
	var keyFile string
	e.codecFlag(fs, &keyFile)
	mc := mcpFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"usage: tulip dev [--db FILE] [--port N] [--namespace NS] [--ui-port N | --headless] [--retention DURATION] [--codec-key-file FILE] [--metrics-port N] [--mcp NAME=COMMAND ARGS...]"}
	}
	if *retention < devserver.MinRetention {
		return usageError{fmt.Sprintf("--retention %s is under the server's minimum of 24h", *retention)}
	}
	if _, err := mc.build(); err != nil {
		return err
	}
	keys, err := e.keys(keyFile)
	if err != nil {
		return err
	}
	// The UI server exits the process when its port is taken: check every
	// fixed port before starting anything.
	const host = "127.0.0.1"
	if !*headless {
		switch {
		case *uiPort == 0 && *port != 0:
			*uiPort = devserver.UIPort(*port)
		case *uiPort == 0:
			// A free one, known now: the codec server allows its origin.
			l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				return err
			}
			*uiPort = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		if *uiPort < 0 || *uiPort > 65535 {
			return usageError{fmt.Sprintf("--ui-port %d is out of range", *uiPort)}
		}
		if *uiPort != 0 {
			if err := devserver.CheckPort(host, *uiPort, "--ui-port, or --headless"); err != nil {
				return err
			}
		}
	}
	var metrics *metricsServer
	if *metricsPort >= 0 {
		m, err := startMetrics(*metricsPort)
		if err != nil {
			return err
		}
		defer m.Close()
		metrics = m
	}
	srv, err := devserver.Start(devserver.Options{DBFile: *db, Port: *port, Namespace: *ns, Retention: *retention,
		LogOutput: e.stderr, LogLevel: e.logLevel(slog.LevelWarn)})
	if err != nil {
		return err
	}
	defer srv.Stop()
	var codecURL string
	if keys != nil && !*headless {
		// The browser decodes through this endpoint; the server keeps
		// ciphertext only.
		origins := []string{"http://" + net.JoinHostPort(host, strconv.Itoa(*uiPort)), "http://" + net.JoinHostPort("localhost", strconv.Itoa(*uiPort))}
		cs, err := startCodecServer(keys, host, 0, codec.HandlerOptions{AllowOrigins: origins})
		if err != nil {
			return err
		}
		defer cs.Close()
		codecURL = cs.url
	}
	var ui *devserver.UI
	if !*headless {
		ui, err = devserver.StartUI(devserver.UIOptions{Host: host, Port: *uiPort, Frontend: srv.Address(), Namespace: *ns, CodecEndpoint: codecURL})
		if err != nil {
			return err
		}
		defer ui.Stop()
	}
	sess := &session{keys: keys}
	if metrics != nil {
		sess.metrics = metrics.handler
	}
	s, err := e.dial(sess, srv.Address(), *ns, true, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	tb := demo.NewToolbox()
	set, err := e.openMCP(mc, demo.ToolNames)
	if err != nil {
		return err
	}
	defer set.Close()
	stop, err := s.startWorker(DevTaskQueue, workerplugin.Options{Tools: tb.Tools(), Toolsets: workerplugin.PublicToolsets(toolsets(set)), Hooks: demo.Hooks(),
		Models: demo.Models()})
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(e.stdout, "Temporal server: %s  namespace: %s  retention: %s\n", srv.Address(), *ns, retentionText(srv.Retention()))
	if ui != nil {
		fmt.Fprintf(e.stdout, "Web UI: %s/namespaces/%s/workflows\n", ui.URL(), *ns)
	}
	if keys != nil {
		fmt.Fprintf(e.stdout, "payloads encrypted with key %q (AES-256-GCM); the server stores ciphertext only\n", keys.KeyIDs()[0])
		if codecURL != "" {
			fmt.Fprintf(e.stdout, "codec server for the UI: %s\n", codecURL)
		}
	}
	fmt.Fprintf(e.stdout, "tulip worker on task queue %q:\n", DevTaskQueue)
	fmt.Fprintf(e.stdout, "  models: %q acts on the message's words (%s); \"demo\" plays the scripted refund story, whatever the message\n",
		demo.SupportModelName, demo.SupportKeywords)
	var idem, other []string
	for _, t := range tb.Tools() {
		if t.Spec().Idempotent {
			idem = append(idem, t.Spec().Name)
		} else {
			other = append(other, t.Spec().Name)
		}
	}
	fmt.Fprintf(e.stdout, "  tools served on repeat (idempotent): %s; run every time: %s\n", strings.Join(idem, ", "), strings.Join(other, ", "))
	fmt.Fprintf(e.stdout, "  hooks: %s (give them in the run input's \"hooks\")\n", strings.Join(slices.Sorted(maps.Keys(demo.Hooks())), ", "))
	for _, ts := range toolsets(set) {
		fmt.Fprintf(e.stdout, "MCP server %q: its tools are the worker's too ('tulip mcp tools' shows them)\n", ts.Name())
	}
	fmt.Fprintf(e.stdout, "point clients and workers at it: --address %s (or TEMPORAL_ADDRESS=%s)\n", srv.Address(), srv.Address())
	if *db != "" {
		fmt.Fprintf(e.stdout, "state is kept in %s\n", *db)
	}
	if s.threads != "" {
		fmt.Fprintf(e.stdout, "threads outlive the retention of their runs in %s\n", s.threads)
	} else {
		fmt.Fprintf(e.stdout, "threads last as long as their runs' histories (%s; --db FILE keeps a thread store)\n", retentionText(srv.Retention()))
	}
	if metrics != nil {
		fmt.Fprintf(e.stdout, "metrics (Prometheus): %s\n", metrics.url)
	}
	fmt.Fprintln(e.stdout, "Ctrl-C stops it.")
	<-e.ctx.Done()
	e.progress("stopping")
	return nil
}

func (e *env) inspect(args []string) error {
	fs := e.flags("inspect")
	c := e.connFlags(fs)
	db := dbFlag(fs)
	agentName := fs.String("agent", agentrun.DefaultAgent, "the agent whose log to show")
	asJSON := fs.Bool("json", false, "print the records as JSON")
	pricesFile := fs.String("prices", "", "a JSON file of prices in USD per million tokens, by model name: {\"gpt\": {\"prompt\": 2.5, \"cached\": 1.25, \"completion\": 10}}: the thread's cost beside its tokens")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: tulip inspect THREAD [--agent A] [--json] [--prices FILE]"}
	}
	var prices map[string]price
	if *pricesFile != "" {
		var err error
		if prices, err = loadPrices(*pricesFile); err != nil {
			return usageError{"--prices " + err.Error()}
		}
	}
	s, err := e.connect(c, *db != "", *db)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := runclient.Thread(e.ctx, s.client, fs.Arg(0))
	if err != nil {
		return err
	}
	recs, err := runclient.LogOf(st, *agentName)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
	fmt.Fprintf(e.stdout, "thread %s, agent %s: %d records\n", fs.Arg(0), *agentName, len(recs))
	if f := st.Fork; f != nil {
		fmt.Fprintf(e.stdout, "a fork of thread %s at response %d: \"cached (origin)\" records were served from its log\n", f.Thread, f.At)
	}
	if v := st.Context; v != nil && v.Upto > 0 {
		fmt.Fprintf(e.stdout, "the model's view: a summary in place of messages 1-%d of %d (compacted %d times; the thread keeps every message, docs/context.md)\n",
			v.Upto, len(st.Messages), v.Compactions)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tRESPONSE\tCALL\tTOOL\tARGUMENTS\tORIGIN\tRESULT / ERROR")
	for _, r := range recs {
		detail := string(r.Result)
		if r.Error != nil {
			detail = "error: " + r.Error.Message
		}
		origin := string(r.Origin)
		switch {
		case r.ServedFrom != nil:
			origin = servedFrom(*r.ServedFrom, r.Relation)
		case r.Relation == dedup.FromOrigin:
			origin = "cached (origin)"
		}
		origin += nearMissWords(r.NearMiss) + unknownWords(r.Unknown)
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Response, r.CallID, r.Tool, clip(r.Arguments, 48), origin, clip(detail, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	served := 0
	for _, r := range recs {
		if r.Origin == dedup.Cached {
			served++
		}
	}
	fmt.Fprintf(e.stdout, "served from the log: %d of %d calls (bodies not run again)\n", served, len(recs))
	printSubAgents(e.stdout, fs.Arg(0), recs)
	if u := st.Usage; u != nil {
		fmt.Fprintf(e.stdout, "thread tokens (every run and agent): %d prompt (%d cached), %d completion\n", u.PromptTokens, u.CachedTokens, u.CompletionTokens)
		printCost(e.stdout, st.UsageByModel, prices)
	}
	return nil
}

// price is a model's price in USD per million tokens: prompt tokens not
// read from the cache, cached ones (absent: at the prompt price), and
// completion tokens.
type price struct {
	Prompt     float64  `json:"prompt"`
	Cached     *float64 `json:"cached"`
	Completion float64  `json:"completion"`
}

// loadPrices reads a prices file (at most 1 MiB): model name -> price.
func loadPrices(path string) (map[string]price, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 1<<20 {
		return nil, fmt.Errorf("%s: over 1 MiB", path)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var prices map[string]price
	if err := dec.Decode(&prices); err != nil {
		return nil, fmt.Errorf("%s: not {\"MODEL\": {\"prompt\": N, \"cached\": N, \"completion\": N}}: %v", path, err)
	}
	for name, p := range prices {
		if p.Cached == nil {
			c := p.Prompt
			p.Cached = &c
			prices[name] = p
		}
		if p.Prompt < 0 || *p.Cached < 0 || p.Completion < 0 {
			return nil, fmt.Errorf("%s: model %q has a negative price", path, name)
		}
	}
	return prices, nil
}

// printCost prints the thread's tokens per model, and with prices each
// model's cost and the total: prompt tokens not cached at the prompt
// price, cached ones at the cached price, completion at its own.
func printCost(w io.Writer, byModel map[string]*threadstate.Usage, prices map[string]price) {
	var total float64
	var unpriced []string
	for _, name := range slices.Sorted(maps.Keys(byModel)) {
		u := byModel[name]
		line := fmt.Sprintf("  model %s: %d prompt (%d cached), %d completion", name, u.PromptTokens, u.CachedTokens, u.CompletionTokens)
		if prices != nil {
			if p, ok := prices[name]; ok {
				cost := (float64(u.PromptTokens-u.CachedTokens)*p.Prompt + float64(u.CachedTokens)*(*p.Cached) + float64(u.CompletionTokens)*p.Completion) / 1e6
				total += cost
				line += fmt.Sprintf(", $%.4f", cost)
			} else {
				unpriced = append(unpriced, name)
			}
		}
		fmt.Fprintln(w, line)
	}
	if prices == nil {
		return
	}
	fmt.Fprintf(w, "cost: $%.4f", total)
	if len(unpriced) > 0 {
		fmt.Fprintf(w, " (no price for %s)", strings.Join(unpriced, ", "))
	}
	fmt.Fprintln(w)
}

func (e *env) history(args []string) error {
	fs := e.flags("history")
	c := e.connFlags(fs)
	db := dbFlag(fs)
	out := fs.String("o", "", "output file")
	runID := fs.String("run-id", "", "run ID (default: the latest run)")
	allRuns := fs.Bool("all-runs", false, "every run of the workflow ID (a thread's runs, and their continue-as-new chains), oldest first")
	encoded := fs.Bool("encoded", false, "with a codec key: write payloads as the server stores them (encrypted) instead of decrypted")
	recent := fs.Int("recent", 0, "instead of WORKFLOW_ID: the N most recently closed agent runs, one file each in the folder -o names (a replay gate's sample: docs/deploy.md)")
	where := fs.String("query", "", "with --recent: a visibility query the runs must also match (\"TaskQueue = 'support'\")")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *recent > 0 {
		if fs.NArg() != 0 || *out == "" || *allRuns || *runID != "" {
			return usageError{"usage: tulip history --recent N -o DIR"}
		}
		s, err := e.connect(c, *db != "", *db)
		if err != nil {
			return err
		}
		defer s.Close()
		return e.recentHistories(s, *recent, *where, *out, *encoded)
	}
	if fs.NArg() != 1 || *out == "" || (*allRuns && *runID != "") {
		return usageError{"usage: tulip history WORKFLOW_ID -o FILE [--run-id ID | --all-runs]"}
	}
	s, err := e.connect(c, *db != "", *db)
	if err != nil {
		return err
	}
	defer s.Close()
	id := fs.Arg(0)
	var hists []*historypb.History // oldest first
	if *allRuns {
		runs, err := e.allRuns(s, id)
		if err != nil {
			return err
		}
		for _, run := range runs {
			hist, err := e.fetchHistory(s, id, run, *encoded)
			if err != nil {
				return err
			}
			hists = append(hists, hist)
		}
	} else {
		// Every run of the continue-as-new chain.
		for run := *runID; ; {
			hist, err := e.fetchHistory(s, id, run, *encoded)
			if err != nil {
				return err
			}
			hists = append([]*historypb.History{hist}, hists...)
			if run = runclient.ContinuedFrom(hist); run == "" {
				break
			}
		}
	}
	names := runclient.HistoryFiles(*out, len(hists))
	for i, hist := range hists {
		if err := runclient.WriteHistory(names[i], hist); err != nil {
			return err
		}
		e.progress("wrote %d events to %s", len(hist.Events), names[i])
	}
	switch {
	case *allRuns:
		e.progress("%d runs of %s: one file per run, oldest first", len(hists), id)
	case len(hists) > 1:
		e.progress("the run continued as new %d times: one file per run, oldest first", len(hists)-1)
	}
	return nil
}

// fetchHistory is one run's history, decrypted with the session's keys
// (unless encoded); without keys, a payload encrypted with one is refused
// by name rather than written as ciphertext.
func (e *env) fetchHistory(s *session, workflowID, runID string, encoded bool) (*historypb.History, error) {
	hist, err := runclient.FetchHistory(e.ctx, s.client, workflowID, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case s.keys != nil && !encoded:
		// The file is for people and replay tests: decrypted, as the
		// Temporal CLI shows histories through a codec.
		if err := decodeHistory(e.ctx, hist, s.keys); err != nil {
			return nil, fmt.Errorf("history of %s: %w", workflowID, err)
		}
	case s.keys == nil && !encoded:
		// Without the key the file would hold ciphertext while it says
		// nothing: refuse, naming the key (or write it as stored).
		if err := workerplugin.CheckKeys(e.ctx, hist, (*codec.Keyring)(nil), nil); err != nil {
			return nil, fmt.Errorf("history of %s: %v (or --encoded to write it as stored)", workflowID, err)
		}
	}
	return hist, nil
}

// allRuns lists every run of a workflow ID, oldest first (the visibility
// store: a run closed a moment ago may be missing).
func (e *env) allRuns(s *session, workflowID string) ([]string, error) {
	type run struct {
		id    string
		start time.Time
	}
	var found []run
	var token []byte
	for {
		resp, err := s.client.ListWorkflow(e.ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = %q", workflowID), PageSize: 100, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("runs of %s: %v", workflowID, err)
		}
		for _, ex := range resp.GetExecutions() {
			found = append(found, run{ex.GetExecution().GetRunId(), ex.GetStartTime().AsTime()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no runs of %s", workflowID)
	}
	slices.SortFunc(found, func(a, b run) int { return a.start.Compare(b.start) })
	out := make([]string, len(found))
	for i, r := range found {
		out[i] = r.id
	}
	return out, nil
}

// ReplayOptions is the worker configuration replay uses: the demo toolbox
// and hooks, as 'tulip dev', 'tulip run' and 'tulip demo' run them.
func ReplayOptions() workerplugin.Options {
	return workerplugin.Options{Tools: demo.NewToolbox().Tools(), Hooks: demo.Hooks()}
}

func (e *env) replay(args []string) error {
	fs := e.flags("replay")
	var keyFile, blobStore string
	e.codecFlag(fs, &keyFile)
	fs.StringVar(&blobStore, "blob-store", "", "the blob store the runs kept large payloads in: s3://BUCKET/PREFIX?..., or a directory (default $TULIP_BLOB_STORE, else $TULIP_BLOB_DIR)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"usage: tulip replay [--codec-key-file F] [--blob-store URL] FILE|DIR..."}
	}
	keys, err := e.keys(keyFile)
	if err != nil {
		return err
	}
	// Histories written encrypted (history --encoded, or the server's own
	// export) and decrypted ones replay alike; a payload encrypted with a
	// key this process lacks is named before any replay.
	ro := workerplugin.ReplayOptions{Keys: keys}
	for _, v := range []string{blobStore, e.getenv("TULIP_BLOB_STORE"), e.getenv("TULIP_BLOB_DIR")} {
		if v != "" {
			if ro.Blobs, err = e.openBlobStore(v); err != nil {
				return err
			}
			break
		}
	}
	if e.logLevel(slog.LevelError+4) <= slog.LevelDebug {
		ro.Logger = e.logger() // the SDK's stack traces, on request
	}
	missing, failed := 0, 0
	var files []string
	for _, f := range fs.Args() {
		// A folder (tulip history --recent's) is its JSON files.
		if fi, err := os.Stat(f); err == nil && fi.IsDir() {
			matches, _ := filepath.Glob(filepath.Join(f, "*.json"))
			files = append(files, matches...)
			continue
		}
		files = append(files, f)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(e.stderr, "tulip: %s: %v\n", f, err)
			missing++
			continue
		}
		if err := workerplugin.ReplayHistories(ReplayOptions(), ro, f); err != nil {
			fmt.Fprintln(e.stderr, "tulip: "+oneLine(err.Error()))
			failed++
			continue
		}
		fmt.Fprintf(e.stdout, "ok   %s\n", f)
	}
	if failed > 0 {
		fmt.Fprintln(e.stderr, "tulip: replay uses the demo toolbox and hooks; replay your own workflows with tulip.ReplayHistories (docs/replay.md)")
	}
	if missing+failed > 0 {
		return exitCode(1)
	}
	return nil
}

func (e *env) resume(args []string) error {
	fs := e.flags("resume")
	c := e.connFlags(fs)
	answer := fs.String("answer", "", "the answer given to the model")
	dangling := fs.Bool("perform-dangling", false, "run the held calls (unmatched, unrecorded)")
	interrupt := fs.String("interrupt", "", "the interrupt answered (default: the current one)")
	bySignal := fs.Bool("signal", false, "send the resume as a signal instead of an update")
	db := fs.String("db", "", "continue a 'tulip chat --db FILE' run: start the embedded server on FILE and the chat worker")
	mf := newModelFlags(fs, modelHelp{
		baseURL:   "with --db: the chat model's API root",
		model:     "with --db: the chat model's name",
		apiKeyEnv: "with --db: environment variable with the API key",
		keyHeader: `with --db: header for the key: default "Authorization: Bearer KEY"; "api-key" for Azure OpenAI`,
	})
	asJSON := fs.Bool("json", false, "with --db: print the rest of the trace as JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || (*db != "" && mf.missing()) {
		return usageError{"usage: tulip resume THREAD --answer TEXT [--perform-dangling] [--interrupt ID] [--signal] [--db FILE [--provider P] --base-url URL --model NAME [--mcp NAME=COMMAND ARGS...]]"}
	}
	if !mf.mcp.empty() && *db == "" {
		return usageError{"--mcp flags need --db: only then does this process run the worker"}
	}
	if _, err := mf.mcp.build(); err != nil {
		return err
	}
	s, err := e.connect(c, *db != "", *db)
	if err != nil {
		return err
	}
	defer s.Close()
	var tb *demo.Toolbox
	if *db != "" {
		stop, t, err := e.chatWorker(s, mf)
		if err != nil {
			return err
		}
		defer stop()
		tb = t
	}
	in := agentrun.ResumeInput{InterruptID: *interrupt, Answer: *answer, PerformDangling: *dangling}
	id := fs.Arg(0)
	if *bySignal {
		if in.InterruptID == "" {
			st, err := runclient.State(e.ctx, s.client, runclient.Handle{WorkflowID: id})
			if err != nil {
				return err
			}
			if st.Interrupt == nil {
				return &runclient.NotInterruptedError{WorkflowID: id}
			}
			in.InterruptID = st.Interrupt.ID
		}
		if err := runclient.ResumeBySignal(e.ctx, s.client, id, in); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "sent resume of %s to %s by signal\n", in.InterruptID, id)
		return nil
	}
	res, err := runclient.Resume(e.ctx, s.client, id, in)
	if err != nil {
		var nie *runclient.NotInterruptedError
		if errors.As(err, &nie) {
			return err
		}
		return fmt.Errorf("resume %s: %s", id, strings.TrimSpace(err.Error()))
	}
	if res.Duplicate {
		fmt.Fprintf(e.stdout, "%s was already answered; nothing changed\n", res.InterruptID)
		return nil
	}
	fmt.Fprintf(e.stderr, "resumed %s of %s (perform_dangling=%v)\n", res.InterruptID, id, *dangling)
	if *db == "" {
		return nil // the run goes on on its worker
	}
	// This process is the run's worker: wait for the run and print it.
	h := runclient.Handle{WorkflowID: id}
	final, err := runclient.Await(e.ctx, s.client, h, res.InterruptID)
	return e.report(s.client, h, final, err, c, *db, mf, *asJSON, tb, nil)
}

// writePrivate writes a file only its owner may read (mode 0600, an
// existing file's mode too).
func writePrivate(name string, b []byte) error {
	if err := os.WriteFile(name, b, 0o600); err != nil {
		return err
	}
	return os.Chmod(name, 0o600)
}

// retentionText says a retention in days where it is whole days.
func retentionText(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		n := int(d / (24 * time.Hour))
		if n == 1 {
			return "1 day"
		}
		return fmt.Sprintf("%d days", n)
	}
	return d.String()
}

// printSubAgents lists the sub-agents a thread's log called (a record
// whose result names a thread under this one, THREAD/sub/NAME): each one's
// thread, and its calls run and served.
func printSubAgents(w io.Writer, thread string, recs []dedup.Record) {
	type tally struct{ ran, served int }
	subs := map[string]*tally{}
	var order []string
	for _, r := range recs {
		var res struct {
			Thread string `json:"thread"`
		}
		if json.Unmarshal(r.Result, &res) != nil || !strings.HasPrefix(res.Thread, thread+"/sub/") {
			continue
		}
		t := subs[res.Thread]
		if t == nil {
			t = &tally{}
			subs[res.Thread] = t
			order = append(order, res.Thread)
		}
		if r.Origin == dedup.Cached {
			t.served++
		} else {
			t.ran++
		}
	}
	for _, s := range order {
		fmt.Fprintf(w, "sub-agent thread %s: %d calls ran it, %d served from this log ('tulip inspect %s --agent NAME')\n", s, subs[s].ran, subs[s].served, s)
	}
}

// recentHistories writes the histories of the n most recently closed agent
// runs (workflow type tulip.AgentRun, any status but running) into dir,
// one file each, named by workflow and run: the sample a replay gate
// replays against a new build before it becomes current (docs/deploy.md).
func (e *env) recentHistories(s *session, n int, where, dir string, encoded bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'Running'", agentrun.WorkflowName)
	if where != "" {
		query += " AND (" + where + ")"
	}
	var token []byte
	written := 0
	for written < n {
		resp, err := s.client.ListWorkflow(e.ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.ns, Query: query,
			PageSize: int32(min(n-written, 100)), NextPageToken: token})
		if err != nil {
			return fmt.Errorf("listing closed agent runs: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			if written == n {
				break
			}
			id, run := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
			hist, err := e.fetchHistory(s, id, run, encoded)
			if err != nil {
				return err
			}
			name := filepath.Join(dir, fileSafe(id)+"-"+run+".json")
			if err := runclient.WriteHistory(name, hist); err != nil {
				return err
			}
			written++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	e.progress("wrote the histories of %d closed agent runs to %s: replay them against the new build (tulip replay, tulip.ReplayHistories)", written, dir)
	return nil
}

// fileSafe is s with anything but letters, digits, '-', '_' and '.' as '_'.
func fileSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}
