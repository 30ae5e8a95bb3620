package devserver

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
)

func TestOptionsAreValidatedUpFront(t *testing.T) {
	for name, o := range map[string]Options{
		"public host":      {Host: "8.8.8.8"},
		"not an IP":        {Host: "localhost.example"},
		"port too large":   {Port: 70000},
		"negative port":    {Port: -1},
		"no folder for db": {DBFile: "/nonexistent/dir/tulip.db"},
	} {
		start := time.Now()
		if _, err := Start(o); err == nil {
			t.Errorf("%s: Start accepted %+v", name, o)
		}
		if time.Since(start) > time.Second {
			t.Errorf("%s: refused only after %s; validation must come first", name, time.Since(start))
		}
	}
}

func TestTunedConfigRaisesPollLimits(t *testing.T) {
	dc := TunedDynamicConfig()
	for _, k := range []string{
		dynamicconfig.TransferProcessorMaxPollRPS.Key().String(),
		dynamicconfig.TimerProcessorMaxPollRPS.Key().String(),
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key().String(),
	} {
		if v, ok := dc[k].(int); !ok || v <= 20 {
			t.Errorf("%s = %v, want a raised limit", k, dc[k])
		}
	}
}

func TestStartStopAndRestartWithDBFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state.db")
	for i := 0; i < 2; i++ {
		start := time.Now()
		s, err := Start(Options{DBFile: db})
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		t.Logf("start %d took %s", i+1, time.Since(start))
		c, err := net.DialTimeout("tcp", s.Address(), time.Second)
		if err != nil {
			t.Fatalf("frontend not reachable: %v", err)
		}
		c.Close()
		// The file is in write-ahead-log mode: its log is beside it.
		if _, err := os.Stat(db + "-wal"); err != nil {
			t.Errorf("no write-ahead log beside the database: %v", err)
		}
		if s.Namespace() != "default" {
			t.Errorf("namespace %q", s.Namespace())
		}
		s.Stop()
		s.Stop() // idempotent
	}
}

// The server's own metrics are served when asked: its persistence
// requests (the namespace's creation at start writes) are there.
func TestMetricsAddress(t *testing.T) {
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s, err := Start(Options{MetricsAddress: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	if !strings.Contains(string(body), "persistence_requests") {
		t.Fatalf("no persistence_requests in the metrics (%d bytes)", len(body))
	}
}
