package mcp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
)

// BenchmarkCallRatio: one call of the "echo" tool through a Toolset (an
// in-process server over the SDK's in-memory transport; a stdio child
// process, this test binary) against the same body as a Go tool's activity
// function. The arms alternate call by call after a warm-up; the metrics
// are each arm's mean and their ratio.
//
//	go test ./mcp -run '^$' -bench CallRatio
func BenchmarkCallRatio(b *testing.B) {
	goTool := tulip.MustTool(tulip.ToolSpec{Name: "echo"}, echo)
	for _, arm := range []struct {
		name string
		srv  func(b *testing.B) Server
	}{
		{"inmemory", func(*testing.B) Server { return newMemServer(newTestServer(nil)).server("bench") }},
		{"stdio", func(b *testing.B) Server { return stdioServer(b, "bench") }},
	} {
		b.Run(arm.name, func(b *testing.B) {
			ts := newToolset(b, arm.srv(b), Options{})
			ctx := context.Background()
			in := func(i int) tulip.ToolInput {
				return tulip.ToolInput{Tool: "echo", CallID: fmt.Sprint(i), IdempotencyKey: fmt.Sprintf("k-%d", i),
					Arguments: fmt.Sprintf(`{"text":"refund ord-4821","n":%d}`, i)}
			}
			call := func(i int) {
				if _, err := ts.Call(ctx, in(i)); err != nil {
					b.Fatal(err)
				}
			}
			goCall := func(i int) {
				if _, err := goTool.Call(ctx, in(i)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 200 { // warm-up: connect, JIT of nothing, caches
				call(i)
				goCall(i)
			}
			out, err := ts.Call(ctx, in(1))
			require.NoError(b, err)
			want, err := goTool.Call(ctx, in(1))
			require.NoError(b, err)
			require.JSONEq(b, string(want.Result), string(out.Result), "the arms compute the same")

			var mcpT, goT time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				call(i)
				mid := time.Now()
				goCall(i)
				mcpT += mid.Sub(start)
				goT += time.Since(mid)
			}
			n := float64(b.N)
			b.ReportMetric(float64(mcpT.Nanoseconds())/n, "mcp-ns/call")
			b.ReportMetric(float64(goT.Nanoseconds())/n, "go-ns/call")
			b.ReportMetric(float64(mcpT)/float64(goT), "mcp/go")
		})
	}
}
