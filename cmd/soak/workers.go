package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/demo/pager"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
)

// pool is the soak's worker OS processes on one task queue.
type pool struct {
	bin  string
	args []string
	log  io.Writer
	// private, when set, gives each worker process a home, temp and
	// working directory of its own under it, and env beside the soak's.
	private string
	env     []string

	mu       sync.Mutex
	procs    []*exec.Cmd
	spawned  int
	pids     map[string]bool // every process's PID, as text
	stopping bool
}

// ran says whether one of the pool's processes had PID pid.
func (p *pool) ran(pid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pids[pid]
}

// spawn starts one more worker process and waits until it polls, trying
// again for up to 2 minutes while the server is away (a worker that cannot
// reach it exits).
func (p *pool) spawn() error {
	var cmd *exec.Cmd
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		if cmd, _, err = startProcess("a worker", p.bin, p.args, p.log, p.setup); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.stopping {
		// stop ran while this one started (a replacement, exited):
		// it is not wanted.
		p.mu.Unlock()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil
	}
	p.procs = append(p.procs, cmd)
	p.spawned++
	if p.pids == nil {
		p.pids = map[string]bool{}
	}
	p.pids[strconv.Itoa(cmd.Process.Pid)] = true
	p.mu.Unlock()
	go func() { // in procs first: a worker that dies at once is replaced
		_ = cmd.Wait()
		p.exited(cmd)
	}()
	return nil
}

// exited replaces a worker process that died on its own (one that killed
// itself after an effect, Options.EffectKills): one the nemesis killed or
// stop ended is no longer in procs.
func (p *pool) exited(cmd *exec.Cmd) {
	p.mu.Lock()
	i := slices.Index(p.procs, cmd)
	if i < 0 || p.stopping {
		p.mu.Unlock()
		return
	}
	p.procs = slices.Delete(p.procs, i, i+1)
	p.mu.Unlock()
	if err := p.spawn(); err != nil && p.log != nil {
		fmt.Fprintf(p.log, "soak: replacing a worker that exited: %v\n", err)
	}
}

// setup gives a worker process its private directories and environment.
func (p *pool) setup(cmd *exec.Cmd) {
	if p.private == "" {
		return
	}
	p.mu.Lock()
	n := p.spawned
	p.mu.Unlock()
	home := filepath.Join(p.private, fmt.Sprintf("worker-%d-%d", n, time.Now().UnixNano()))
	if err := os.MkdirAll(home, 0o700); err != nil {
		return // the worker starts without one; its thread store is shared anyway
	}
	cmd.Dir = home
	cmd.Env = append(append(os.Environ(), p.env...), "HOME="+home, "TMPDIR="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
}

// kill SIGKILLs a random worker process and returns the kill.
func (p *pool) kill(rng *rand.Rand) (Kill, error) {
	p.mu.Lock()
	if len(p.procs) == 0 {
		p.mu.Unlock()
		return Kill{}, errors.New("soak: no worker to kill")
	}
	k := rng.IntN(len(p.procs))
	victim := p.procs[k]
	p.procs = append(p.procs[:k], p.procs[k+1:]...)
	p.mu.Unlock()
	at := time.Now()
	if err := syscall.Kill(-victim.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return Kill{}, err
	}
	// Gone already (it killed itself after an effect and exited found it
	// out of procs): the caller replaces it all the same.
	return Kill{Pid: victim.Process.Pid, At: at}, nil
}

// stop ends every worker process (SIGKILL: the soak is over).
func (p *pool) stop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	for _, c := range p.procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	p.procs = nil
	return p.spawned
}

// WorkerOptions are the hidden 'tulip soak-worker' command's.
type WorkerOptions struct {
	// Address and Namespace of the frontend (the soak's proxy).
	Address, Namespace string
	// TaskQueue to poll (required).
	TaskQueue string
	// CacheSize is the sticky workflow cache size. Zero value: the SDK's.
	CacheSize int
	// Billing and Pager are the demo services' URLs (required).
	Billing, Pager string
	// CodecKeyFile encrypts payloads. Zero value: none.
	CodecKeyFile string
	// Attempts is a file that every activity attempt's start and end is
	// appended to (witness.go). Zero value: none.
	Attempts string
	// Inject is Options.Inject.
	Inject string
	// OnUnknown and EffectKills are Options'.
	OnUnknown   string
	EffectKills float64
	// ThreadDir is the workers' thread store (threadstore.DirStore), shared
	// by every worker process. Zero value: none.
	ThreadDir string
	// ThreadStore, when set, is the workers' thread store instead: an
	// s3:// URL (module s3store) every worker process shares,
	// each of whose saves is made again late (lateSaver).
	ThreadStore string
	// ModelLatency is Options.ModelLatency.
	ModelLatency time.Duration
	// Deployment and BuildID put the worker on a Worker Deployment
	// Version (the upgrade drill). Zero value: unversioned.
	Deployment, BuildID string
	// V2 is the drill's v2 of the agent (upgrade.go). Zero value: v1.
	V2 bool
	// Ready receives "ready" once the worker polls.
	Ready io.Writer
	// Log receives the SDK's logs at Level. Zero value: none.
	Log   io.Writer
	Level slog.Level
}

// RunWorker runs one soak worker until ctx ends.
func RunWorker(ctx context.Context, opts WorkerOptions) error {
	if opts.TaskQueue == "" || opts.Billing == "" || opts.Pager == "" {
		return errors.New("soak-worker: --task-queue, --billing and --pager are required")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	dc, fc, err := converters(opts.CodecKeyFile)
	if err != nil {
		return err
	}
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(opts.Log, &slog.HandlerOptions{Level: opts.Level})))
	c, err := client.DialContext(ctx, client.Options{HostPort: opts.Address, Namespace: opts.Namespace, Logger: logger,
		DataConverter: dc, FailureConverter: fc})
	if err != nil {
		return fmt.Errorf("soak-worker: cannot reach Temporal at %s: %v", opts.Address, err)
	}
	defer c.Close()
	if opts.CacheSize > 0 {
		sdkworker.SetStickyWorkflowCacheSize(opts.CacheSize)
	}
	wopts, err := workerOptions(opts)
	if err != nil {
		return err
	}
	plugin, err := workerplugin.NewPlugin(wopts)
	if err != nil {
		return err
	}
	so := sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}}
	if opts.Deployment != "" {
		so.DeploymentOptions = sdkworker.DeploymentOptions{UseVersioning: true,
			Version: sdkworker.WorkerDeploymentVersion{DeploymentName: opts.Deployment, BuildID: opts.BuildID}}
	}
	if opts.V2 {
		so.Interceptors = append(so.Interceptors, &StepAtStart{})
	}
	if opts.Attempts != "" {
		f, err := os.OpenFile(opts.Attempts, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("soak-worker: %w", err)
		}
		defer f.Close()
		so.Interceptors = append(so.Interceptors, &attemptRecorder{f: f, pid: os.Getpid()})
	}
	w := sdkworker.New(c, opts.TaskQueue, so)
	if err := w.Start(); err != nil {
		return fmt.Errorf("soak-worker: %v", err)
	}
	defer w.Stop()
	fmt.Fprintln(opts.Ready, "ready")
	<-ctx.Done()
	return nil
}

// workerOptions are a soak worker's tools (through billing and the pager),
// hooks and model, broken as opts.Inject says.
func workerOptions(opts WorkerOptions) (workerplugin.Options, error) {
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: opts.Billing})
	tb.UsePager(pager.Client{BaseURL: opts.Pager})
	wo := workerplugin.Options{Tools: tb.Tools(), Hooks: demo.Hooks(), Models: Models(opts.ModelLatency)}
	if opts.V2 {
		tools, err := v2Tools(wo.Tools, billing.Client{BaseURL: opts.Billing})
		if err != nil {
			return wo, err
		}
		wo.Tools = tools
	}
	if opts.OnUnknown != "" || opts.EffectKills > 0 {
		tools, err := refundUnknown(wo.Tools, opts)
		if err != nil {
			return wo, err
		}
		wo.Tools = tools
	}
	switch opts.Inject {
	case "dedup-off":
		tools, err := nonIdempotent(wo.Tools)
		if err != nil {
			return wo, err
		}
		wo.Tools = tools
	case "served-but-ran":
		wo.Observer = &servedButRan{billing: opts.Billing, pager: opts.Pager}
	}
	if opts.ThreadStore != "" && opts.Inject != "no-thread-store" {
		store, err := s3Threads(context.Background(), opts.ThreadStore, opts.CodecKeyFile, true, opts.Inject == "no-cas")
		if err != nil {
			return wo, err
		}
		wo.Checkpointer = threadstate.TemporalCheckpointer{Store: store}
		return wo, nil
	}
	if opts.ThreadDir != "" && opts.Inject != "no-thread-store" {
		store, err := threadStore(opts.ThreadDir, opts.CodecKeyFile)
		if err != nil {
			return wo, err
		}
		wo.Checkpointer = threadstate.TemporalCheckpointer{Store: store}
	}
	return wo, nil
}

// refundUnknown declares issue_refund again: with opts.OnUnknown (for
// "check", asking billing by key; with it or "hold", 5 s an attempt,
// after which a lost one is checked or held), and killing its worker
// after billing answered, on a call's first attempt, with chance
// opts.EffectKills.
func refundUnknown(tools []*activities.Tool, opts WorkerOptions) ([]*activities.Tool, error) {
	bill := billing.Client{BaseURL: opts.Billing}
	out := make([]*activities.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Spec().Name != "issue_refund" {
			out = append(out, t)
			continue
		}
		spec, o := t.Spec(), t.Options()
		spec.OnUnknown = opts.OnUnknown
		if opts.OnUnknown != "" {
			o.StartToCloseTimeout = 5 * time.Second
		}
		if opts.OnUnknown == protocol.OnUnknownCheck {
			o.Check = func(ctx context.Context, in activities.ToolInput) (json.RawMessage, bool, error) {
				rc, ok, err := bill.Lookup(ctx, in.IdempotencyKey)
				if err != nil || !ok {
					return nil, false, err
				}
				b, err := json.Marshal(rc)
				return b, true, err
			}
		}
		nt, err := redeclare(t, spec, o, func(ctx context.Context) {
			if opts.EffectKills > 0 && activity.GetInfo(ctx).Attempt == 1 && rand.Float64() < opts.EffectKills {
				effectKill(ctx, opts.Attempts)
			}
		})
		if err != nil {
			return nil, err
		}
		out = append(out, nt)
	}
	return out, nil
}

// effectKill notes the kill in the attempts file, then SIGKILLs this
// worker process: billing made the refund, its result is lost.
func effectKill(ctx context.Context, attempts string) {
	if attempts != "" {
		if f, err := os.OpenFile(attempts, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			info := activity.GetInfo(ctx)
			b, _ := json.Marshal(Attempt{Phase: PhaseEffectKill, Type: info.ActivityType.Name, Workflow: info.WorkflowExecution.ID,
				Run: info.WorkflowExecution.RunID, Activity: info.ActivityID, Attempt: int(info.Attempt), At: time.Now().UnixNano(), Pid: os.Getpid()})
			_, _ = f.Write(append(b, '\n'))
			_ = f.Close()
		}
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// nonIdempotent declares every tool again, not idempotent: nothing is
// served from the log (the dedup-off control).
func nonIdempotent(tools []*activities.Tool) ([]*activities.Tool, error) {
	out := make([]*activities.Tool, 0, len(tools))
	for _, t := range tools {
		spec := t.Spec()
		spec.Idempotent = false
		nt, err := redeclare(t, spec, t.Options(), nil)
		if err != nil {
			return nil, err
		}
		out = append(out, nt)
	}
	return out, nil
}

// redeclare declares t again with spec and opts, its body t's; after
// (nil: nothing) runs once the body returned without an error.
func redeclare(t *activities.Tool, spec protocol.ToolSpec, opts activities.ToolOptions, after func(ctx context.Context)) (*activities.Tool, error) {
	fn := t.Activity()
	return activities.NewTool(spec, func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		in, _ := activities.CallInfo(ctx)
		out, err := fn(ctx, in)
		if err == nil && after != nil {
			after(ctx)
		}
		return out.Result, err
	}, opts)
}

// attemptRecorder appends each activity attempt's start and end to a file
// shared by the soak's workers, one JSON line (Attempt) per write.
type attemptRecorder struct {
	interceptor.WorkerInterceptorBase
	f   *os.File
	pid int
}

func (r *attemptRecorder) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityRecorder{rec: r}
	a.Next = next
	return a
}

func (r *attemptRecorder) write(phase string, info activity.Info) {
	b, _ := json.Marshal(Attempt{Phase: phase, Type: info.ActivityType.Name, Workflow: info.WorkflowExecution.ID,
		Run: info.WorkflowExecution.RunID, Activity: info.ActivityID, Attempt: int(info.Attempt), At: time.Now().UnixNano(), Pid: r.pid})
	_, _ = r.f.Write(append(b, '\n'))
}

type activityRecorder struct {
	interceptor.ActivityInboundInterceptorBase
	rec *attemptRecorder
}

func (a *activityRecorder) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	a.rec.write(PhaseStart, info)
	defer a.rec.write(PhaseEnd, info)
	return a.Next.ExecuteActivity(ctx, in)
}

// threadStore is the thread store in dir, encrypted with keyFile's keys
// when there is one.
func threadStore(dir, keyFile string) (threadstate.Checkpointer, error) {
	store := threadstore.DirStore{Dir: dir}
	if keyFile != "" {
		keys, err := codec.LoadKeyFile(keyFile)
		if err != nil {
			return nil, err
		}
		store.Codec = keys
	}
	return store, nil
}
