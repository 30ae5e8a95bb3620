// Package devserver embeds a Temporal server (SQLite, in memory or in a file)
// for local use and tests: the temporalite idea, tuned for agent loops.
//
// It lives in its own module so that importing the tulip library never pulls
// in go.temporal.io/server.
package devserver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Options configures Start. The zero value is valid: an in-memory server on
// 127.0.0.1, a free port, the "default" namespace, tuned dynamic config, and
// only error logs, written to stderr.
type Options struct {
	// Host is the IP the frontend binds. It must be a loopback address.
	// Zero value: 127.0.0.1.
	Host string
	// Port is the frontend gRPC port. Zero value: a free port.
	Port int
	// Namespace is created at start. Zero value: "default".
	Namespace string
	// Retention is how long the namespace keeps a closed run's history
	// before it deletes it; a database file's namespace is brought to it
	// at every start. A thread's runs are closed runs: see
	// docs/threads.md for what their deletion means and how tulip keeps
	// threads past it. Zero value: DefaultRetention. At least a day.
	Retention time.Duration
	// DBFile keeps the server's state in this SQLite file, so it survives a
	// restart. Zero value: in memory, gone at Stop.
	DBFile string
	// ServerDefaults keeps the server's stock dynamic config instead of the
	// tuned one (for baselines). Zero value: tuned.
	ServerDefaults bool
	// DynamicConfig overrides individual dynamic config keys, applied last.
	DynamicConfig map[string]any
	// LogOutput receives server logs at LogLevel and above. Zero value:
	// os.Stderr.
	LogOutput io.Writer
	// LogLevel is the lowest level logged. Zero value (slog.LevelInfo) is
	// raised to slog.LevelError unless LogOutput is set.
	LogLevel slog.Level
	// MetricsAddress serves the server's own metrics in Prometheus' text
	// format at http://MetricsAddress/metrics: persistence requests by
	// operation, task latencies, and the rest the server reports. Zero
	// value: none.
	MetricsAddress string
}

// DefaultRetention is Options.Retention's zero value: 30 days, long
// enough that a laptop's threads never meet it (the server's own default
// is a day).
const DefaultRetention = 30 * 24 * time.Hour

// MinRetention is the shortest Retention the server accepts.
const MinRetention = 24 * time.Hour

// TunedDynamicConfig is what Start applies unless Options.ServerDefaults is
// set. The history queue processors' poll-rate limits (20 per second by
// default) make every sequential activity after the first few wait ~50 ms;
// agent loops are exactly that shape.
func TunedDynamicConfig() map[string]any {
	dc := dynamicconfig.StaticClient{}
	for _, k := range []dynamicconfig.Key{
		dynamicconfig.TransferProcessorMaxPollRPS.Key(),
		dynamicconfig.TransferProcessorMaxPollHostRPS.Key(),
		dynamicconfig.TimerProcessorMaxPollRPS.Key(),
		dynamicconfig.TimerProcessorMaxPollHostRPS.Key(),
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(),
		dynamicconfig.VisibilityProcessorMaxPollHostRPS.Key(),
		dynamicconfig.OutboundProcessorMaxPollRPS.Key(),
		dynamicconfig.OutboundProcessorMaxPollHostRPS.Key(),
	} {
		dc[k] = 10000
	}
	dc[dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key()] = 1000
	dc[dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key()] = true
	// A closed run is deleted (retention, 'temporal workflow delete') only
	// once the transfer queue's ack level passed its close, which is saved
	// every 30 s by default: a delete right after a close took over 30 s.
	dc[dynamicconfig.TransferProcessorUpdateAckInterval.Key()] = "1s"
	out := make(map[string]any, len(dc))
	for k, v := range dc {
		out[k.String()] = v
	}
	return out
}

// Server is a running embedded Temporal server.
type Server struct {
	srv       temporal.Server
	address   string
	namespace string
	retention time.Duration
	stopOnce  sync.Once
}

// Address is the frontend's host:port, for client.Options.HostPort.
func (s *Server) Address() string { return s.address }

// Namespace is the namespace the server created.
func (s *Server) Namespace() string { return s.namespace }

// Retention is the namespace's retention (Options.Retention).
func (s *Server) Retention() time.Duration { return s.retention }

// Stop stops the server. It is safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() { s.srv.Stop() })
}

func (o *Options) validate() error {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	ip := net.ParseIP(o.Host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("devserver: host %q is not a loopback IP address", o.Host)
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("devserver: port %d is out of range", o.Port)
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Retention < MinRetention {
		return fmt.Errorf("devserver: retention %s is under the server's minimum of a day", o.Retention)
	}
	if o.DBFile != "" {
		dir := filepath.Dir(o.DBFile)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("devserver: folder %q for the database file does not exist", dir)
		}
	}
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
		if o.LogLevel < slog.LevelError {
			o.LogLevel = slog.LevelError
		}
	}
	return nil
}

// ErrPortInUse is wrapped by Start when the frontend port is taken.
var ErrPortInUse = errors.New("devserver: port already in use")

// Start validates the options, then starts the server and returns once it
// accepts connections.
func Start(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	var ports [5]int
	for i := range ports {
		p, err := freePort(opts.Host)
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	if opts.Port != 0 {
		// The server panics on a port it cannot bind: check it first.
		if err := CheckPort(opts.Host, opts.Port, "--port, or 0 for a free one"); err != nil {
			return nil, err
		}
		ports[0] = opts.Port
	}
	cfg, err := buildConfig(&opts, ports)
	if err != nil {
		return nil, err
	}
	dc := dynamicconfig.StaticClient{}
	if !opts.ServerDefaults {
		for k, v := range TunedDynamicConfig() {
			dc[dynamicconfig.MakeKey(k)] = v
		}
	}
	for k, v := range opts.DynamicConfig {
		dc[dynamicconfig.MakeKey(k)] = v
	}
	logger := &logAdapter{w: opts.LogOutput, level: opts.LogLevel}
	host := func(p int) static.Hosts { return static.SingleLocalHost(net.JoinHostPort(opts.Host, strconv.Itoa(p))) }
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: host(ports[0]),
			primitives.HistoryService:  host(ports[2]),
			primitives.MatchingService: host(ports[3]),
			primitives.WorkerService:   host(ports[4]),
		}),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start: %w", err)
	}
	s := &Server{srv: srv, address: net.JoinHostPort(opts.Host, strconv.Itoa(ports[0])), namespace: opts.Namespace, retention: opts.Retention}
	if err := waitReachable("frontend", s.address, 10*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.keepRetention(30 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReachable waits until addr (the what: "frontend", "UI") accepts TCP
// connections.
func waitReachable(what, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("devserver: %s %s not reachable: %w", what, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func buildConfig(o *Options, ports [5]int) (*config.Config, error) {
	const clusterName = "active"
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	if o.MetricsAddress != "" {
		conf.Global.Metrics = &metrics.Config{Prometheus: &metrics.PrometheusConfig{
			Framework: metrics.FrameworkOpentelemetry, ListenAddress: o.MetricsAddress, HandlerPath: "/metrics"}}
	}
	conf.Global.Membership.BroadcastAddress = o.Host
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1

	sqlConf := config.SQL{PluginName: sqliteplugin.PluginName}
	if o.DBFile == "" {
		sqlConf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlConf.DatabaseName = "tulip-" + strconv.FormatUint(rand.Uint64(), 36)
	} else {
		// Attributes other than the driver's query parameters are sent as
		// pragmas, by these names: the file keeps a write-ahead log (one
		// sync a commit, and reads that need no lock), and a connection
		// waits for a lock instead of failing. With the names misspelled
		// (as before) the file kept SQLite's rollback journal: in a
		// 160-thread soak a one-thread visibility listing queued behind
		// the writes, 14 s at 28 minutes and 73 to 82 s at 68 (12,000
		// executions), and the thread loads of plain starts failed. The
		// server keeps one connection: with several, colliding writers
		// failed with SQLITE_BUSY (534 in a soak's first minute, shard
		// updates among them), whatever the busy timeout.
		sqlConf.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "busy_timeout": "10000"}
		sqlConf.DatabaseName = o.DBFile
		if _, err := os.Stat(o.DBFile); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(&sqlConf); err != nil {
				return nil, fmt.Errorf("devserver: set up schema in %s: %w", o.DBFile, err)
			}
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, o.Namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace: %w", err)
	}
	ns.Detail.Config.Retention = durationpb.New(o.Retention)
	if err := sqliteschema.CreateNamespaces(&sqlConf, ns); err != nil {
		return nil, fmt.Errorf("devserver: create namespace: %w", err)
	}
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: &sqlConf}}

	frontend := net.JoinHostPort(o.Host, strconv.Itoa(ports[0]))
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				HTTPAddress:            net.JoinHostPort(o.Host, strconv.Itoa(ports[1])),
				ClusterID:              "tulip-dev",
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	svc := func(p int) config.Service {
		var s config.Service
		s.RPC.GRPCPort = p
		s.RPC.BindOnIP = o.Host
		return s
	}
	fe := svc(ports[0])
	fe.RPC.HTTPPort = ports[1]
	conf.Services = map[string]config.Service{
		"frontend": fe,
		"history":  svc(ports[2]),
		"matching": svc(ports[3]),
		"worker":   svc(ports[4]),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	return &conf, nil
}

// FreePort finds a free TCP port on host (a loopback IP) for a server to
// bind next: see freePort.
func FreePort(host string) (int, error) { return freePort(host) }

// freePort finds a free port and leaves it in TIME_WAIT (closed from the
// listening side), so the kernel will not hand it to another bind(:0) before
// the server binds it explicitly.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("devserver: no free port: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("devserver: reserve port: %w", err)
	}
	defer c.Close()
	sc, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("devserver: reserve port: %w", err)
	}
	sc.Close()
	return port, nil
}

// printable quotes s when it holds anything but printable text (the
// server logs raw payload bytes in some tags).
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

// NewLogger is the server logger Start uses: text lines at or above level
// written to w. Processes that host one service of a cluster log with it.
func NewLogger(w io.Writer, level slog.Level) log.Logger {
	return &logAdapter{w: w, level: level}
}

// logAdapter writes the server's logs as text lines at or above level.
type logAdapter struct {
	mu    sync.Mutex
	w     io.Writer
	level slog.Level
}

func (l *logAdapter) log(level slog.Level, msg string, tags []tag.Tag) {
	if level < l.level {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	line := fmt.Sprintf("temporal %s %s", level, printable(msg))
	for _, t := range tags {
		line += fmt.Sprintf(" %s=%s", t.Key(), printable(fmt.Sprint(t.Value())))
	}
	fmt.Fprintln(l.w, line)
}

func (l *logAdapter) Debug(msg string, tags ...tag.Tag)  { l.log(slog.LevelDebug, msg, tags) }
func (l *logAdapter) Info(msg string, tags ...tag.Tag)   { l.log(slog.LevelInfo, msg, tags) }
func (l *logAdapter) Warn(msg string, tags ...tag.Tag)   { l.log(slog.LevelWarn, msg, tags) }
func (l *logAdapter) Error(msg string, tags ...tag.Tag)  { l.log(slog.LevelError, msg, tags) }
func (l *logAdapter) DPanic(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }
func (l *logAdapter) Panic(msg string, tags ...tag.Tag)  { l.log(slog.LevelError, msg, tags) }
func (l *logAdapter) Fatal(msg string, tags ...tag.Tag)  { l.log(slog.LevelError+4, msg, tags) }
