// Command new is ../old, the small support-agent service written against
// tulip's pre-v1 API, ported to v1 by docs/migrating.md.
// tests/ported_test.go compiles it against the current tree.
//
// Without TEMPORAL_ADDRESS it builds everything and dials nothing.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/openaimodel"
)

const queue = "agents"

type refundArgs struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

type receipt struct {
	OrderID string `json:"order_id"`
	Key     string `json:"key"`
}

// refund is idempotent: a repeat is served from the log, and the billing
// service deduplicates by the key the body sends it.
var refund = tulip.MustTool(tulip.ToolSpec{Name: "issue_refund", Description: "Refund an order.", Idempotent: true},
	func(ctx context.Context, a refundArgs) (receipt, error) {
		key := tulip.IdempotencyKey(ctx)
		if key == "" {
			return receipt{}, tulip.ToolError("no idempotency key", "billing.NoKey", true)
		}
		return receipt{OrderID: a.OrderID, Key: key}, nil // billing.Refund(ctx, a.OrderID, a.Amount, key)
	}, tulip.ToolOptions{StartToCloseTimeout: 30 * time.Second})

var page = tulip.MustTool(tulip.ToolSpec{Name: "page_oncall", Description: "Page the on-call engineer."},
	func(ctx context.Context, a struct {
		Summary string `json:"summary"`
	}) (string, error) {
		in, _ := tulip.CallInfo(ctx)
		return "paged for " + in.Thread + ": " + a.Summary, nil
	})

// upperOrder normalises order ids, so "ORD-1" and "ord-1" are one refund.
func upperOrder(c *tulip.Call) tulip.Verdict {
	if v := c.Arg("order_id"); v != nil && v.Kind() == tulip.String {
		c.SetArg("order_id", tulip.StringValue(strings.ToUpper(v.Str())))
	}
	return tulip.Verdict{}
}

// script is the test model: a refund, its repeat and a page (held for
// approval), then the answer once resumed. It answers by turn (the
// scenario's turn i is req.Turn i+1; a resumed run keeps counting).
func script() tulip.Model {
	refundCall := tulip.ToolCall{ID: "r1", Name: "issue_refund", Arguments: `{"order_id": "ord-4821", "amount": 25}`}
	again := refundCall
	again.ID = "r2"
	return tulip.ModelFunc(func(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
		switch req.Turn {
		case 1:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{refundCall}}, nil
		case 2:
			return tulip.ModelResponse{ToolCalls: []tulip.ToolCall{again, {ID: "p1", Name: "page_oncall", Arguments: `{"summary": "refund issued"}`}}}, nil
		}
		return tulip.ModelResponse{Text: "Refunded ORD-4821 and paged on-call."}, nil
	})
}

// served counts served calls as the worker decides them.
type served struct{ n atomic.Int64 }

func (s *served) Decision(d tulip.CallEvent) {
	if d.Outcome == "cached" { // agent.Served; a CallEvent's Outcome is not an agent.Outcome
		s.n.Add(1)
	}
}
func (s *served) ModelCall(tulip.ModelEvent) {}

func workerOptions() (tulip.Options, error) {
	gpt, err := openaimodel.New(openaimodel.Options{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", SystemPrompt: "You are a support agent."})
	if err != nil {
		return tulip.Options{}, err
	}
	return tulip.Options{
		Tools: []tulip.Toolset{refund, page},
		Hooks: map[string]tulip.Hook{
			"approve_pages": tulip.Approve("page_oncall", "paging needs a person"),
			"upper_order":   upperOrder,
		},
		Models:                 map[string]tulip.Model{"support": script(), "gpt": gpt},
		ThreadStore:            tulip.DirStore{Dir: "threads"},
		Conversation:           tulip.LastTurns(20),
		ConversationCacheBytes: 256 << 20,
		Observer:               &served{},
	}, nil
}

// clientOptions encrypt payloads (when a key file is given) and keep large
// ones in a blob directory.
func clientOptions(blobs blobstore.Store) (client.Options, error) {
	opts := client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")}
	opts.ExternalStorage = blobstore.ExternalStorage(blobs, 0)
	var keys *codec.Keyring // nil: no keys; an encrypted payload's key is named
	if file := os.Getenv("TULIP_KEYS"); file != "" {
		var err error
		if keys, err = codec.LoadKeyFile(file); err != nil {
			return opts, err
		}
	}
	opts.DataConverter, opts.FailureConverter = keys.Converters(nil)
	return opts, nil
}

// stored says whether the blob store holds data already.
func stored(ctx context.Context, blobs blobstore.Store, data []byte) bool {
	sum := sha256.Sum256(data)
	_, err := blobs.Get(ctx, "sha256-"+hex.EncodeToString(sum[:]))
	return err == nil
}

// watch logs the run's call decisions as they are made.
func watch(ctx context.Context, run *agent.Run) error {
	return run.Watch(ctx, 0, func(ev agent.Event) error {
		if ci := ev.Call; ci != nil {
			log.Printf("turn %d: %s %s %s", ci.Turn, ci.CallID, ci.Tool, ci.Outcome)
		}
		return nil
	})
}

// refundOrder runs the agent on the customer's thread, approving the page.
func refundOrder(ctx context.Context, c client.Client) error {
	run, err := agent.Start(ctx, c, agent.Options{TaskQueue: queue, Model: "support", ThreadID: "customer-4821",
		Message: "Please refund order ord-4821", Hooks: []string{"upper_order", "approve_pages"},
		MaxArgumentBytes: 64 << 10, Stream: &agent.StreamOptions{Content: true},
		ExecutionTimeout: time.Hour})
	if tulip.Is(err, tulip.ThreadBusy) {
		return fmt.Errorf("thread is busy: %w", err)
	}
	if err != nil {
		return err
	}
	go watch(ctx, run)
	res, err := run.Await(ctx)
	if tulip.Is(err, tulip.MaxTurnsExceeded) {
		return fmt.Errorf("the agent went round in circles: %w", err)
	}
	if err != nil {
		return err
	}
	if res.Status == agent.Interrupted {
		if _, err := run.Resume(ctx, agent.Approve(res.Interrupt.ID)); err != nil {
			return err
		}
		if res, err = run.Await(ctx); err != nil {
			return err
		}
	}
	for _, l := range res.Trace { // whole
		if l.Outcome == agent.Served {
			log.Printf("%s served from record %d", l.CallID, *l.ServedFrom)
		}
	}
	recs, err := run.Log(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Origin == "executed" {
			log.Printf("record %d: %s ran with key %s", r.Seq, r.Tool, r.Key)
		}
	}
	thread, err := agent.Thread(ctx, c, run.ID())
	if err != nil {
		return err
	}
	log.Printf("%s: %s (%d messages on the thread)", res.Status, res.Answer, len(thread.Messages))
	return nil
}

// testInEnv plays the agent in the SDK's test environment: the plugin in
// the environment's worker options, the approval given by agent.RunTest.
func testInEnv() (*agent.Result, error) {
	opts, err := workerOptions()
	if err != nil {
		return nil, err
	}
	opts.ThreadStore = nil // no thread: the environment has no server
	plugin, err := tulip.NewPlugin(opts)
	if err != nil {
		return nil, err
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	return agent.RunTest(env, agent.Options{Model: "support", Message: "Please refund order ord-4821",
		Hooks: []string{"upper_order", "approve_pages"}},
		func(in agent.Interrupt) agent.ResumeInput { return agent.Approve(in.ID) })
}

// must stops the program on an error.
func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

func main() {
	plugin := must(tulip.NewPlugin(must(workerOptions())))
	blobs := must(blobstore.NewDir("blobs"))
	copts := must(clientOptions(blobs))
	if os.Getenv("PORTED_TEST") != "" { // the test-environment run
		res := must(testInEnv())
		fmt.Println(res.Status, res.Answer, len(res.Trace))
	}
	if copts.HostPort == "" {
		return // built, not dialed
	}
	c := must(client.Dial(copts))
	defer c.Close()
	w := sdkworker.New(c, queue, sdkworker.Options{Plugins: []sdkworker.Plugin{plugin}})
	must(0, w.Start())
	defer w.Stop()
	ctx := context.Background()
	must(0, refundOrder(ctx, c))
	log.Print("large results stored: ", stored(ctx, blobs, []byte("{}")))
}
