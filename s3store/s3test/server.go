// Package s3test runs a real S3-compatible server for your tests of
// s3store (and for tulip's own tests and soak): SeaweedFS's weed, as child
// processes on free loopback ports with their data in a folder of the
// caller's. It honours conditional writes (If-None-Match: * and If-Match
// on PutObject), as s3store needs, so a test checks compare-and-swap
// against a real server rather than a fake.
//
// weed is built once from its Go module (Install, or
//
//	go run github.com/tulip-temporal/tulip/s3store/s3test/installweed
//
// which takes minutes the first time and is cached) into
// ~/.cache/tulip-test-deps; $TULIP_WEED overrides the path. In a test:
//
//	srv := s3test.StartForTest(t) // skips t when weed is not installed
//	bucket, err := s3store.Open(ctx, srv.Options())
//
// Two processes make one Server. The storage process (weed mini with its S3
// gateway off: master, volume server, filer) holds the data and runs for
// the test's whole life. The gateway process (weed s3) is the one the
// Endpoint reaches; Stop, Restart, Pause and Resume act on it, so an outage
// or a hung endpoint costs well under a second to stage, and the data stays
// (it lives in the storage process). Restarting the storage process itself
// would hold every new write for SeaweedFS's 15-second master warm-up.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Version is the github.com/seaweedfs/seaweedfs module version that
// scripts/install-test-deps builds weed from.
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// EnvBinary names the environment variable that points at a weed binary,
// overriding the install-test-deps cache path.
const EnvBinary = "TULIP_WEED"

// startTimeout bounds how long Start waits for storage and gateway to
// serve a write, and Restart for the gateway to answer.
const startTimeout = 90 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Server is one running S3 server. Point an S3 client at Endpoint with path
// style addressing, Region and the static AccessKey/SecretKey; Bucket exists.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Bucket    string
	Region    string
	AccessKey string
	SecretKey string

	bin    string
	dir    string // the temp dir: data/, logs, the identities file
	ports  ports
	client *s3.Client

	mu      sync.Mutex
	storage *proc
	gateway *proc
	paused  bool
}

type ports struct {
	master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, admin, adminGrpc, s3, s3Grpc int
}

// proc is one child process and the channel closed when it has exited.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set before done closes
}

// Binary returns the weed binary the tests use: $TULIP_WEED if set, else
// the one scripts/install-test-deps builds under ~/.cache. The error says
// how to install it.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("s3test: %s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	p, err := CachePath()
	if err != nil {
		return "", err
	}
	if err := executable(p); err != nil {
		return "", fmt.Errorf("s3test: SeaweedFS's weed %s is not installed (%v): run `go run github.com/tulip-temporal/tulip/s3store/s3test/installweed` (once: it builds it, in minutes), or set %s", Version, err, EnvBinary)
	}
	return p, nil
}

// CachePath is where scripts/install-test-deps puts weed:
// $HOME/.cache/tulip-test-deps/seaweedfs-<Version>/weed.
func CachePath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("s3test: no home folder to find weed in: %w", err)
	}
	return filepath.Join(home, ".cache", "tulip-test-deps", "seaweedfs-"+Version, "weed"), nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// Start runs a server whose data, logs and identities file are in dir
// (which it creates), and returns once it serves a write. Close ends it.
func Start(dir string) (*Server, error) {
	return startWith(dir, freePorts)
}

// startWith is Start with the function that picks the ten ports.
func startWith(dir string, pick func(n int) ([]int, error)) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Bucket:    "tulip-test",
		Region:    "us-east-1",
		AccessKey: "tulip-" + randomHex(6),
		SecretKey: randomHex(20),
		bin:       bin,
		dir:       dir,
	}
	for attempt := 1; ; attempt++ {
		ps, err := pick(10)
		if err != nil {
			return nil, fmt.Errorf("s3test: free ports: %w", err)
		}
		err = s.start(ps)
		if err == nil {
			return s, nil
		}
		s.Close()
		// A weed process that ends while it starts has most likely lost
		// one of its ports to another process between freePorts and its
		// bind: start again on fresh ports with empty data.
		var exited *exitedError
		if attempt == startAttempts || !errors.As(err, &exited) {
			if attempt > 1 {
				err = fmt.Errorf("%w (attempt %d of %d)", err, attempt, startAttempts)
			}
			return nil, err
		}
		if err := os.RemoveAll(s.dataDir()); err != nil {
			return nil, fmt.Errorf("s3test: %w", err)
		}
	}
}

// startAttempts is how many times Start starts the processes on fresh
// ports when one of them exits while starting.
const startAttempts = 3

// exitedError is a weed process that ended while Start or Restart waited
// for it to answer.
type exitedError struct {
	name, log, tail string
	err             error
}

func (e *exitedError) Error() string {
	return fmt.Sprintf("weed %s exited (%v); the end of %s:\n%s", e.name, e.err, e.log, e.tail)
}

// Dir is the server's folder.
func (s *Server) Dir() string { return s.dir }

// start runs the processes on ports ps (ten of them).
func (s *Server) start(ps []int) error {
	s.ports = ports{ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], ps[7], ps[8], ps[9]}
	s.Endpoint = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports.s3))
	if err := os.MkdirAll(s.dataDir(), 0o700); err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	ident, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "tulip-test",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err := os.WriteFile(s.identities(), ident, 0o600); err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	s.client = s.Client()

	deadline := time.Now().Add(startTimeout)
	if err := s.startStorage(); err != nil {
		return err
	}
	// The gateway wants the filer up when it starts.
	filer := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports.filer)) + "/"
	if err := s.waitFor(deadline, s.storage, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, filer, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}); err != nil {
		return fmt.Errorf("s3test: the filer on port %d did not come up: %w", s.ports.filer, err)
	}
	if err := s.startGateway(); err != nil {
		return err
	}
	// Ready means a write and its read-back go through: the bucket exists,
	// a volume has been grown, the filer's lock service answers.
	probe := ".s3server-ready"
	if err := s.waitFor(deadline, s.gateway, func(ctx context.Context) error {
		var owned *types.BucketAlreadyOwnedByYou
		if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket}); err != nil && !errors.As(err, &owned) {
			return err
		}
		if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.Bucket, Key: &probe, Body: bytes.NewReader([]byte("ready"))}); err != nil {
			return err
		}
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.Bucket, Key: &probe})
		if err != nil {
			return err
		}
		_, err = io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			return err
		}
		_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.Bucket, Key: &probe})
		return err
	}); err != nil {
		return fmt.Errorf("s3test: %s did not serve a write: %w", s.Endpoint, err)
	}
	return nil
}

func (s *Server) dataDir() string    { return filepath.Join(s.dir, "data") }
func (s *Server) identities() string { return filepath.Join(s.dir, "identities.json") }

func (s *Server) startStorage() error {
	p := s.ports
	args := []string{"mini",
		"-dir=" + s.dataDir(),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + strconv.Itoa(p.master), "-master.port.grpc=" + strconv.Itoa(p.masterGrpc),
		"-volume.port=" + strconv.Itoa(p.volume), "-volume.port.grpc=" + strconv.Itoa(p.volumeGrpc),
		"-filer.port=" + strconv.Itoa(p.filer), "-filer.port.grpc=" + strconv.Itoa(p.filerGrpc),
		"-admin.port=" + strconv.Itoa(p.admin), "-admin.port.grpc=" + strconv.Itoa(p.adminGrpc),
		"-admin.port.legacy=0", "-admin.ui=false",
		"-s3=false", "-webdav=false",
		"-s3.config=" + s.identities(),
		"-master.telemetry=false", // no calls home: the machine has no network
	}
	pr, err := s.spawn("storage", args, nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.storage = pr
	s.mu.Unlock()
	return nil
}

func (s *Server) startGateway() error {
	p := s.ports
	args := []string{"s3",
		fmt.Sprintf("-filer=127.0.0.1:%d.%d", p.filer, p.filerGrpc),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-port=" + strconv.Itoa(p.s3), "-port.grpc=" + strconv.Itoa(p.s3Grpc),
		"-port.iceberg=0", "-port.lance=0",
		"-config=" + s.identities(),
	}
	// The same SSE-S3 key weed mini made for itself, as mini's own gateway
	// would have it (without it IAM logs that it has no STS signing key).
	var env []string
	for file, name := range map[string]string{".mini_sse_kek": "WEED_S3_SSE_KEK", ".mini_kek_passphrase": "WEED_S3_SSE_KEK_PASSPHRASE"} {
		if b, err := os.ReadFile(filepath.Join(s.dataDir(), file)); err == nil {
			env = append(env, name+"="+strings.TrimSpace(string(b)))
		}
	}
	pr, err := s.spawn("gateway", args, env)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.gateway = pr
	s.paused = false
	s.mu.Unlock()
	return nil
}

// spawn starts weed with args, its output appended to NAME.log in the temp dir.
func (s *Server) spawn(name string, args, env []string) (*proc, error) {
	logPath := filepath.Join(s.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	fmt.Fprintf(f, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), s.bin, strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// Its own process group: a signal to the test's group (^C) does not
	// reach it, and shutdown ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("s3test: start %s %s: %w", s.bin, args[0], err)
	}
	pr := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		f.Close()
		close(pr.done)
	}()
	return pr, nil
}

// waitFor calls check until it succeeds, the deadline passes, or pr exits.
func (s *Server) waitFor(deadline time.Time, pr *proc, check func(context.Context) error) error {
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		last = check(ctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-pr.done:
			return &exitedError{name: pr.name, err: pr.err, log: pr.log, tail: tail(pr.log)}
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v; the end of %s:\n%s", last, pr.log, tail(pr.log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client returns an S3 client for the server: path style, static
// credentials, Endpoint, Region, no retries.
func (s *Server) Client() *s3.Client {
	key, secret := s.AccessKey, s.SecretKey
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret, Source: "s3test"}, nil
		}),
		RetryMaxAttempts: 1,
	})
}

// Stop ends the gateway (SIGTERM, SIGKILL after 5s): the Endpoint refuses
// connections until Restart. The data stays.
func (s *Server) Stop() {
	s.mu.Lock()
	pr, paused := s.gateway, s.paused
	s.gateway, s.paused = nil, false
	s.mu.Unlock()
	if pr == nil {
		return
	}
	stop(pr, paused)
}

// Restart stops the gateway if it runs and starts it again on the same
// port against the same data, and returns once it answers.
func (s *Server) Restart() error {
	s.Stop()
	// Hold the gateway's ports again until it binds them: stopped, they
	// were free for any process to take.
	for _, port := range []int{s.ports.s3, s.ports.s3Grpc} {
		if err := reservePort(port); err != nil {
			return fmt.Errorf("s3test: %s cannot come back: %w", s.Endpoint, err)
		}
	}
	if err := s.startGateway(); err != nil {
		return err
	}
	if err := s.waitFor(time.Now().Add(startTimeout), s.gateway, func(ctx context.Context) error {
		_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.Bucket})
		return err
	}); err != nil {
		return fmt.Errorf("s3test: %s did not come back: %w", s.Endpoint, err)
	}
	return nil
}

// Pause freezes the gateway (SIGSTOP): connections open, requests hang.
func (s *Server) Pause() error {
	return s.signalGateway(syscall.SIGSTOP, true)
}

// Resume lets a paused gateway run again (SIGCONT).
func (s *Server) Resume() error {
	return s.signalGateway(syscall.SIGCONT, false)
}

func (s *Server) signalGateway(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gateway == nil {
		return fmt.Errorf("s3test: %v: the gateway is stopped", sig)
	}
	if err := s.gateway.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("s3test: %v: %w", sig, err)
	}
	s.paused = paused
	if paused {
		// A signal is delivered when the kernel next runs the process:
		// until then it may still answer a request. Pause returns once
		// it has stopped.
		awaitStopped(s.gateway.cmd.Process.Pid, 2*time.Second)
	}
	return nil
}

// awaitStopped waits, up to d, until process pid is stopped (its state in
// /proc is T); where /proc is absent it returns at once.
func awaitStopped(pid int, d time.Duration) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] == 'T' || b[i+2] == 't' {
			return
		}
	}
}

// Logs returns the end of the storage and gateway logs.
func (s *Server) Logs() string {
	return "storage.log:\n" + tail(filepath.Join(s.dir, "storage.log")) +
		"\ngateway.log:\n" + tail(filepath.Join(s.dir, "gateway.log"))
}

// Close ends both processes and removes the unix sockets weed leaves
// under /tmp when it is killed. The folder stays (its owner removes it).
func (s *Server) Close() {
	s.mu.Lock()
	gw, st, paused := s.gateway, s.storage, s.paused
	s.gateway, s.storage = nil, nil
	s.mu.Unlock()
	if gw != nil {
		stop(gw, paused)
	}
	if st != nil {
		stop(st, false)
	}
	if s.ports.master == 0 {
		return
	}
	p := s.ports
	for _, sock := range []string{
		fmt.Sprintf("seaweedfs-master-grpc-%d.sock", p.masterGrpc),
		fmt.Sprintf("seaweedfs-volume-grpc-%d.sock", p.volumeGrpc),
		fmt.Sprintf("seaweedfs-filer-grpc-%d.sock", p.filerGrpc),
		fmt.Sprintf("seaweedfs-filer-%d.sock", p.filer),
		fmt.Sprintf("seaweedfs-admin-grpc-%d.sock", p.adminGrpc),
		fmt.Sprintf("seaweedfs-s3-grpc-%d.sock", p.s3Grpc),
		fmt.Sprintf("seaweedfs-s3-%d.sock", p.s3),
	} {
		os.Remove(filepath.Join("/tmp", sock))
	}
}

// stop sends SIGTERM (and SIGCONT, for a paused process), waits stopGrace,
// then kills the process group.
func stop(pr *proc, paused bool) {
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	if paused {
		_ = pr.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-pr.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
		<-pr.done
	}
}

// freePorts returns n distinct loopback ports, each left reserved (see
// reserve) for the weed processes to bind.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		if err := reserve(l); err != nil {
			return nil, err
		}
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// reservePort reserves a loopback port that is free now (see reserve).
func reservePort(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d: %w", port, err)
	}
	defer l.Close()
	return reserve(l)
}

// reserve connects to l and closes the accepted side first, which leaves
// l's port in TIME_WAIT for a minute: in that time the kernel hands it to
// no bind to port 0 and to no outgoing connection, while a listener that
// names it (Go's sets SO_REUSEADDR, as weed's do) binds it. Without it, a
// port found free could go to any process's next connection before weed
// bound it.
func reserve(l net.Listener) error {
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return fmt.Errorf("reserve %s: %w", l.Addr(), err)
	}
	defer c.Close()
	sc, err := l.Accept()
	if err != nil {
		return fmt.Errorf("reserve %s: %w", l.Addr(), err)
	}
	return sc.Close()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// tail returns the last 40 lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
