// Package cluster starts a real Temporal cluster on one machine, for tests
// and the soak, from the server module alone: a PostgreSQL server of its
// own (Debian's binaries, a temporary data folder, a free loopback port),
// the server's own SQL schemas in two databases (default store and
// visibility), and the frontend, history, matching and worker services each
// in its own OS process, history in two by default so that shards move
// when one dies. Membership is ringpop on loopback, seeded from the
// database's cluster_membership table, as in a real deployment.
//
// The service processes are a binary that calls RunService (the tulip
// binary's hidden 'cluster-service' command). Faults are methods: Kill
// (SIGKILL) and Restart a process, RestartDB (pg_ctl restart -m fast);
// WaitProgress waits until every history shard takes writes again.
//
//	c, err := cluster.Start(ctx, cluster.Options{Binary: tulipBinary, Dir: dir})
//	...
//	defer c.Stop()
//	client.Dial(client.Options{HostPort: c.FrontendAddress()})
//
// It lives in the devserver module so that the tulip library never imports
// the Temporal server.
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/api/adminservice/v1"
	"go.temporal.io/server/common"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tulip-temporal/tulip/devserver"
)

// Options configures Start. Binary is required; every other zero value
// is a working default.
type Options struct {
	// Binary hosts the service processes: Start runs `Binary
	// cluster-service --config FILE --service NAME --index N`, which must
	// call RunService (the tulip binary does). Required.
	Binary string
	// Dir holds the config file every process reads (cluster.json), one log
	// file per process (NAME-INDEX.log, kept across restarts) and, after
	// Stop, PostgreSQL's log (postgres.log). It must exist. Zero value: a
	// new temporary folder, removed by Stop.
	Dir string
	// HistoryProcesses is how many history processes run. Zero value: 2.
	HistoryProcesses int
	// Shards is the number of history shards, fixed for the database's
	// life. Zero value: 8.
	Shards int
	// Namespace is registered at start. Zero value: "default".
	Namespace string
	// Retention is how long the namespace keeps closed runs' histories
	// (see docs/threads.md for what it means for a thread). Zero value:
	// devserver.DefaultRetention (30 days). At least a day.
	Retention time.Duration
	// PostgresBin is the folder of initdb, pg_ctl and postgres. Zero value:
	// the newest /usr/lib/postgresql/*/bin (FindPostgres).
	PostgresBin string
	// DynamicConfig overrides keys of devserver.TunedDynamicConfig, which
	// every process applies (the embedded server's tuning, so latencies
	// compare). Values go through JSON: numbers, strings, booleans.
	DynamicConfig map[string]any
	// LogLevel is the lowest level the service processes log: "debug",
	// "info", "warn" or "error". Zero value: "warn".
	LogLevel string
	// StartTimeout bounds Start (when ctx has no earlier deadline), each
	// Restart and RestartDB. Zero value: 3 minutes.
	StartTimeout time.Duration
}

func (o *Options) validate() error {
	if o.Retention == 0 {
		o.Retention = devserver.DefaultRetention
	}
	if o.Retention < devserver.MinRetention {
		return fmt.Errorf("cluster: retention %s is under the server's minimum of a day", o.Retention)
	}
	if o.Binary == "" {
		return errors.New("cluster: Options.Binary is required (a binary with the cluster-service command, e.g. tulip)")
	}
	if st, err := os.Stat(o.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("cluster: binary %s is not an executable file", o.Binary)
	}
	if o.Dir != "" {
		if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
			return fmt.Errorf("cluster: folder %s does not exist", o.Dir)
		}
	}
	if o.HistoryProcesses < 0 || o.HistoryProcesses > 16 {
		return fmt.Errorf("cluster: %d history processes: want 1 to 16 (0: 2)", o.HistoryProcesses)
	}
	if o.HistoryProcesses == 0 {
		o.HistoryProcesses = 2
	}
	if o.Shards < 0 || o.Shards > 1024 {
		return fmt.Errorf("cluster: %d shards: want 1 to 1024 (0: 8)", o.Shards)
	}
	if o.Shards == 0 {
		o.Shards = 8
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return err
	}
	if o.StartTimeout < 0 {
		return fmt.Errorf("cluster: start timeout %s is negative", o.StartTimeout)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	bin, err := FindPostgres(o.PostgresBin)
	if err != nil {
		return err
	}
	o.PostgresBin = bin
	return nil
}

// ProcessError is a service process that exited, or did not start in
// time. Log is the last line of its log file.
type ProcessError struct {
	Service string
	Index   int
	Err     error
	Log     string
}

func (e *ProcessError) Error() string {
	msg := fmt.Sprintf("cluster: %s-%d: %v", e.Service, e.Index, e.Err)
	if e.Log != "" {
		msg += " (log: " + e.Log + ")"
	}
	return msg
}

func (e *ProcessError) Unwrap() error { return e.Err }

// Cluster is a running cluster. Its methods are safe for concurrent use,
// but one process should not be killed or restarted twice at once.
type Cluster struct {
	opts       Options
	dir        string
	ownDir     bool
	configFile string
	spec       *spec
	pg         *postgres
	conn       *grpc.ClientConn
	nsID       string
	probeIDs   []string // probeIDs[s] is a workflow ID on shard s+1

	mu    sync.Mutex
	procs map[string][]*process

	stopOnce sync.Once
}

// process is one service process; cmd is nil while it is down.
type process struct {
	service string
	index   int
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
}

// Start validates opts, then starts PostgreSQL, sets up the schemas,
// starts the service processes, registers the namespace, and returns once
// the frontend answers, the namespace exists, each history process owns
// shards and every shard takes writes. On error nothing is left running.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	c = &Cluster{opts: opts, dir: opts.Dir, procs: map[string][]*process{}}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "tulip-cluster-"); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.ownDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	const host = "127.0.0.1"
	if c.pg, err = startPostgres(ctx, opts.PostgresBin, host); err != nil {
		return c, err
	}
	if err = setupSchemas(c.pg.address()); err != nil {
		return c, err
	}
	c.spec = &spec{Host: host, Shards: opts.Shards, Database: c.pg.address(), Ports: map[string][]processPorts{},
		DynamicConfig: devserver.TunedDynamicConfig(), LogLevel: opts.LogLevel}
	for k, v := range opts.DynamicConfig {
		c.spec.DynamicConfig[k] = v
	}
	taken := map[int]bool{}
	for _, svc := range services {
		n := 1
		if svc == History {
			n = opts.HistoryProcesses
		}
		for i := range n {
			var ports processPorts
			if ports.GRPC, err = devserver.FreePort(host); err != nil {
				return c, err
			}
			if ports.Membership, err = membershipPort(host, taken); err != nil {
				return c, err
			}
			c.spec.Ports[svc] = append(c.spec.Ports[svc], ports)
			c.procs[svc] = append(c.procs[svc], &process{service: svc, index: i})
		}
	}
	c.configFile = filepath.Join(c.dir, "cluster.json")
	if err = c.spec.write(c.configFile); err != nil {
		return c, err
	}
	// The first process writes the cluster metadata; the others start
	// together once it is up.
	first := c.procs[History][0]
	if err = c.launch(ctx, first); err != nil {
		return c, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(c.all()))
	for _, p := range c.all() {
		if p == first {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.launch(ctx, p)
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		if e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return c, err
	}
	c.conn, err = grpc.NewClient(c.spec.frontend(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return c, fmt.Errorf("cluster: frontend client: %w", err)
	}
	if err = c.registerNamespace(ctx); err != nil {
		return c, err
	}
	// Shards went to the first history process; let the others take
	// theirs before the cluster is called ready.
	for i := range opts.HistoryProcesses {
		c.waitShards(ctx, i)
	}
	if err = c.WaitProgress(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// membershipPort finds a free port below 32768 for ringpop: the
// cluster_membership table keeps it in a smallint, and the kernel's own
// free ports (32768 and up) do not fit.
func membershipPort(host string, taken map[int]bool) (int, error) {
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		taken[p] = true
		return p, nil
	}
	return 0, errors.New("cluster: no free port between 20000 and 32000 for membership")
}

// FrontendAddress is the frontend's host:port, for client.Options.HostPort.
// It stays the same across frontend restarts.
func (c *Cluster) FrontendAddress() string { return c.spec.frontend() }

// Namespace is the namespace Start registered.
func (c *Cluster) Namespace() string { return c.opts.Namespace }

// Dir is the folder of the config file and the processes' logs.
func (c *Cluster) Dir() string { return c.dir }

// LogFile is the log file of process index of service.
func (c *Cluster) LogFile(service string, index int) string {
	return filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", service, index))
}

// Processes is how many processes run service.
func (c *Cluster) Processes(service string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.procs[service])
}

func (c *Cluster) all() []*process {
	var out []*process
	for _, svc := range services {
		out = append(out, c.procs[svc]...)
	}
	return out
}

func (c *Cluster) process(service string, index int) (*process, error) {
	ps, ok := c.procs[service]
	if !ok {
		return nil, fmt.Errorf("cluster: unknown service %q (frontend, history, matching or worker)", service)
	}
	if index < 0 || index >= len(ps) {
		return nil, fmt.Errorf("cluster: %s has %d processes, no index %d", service, len(ps), index)
	}
	return ps[index], nil
}

// launch starts p and waits for its "ready" line.
func (c *Cluster) launch(ctx context.Context, p *process) error {
	logFile, err := os.OpenFile(c.LogFile(p.service, p.index), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: log file: %w", err)
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(c.opts.Binary, "cluster-service", "--config", c.configFile, "--service", p.service, "--index", strconv.Itoa(p.index))
	cmd.Stdout, cmd.Stderr = w, logFile
	// Its own process group, so that a kill reaches anything it starts;
	// and killed with the process that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return &ProcessError{Service: p.service, Index: p.index, Err: err}
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.mu.Lock()
	p.cmd, p.exited = cmd, exited
	c.mu.Unlock()
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ready <- line == "ready\n"
	}()
	fail := func(err error) error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return &ProcessError{Service: p.service, Index: p.index, Err: err, Log: tailFile(c.LogFile(p.service, p.index))}
	}
	select {
	case ok := <-ready:
		if !ok {
			return fail(errors.New("exited before it was ready"))
		}
		return nil
	case <-ctx.Done():
		return fail(fmt.Errorf("not ready: %w", ctx.Err()))
	}
}

// Kill sends SIGKILL to process index of service (and its process group)
// and waits for it to exit. Killing a process that is down does nothing.
func (c *Cluster) Kill(service string, index int) error {
	c.mu.Lock()
	p, err := c.process(service, index)
	var cmd *exec.Cmd
	var exited chan struct{}
	if err == nil {
		cmd, exited = p.cmd, p.exited
		p.cmd = nil
	}
	c.mu.Unlock()
	if err != nil || cmd == nil {
		return err
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		return &ProcessError{Service: service, Index: index, Err: errors.New("still running 30s after SIGKILL")}
	}
}

// Signal sends sig to process index of service and its process group:
// SIGSTOP pauses it (its connections stay open, nothing answers), SIGCONT
// resumes it. A process that is down is left alone.
func (c *Cluster) Signal(service string, index int, sig syscall.Signal) error {
	c.mu.Lock()
	p, err := c.process(service, index)
	var cmd *exec.Cmd
	if err == nil {
		cmd = p.cmd
	}
	c.mu.Unlock()
	if err != nil || cmd == nil {
		return err
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return &ProcessError{Service: service, Index: index, Err: err}
	}
	return nil
}

// Restart starts process index of service again on the same ports (after
// killing it if it runs) and waits until it is ready. Clients keep the
// same frontend address. A restarted history process takes shards back
// from the others: Restart also waits until it owns one (at most 10 s: the
// ring may give it none); WaitProgress then waits until every shard takes
// writes.
func (c *Cluster) Restart(service string, index int) error {
	if err := c.Kill(service, index); err != nil {
		return err
	}
	c.mu.Lock()
	p, err := c.process(service, index)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	if err := c.launch(ctx, p); err != nil {
		return err
	}
	if service == History {
		c.waitShards(ctx, index)
	}
	return nil
}

// waitShards waits until history process index owns a shard, at most 10 s
// (the ring may give it none).
func (c *Cluster) waitShards(ctx context.Context, index int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if shards, err := c.HistoryShards(ctx, index); err == nil && len(shards) > 0 {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// HistoryShards are the shards history process index owns now, as it
// answers itself.
func (c *Cluster) HistoryShards(ctx context.Context, index int) ([]int32, error) {
	c.mu.Lock()
	_, err := c.process(History, index)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(c.spec.Host, strconv.Itoa(c.spec.Ports[History][index].GRPC))
	resp, err := adminservice.NewAdminServiceClient(c.conn).DescribeHistoryHost(ctx, &adminservice.DescribeHistoryHostRequest{HostAddress: addr})
	if err != nil {
		return nil, fmt.Errorf("cluster: shards of history-%d: %w", index, err)
	}
	return resp.GetShardIds(), nil
}

// RestartDB restarts PostgreSQL with pg_ctl restart -m fast: every
// connection drops, the server comes back on the same port and data.
func (c *Cluster) RestartDB() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	return c.pg.restart(ctx)
}

// Stop kills every service process, stops PostgreSQL (keeping its log in
// Dir when Dir was given) and removes what Start made. It is safe to call
// more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, p := range c.all() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.Kill(p.service, p.index)
			}()
		}
		wg.Wait()
		if c.conn != nil {
			c.conn.Close()
		}
		if c.pg != nil {
			keep := ""
			if !c.ownDir {
				keep = filepath.Join(c.dir, "postgres.log")
			}
			c.pg.stopAndKeepLog(keep)
		}
		if c.ownDir {
			_ = os.RemoveAll(c.dir)
		}
	})
}

func (c *Cluster) workflowService() workflowservice.WorkflowServiceClient {
	return workflowservice.NewWorkflowServiceClient(c.conn)
}

// registerNamespace registers the namespace through the frontend, as a
// user would, retrying while the frontend and history come up.
func (c *Cluster) registerNamespace(ctx context.Context) error {
	ws := c.workflowService()
	var last error
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := ws.RegisterNamespace(rctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        c.opts.Namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(c.opts.Retention),
		})
		cancel()
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := ws.DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.opts.Namespace})
			cancel()
			if err == nil {
				c.nsID = resp.GetNamespaceInfo().GetId()
				c.probeIDs = probeIDs(c.nsID, c.opts.Shards)
				return nil
			}
			last = err
		} else {
			last = err
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return fmt.Errorf("cluster: register namespace %s: %v (%w)", c.opts.Namespace, last, ctx.Err())
}

// probeIDs finds a workflow ID on each shard: probeIDs[s] lands on shard s+1.
func probeIDs(namespaceID string, shards int) []string {
	ids := make([]string, shards)
	left := shards
	for k := 0; left > 0; k++ {
		id := "tulip-cluster-probe-" + strconv.Itoa(k)
		s := common.WorkflowIDToHistoryShard(namespaceID, id, int32(shards)) - 1
		if ids[s] == "" {
			ids[s] = id
			left--
		}
	}
	return ids
}

// WaitProgress waits until every history shard takes writes: on each, a
// probe workflow is started and terminated through the frontend. After a
// history process dies this is the time its shards take to move.
func (c *Cluster) WaitProgress(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.probeIDs))
	for s, id := range c.probeIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := c.probe(ctx, id)
				if err == nil {
					errs[s] = nil
					return
				}
				errs[s] = fmt.Errorf("shard %d: %v", s+1, err)
				if ctx.Err() != nil {
					return
				}
				sleep(ctx, 100*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: shards without progress: %s", oneLine(err.Error()))
	}
	return nil
}

func (c *Cluster) probe(ctx context.Context, workflowID string) error {
	ws := c.workflowService()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := ws.StartWorkflowExecution(pctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace:                c.opts.Namespace,
		WorkflowId:               workflowID,
		WorkflowType:             &commonpb.WorkflowType{Name: "tulip-cluster-probe"},
		TaskQueue:                &taskqueuepb.TaskQueue{Name: "tulip-cluster-probe"},
		RequestId:                uuid.NewString(),
		WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
		Identity:                 "tulip-cluster",
	})
	if err != nil {
		return err
	}
	_, err = ws.TerminateWorkflowExecution(pctx, &workflowservice.TerminateWorkflowExecutionRequest{
		Namespace:         c.opts.Namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: resp.GetRunId()},
		Reason:            "probe",
		Identity:          "tulip-cluster",
	})
	return err
}

// HistoryOwner is the index of the history process that owns workflowID's
// shard now (as the owner itself answers).
func (c *Cluster) HistoryOwner(ctx context.Context, workflowID string) (int, error) {
	resp, err := adminservice.NewAdminServiceClient(c.conn).DescribeHistoryHost(ctx, &adminservice.DescribeHistoryHostRequest{
		Namespace:         c.opts.Namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
	})
	if err != nil {
		return -1, fmt.Errorf("cluster: owner of %s: %w", workflowID, err)
	}
	_, port, err := net.SplitHostPort(resp.GetAddress())
	if err != nil {
		return -1, fmt.Errorf("cluster: owner of %s: address %q: %w", workflowID, resp.GetAddress(), err)
	}
	for i, p := range c.spec.Ports[History] {
		if strconv.Itoa(p.GRPC) == port {
			return i, nil
		}
	}
	return -1, fmt.Errorf("cluster: owner of %s: %s is no history process of this cluster", workflowID, resp.GetAddress())
}

// Shard is the history shard (1 to Options.Shards) of workflowID.
func (c *Cluster) Shard(workflowID string) int {
	return int(common.WorkflowIDToHistoryShard(c.nsID, workflowID, int32(c.opts.Shards)))
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ';'
		}
		out = append(out, r)
	}
	return string(out)
}
