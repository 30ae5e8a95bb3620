package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
)

// 'tulip serve': an OpenAI-compatible HTTP server in front of durable
// threads (docs/serve.md). A request is a run on a thread; a response's id
// names the thread and the run, authenticated with the server's id key.
//
// The files: serve.go (flags, the server, its limits), serve_auth.go
// (tenants, keys, origins), serve_ids.go (response and call ids),
// serve_errors.go (OpenAI-shaped errors), serve_responses.go (the
// Responses API), serve_stream.go (its server-sent events), serve_chat.go
// (Chat Completions), serve_items.go (output items and usage).

type agentList []string

func (a *agentList) String() string { return strings.Join(*a, ",") }
func (a *agentList) Set(v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return errors.New("empty agent name")
	}
	*a = append(*a, v)
	return nil
}

type originList []string

func (a *originList) String() string { return strings.Join(*a, ",") }
func (a *originList) Set(v string) error {
	for _, o := range strings.Split(v, ",") {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			*a = append(*a, o)
		}
	}
	return nil
}

// serveLimits bound what one request, one stream and the server take.
type serveLimits struct {
	maxBody    int64         // request body bytes
	maxStreams int           // concurrent streamed responses
	write      time.Duration // one write to a client
	grace      time.Duration // in-flight responses at shutdown
	// clientWait is how long a run waits for its client tools' results
	// (a request's metadata tulip_client_timeout may shorten it).
	clientWait time.Duration
}

func (e *env) serve(args []string) error {
	fs := e.flags("serve")
	c := e.connFlags(fs)
	mf := newModelFlags(fs, modelHelp{
		baseURL:   "OpenAI-compatible API root of the model the worker calls (not needed with --no-worker)",
		model:     "model name (not needed with --no-worker)",
		apiKeyEnv: "environment variable with the model's API key (read by the worker; with --provider anthropic the default is ANTHROPIC_API_KEY)",
		keyHeader: `header for the model's key: default "Authorization: Bearer KEY"; "api-key" for Azure OpenAI`,
	})
	var agents agentList
	fs.Var(&agents, "agent", "an agent served, named by a request's \"model\" (repeat it; default: "+agentrun.DefaultAgent+")")
	var origins originList
	fs.Var(&origins, "allow-origin", "a browser origin allowed to call the API (scheme://host[:port]; repeat it or comma-separate); default: none")
	hookList := fs.String("hooks", "", "comma-separated hooks each run installs (upper_order_id, block_page_oncall, approve_isolate_host)")
	maxTurns := fs.Int("max-turns", 0, "model turn limit (default 32)")
	db := fs.String("db", "", "embedded server state file (threads outlive the process)")
	listen := fs.String("listen", "127.0.0.1:8787", "HOST:PORT to serve HTTP on (port 0: a free one)")
	noWorker := fs.Bool("no-worker", false, "run no worker in this process: workers elsewhere poll --task-queue")
	taskQueue := fs.String("task-queue", ChatTaskQueue, "the workers' task queue")
	keyFile := fs.String("api-key-file", "", "file of the bearer tokens clients must send, one a line: TOKEN, or TENANT TOKEN (threads belong to a tenant); default: no check, loopback only")
	idKeyFile := fs.String("id-key-file", "", "file holding the secret that authenticates response ids (created, 0600, when missing); default: beside --db, else one per process")
	insecure := fs.Bool("insecure", false, "allow listening on a non-loopback address with no --api-key-file")
	maxBody := fs.Int64("max-body", 8<<20, "largest request body, in bytes (413 over it)")
	maxStreams := fs.Int("max-streams", 256, "concurrent streamed responses (429 over it)")
	writeTimeout := fs.Duration("write-timeout", 30*time.Second, "longest one write to a client may take; a client that stops reading is dropped")
	grace := fs.Duration("shutdown-grace", 20*time.Second, "how long in-flight responses may take to finish at shutdown")
	clientWait := fs.Duration("client-timeout", 10*time.Minute, "how long a run waits for a client tool's result before answering the call as not performed (a request's metadata tulip_client_timeout may shorten it)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || (!*noWorker && mf.missing()) {
		return usageError{"usage: tulip serve ([--provider openai|anthropic] --base-url URL --model NAME | --no-worker) [--listen HOST:PORT] [--agent NAME]... [--hooks H,...] [--api-key-file FILE] [--id-key-file FILE] [--allow-origin O] [--db FILE | --address A] [--task-queue Q] [--mcp NAME=COMMAND ARGS...]"}
	}
	if *maxBody <= 0 || *maxStreams <= 0 || *writeTimeout <= 0 || *grace < 0 || *clientWait <= 0 {
		return usageError{"--max-body, --max-streams, --write-timeout and --client-timeout must be positive"}
	}
	if len(agents) == 0 {
		agents = agentList{agentrun.DefaultAgent}
	}
	var hooks []string
	for _, h := range strings.Split(*hookList, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if _, ok := demo.Hooks()[h]; !ok {
				return usageError{fmt.Sprintf("unknown hook %q", h)}
			}
			hooks = append(hooks, h)
		}
	}
	for _, o := range origins {
		if !validOrigin(o) {
			return usageError{fmt.Sprintf("--allow-origin %q: an origin is scheme://host[:port]", o)}
		}
	}
	var keys map[string]string // token → tenant
	if *keyFile != "" {
		var err error
		if keys, err = readAPIKeys(*keyFile); err != nil {
			return err
		}
	}
	if !*noWorker {
		if _, err := mf.mcp.build(); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %v", err)
	}
	defer ln.Close()
	if keys == nil && !*insecure && !loopback(ln.Addr()) {
		return usageError{fmt.Sprintf("--listen %s is not a loopback address: give --api-key-file (or --insecure to serve anyone who reaches it)", *listen)}
	}
	idKeyPath := *idKeyFile
	if idKeyPath == "" && *db != "" {
		idKeyPath = filepath.Join(filepath.Dir(*db), filepath.Base(*db)+".idkey")
	}
	idKey, err := loadIDKey(idKeyPath)
	if err != nil {
		return err
	}
	if idKeyPath == "" && (c.address != "" || e.getenv("TEMPORAL_ADDRESS") != "") {
		fmt.Fprintln(e.stderr, "tulip serve: response ids are keyed for this process only: give --id-key-file so that they outlive it (and are the same on every server of the threads)")
	}
	s, err := e.connect(c, true, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	var toolNames []string
	if !*noWorker {
		stop, tb, err := e.chatWorkerOn(s, mf, *taskQueue)
		if err != nil {
			return err
		}
		defer stop()
		for _, t := range tb.Tools() {
			toolNames = append(toolNames, t.Spec().Name)
		}
	}
	limits := serveLimits{maxBody: *maxBody, maxStreams: *maxStreams, write: *writeTimeout, grace: *grace, clientWait: *clientWait}
	srv := newAPIServer(s.client, *taskQueue, agents, hooks, *maxTurns, keys, idKey, origins, ln.Addr().String(), limits, toolNames)
	// A request's context ends with its client, or when the grace period
	// after a shutdown has passed (runs go on in Temporal either way).
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs := &http.Server{Handler: srv.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second, // the whole request; responses set their own write deadlines
		IdleTimeout:       120 * time.Second,
		// Headers up to 1 MiB are read, and those over maxHeaderBytes
		// refused in OpenAI's error shape (the http.Server's own 431 is
		// plain text).
		MaxHeaderBytes: 1 << 20,
		BaseContext:    func(net.Listener) context.Context { return base }}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	if s.server != nil {
		fmt.Fprintf(e.stdout, "Temporal server: %s\n", s.server.Address())
	}
	fmt.Fprintf(e.stdout, "tulip serve: http://%s/v1\n", ln.Addr())
	select {
	case <-e.ctx.Done():
	case err := <-done:
		return err
	}
	e.progress("stopping: in-flight responses have %s to finish", *grace)
	// Streams end at once (their clients resume from the last sequence
	// number they read); answers being awaited get the grace period.
	srv.drain()
	ctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		cancelBase()
		_ = hs.Close()
	}
	return nil
}

// apiServer answers the OpenAI-compatible endpoints.
type apiServer struct {
	c         client.Client
	taskQueue string
	agents    []string
	hooks     []string
	maxTurns  int
	// keys maps a bearer token to its tenant; nil: no check, one tenant.
	keys    map[string]string
	ids     idKeyer
	origins []string // allowed browser origins
	addr    string   // the listen address (the Host a request must name without keys)
	limits  serveLimits
	// toolNames are the agent's own tools (a client tool may not reuse
	// one); empty with --no-worker, where the run refuses a clash.
	toolNames []string
	toolSet   map[string]struct{} // toolNames, to look up

	streams  chan struct{} // a token a streamed response
	draining chan struct{} // closed at shutdown
	drainOne sync.Once
	// threads serializes starts on one thread within this server (the
	// start itself is atomic at the Temporal server): a lock a thread
	// while a start holds or waits for it, removed by its last holder.
	threadsMu sync.Mutex
	threads   map[string]*threadLock
}

// threadLock is one thread's start lock and how many hold or wait for it.
type threadLock struct {
	mu    sync.Mutex
	users int
}

func newAPIServer(c client.Client, taskQueue string, agents, hooks []string, maxTurns int, keys map[string]string, idKey []byte,
	origins []string, addr string, limits serveLimits, toolNames []string) *apiServer {
	return &apiServer{c: c, taskQueue: taskQueue, agents: agents, hooks: hooks, maxTurns: maxTurns, keys: keys, ids: idKeyer{key: idKey},
		origins: origins, addr: addr, limits: limits, toolNames: toolNames, toolSet: setOf(toolNames),
		streams: make(chan struct{}, limits.maxStreams), draining: make(chan struct{}), threads: map[string]*threadLock{}}
}

func (a *apiServer) drain() { a.drainOne.Do(func() { close(a.draining) }) }

func (a *apiServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", a.models)
	mux.HandleFunc("POST /v1/responses", a.createResponse)
	mux.HandleFunc("GET /v1/responses/{id}", a.getResponse)
	mux.HandleFunc("POST /v1/chat/completions", a.chatCompletions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > maxHeaderBytes {
			w.Header().Set("Connection", "close")
			apiError(w, http.StatusRequestHeaderFieldsTooLarge, "invalid_request_error", "headers_too_large",
				"", fmt.Sprintf("the request's headers are over %d bytes", maxHeaderBytes))
			return
		}
		if !a.admit(w, r) {
			return
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent) // an allowed origin's preflight (admit answered its headers)
			return
		}
		tenant, ok := a.authenticate(w, r)
		if !ok {
			return
		}
		if r.ContentLength > a.limits.maxBody {
			tooLarge(w, a.limits.maxBody)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.limits.maxBody)
		mux.ServeHTTP(w, r.WithContext(withTenant(r.Context(), tenant)))
	})
}

func setOf(names []string) map[string]struct{} {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return set
}

// maxHeaderBytes bounds a request's headers (431 over it).
const maxHeaderBytes = 64 << 10

// headerBytes is the size of a request's header lines, as sent.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// lockThread holds thread's start lock until the returned func is called.
// The map holds a thread only while a start holds or waits for its lock.
func (a *apiServer) lockThread(thread string) func() {
	a.threadsMu.Lock()
	l := a.threads[thread]
	if l == nil {
		l = &threadLock{}
		a.threads[thread] = l
	}
	l.users++
	a.threadsMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		a.threadsMu.Lock()
		if l.users--; l.users == 0 {
			delete(a.threads, thread)
		}
		a.threadsMu.Unlock()
	}
}

// lockedThreads counts the threads whose start lock is held or waited for.
func (a *apiServer) lockedThreads() int {
	a.threadsMu.Lock()
	defer a.threadsMu.Unlock()
	return len(a.threads)
}

func (a *apiServer) models(w http.ResponseWriter, r *http.Request) {
	var data []map[string]any
	for _, name := range a.agents {
		data = append(data, map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "tulip"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// readKeyFile reads a secret file: its trimmed content, or an error that
// names the flag.
func readKeyFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %v", flag, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// agentOf checks a request's model names a served agent.
func (a *apiServer) agentOf(w http.ResponseWriter, model string) bool {
	if model == "" {
		badInput(w, "model", "model is required: the agent to run (GET /v1/models lists them)")
		return false
	}
	if !slices.Contains(a.agents, model) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "model",
			fmt.Sprintf("the model %q does not exist: this server runs the agents %s", model, strings.Join(a.agents, ", ")))
		return false
	}
	return true
}
