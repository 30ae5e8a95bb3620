package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startProcess starts bin with args in its own process group (SIGKILLed
// if this process dies), stderr and the rest of stdout to log, and waits
// (up to limit) for a stdout line that starts with ready.
func startProcess(bin string, args []string, log io.Writer, ready string, limit time.Duration) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadString('\n')
			if strings.HasPrefix(line, ready) {
				lines <- strings.TrimSpace(line)
				break
			}
			if line != "" {
				_, _ = io.WriteString(log, line)
			}
			if err != nil {
				close(lines)
				return
			}
		}
		_, _ = io.Copy(log, br)
	}()
	select {
	case line, ok := <-lines:
		if ok {
			return cmd, line, nil
		}
		err = errors.New("exited before it was ready")
	case <-time.After(limit):
		err = fmt.Errorf("not ready after %s", limit)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	return nil, "", fmt.Errorf("%s %s: %v (its log: %s)", bin, strings.Join(args, " "), err, logName(log))
}

// logName names a log file.
func logName(w io.Writer) string {
	if f, ok := w.(*os.File); ok {
		return f.Name()
	}
	return "?"
}

// workerPool is the worker OS processes.
type workerPool struct {
	bin  string
	args []string
	log  io.Writer

	mu    sync.Mutex
	procs []*exec.Cmd
	kills int
	rng   *rand.Rand
}

func (p *workerPool) spawn() error {
	cmd, _, err := startProcess(p.bin, append([]string{"-role", "worker"}, p.args...), p.log, "ready", 2*time.Minute)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.procs = append(p.procs, cmd)
	p.mu.Unlock()
	go func() { _ = cmd.Wait() }()
	return nil
}

// kill SIGKILLs a random worker process and starts another in its place.
func (p *workerPool) kill() error {
	p.mu.Lock()
	if len(p.procs) == 0 {
		p.mu.Unlock()
		return errors.New("no worker to kill")
	}
	k := p.rng.IntN(len(p.procs))
	victim := p.procs[k]
	p.procs = append(p.procs[:k], p.procs[k+1:]...)
	p.kills++
	p.mu.Unlock()
	if err := syscall.Kill(-victim.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return p.spawn()
}

func (p *workerPool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	p.procs = nil
}

func (p *workerPool) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, c := range p.procs {
		out = append(out, c.Process.Pid)
	}
	return out
}

func (p *workerPool) killCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kills
}

// serveInstance is one 'tulip serve' process on a fixed port.
type serveInstance struct {
	bin  []string // the command: a tulip binary, or this one and its role
	args []string
	host string // 127.0.0.1:PORT
	log  io.Writer

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	restarts int
}

var serveURL = "tulip serve: http://"

func (s *serveInstance) start() error {
	args := append(append(append([]string(nil), s.bin[1:]...), "serve", "--listen", s.host), s.args...)
	cmd, _, err := startProcess(s.bin[0], args, s.log, serveURL, 2*time.Minute)
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after
// limit); it says whether it exited by itself.
func (s *serveInstance) stop(limit time.Duration) bool {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return true
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return false
	}
}

// pid is the current process's id (0: none).
func (s *serveInstance) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	select {
	case <-s.exited:
		return 0
	default:
		return s.cmd.Process.Pid
	}
}

// rss reads a process's resident set size (VmRSS) in bytes (0: gone).
func rss(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// memSampler samples the serve instances' RSS every second.
type memSampler struct {
	inst []*serveInstance
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	peak    []int64 // each instance's highest RSS
	peakSum int64   // the highest sum over the instances
}

func startSampler(inst []*serveInstance) *memSampler {
	m := &memSampler{inst: inst, stop: make(chan struct{}), done: make(chan struct{}), peak: make([]int64, len(inst))}
	go func() {
		defer close(m.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memSampler) sample() []int64 {
	now := make([]int64, len(m.inst))
	var sum int64
	for i, s := range m.inst {
		now[i] = rss(s.pid())
		sum += now[i]
	}
	m.mu.Lock()
	for i, v := range now {
		m.peak[i] = max(m.peak[i], v)
	}
	m.peakSum = max(m.peakSum, sum)
	m.mu.Unlock()
	return now
}

func (m *memSampler) end() ([]int64, int64) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int64(nil), m.peak...), m.peakSum
}

// cpuTimes are this process's CPU time, its reaped children's and the
// live ones' of pids included, and the machine's busy and total time, in
// clock ticks.
type cpuTimes struct{ own, machine, total int64 }

// procCPU is a process's utime and stime, and with children its reaped
// children's cutime and cstime too.
func procCPU(pid string, children bool) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	// The fields after the name: state is 0; utime 11, stime 12, cutime
	// 13, cstime 14.
	f := strings.Fields(s[i+1:])
	ks := []int{11, 12}
	if children {
		ks = append(ks, 13, 14)
	}
	var n int64
	for _, k := range ks {
		if k < len(f) {
			v, _ := strconv.ParseInt(f[k], 10, 64)
			n += v
		}
	}
	return n
}

func readCPU(pids ...int) cpuTimes {
	c := cpuTimes{own: procCPU("self", true)}
	for _, p := range pids {
		if p != 0 {
			c.own += procCPU(strconv.Itoa(p), true)
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, x := range f[1:] {
			v, _ := strconv.ParseInt(x, 10, 64)
			c.total += v
			if i != 3 && i != 4 { // idle, iowait
				c.machine += v
			}
		}
	}
	return c
}
