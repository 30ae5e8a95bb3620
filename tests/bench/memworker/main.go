// Command memworker is the worker process of BenchmarkWorkerMemory: a tulip
// worker and a plain SDK worker in one process with a large sticky cache,
// whose runs take -turns turns and then stay open (tulip's interrupted for
// approval, the plain loop waiting for a signal), so that the process holds
// them in memory. Each line "mem" on stdin makes it collect garbage, return
// it to the OS and print "rss BYTES heap BYTES stack BYTES" (VmRSS,
// HeapInuse, StackInuse) and "cache BYTES" (what the model activity's
// conversation cache holds); "heap PATH" writes a heap profile to PATH.
//
// With -after, a run that was held goes on after its approval with a call
// served from its log (turn 1's refund again) and a call executed (a new
// refund) before it answers; "lat" prints "served P50 P99 executed P50 P99
// n N" in milliseconds: each the time from the model's answer asking for
// the call to the next model call's start, over the N runs that went on.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/tests/bench/plainsdk"
)

// Names the benchmark uses (the plain loop's are plainsdk's).
const (
	Model    = "held" // tulip: -turns turns of one refund each, then a held call
	HoldHook = "hold"
	heldTool = "hold_open"
)

func main() {
	address := flag.String("address", "", "Temporal frontend")
	tq := flag.String("task-queue", "", "task queue of the tulip worker (the plain worker's is this with -plain)")
	turns := flag.Int("turns", 1000, "turns a run takes before it is held open")
	cache := flag.Int("cache", 4096, "sticky cache size")
	after := flag.Bool("after", false, "after its approval a run makes a served and an executed call")
	rate := flag.Int("memprofilerate", 0, "runtime.MemProfileRate (0: the default)")
	flag.Parse()
	if *rate > 0 {
		runtime.MemProfileRate = *rate
	}
	if err := run(*address, *tq, *turns, *cache, *after); err != nil {
		fmt.Fprintln(os.Stderr, "memworker:", err)
		os.Exit(1)
	}
}

func run(address, tq string, turns, cache int, after bool) error {
	if address == "" || tq == "" {
		return errors.New("-address and -task-queue are required")
	}
	sdkworker.SetStickyWorkflowCacheSize(cache)
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	c, err := client.Dial(client.Options{HostPort: address, Logger: logger})
	if err != nil {
		return err
	}
	defer c.Close()

	tool, err := activities.NewTool(protocol.ToolSpec{Name: plainsdk.RefundTool, Idempotent: true},
		func(ctx context.Context, a map[string]any) (map[string]any, error) {
			a["refund_id"] = "rf-1"
			return a, nil
		})
	if err != nil {
		return err
	}
	held, err := activities.NewTool(protocol.ToolSpec{Name: heldTool},
		func(ctx context.Context, a map[string]any) (map[string]any, error) { return a, nil })
	if err != nil {
		return err
	}
	var lat latencies
	model := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		refund := func(n int) (activities.ModelResponse, error) {
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: fmt.Sprintf("c%d", req.Turn), Name: plainsdk.RefundTool, Arguments: plainsdk.Args(n)}}}, nil
		}
		switch {
		case req.Turn <= turns:
			return refund(req.Turn)
		case req.Turn == turns+1:
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "held", Name: heldTool, Arguments: `{}`}}}, nil
		case after && req.Turn <= turns+4:
			run := activity.GetInfo(ctx).WorkflowExecution.ID
			lat.started(run, req.Turn-turns-2) // 1: after the served call, 2: after the executed one
			defer lat.answered(run, req.Turn-turns-2)
			switch req.Turn {
			case turns + 2:
				return refund(1) // served from the log
			case turns + 3:
				return refund(req.Turn) // executed
			}
		}
		return activities.ModelResponse{Text: "done"}, nil
	})
	// The model activity's conversation cache is the worker's, not a
	// run's: "mem" reports its bytes apart.
	convCache := activities.NewConversationCacheBytes(activities.DefaultCacheNodes, activities.DefaultCacheBytes)
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: []*activities.Tool{tool, held}, ConversationCache: convCache,
		Hooks:  map[string]hooks.Hook{HoldHook: hooks.Approve(heldTool, "held open by the benchmark")},
		Models: map[string]activities.Model{Model: model}})
	if err != nil {
		return err
	}
	w := sdkworker.New(c, tq, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	pw := sdkworker.New(c, tq+"-plain", sdkworker.Options{})
	plainsdk.Register(pw)
	if err := pw.Start(); err != nil {
		return err
	}
	defer pw.Stop()

	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if path, ok := strings.CutPrefix(in.Text(), "heap "); ok {
			runtime.GC()
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				return err
			}
			f.Close()
			fmt.Println("heap written")
			continue
		}
		if strings.TrimSpace(in.Text()) == "lat" {
			fmt.Println(lat.report())
			continue
		}
		if strings.TrimSpace(in.Text()) != "mem" {
			continue
		}
		rss, heap, stack, err := mem()
		if err != nil {
			return err
		}
		fmt.Printf("rss %d heap %d stack %d cache %d\n", rss, heap, stack, convCache.Bytes())
	}
	return nil
}

// mem collects garbage, returns it to the OS, and reads VmRSS.
func mem() (rss, heap, stack uint64, err error) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024, ms.HeapInuse, ms.StackInuse, err
		}
	}
	return 0, 0, 0, errors.New("no VmRSS in /proc/self/status")
}

// latencies are, per run that went on after its approval, when the model
// answered asking for a call (step 0: the served one, 1: the executed
// one) and when the next model call started.
type latencies struct {
	mu       sync.Mutex
	asked    map[string][2]time.Time
	served   []float64
	executed []float64
}

// started notes that run's model call after step step-1's call began.
func (l *latencies) started(run string, step int) {
	if step < 1 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.asked[run]
	if !ok || at[step-1].IsZero() {
		return
	}
	ms := float64(time.Since(at[step-1])) / float64(time.Millisecond)
	if step == 1 {
		l.served = append(l.served, ms)
	} else {
		l.executed = append(l.executed, ms)
		delete(l.asked, run)
	}
}

// answered notes that run's model answered, asking for step's call.
func (l *latencies) answered(run string, step int) {
	if step > 1 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asked == nil {
		l.asked = map[string][2]time.Time{}
	}
	at := l.asked[run]
	at[step] = time.Now()
	l.asked[run] = at
}

func (l *latencies) report() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := func(xs []float64, p float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	return fmt.Sprintf("served %.2f %.2f executed %.2f %.2f n %d", q(l.served, 0.5), q(l.served, 0.99), q(l.executed, 0.5), q(l.executed, 0.99), len(l.executed))
}
