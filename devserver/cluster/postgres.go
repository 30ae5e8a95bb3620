package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tulip-temporal/tulip/devserver"
)

// ErrNoPostgres is wrapped by Start (and returned by FindPostgres) when no
// PostgreSQL server binaries are installed.
var ErrNoPostgres = errors.New("cluster: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run scripts/install-test-deps, or apt-get install postgresql")

// FindPostgres returns the folder that holds initdb, pg_ctl and postgres:
// bin itself when it is not empty, else the newest
// /usr/lib/postgresql/VERSION/bin (where Debian puts them). It wraps
// ErrNoPostgres when there is none.
func FindPostgres(bin string) (string, error) {
	if bin != "" {
		for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
				return "", fmt.Errorf("%w: %s has no %s", ErrNoPostgres, bin, tool)
			}
		}
		return bin, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", ErrNoPostgres
	}
	// Newest major version first: 16 sorts after 9 only as a number.
	version := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return n
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	return filepath.Dir(found[0]), nil
}

// postgres is a PostgreSQL server of the cluster's own: its data folder, its
// unix socket folder and its log in a temporary folder (root), listening on
// a loopback port of its own. When this process runs as root it runs as
// the "postgres" system user (initdb refuses root).
type postgres struct {
	bin  string
	root string
	host string
	port int
	// runAs is the system user that runs initdb, pg_ctl and the server;
	// empty: this process's own user.
	runAs string
}

// dbUser is the database superuser initdb creates; connections from
// loopback are trusted.
const dbUser = "postgres"

func startPostgres(ctx context.Context, bin, host string) (pg *postgres, err error) {
	pg = &postgres{bin: bin, host: host}
	pg.root, err = os.MkdirTemp("", "tulip-pg-")
	if err != nil {
		return nil, fmt.Errorf("cluster: postgres folder: %w", err)
	}
	defer func() {
		if err != nil {
			pg.stop()
		}
	}()
	if err := os.Mkdir(pg.socketDir(), 0o700); err != nil {
		return pg, fmt.Errorf("cluster: postgres socket folder: %w", err)
	}
	if os.Geteuid() == 0 {
		pg.runAs = "postgres"
		u, err := user.Lookup(pg.runAs)
		if err != nil {
			return pg, fmt.Errorf("cluster: no %q system user to run PostgreSQL as (initdb refuses root): %w", pg.runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, dir := range []string{pg.root, pg.socketDir()} {
			if err := os.Chown(dir, uid, gid); err != nil {
				return pg, fmt.Errorf("cluster: postgres folder: %w", err)
			}
		}
	}
	if out, err := pg.run(ctx, "initdb", "-D", pg.data(), "-U", dbUser, "-A", "trust", "-E", "UTF8", "--locale=C", "-N"); err != nil {
		return pg, fmt.Errorf("cluster: initdb: %v: %s", err, lastLine(out))
	}
	if pg.port, err = devserver.FreePort(host); err != nil {
		return pg, err
	}
	opts := strings.Join([]string{
		"-c listen_addresses=" + host,
		"-p " + strconv.Itoa(pg.port),
		"-k " + pg.socketDir(),
		// A test database: a crash may lose it, speed matters.
		"-c fsync=off",
		"-c synchronous_commit=off",
		"-c full_page_writes=off",
		// Every service process keeps pools to two databases.
		"-c max_connections=400",
	}, " ")
	if out, err := pg.run(ctx, "pg_ctl", "start", "-D", pg.data(), "-l", pg.logFile(), "-w", "-t", "60", "-o", opts); err != nil {
		return pg, fmt.Errorf("cluster: pg_ctl start: %v: %s %s", err, lastLine(out), pg.logTail())
	}
	return pg, nil
}

func (pg *postgres) data() string      { return filepath.Join(pg.root, "data") }
func (pg *postgres) socketDir() string { return filepath.Join(pg.root, "sock") }
func (pg *postgres) logFile() string   { return filepath.Join(pg.root, "postgres.log") }

// address is the server's host:port.
func (pg *postgres) address() string {
	return pg.host + ":" + strconv.Itoa(pg.port)
}

// run runs a PostgreSQL tool as runAs.
func (pg *postgres) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	path := filepath.Join(pg.bin, tool)
	var cmd *exec.Cmd
	if pg.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", pg.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	// The tools change to the working folder; the postgres user may not
	// be allowed into ours.
	cmd.Dir = pg.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the server running with our output pipes open:
	// do not wait for them to close.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	return out.Bytes(), err
}

// restart is pg_ctl restart -m fast: every connection is dropped, the
// server comes back on the same port with the same data.
func (pg *postgres) restart(ctx context.Context) error {
	if out, err := pg.run(ctx, "pg_ctl", "restart", "-D", pg.data(), "-l", pg.logFile(), "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("cluster: pg_ctl restart: %v: %s %s", err, lastLine(out), pg.logTail())
	}
	return nil
}

// stop stops the server (fast, then immediate), keeps its log in keepLog
// when that is not empty, and removes its folder.
func (pg *postgres) stopAndKeepLog(keepLog string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(pg.data(), "postmaster.pid")); err == nil {
		if _, err := pg.run(ctx, "pg_ctl", "stop", "-D", pg.data(), "-m", "fast", "-w", "-t", "30"); err != nil {
			_, _ = pg.run(ctx, "pg_ctl", "stop", "-D", pg.data(), "-m", "immediate", "-w", "-t", "30")
		}
	}
	if keepLog != "" {
		if b, err := os.ReadFile(pg.logFile()); err == nil {
			_ = os.WriteFile(keepLog, b, 0o644)
		}
	}
	_ = os.RemoveAll(pg.root)
}

func (pg *postgres) stop() { pg.stopAndKeepLog("") }

// logTail is the last line of the server's log, for errors.
func (pg *postgres) logTail() string {
	b, _ := os.ReadFile(pg.logFile())
	return lastLine(b)
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailFile is the last non-empty line of a file, or "" when it cannot be
// read.
func tailFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 64<<10 {
		_, _ = f.Seek(-64<<10, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return lastLine(b)
}
