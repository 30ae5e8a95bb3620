// Package cli is the tulip command line, callable in process (Main) so that
// tests can drive it with their own arguments and output.
package cli

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/internal/keyfile"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

const usage = `tulip: LLM-agent tool calls that are safe to repeat, on Temporal.

Usage:
  tulip demo [--address A]              run the refund story on an embedded server
  tulip dev [--db FILE] [--port N]      embedded server + Web UI + demo worker; stays up
  tulip run --scenario FILE [--json]    play a scenario (docs/scenarios.md) and print its trace
  tulip chat --base-url URL --model M "message"
                                        run the support agent against an OpenAI-compatible model
  tulip serve --base-url URL --model M [--listen HOST:PORT]
                                        an OpenAI-compatible API (Responses, chat completions) over durable threads
  tulip inspect THREAD [--agent A] [--json]
                                        print a thread's execution log
  tulip explain THREAD CALL_ID [--agent A] [--json]
                                        why a call ran again: its tool's records, nearest first
  tulip watch WORKFLOW_ID [--json]      print a running run live: each call as decided, the model's text
  tulip history WORKFLOW_ID -o FILE     export a run's history as JSON
  tulip history --recent N [--query Q] -o DIR
                                        export the latest closed agent runs (the replay gate)
  tulip replay FILE|DIR...              replay histories with the tulip plugin installed
  tulip resume THREAD --answer TEXT [--perform-dangling] [--interrupt ID] [--signal]
                                        answer an interrupted run
  tulip fork THREAD --at N (--task-queue Q | --base-url URL) --model M [--live]
                                        a new thread from THREAD before its response N; what THREAD
                                        did is served from its log, new calls are held
  tulip eval THREAD... | FILE... (--task-queue Q | --base-url URL) --model M [--max-diverged K]
                                        fork each recorded thread from its first response and report
                                        where the new model's calls differ (exit 1 past K)
  tulip export THREAD... -o DIR         write threads in full as JSON files (eval reads them with no server)
  tulip mcp tools --mcp NAME=COMMAND ARGS... | --mcp-url NAME=URL [--mcp-trust NAME] [--approve-destructive] [--json]
                                        list MCP servers' tools and what tulip does with each
  tulip codec-server --codec-key-file FILE [--port N] [--allow-origin URL,...]
                                        serve the codec endpoint that decrypts payloads for a Web UI
  tulip keygen KEY_ID                   print a key file line with a fresh AES-256 key
  tulip set-current-version --deployment D --build-id B
                                        make a Worker Deployment Version current: new runs start on it
  tulip soak [--cluster] [--workers N] [--threads T] [--duration D] [--kill-every D] [--upgrade-at D] [--json]
                                        many agents on worker processes, with worker kills,
                                        server restarts and pauses, dropped connections (and on
                                        a cluster service kills), checked against the same runs
                                        played alone and the services' witnesses

Commands that talk to a server take --address and --namespace, and read the
Temporal CLI's environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH,
TEMPORAL_TLS_CLIENT_KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH,
TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS_DISABLE_HOST_VERIFICATION. demo, run
and chat start an embedded server when no address is given.

chat, dev and resume --db take the same --mcp flags: their worker then
offers the servers' tools too (docs/mcp.md).

--codec-key-file FILE (or TULIP_CODEC_KEY_FILE) encrypts every payload with
AES-256-GCM on every command that reads or writes them: the first key in the
file encrypts, all of them decrypt (rotation). 'tulip dev' then serves a
codec endpoint so its Web UI shows payloads decrypted.

'tulip COMMAND --help' lists a command's flags. TULIP_LOG_LEVEL (debug,
info, warn, error) shows the server's and the SDK's logs. The rules, the
scenario format and the wire protocol are in docs/ in the repository.
`

// Main runs the tulip command line with args (without the program name) and
// returns the exit code. Errors are one line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "demo":
		err = e.demo(args[1:])
	case "dev":
		err = e.dev(args[1:])
	case "run":
		err = e.run(args[1:])
	case "chat":
		err = e.chat(args[1:])
	case "serve":
		err = e.serve(args[1:])
	case "inspect":
		err = e.inspect(args[1:])
	case "explain":
		err = e.explain(args[1:])
	case "watch":
		err = e.watchCmd(args[1:])
	case "history":
		err = e.history(args[1:])
	case "set-current-version":
		err = e.setCurrentVersion(args[1:])
	case "replay":
		err = e.replay(args[1:])
	case "resume":
		err = e.resume(args[1:])
	case "fork":
		err = e.fork(args[1:])
	case "eval":
		err = e.eval(args[1:])
	case "export":
		err = e.export(args[1:])
	case "mcp":
		err = e.mcpCmd(args[1:])
	case "codec-server":
		err = e.codecServerCmd(args[1:])
	case "keygen":
		err = e.keygen(args[1:])
	case "soak":
		err = e.soak(args[1:])
	case "soak-worker":
		err = e.soakWorker(args[1:])
	case "soak-server":
		err = e.soakServer(args[1:])
	case "cluster-service":
		err = e.clusterService(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usageError{fmt.Sprintf("unknown command %q (try 'tulip help')", args[0])}
	}
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	var keyErr *codec.KeyError
	if errors.As(err, &keyErr) {
		// However deep it came from, the person needs this line.
		fmt.Fprintln(stderr, "tulip: "+keyErr.Error())
		return 1
	}
	if errors.Is(err, devserver.ErrPortInUse) {
		fmt.Fprintln(stderr, "tulip: "+oneLine(err.Error()))
		return 1
	}
	fmt.Fprintln(stderr, "tulip: "+oneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// exitCode ends Main with this code and no further message.
type exitCode int

func (e exitCode) Error() string { return "exit " + strconv.Itoa(int(e)) }

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.ReplaceAll(s, "\n", " ")
}

type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
	getenv         func(string) string
}

func (e *env) progress(format string, a ...any) {
	fmt.Fprintf(e.stderr, format+"\n", a...)
}

// flagSet is a command's flags, and how to print its help.
type flagSet struct {
	*flag.FlagSet
	help func()
}

// flags makes a flag set whose errors come back as usage errors, and
// whose -h/--help prints its flags to stdout (exit 0).
func (e *env) flags(name string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("tulip "+name, flag.ContinueOnError)}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.help = func() {
		fmt.Fprintf(e.stdout, "usage: tulip %s [flags]%s\n\nflags:\n", name, helpArgs[name])
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprintln(e.stdout, "\nThe formats, rules and protocol: docs/ in the repository (README.md, docs/rules.md, docs/scenarios.md, docs/protocol.md).")
	}
	return fs
}

// helpArgs are the positional arguments each command takes, for --help.
var helpArgs = map[string]string{
	"inspect": " THREAD", "explain": " THREAD CALL_ID", "watch": " WORKFLOW_ID", "keygen": " KEY_ID", "history": " WORKFLOW_ID", "replay": " FILE...", "resume": " THREAD", "fork": " THREAD", "eval": " THREAD... | FILE...", "export": " THREAD...", "chat": ` "message"`,
}

// dbFlag is --db for a command that reads threads: the embedded server's
// state file of 'tulip chat --db FILE' (or dev, serve, fork): the command
// starts the embedded server on it instead of dialing one.
func dbFlag(fs *flagSet) *string {
	return fs.String("db", "", "read the threads of an embedded server's state file ('tulip chat --db FILE', dev, serve): start it on FILE instead of dialing --address")
}

func parse(fs *flagSet, args []string) error {
	// Allow flags after positional arguments: tulip inspect T --agent a.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.help()
				return exitCode(0)
			}
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// conn holds the connection flags shared by server commands.
type conn struct {
	address, namespace string
	codecKeyFile       string
	threadStore        string // --thread-store
	blobStore          string // --blob-store
}

func (e *env) connFlags(fs *flagSet) *conn {
	c := &conn{}
	fs.StringVar(&c.address, "address", "", "Temporal frontend host:port (default $TEMPORAL_ADDRESS, else an embedded server where the command allows)")
	fs.StringVar(&c.namespace, "namespace", "", "Temporal namespace (default $TEMPORAL_NAMESPACE, else \"default\")")
	e.codecFlag(fs, &c.codecKeyFile)
	e.storeFlags(fs, c)
	return c
}

// codecFlag adds --codec-key-file to fs.
func (e *env) codecFlag(fs *flagSet, p *string) {
	fs.StringVar(p, "codec-key-file", "", "encrypt payloads (AES-256-GCM) with the first key of this file, decrypt with any; lines \"KEY_ID BASE64_OF_32_BYTES\" (default $TULIP_CODEC_KEY_FILE; none: payloads are stored as written)")
}

// keys loads the key file the flag names, else TULIP_CODEC_KEY_FILE; nil
// when neither is set.
func (e *env) keys(flagValue string) (*codec.Keyring, error) {
	path := flagValue
	if path == "" {
		path = e.getenv("TULIP_CODEC_KEY_FILE")
	}
	if path == "" {
		return nil, nil
	}
	keys, err := codec.LoadKeyFile(path)
	if err != nil {
		return nil, err // the one line
	}
	if w := keyfile.Warning(path); w != "" {
		e.progress("%s", w)
	}
	return keys, nil
}

// logLevel is TULIP_LOG_LEVEL (debug, info, warn, error), or def.
func (e *env) logLevel(def slog.Level) slog.Level {
	level := def
	if v := e.getenv("TULIP_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return level
}

// logger writes the SDK's logs to stderr: errors only, unless
// TULIP_LOG_LEVEL says otherwise.
func (e *env) logger() sdklog.Logger {
	level := e.logLevel(slog.LevelError)
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})))
}

// session is a client, with the embedded server it may have started and
// the blob store that keeps its large payloads (nil: none).
type session struct {
	client  client.Client
	server  *devserver.Server
	blobs   blobstore.Store
	threads string                // the thread store's URL or directory ("": none)
	ns      string                // the namespace
	local   bool                  // the server is this process's own
	metrics client.MetricsHandler // nil: none
	keys    *codec.Keyring        // nil: payloads are not encrypted
	env     *env
	// version, when set, puts the session's workers on a Worker
	// Deployment Version (--deployment, --build-id; docs/deploy.md).
	version *sdkworker.WorkerDeploymentVersion
}

func (s *session) Close() {
	if s.client != nil {
		s.client.Close()
	}
	if s.server != nil {
		s.server.Stop()
	}
}

// connect dials the server named by flags or environment, or starts an
// embedded one when embedded is true and none is named.
func (e *env) connect(c *conn, embedded bool, dbFile string) (*session, error) {
	addr := c.address
	if addr == "" {
		addr = e.getenv("TEMPORAL_ADDRESS")
	}
	ns := c.namespace
	if ns == "" {
		ns = e.getenv("TEMPORAL_NAMESPACE")
	}
	if ns == "" {
		ns = "default"
	}
	keys, err := e.keys(c.codecKeyFile)
	if err != nil {
		return nil, err
	}
	s := &session{keys: keys, threads: c.threadStore}
	if c.blobStore != "" {
		if s.blobs, err = e.openBlobStore(c.blobStore); err != nil {
			return nil, err
		}
	}
	local := false
	if addr == "" {
		if !embedded {
			return nil, usageError{"no server: give --address (or TEMPORAL_ADDRESS); 'tulip dev' starts one"}
		}
		e.progress("starting the embedded Temporal server...")
		start := time.Now()
		srv, err := devserver.Start(devserver.Options{DBFile: dbFile, Namespace: ns, LogOutput: e.stderr, LogLevel: e.logLevel(slog.LevelError)})
		if err != nil {
			return nil, err
		}
		e.progress("embedded server at %s (started in %s)", srv.Address(), time.Since(start).Round(time.Millisecond))
		s.server, addr = srv, srv.Address()
		local = true
	}
	return e.dial(s, addr, ns, local, dbFile)
}

// dial connects s to addr. Large payloads go to a blob store: the one
// --blob-store, TULIP_BLOB_STORE or TULIP_BLOB_DIR names; else, for a
// local server, a directory beside its database file (dbFile + ".blobs"),
// or memory when it keeps none.
func (e *env) dial(s *session, addr, ns string, local bool, dbFile string) (*session, error) {
	s.ns, s.local = ns, local
	blobDir := e.getenv("TULIP_BLOB_DIR")
	if u := e.getenv("TULIP_BLOB_STORE"); u != "" {
		blobDir = u
	}
	switch {
	case s.blobs != nil:
	case blobDir != "":
		d, err := e.openBlobStore(blobDir)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.blobs = d
	case local && dbFile != "":
		d, err := blobstore.NewDir(dbFile + ".blobs")
		if err != nil {
			s.Close()
			return nil, err
		}
		s.blobs = d
	case local:
		s.blobs = &blobstore.Memory{}
	}
	// Threads outlive their runs' retention in a thread store: the one
	// --thread-store, TULIP_THREAD_STORE or TULIP_THREAD_DIR names, else
	// one beside a local server's database file (dbFile + ".threads");
	// a worker on a named server keeps one in the user's state directory
	// (startWorker).
	threadDir := e.getenv("TULIP_THREAD_DIR")
	if u := e.getenv("TULIP_THREAD_STORE"); u != "" {
		threadDir = u
	}
	switch {
	case s.threads != "":
	case threadDir != "":
		s.threads = threadDir
	case local && dbFile != "":
		s.threads = dbFile + ".threads"
	}
	opts := client.Options{HostPort: addr, Namespace: ns, Logger: e.logger(), MetricsHandler: s.metrics}
	if s.blobs != nil {
		opts.ExternalStorage = blobstore.ExternalStorage(s.blobs, 0)
	}
	// Blobs are stored after encryption: they hold ciphertext too.
	opts.DataConverter, opts.FailureConverter = converters(s.keys)
	if err := e.tlsOptions(&opts); err != nil {
		s.Close()
		return nil, err
	}
	dctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	cl, err := client.DialContext(dctx, opts)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cannot reach Temporal at %s: %v", addr, err)
	}
	s.client = cl
	s.env = e
	return s, nil
}

// tlsOptions applies the Temporal CLI's TLS and API-key environment. TLS is
// on when TEMPORAL_TLS is true, or when a certificate, CA, server name or
// API key is given, unless TEMPORAL_TLS is explicitly false.
func (e *env) tlsOptions(opts *client.Options) error {
	apiKey := e.getenv("TEMPORAL_API_KEY")
	if apiKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	certPath, keyPath := e.getenv("TEMPORAL_TLS_CLIENT_CERT_PATH"), e.getenv("TEMPORAL_TLS_CLIENT_KEY_PATH")
	caPath, serverName := e.getenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH"), e.getenv("TEMPORAL_TLS_SERVER_NAME")
	useTLS := certPath != "" || keyPath != "" || caPath != "" || serverName != "" || apiKey != ""
	if v := e.getenv("TEMPORAL_TLS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("TEMPORAL_TLS=%q is not a boolean", v)
		}
		useTLS = b
	}
	if !useTLS {
		return nil
	}
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if certPath != "" || keyPath != "" {
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return fmt.Errorf("TLS client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if caPath != "" {
		pem, err := os.ReadFile(caPath)
		if err != nil {
			return fmt.Errorf("TLS server CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS server CA %s holds no certificate", caPath)
		}
		cfg.RootCAs = pool
	}
	if skip, _ := strconv.ParseBool(e.getenv("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION")); skip {
		cfg.InsecureSkipVerify = true
	}
	opts.ConnectionOptions.TLS = cfg
	return nil
}

// startWorker runs a tulip worker on taskQueue until the returned stop is
// called.
func (s *session) startWorker(taskQueue string, opts workerplugin.Options) (func(), error) {
	if s.blobs != nil {
		opts.PayloadLimit = -1 // large payloads go to the blob store
	}
	if s.threads == "" && !s.local {
		// A named server's namespace deletes runs on its retention: a
		// worker of the CLI never serves threads without a store.
		dir, err := s.env.defaultThreadDir(s.ns)
		if err != nil {
			return nil, err
		}
		s.threads = dir
	}
	if s.threads != "" && opts.Checkpointer == nil {
		// The entries hold ciphertext when payloads are encrypted.
		store, err := s.env.openThreadStore(s.threads, s.keys)
		if err != nil {
			return nil, err
		}
		opts.Checkpointer = threadstate.TemporalCheckpointer{Store: store}
	}
	for _, w := range storeWarnings(s.env.ctx, s.client, s.ns, s.threads, s.keys != nil, s.local) {
		fmt.Fprintln(s.env.stderr, "tulip: "+w)
	}
	plugin, err := workerplugin.NewPlugin(opts)
	if err != nil {
		return nil, err
	}
	wopts := sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}}
	if s.version != nil {
		// Agent runs are pinned (the plugin registers them so): a run ends
		// on this version, a thread's next run starts on the current one.
		wopts.DeploymentOptions = sdkworker.DeploymentOptions{UseVersioning: true, Version: *s.version}
	}
	w := sdkworker.New(s.client, taskQueue, wopts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("worker: %v", err)
	}
	return w.Stop, nil
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
