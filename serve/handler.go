package serve

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
)

// Options configure a Handler. Only TaskQueue and IDKey are required;
// every other zero value is documented.
type Options struct {
	// TaskQueue is the queue of the workers that run the agents (each
	// with the tulip plugin and the model named Model).
	TaskQueue string
	// Model is the name the workers register the model under
	// (tulip.Options.Models). Zero value: "openai", as 'tulip serve' and
	// 'tulip chat' register it.
	Model string
	// Agents are the agents served: a request's "model" names one, and
	// GET /v1/models lists them. Zero value: ["support"].
	Agents []string
	// Hooks are installed in every run, by name (the workers' hooks).
	// Zero value: none.
	Hooks []string
	// MaxTurns is a run's model turn limit. Zero value: the run's default
	// (32).
	MaxTurns int
	// IDKey authenticates response, message, approval and call ids (an
	// HMAC key, at least 16 bytes; every instance serving the same
	// threads needs the same key). Required.
	IDKey []byte
	// Tenant names the tenant a request acts for: every thread belongs
	// to the tenant that made it, and another tenant's ids are 404s. An
	// error is a 401, its message shown; a tenant is 1-64 of A-Z a-z 0-9
	// . _ -. Put your own authentication here (OIDC, JWT, mTLS), or use
	// BearerTokens. Zero value: every request is DefaultTenant's, and
	// Addr is checked.
	Tenant func(r *http.Request) (string, error)
	// Addr is the address the handler is served on (host:port): without
	// a Tenant function, a request whose Host names anything else (DNS
	// rebinding) is refused, and a browser origin of that address is its
	// own. Zero value: no Host check and no origin of its own (only
	// AllowedOrigins are let in).
	Addr string
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed
	// to call the API, with CORS headers. Zero value: none.
	AllowedOrigins []string
	// OwnTools are the agent's own tools' names: a request's client tool
	// may not reuse one. Zero value: not checked here (a run with a
	// clashing client tool fails at its start).
	OwnTools []string
	// MaxBody bounds a request's body (413 over it). Zero value: 8 MiB.
	MaxBody int64
	// MaxStreams bounds the streamed responses at once (429 over it,
	// before any run starts). Zero value: 256.
	MaxStreams int
	// WriteTimeout bounds one write to a client: a client that stops
	// reading is dropped. Zero value: 30 s.
	WriteTimeout time.Duration
	// ClientTimeout is how long a run waits for a client tool's result
	// before answering the call as not performed (a request's metadata
	// tulip_client_timeout may shorten it). Zero value: 10 minutes.
	ClientTimeout time.Duration
}

// Options' zero values, and the names and bounds of the API.
const (
	DefaultModel         = "openai"
	DefaultMaxBody       = 8 << 20
	DefaultMaxStreams    = 256
	DefaultWriteTimeout  = 30 * time.Second
	DefaultClientTimeout = 10 * time.Minute
	// DefaultTenant owns every thread of a handler without a Tenant
	// function.
	DefaultTenant = "default"
	// ThreadHeader names the thread of a chat completion request (and
	// of its answer).
	ThreadHeader = "X-Tulip-Thread"
	// IdempotencyHeader names a request's idempotency key: a retry of a
	// request that starts a thread reaches the run its first try
	// started.
	IdempotencyHeader = "Idempotency-Key"
	// MaxHeaderBytes bounds a request's headers: over it a 431 in
	// OpenAI's error shape. Serve the handler with an http.Server whose
	// MaxHeaderBytes is larger (the server's own 431 is plain text).
	MaxHeaderBytes = 64 << 10
)

// Handler is the OpenAI-compatible API (docs/serve.md) over the tulip
// threads of one Temporal client: POST /v1/responses, GET
// /v1/responses/{id}, POST /v1/chat/completions and GET /v1/models. It
// is an http.Handler: mount it in your own server, behind your own
// middleware. Runs go on in Temporal whatever happens to a request.
type Handler struct {
	a *apiServer
	h http.Handler
}

// NewHandler returns the API over c's threads, or an error naming the
// option that is wrong.
func NewHandler(c client.Client, opts Options) (*Handler, error) {
	switch {
	case c == nil:
		return nil, errors.New("serve: a Temporal client is required")
	case opts.TaskQueue == "":
		return nil, errors.New("serve: Options.TaskQueue is required")
	case len(opts.IDKey) < 16:
		return nil, errors.New("serve: Options.IDKey must be at least 16 bytes")
	case opts.MaxBody < 0 || opts.MaxStreams < 0 || opts.WriteTimeout < 0 || opts.ClientTimeout < 0:
		return nil, errors.New("serve: Options.MaxBody, MaxStreams, WriteTimeout and ClientTimeout are not negative")
	}
	for _, o := range opts.AllowedOrigins {
		if !validOrigin(o) {
			return nil, fmt.Errorf("serve: Options.AllowedOrigins: %q is not scheme://host[:port]", o)
		}
	}
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	if len(opts.Agents) == 0 {
		opts.Agents = []string{agentrun.DefaultAgent}
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxStreams == 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.ClientTimeout == 0 {
		opts.ClientTimeout = DefaultClientTimeout
	}
	origins := make([]string, len(opts.AllowedOrigins))
	for i, o := range opts.AllowedOrigins {
		origins[i] = strings.TrimRight(o, "/")
	}
	a := &apiServer{c: c, taskQueue: opts.TaskQueue, model: opts.Model, agents: slices.Clone(opts.Agents), hooks: slices.Clone(opts.Hooks),
		maxTurns: opts.MaxTurns, tenant: opts.Tenant, ids: idKeyer{key: slices.Clone(opts.IDKey)}, origins: origins, addr: opts.Addr,
		limits:    serveLimits{maxBody: opts.MaxBody, maxStreams: opts.MaxStreams, write: opts.WriteTimeout, clientWait: opts.ClientTimeout},
		toolNames: slices.Clone(opts.OwnTools), toolSet: setOf(opts.OwnTools),
		streams: make(chan struct{}, opts.MaxStreams), draining: make(chan struct{}), threads: map[string]*threadLock{}}
	return &Handler{a: a, h: a.handler()}, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Drain ends the open streams at once, each with an error event that
// says where to resume it (GET /v1/responses/{id}?stream=true&
// starting_after=N, here once restarted or on another instance with the
// same IDKey). Call it before http.Server.Shutdown, which waits for them.
func (h *Handler) Drain() { h.a.drain() }

// serveLimits bound what one request, one stream and the handler take.
type serveLimits struct {
	maxBody    int64         // request body bytes
	maxStreams int           // concurrent streamed responses
	write      time.Duration // one write to a client
	// clientWait is how long a run waits for its client tools' results
	// (a request's metadata tulip_client_timeout may shorten it).
	clientWait time.Duration
}

// apiServer answers the OpenAI-compatible endpoints.
type apiServer struct {
	c         client.Client
	taskQueue string
	model     string // the workers' model name
	agents    []string
	hooks     []string
	maxTurns  int
	tenant    func(*http.Request) (string, error) // nil: one tenant
	ids       idKeyer
	origins   []string // allowed browser origins
	addr      string   // the listen address (the Host a request must name without a tenant function)
	limits    serveLimits
	// toolNames are the agent's own tools (a client tool may not reuse
	// one); empty when not known here, where the run refuses a clash.
	toolNames []string
	toolSet   map[string]struct{} // toolNames, to look up

	streams  chan struct{} // a token a streamed response
	draining chan struct{} // closed at shutdown
	drainOne sync.Once
	// threads serializes starts on one thread within this handler (the
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

func setOf(names []string) map[string]struct{} {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return set
}

func (a *apiServer) drain() { a.drainOne.Do(func() { close(a.draining) }) }

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

func (a *apiServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", a.models)
	mux.HandleFunc("POST /v1/responses", a.createResponse)
	mux.HandleFunc("GET /v1/responses/{id}", a.getResponse)
	mux.HandleFunc("POST /v1/chat/completions", a.chatCompletions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", fmt.Sprintf("no endpoint %s %s", r.Method, shortID(r.URL.Path)))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > MaxHeaderBytes {
			w.Header().Set("Connection", "close")
			apiError(w, http.StatusRequestHeaderFieldsTooLarge, "invalid_request_error", "headers_too_large",
				"", fmt.Sprintf("the request's headers are over %d bytes", MaxHeaderBytes))
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
