package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tulip-temporal/tulip/devserver"
	"github.com/tulip-temporal/tulip/devserver/cluster"
)

// server is the Temporal server under test, and the faults it can take.
type server interface {
	// Address is the frontend's host:port; it stays the same across
	// faults.
	Address() string
	// Kinds are the fault kinds Inject takes.
	Kinds() []string
	// Inject injects one fault of kind and returns once the server is back.
	Inject(ctx context.Context, kind string) error
	Stop()
}

// ProcessError is a soak process (server or worker) that did not start.
type ProcessError struct {
	What string
	Err  error
}

func (e *ProcessError) Error() string { return fmt.Sprintf("soak: %s: %v", e.What, e.Err) }
func (e *ProcessError) Unwrap() error { return e.Err }

// startProcess starts bin with args in its own process group (killed with
// the soak), its stderr to log, and waits for its first stdout line, which
// must start with "ready". It returns the rest of that line.
func startProcess(what, bin string, args []string, log io.Writer, setup ...func(*exec.Cmd)) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, args...)
	for _, f := range setup {
		f(cmd)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", &ProcessError{what, err}
	}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", &ProcessError{what, err}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ready")
	if err != nil || !ok {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, "", &ProcessError{what, fmt.Errorf("not ready: %q %v", line, err)}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return cmd, strings.TrimSpace(rest), nil
}

// Server fault kinds.
const (
	ServerRestart = "server_restart"
	ServerPause   = "server_pause"
	HistoryKill   = "history_kill"
	MatchingKill  = "matching_kill"
	FrontendKill  = "frontend_kill"
	DBRestart     = "db_restart"
)

// embedded is the embedded server in its own OS process ('tulip
// soak-server') on a file database, on a fixed port across restarts.
type embedded struct {
	bin, db, addr string
	pauseFor      time.Duration
	retention     time.Duration
	log           io.Writer
	level         string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func startEmbedded(bin, dir string, pauseFor, retention time.Duration, log io.Writer, level string) (*embedded, error) {
	s := &embedded{bin: bin, db: filepath.Join(dir, "soak.db"), pauseFor: pauseFor, retention: retention, log: log, level: level}
	return s, s.start()
}

func (s *embedded) start() error {
	port := "0"
	if s.addr != "" {
		_, port, _ = strings.Cut(s.addr, ":")
	}
	cmd, addr, err := startProcess("the server", s.bin, []string{"soak-server", "--db", s.db, "--port", port, "--log-level", s.level, "--retention", s.retention.String()}, s.log)
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.addr = cmd, exited, addr
	s.mu.Unlock()
	return nil
}

func (s *embedded) Address() string { return s.addr }

func (s *embedded) Kinds() []string { return []string{ServerRestart, ServerPause} }

func (s *embedded) Inject(ctx context.Context, kind string) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	switch kind {
	case ServerPause:
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			return err
		}
		sleep(ctx, s.pauseFor)
		return syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	case ServerRestart:
		s.halt(cmd, exited)
		time.Sleep(500 * time.Millisecond)
		return s.start()
	}
	return fmt.Errorf("soak: the embedded server takes no %q", kind)
}

// halt stops the server process: SIGTERM (it stops the server cleanly),
// SIGKILL after 30 s.
func (s *embedded) halt(cmd *exec.Cmd, exited chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func (s *embedded) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	s.halt(cmd, exited)
}

// ServerOptions are the hidden 'tulip soak-server' command's.
type ServerOptions struct {
	// DBFile is the server's database file (required).
	DBFile string
	// Port is the frontend's port. Zero value: a free one.
	Port int
	// Retention is the namespace's. Zero value: devserver.DefaultRetention.
	Retention time.Duration
	// Ready receives "ready HOST:PORT" once the server serves.
	Ready io.Writer
	// Log receives the server's logs at Level. Zero value: none.
	Log   io.Writer
	Level slog.Level
}

// RunServer runs the embedded server on opts.DBFile until ctx ends (the
// soak's SIGTERM), then stops it.
func RunServer(ctx context.Context, opts ServerOptions) error {
	if opts.DBFile == "" {
		return errors.New("soak-server: --db is required")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	srv, err := devserver.Start(devserver.Options{DBFile: opts.DBFile, Port: opts.Port, Retention: opts.Retention, LogOutput: opts.Log, LogLevel: opts.Level})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintln(opts.Ready, "ready", srv.Address())
	<-ctx.Done()
	return nil
}

// onCluster is a devserver/cluster cluster.
type onCluster struct {
	c        *cluster.Cluster
	pauseFor time.Duration
	rng      *rand.Rand
	mu       sync.Mutex
}

func startCluster(ctx context.Context, bin string, pauseFor, retention time.Duration, level string) (*onCluster, error) {
	c, err := cluster.Start(ctx, cluster.Options{Binary: bin, LogLevel: level, Retention: retention})
	if err != nil {
		return nil, err
	}
	return &onCluster{c: c, pauseFor: pauseFor, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))}, nil
}

func (s *onCluster) Address() string { return s.c.FrontendAddress() }

func (s *onCluster) Kinds() []string {
	return []string{HistoryKill, MatchingKill, FrontendKill, DBRestart, ServerPause}
}

func (s *onCluster) history() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(s.c.Processes(cluster.History))
}

func (s *onCluster) Inject(ctx context.Context, kind string) error {
	var err error
	switch kind {
	case HistoryKill:
		err = s.killRestart(cluster.History, s.history())
	case MatchingKill:
		err = s.killRestart(cluster.Matching, 0)
	case FrontendKill:
		err = s.killRestart(cluster.Frontend, 0)
	case DBRestart:
		err = s.c.RestartDB()
	case ServerPause:
		i := s.history()
		if err = s.c.Signal(cluster.History, i, syscall.SIGSTOP); err == nil {
			sleep(ctx, s.pauseFor)
			err = s.c.Signal(cluster.History, i, syscall.SIGCONT)
		}
	default:
		return fmt.Errorf("soak: the cluster takes no %q", kind)
	}
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return s.c.WaitProgress(wctx)
}

// killRestart SIGKILLs a process, leaves it down a second, starts it again.
func (s *onCluster) killRestart(service string, index int) error {
	if err := s.c.Kill(service, index); err != nil {
		return err
	}
	time.Sleep(time.Second)
	return s.c.Restart(service, index)
}

func (s *onCluster) Stop() { s.c.Stop() }

// external is a server the soak does not run: no faults.
type external struct{ addr string }

func (s external) Address() string { return s.addr }
func (s external) Kinds() []string { return nil }
func (s external) Inject(context.Context, string) error {
	return errors.New("soak: a server given by --address takes no faults")
}
func (s external) Stop() {}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func executable(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	return os.Executable()
}
