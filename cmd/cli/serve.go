package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/serve"
)

// 'tulip serve': an OpenAI-compatible HTTP server in front of durable
// threads (docs/serve.md): a command over package serve's Handler. This
// file reads its flags and serves; serve_keys.go reads the token and id
// key files.

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
			if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
				return fmt.Errorf("%q: an origin is scheme://host[:port]", o)
			}
			*a = append(*a, o)
		}
	}
	return nil
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
	var tenant func(*http.Request) (string, error)
	if keys != nil {
		tenant = serve.BearerTokens(keys)
	}
	srv, err := serve.NewHandler(s.client, serve.Options{TaskQueue: *taskQueue, Model: chatModel, Agents: agents, Hooks: hooks,
		MaxTurns: *maxTurns, IDKey: idKey, Tenant: tenant, Addr: ln.Addr().String(), AllowedOrigins: origins, OwnTools: toolNames,
		MaxBody: *maxBody, MaxStreams: *maxStreams, WriteTimeout: *writeTimeout, ClientTimeout: *clientWait})
	if err != nil {
		return err
	}
	// A request's context ends with its client, or when the grace period
	// after a shutdown has passed (runs go on in Temporal either way).
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs := &http.Server{Handler: srv,
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
	srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		cancelBase()
		_ = hs.Close()
	}
	return nil
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

// loopback: addr is a loopback address.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
