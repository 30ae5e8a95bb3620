package tests

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/cmd/cli"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `tulip dev` stays up and prints its address; other clients (here `tulip
// run` and `tulip inspect`) use it; it stops cleanly when interrupted.
func TestCLIDev(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.Main(ctx, []string{"dev", "--port", "0"}, &out, &errb) }()
	addrRe := regexp.MustCompile(`--address (\S+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := addrRe.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return addr != ""
	}, 30*time.Second, 20*time.Millisecond, "dev printed no address; stderr: %s", errb.String())

	f := writeFile(t, "s.json", `{"runs": [{"thread_id": "t-dev", "turns": [{"tool_calls": [{"id": "c1", "name": "mint_case_id", "arguments": "{}"}]}]}]}`)
	stdout, stderr, code := runCLI(t, "run", "--scenario", f, "--json", "--address", addr)
	require.Equal(t, 0, code, stderr)
	lines, sum := parseTrace(t, stdout)
	require.Len(t, lines, 1)
	assert.Equal(t, "executed", string(lines[0].Outcome))
	thread := sum.Runs[0].WorkflowID
	stdout, stderr, code = runCLI(t, "inspect", thread, "--address", addr)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "1 records")

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
}
