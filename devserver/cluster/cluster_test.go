package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/server/common"
)

// fakePostgres is a folder with the three tools FindPostgres looks for.
func fakePostgres(t *testing.T) string {
	dir := t.TempDir()
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, tool), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestOptionsAreValidatedUpFront(t *testing.T) {
	pg := fakePostgres(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "tulip")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Options{
		"no binary":               {PostgresBin: pg},
		"binary missing":          {Binary: "/nonexistent/tulip", PostgresBin: pg},
		"binary not executable":   {Binary: notExec, PostgresBin: pg},
		"binary is a folder":      {Binary: t.TempDir(), PostgresBin: pg},
		"no folder":               {Binary: self, Dir: "/nonexistent/dir", PostgresBin: pg},
		"negative history":        {Binary: self, HistoryProcesses: -1, PostgresBin: pg},
		"too many history":        {Binary: self, HistoryProcesses: 17, PostgresBin: pg},
		"negative shards":         {Binary: self, Shards: -8, PostgresBin: pg},
		"unknown log level":       {Binary: self, LogLevel: "loud", PostgresBin: pg},
		"negative start timeout":  {Binary: self, StartTimeout: -time.Second, PostgresBin: pg},
		"no postgres in the path": {Binary: self, PostgresBin: t.TempDir()},
	} {
		start := time.Now()
		c, err := Start(context.Background(), o)
		if err == nil {
			c.Stop()
			t.Errorf("%s: Start accepted %+v", name, o)
			continue
		}
		if time.Since(start) > time.Second {
			t.Errorf("%s: refused only after %s; validation must come first", name, time.Since(start))
		}
		if name == "no postgres in the path" && !errors.Is(err, ErrNoPostgres) {
			t.Errorf("%s: %v does not wrap ErrNoPostgres", name, err)
		}
	}
}

func TestZeroValuesAreDefaults(t *testing.T) {
	self, _ := os.Executable()
	o := Options{Binary: self, PostgresBin: fakePostgres(t)}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.HistoryProcesses != 2 || o.Shards != 8 || o.Namespace != "default" || o.StartTimeout != 3*time.Minute {
		t.Errorf("defaults: %+v", o)
	}
}

func TestSpecBuildsEachProcessConfig(t *testing.T) {
	s := &spec{Host: "127.0.0.1", Shards: 8, Database: "127.0.0.1:5999", LogLevel: "warn",
		Ports: map[string][]processPorts{
			Frontend: {{GRPC: 7233, Membership: 26933}},
			History:  {{GRPC: 7234, Membership: 26934}, {GRPC: 7244, Membership: 26944}},
			Matching: {{GRPC: 7235, Membership: 26935}},
			Worker:   {{GRPC: 7239, Membership: 26939}},
		},
		DynamicConfig: map[string]any{"history.transferProcessorMaxPollRPS": 10000, "some.ratio": 0.5, "some.flag": true}}
	file := filepath.Join(t.TempDir(), "cluster.json")
	if err := s.write(file); err != nil {
		t.Fatal(err)
	}
	s, err := readSpec(file)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.DynamicConfig["history.transferProcessorMaxPollRPS"].(int); !ok || v != 10000 {
		t.Errorf("an integer came back as %T %v", s.DynamicConfig["history.transferProcessorMaxPollRPS"], s.DynamicConfig["history.transferProcessorMaxPollRPS"])
	}
	if v, ok := s.DynamicConfig["some.ratio"].(float64); !ok || v != 0.5 {
		t.Errorf("a float came back as %T %v", s.DynamicConfig["some.ratio"], s.DynamicConfig["some.ratio"])
	}
	cfg, err := s.serverConfig(History, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Services[History].RPC; got.GRPCPort != 7244 || got.MembershipPort != 26944 || got.BindOnIP != "127.0.0.1" {
		t.Errorf("history-1 RPC config: %+v", got)
	}
	if len(cfg.Services) != 4 {
		t.Errorf("membership needs every service listed: %v", cfg.Services)
	}
	if cfg.Persistence.NumHistoryShards != 8 {
		t.Errorf("shards: %d", cfg.Persistence.NumHistoryShards)
	}
	if cfg.PublicClient.HostPort != "127.0.0.1:7233" {
		t.Errorf("public client: %s", cfg.PublicClient.HostPort)
	}
	if _, err := s.serverConfig(History, 2); err == nil {
		t.Error("history-2 of 2 accepted")
	}
	if _, err := s.serverConfig("scheduler", 0); err == nil {
		t.Error("an unknown service accepted")
	}
}

func TestProbeIDsCoverEveryShard(t *testing.T) {
	ns := "0c3e5f1a-6f0e-4e8f-9d43-bb1d5b7a7f10"
	ids := probeIDs(ns, 8)
	for s, id := range ids {
		if got := common.WorkflowIDToHistoryShard(ns, id, 8); int(got) != s+1 {
			t.Errorf("probe %s is on shard %d, want %d", id, got, s+1)
		}
	}
}

func TestUnknownProcessIsAnError(t *testing.T) {
	c := &Cluster{procs: map[string][]*process{History: {{service: History}}}}
	if err := c.Kill("scheduler", 0); err == nil {
		t.Error("Kill of an unknown service")
	}
	if err := c.Kill(History, 3); err == nil {
		t.Error("Kill of history-3 of 1")
	}
	if err := c.Kill(History, 0); err != nil {
		t.Errorf("Kill of a process that is down: %v", err)
	}
}

func TestProcessErrorIsOneLine(t *testing.T) {
	err := &ProcessError{Service: History, Index: 1, Err: errors.New("exited before it was ready"), Log: "temporal ERROR+4 lost"}
	want := "cluster: history-1: exited before it was ready (log: temporal ERROR+4 lost)"
	if err.Error() != want {
		t.Errorf("%q", err.Error())
	}
}

// A service binary that never gets ready: Start fails with a ProcessError
// naming the process, and leaves no PostgreSQL server or folder behind.
func TestStartFailsCleanly(t *testing.T) {
	if _, err := FindPostgres(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	// PostgreSQL's folder goes under TMPDIR: one of our own, that the
	// postgres user may enter.
	tmp, err := os.MkdirTemp("", "cluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	start := time.Now()
	_, err = Start(context.Background(), Options{Binary: "/bin/true", Dir: dir})
	var pe *ProcessError
	if !errors.As(err, &pe) || pe.Service != History || pe.Index != 0 {
		t.Fatalf("want a ProcessError for history-0, got %v", err)
	}
	t.Logf("failed in %s: %v", time.Since(start).Round(time.Millisecond), err)
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres.log")); err != nil {
		t.Errorf("PostgreSQL's log was not kept in Dir: %v", err)
	}
}
