package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/demo/witness"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/workerplugin"
	"github.com/tulip-temporal/tulip/openaimodel"
)

// runWorker is the worker process (-role worker): the worker 'tulip serve
// --no-worker' leaves to others. It polls the task queue with the tulip
// plugin: the demo toolbox, issue_refund through billing, and the scripted
// model as "openai". It prints "ready" once it polls, and runs until
// SIGTERM (or SIGKILL: the nemesis's).
func runWorker(args []string) int {
	fs := flag.NewFlagSet("serveload worker", flag.ContinueOnError)
	address := fs.String("address", "", "Temporal frontend")
	taskQueue := fs.String("task-queue", "", "task queue")
	billingURL := fs.String("billing", "", "billing base URL")
	modelURL := fs.String("model", "", "the scripted model's base URL")
	breakDedup := fs.Bool("break-dedup", false, "issue_refund not idempotent, each run under a new billing key")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := worker(*address, *taskQueue, *billingURL, *modelURL, *breakDedup); err != nil {
		fmt.Fprintln(os.Stderr, "serveload worker:", err)
		return 1
	}
	return 0
}

func worker(address, taskQueue, billingURL, modelURL string, breakDedup bool) error {
	if address == "" || taskQueue == "" || billingURL == "" || modelURL == "" {
		return errors.New("-address, -task-queue, -billing and -model are required")
	}
	c, err := client.Dial(client.Options{HostPort: address,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))})
	if err != nil {
		return err
	}
	defer c.Close()
	// No API key is sent to the scripted model.
	m, err := openaimodel.New(openaimodel.Options{BaseURL: modelURL + "/v1", Model: "scripted", APIKeyEnv: "SERVELOAD_NO_API_KEY"})
	if err != nil {
		return err
	}
	tb := demo.NewToolbox()
	tb.UseBilling(billing.Client{BaseURL: billingURL})
	tools := tb.Tools()
	if breakDedup {
		tools = brokenRefund(tools, billingURL)
	}
	plugin, err := workerplugin.NewPlugin(workerplugin.Options{Tools: tools, Hooks: demo.Hooks(),
		Models: map[string]activities.Model{"openai": activities.PublicModel(m)}})
	if err != nil {
		return err
	}
	w := sdkworker.New(c, taskQueue, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
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

// brokenRefund replaces issue_refund with the control's: not idempotent
// (a re-emitted refund is not served from the log) and refunding under a
// key of its own each time (billing cannot tell a repeat).
func brokenRefund(tools []*activities.Tool, billingURL string) []*activities.Tool {
	type refundArgs struct {
		OrderID string      `json:"order_id"`
		Amount  json.Number `json:"amount"`
	}
	broken := activities.MustTool(protocol.ToolSpec{Name: "issue_refund", Description: "Refund an order (control: not idempotent).",
		Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["order_id","amount"]}`)},
		func(ctx context.Context, a refundArgs) (billing.Receipt, error) {
			body, _ := json.Marshal(billing.RefundRequest{OrderID: a.OrderID, Amount: a.Amount})
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, billingURL+"/refunds", bytes.NewReader(body))
			if err != nil {
				return billing.Receipt{}, err
			}
			req.Header.Set("Content-Type", "application/json")
			if err := witness.SetHeaders(ctx, req); err != nil {
				return billing.Receipt{}, err
			}
			var nonce [8]byte
			_, _ = rand.Read(nonce[:])
			req.Header.Set(activities.IdempotencyKeyHeader, "broken-"+hex.EncodeToString(nonce[:]))
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				return billing.Receipt{}, err
			}
			defer resp.Body.Close()
			var rc billing.Receipt
			if resp.StatusCode >= 300 {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				return rc, fmt.Errorf("billing: status %d: %s", resp.StatusCode, msg)
			}
			dec := json.NewDecoder(resp.Body)
			dec.UseNumber()
			return rc, dec.Decode(&rc)
		})
	out := make([]*activities.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Spec().Name == "issue_refund" {
			t = broken
		}
		out = append(out, t)
	}
	return out
}
