package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/temporal"

	"github.com/tulip-temporal/tulip/devserver"
)

// The services of a cluster, as Kill and Restart name them.
const (
	Frontend = "frontend"
	History  = "history"
	Matching = "matching"
	Worker   = "worker"
)

// services are the cluster's services in the order Start launches them
// (history first: the first process to start writes the cluster
// metadata, and two at once would race to).
var services = []string{History, Matching, Frontend, Worker}

// spec is the cluster's config file (DIR/cluster.json): what every service
// process needs to build its server config.
type spec struct {
	Host          string                    `json:"host"`
	Shards        int                       `json:"shards"`
	Database      string                    `json:"database"` // host:port of PostgreSQL
	Ports         map[string][]processPorts `json:"ports"`    // by service, by process index
	DynamicConfig map[string]any            `json:"dynamic_config"`
	LogLevel      string                    `json:"log_level"`
}

// processPorts are one process's ports: gRPC for its service, and ringpop's.
type processPorts struct {
	GRPC       int `json:"grpc"`
	Membership int `json:"membership"`
}

func (s *spec) frontend() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Ports[Frontend][0].GRPC))
}

func readSpec(path string) (*spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: config: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var s spec
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("cluster: config %s: %w", path, err)
	}
	// Dynamic config wants Go ints where JSON has integers.
	for k, v := range s.DynamicConfig {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				s.DynamicConfig[k] = int(i)
			} else if f, err := n.Float64(); err == nil {
				s.DynamicConfig[k] = f
			}
		}
	}
	return &s, nil
}

func (s *spec) write(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("cluster: config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cluster: config: %w", err)
	}
	return nil
}

// serverConfig is process index of service's server config: the shared
// persistence (PostgreSQL, two databases), cluster metadata, and the
// services with this process's own ports for its service. Membership is ringpop on loopback,
// seeded from the cluster_membership table.
func (s *spec) serverConfig(service string, index int) (*config.Config, error) {
	all, ok := s.Ports[service]
	if !ok {
		return nil, fmt.Errorf("cluster: unknown service %q (frontend, history, matching or worker)", service)
	}
	if index < 0 || index >= len(all) {
		return nil, fmt.Errorf("cluster: %s has %d processes, no index %d", service, len(all), index)
	}
	ports := all[index]
	const clusterName = "active"
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = s.Host
	conf.Persistence.DefaultStore = "default"
	conf.Persistence.VisibilityStore = "visibility"
	conf.Persistence.NumHistoryShards = int32(s.Shards)
	store := sqlConfig(s.Database, storeDatabase)
	store.MaxConns, store.MaxIdleConns = 20, 20
	vis := sqlConfig(s.Database, visibilityDatabase)
	vis.MaxConns, vis.MaxIdleConns = 10, 10
	conf.Persistence.DataStores = map[string]config.DataStore{
		"default":    {SQL: store},
		"visibility": {SQL: vis},
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: s.frontend()},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	// Every service is listed: membership keeps a ring for each listed
	// one. The others' ports are only a fallback (members advertise
	// theirs); this process's service gets its own.
	conf.Services = map[string]config.Service{}
	for name, ps := range s.Ports {
		p := ps[0]
		if name == service {
			p = ports
		}
		var svc config.Service
		svc.RPC.GRPCPort = p.GRPC
		svc.RPC.MembershipPort = p.Membership
		svc.RPC.BindOnIP = s.Host
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = s.frontend()
	if err := conf.Validate(); err != nil {
		return nil, fmt.Errorf("cluster: %s-%d config: %w", service, index, err)
	}
	return &conf, nil
}

// ServiceOptions configures RunService.
type ServiceOptions struct {
	// ConfigFile is the cluster's config file, written by Start. Required.
	ConfigFile string
	// Service is the one service this process hosts: Frontend, History,
	// Matching or Worker. Required.
	Service string
	// Index is the process's index among its service's processes (history
	// has several). Zero value: the first.
	Index int
	// Ready receives the line "ready" once the service has started. Zero
	// value: os.Stdout.
	Ready io.Writer
	// Log receives the server's log lines at the cluster's log level. Zero
	// value: os.Stderr.
	Log io.Writer
}

// RunService hosts one service of a cluster Start made until ctx is done
// (SIGTERM; Kill uses SIGKILL), then stops it. A binary given to
// Options.Binary runs it for `cluster-service --config FILE --service NAME
// --index N`.
func RunService(ctx context.Context, opts ServiceOptions) error {
	if opts.ConfigFile == "" || opts.Service == "" {
		return fmt.Errorf("cluster: a service process needs a config file and a service name")
	}
	if opts.Ready == nil {
		opts.Ready = os.Stdout
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	s, err := readSpec(opts.ConfigFile)
	if err != nil {
		return err
	}
	cfg, err := s.serverConfig(opts.Service, opts.Index)
	if err != nil {
		return err
	}
	level, err := parseLevel(s.LogLevel)
	if err != nil {
		return err
	}
	dc := dynamicconfig.StaticClient{}
	for k, v := range s.DynamicConfig {
		dc[dynamicconfig.MakeKey(k)] = v
	}
	srv, err := temporal.NewServer(
		temporal.ForServices([]string{opts.Service}),
		temporal.WithConfig(cfg),
		temporal.WithLogger(exitOnFatal{devserver.NewLogger(opts.Log, level)}),
		temporal.WithDynamicConfigClient(dc),
	)
	if err != nil {
		return fmt.Errorf("cluster: %s-%d: %w", opts.Service, opts.Index, err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("cluster: %s-%d: start: %w", opts.Service, opts.Index, err)
	}
	fmt.Fprintln(opts.Ready, "ready")
	<-ctx.Done()
	return srv.Stop()
}

// exitOnFatal ends the process on a fatal log line, as the server expects
// of its loggers (a ringpop port it cannot bind, a lost database at start).
type exitOnFatal struct{ log.Logger }

func (l exitOnFatal) Fatal(msg string, tags ...tag.Tag) {
	l.Logger.Fatal(msg, tags...)
	os.Exit(1)
}

// parseLevel reads Options.LogLevel; empty is warn.
func parseLevel(s string) (slog.Level, error) {
	if s == "" {
		return slog.LevelWarn, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("cluster: log level %q is not debug, info, warn or error", s)
	}
	return l, nil
}
