// Command crashworker is a tulip worker process for the crash-window tests.
// With -crash-at it kills itself with SIGKILL at one point of a refund, the
// first time it gets there (a marker file remembers): before the call to
// billing, after billing made the refund but before the activity completed,
// or after the activity completed but before the next workflow task did.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// Crash points.
const (
	BeforeBilling   = "before-billing"
	AfterBilling    = "after-billing"
	AfterCompletion = "after-completion"
)

var (
	crashAt   = flag.String("crash-at", "", "crash point: before-billing, after-billing, after-completion (empty: none)")
	marker    = flag.String("marker", "", "marker file: crash only while it does not exist")
	hangAt    = flag.String("hang-at", "", "hang (block forever, saying so on stdout) the first time here: tool (report_case's body) or model")
	events    = flag.String("events", "", "append a line per report_case body and model call here: WHAT ATTEMPT UNIXNANO")
	delay     = flag.Duration("tool-delay", 0, "report_case takes this long")
	oaiURL    = flag.String("openai", "", "register the model \"stream\": an OpenAI-compatible endpoint at this base URL")
	onUnknown = flag.String("on-unknown", "", "issue_refund's OnUnknown: check (asks billing by key) or empty (Temporal retries)")
	oaiName   = flag.String("openai-name", "stream", "the name -openai's model is registered under (\"openai\": the model 'tulip serve' runs)")
)

// event records that what (tool, model) started an attempt.
func event(ctx context.Context, what string) {
	if *events == "" {
		return
	}
	f, err := os.OpenFile(*events, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %d %d\n", what, activity.GetInfo(ctx).Attempt, time.Now().UnixNano())
}

// hang blocks forever at point p, once (a marker file remembers), after
// saying so on stdout: the test kills the process there.
func hang(p string) {
	if *hangAt != p || *marker == "" {
		return
	}
	f, err := os.OpenFile(*marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	f.Close()
	fmt.Printf("hanging %s\n", p)
	select {}
}

// crash kills this process with SIGKILL at point p, once.
func crash(p string) {
	if *crashAt != p || *marker == "" {
		return
	}
	f, err := os.OpenFile(*marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // crashed here before
	}
	f.Close()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// crashInterceptor kills the worker while it handles the workflow task that
// follows the refund's completion: when, not replaying, the run schedules
// its second model turn.
type crashInterceptor struct {
	sdkinterceptor.WorkerInterceptorBase
}

func (c *crashInterceptor) InterceptWorkflow(_ workflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	i := &crashInbound{}
	i.Next = next
	return i
}

type crashInbound struct {
	sdkinterceptor.WorkflowInboundInterceptorBase
}

func (i *crashInbound) Init(outbound sdkinterceptor.WorkflowOutboundInterceptor) error {
	o := &crashOutbound{}
	o.Next = outbound
	return i.Next.Init(o)
}

type crashOutbound struct {
	sdkinterceptor.WorkflowOutboundInterceptorBase
}

func (o *crashOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if activityType == protocol.ModelActivity && !workflow.IsReplaying(ctx) && len(args) == 1 {
		if req, ok := args[0].(activities.ModelInput); ok && req.Turn == 2 {
			crash(AfterCompletion)
		}
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

type refundArgs struct {
	OrderID string      `json:"order_id"`
	Amount  json.Number `json:"amount"`
}

func main() {
	address := flag.String("address", "", "Temporal frontend")
	taskQueue := flag.String("task-queue", "", "task queue")
	billingURL := flag.String("billing", "", "billing base URL")
	flag.Parse()
	if err := run(*address, *taskQueue, *billingURL); err != nil {
		fmt.Fprintln(os.Stderr, "crashworker:", err)
		os.Exit(1)
	}
}

func run(address, taskQueue, billingURL string) error {
	if address == "" || taskQueue == "" || billingURL == "" {
		return errors.New("-address, -task-queue and -billing are required")
	}
	// No sticky cache: a task lost with this process goes straight back to
	// the normal queue, and every task replays the history.
	sdkworker.SetStickyWorkflowCacheSize(0)
	bill := billing.Client{BaseURL: billingURL}
	refundOpts := activities.ToolOptions{StartToCloseTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 20}}
	if *onUnknown == protocol.OnUnknownCheck {
		refundOpts.Check = func(ctx context.Context, in activities.ToolInput) (json.RawMessage, bool, error) {
			rc, ok, err := bill.Lookup(ctx, in.IdempotencyKey)
			if err != nil || !ok {
				return nil, false, err
			}
			b, err := json.Marshal(rc)
			return b, true, err
		}
	}
	refund := activities.MustTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true, KeyTemplate: "refund:{order_id}:{amount}:v1", OnUnknown: *onUnknown},
		func(ctx context.Context, a refundArgs) (billing.Receipt, error) {
			crash(BeforeBilling)
			rc, err := bill.Refund(ctx, a.OrderID, a.Amount)
			if err != nil {
				return rc, err
			}
			crash(AfterBilling)
			return rc, nil
		},
		refundOpts)
	// report_case has the default tool options: a minute to run, and a
	// heartbeat timeout (tulip heartbeats for it).
	report := activities.MustTool(protocol.ToolSpec{Name: "report_case", Idempotent: true},
		func(ctx context.Context, a struct {
			Case string `json:"case"`
		}) (map[string]string, error) {
			event(ctx, "tool")
			hang("tool")
			time.Sleep(*delay)
			return map[string]string{"reported": a.Case}, nil
		})
	// The model reports a case, then ends (the default model options: two
	// minutes to answer).
	reporter := activities.ModelFunc(func(ctx context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		event(ctx, "model")
		if req.Turn == 1 {
			hang("model")
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "c1", Name: "report_case", Arguments: `{"case": "case-1"}`}}}, nil
		}
		return activities.ModelResponse{Text: "reported"}, nil
	})
	// The model refunds the order named in the user's message, then ends.
	model := activities.ModelFunc(func(_ context.Context, req activities.ModelRequest) (activities.ModelResponse, error) {
		if req.Turn == 1 {
			args, _ := json.Marshal(map[string]any{"order_id": req.Messages[0].Content, "amount": json.Number("120.0")})
			return activities.ModelResponse{ToolCalls: []threadstate.ToolCall{{ID: "c1", Name: "issue_refund", Arguments: string(args)}}}, nil
		}
		return activities.ModelResponse{Text: "refunded"}, nil
	})
	c, err := client.Dial(client.Options{HostPort: address,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return err
	}
	defer c.Close()
	models := map[string]activities.Model{"refund": model, "report": reporter}
	if *oaiURL != "" {
		m, err := openaimodel.New(openaimodel.Options{BaseURL: *oaiURL, Model: "fake"})
		if err != nil {
			return err
		}
		models[*oaiName] = activities.PublicModel(m)
	}
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: []*activities.Tool{refund, report}, Models: models})
	if err != nil {
		return err
	}
	w := sdkworker.New(c, taskQueue, sdkworker.Options{
		Plugins:      []sdkworker.Plugin{plugin},
		Interceptors: []sdkinterceptor.WorkerInterceptor{&crashInterceptor{}},
	})
	if err := w.Start(); err != nil {
		return err
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	w.Stop()
	return nil
}
