// Command old is a small support-agent service written against tulip's
// pre-v1 API (commit 5dc7792): one package of tulip's for each concept.
// tests/ported_test.go compiles it against that commit; ../new is the same
// service ported to v1 by docs/migrating.md.
//
// Without TEMPORAL_ADDRESS it builds everything and dials nothing.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tulip-temporal/tulip/activities"
	"github.com/tulip-temporal/tulip/agent"
	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/dedup"
	"github.com/tulip-temporal/tulip/hooks"
	"github.com/tulip-temporal/tulip/interceptor"
	"github.com/tulip-temporal/tulip/openai"
	"github.com/tulip-temporal/tulip/scenario"
	"github.com/tulip-temporal/tulip/streams"
	tworker "github.com/tulip-temporal/tulip/worker"
	"github.com/tulip-temporal/tulip/workflow"
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
var refund = activities.MustTool(activities.ToolSpec{Name: "issue_refund", Description: "Refund an order.", Idempotent: true},
	func(ctx context.Context, a refundArgs) (receipt, error) {
		key := activities.IdempotencyKey(ctx)
		if key == "" {
			return receipt{}, activities.ToolError("no idempotency key", "billing.NoKey", true)
		}
		return receipt{OrderID: a.OrderID, Key: key}, nil // billing.Refund(ctx, a.OrderID, a.Amount, key)
	}, activities.ToolOptions{StartToCloseTimeout: 30 * time.Second})

var page = activities.MustTool(activities.ToolSpec{Name: "page_oncall", Description: "Page the on-call engineer."},
	func(ctx context.Context, a struct {
		Summary string `json:"summary"`
	}) (string, error) {
		in, _ := activities.CallInfo(ctx)
		return "paged for " + in.Thread + ": " + a.Summary, nil
	})

// upperOrder normalises order ids, so "ORD-1" and "ord-1" are one refund.
func upperOrder(c *hooks.Call) hooks.Decision {
	if v := c.Arg("order_id"); v != nil && v.Kind() == dedup.String {
		c.SetArg("order_id", dedup.StringValue(strings.ToUpper(v.Str())))
	}
	return hooks.Decision{}
}

// script is the test model: a refund, its repeat and a page (held for
// approval), then the answer once resumed.
func script() activities.Model {
	done := "Refunded ORD-4821 and paged on-call."
	refundCall := activities.ToolCall{ID: "r1", Name: "issue_refund", Arguments: `{"order_id": "ord-4821", "amount": 25}`}
	again := refundCall
	again.ID = "r2"
	return scenario.Run{
		Turns: []scenario.Turn{
			{ToolCalls: []activities.ToolCall{refundCall}},
			{ToolCalls: []activities.ToolCall{again, {ID: "p1", Name: "page_oncall", Arguments: `{"summary": "refund issued"}`}}},
		},
		Resumes: []scenario.Resume{{Answer: "approved", PerformDangling: true, Turns: []scenario.Turn{{Text: &done}}}},
	}.Model()
}

// served counts served calls as the worker decides them.
type served struct{ n atomic.Int64 }

func (s *served) Decision(d workflow.Decision) {
	if d.Outcome == workflow.OutcomeCached {
		s.n.Add(1)
	}
}
func (s *served) ModelCall(workflow.ModelCall) {}

func workerOptions() (tworker.Options, error) {
	gpt, err := openai.New(openai.Options{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", SystemPrompt: "You are a support agent."})
	if err != nil {
		return tworker.Options{}, err
	}
	return tworker.Options{
		Tools: []*activities.Tool{refund, page},
		Hooks: map[string]hooks.Hook{
			"approve_pages": hooks.Approve("page_oncall", "paging needs a person"),
			"upper_order":   upperOrder,
		},
		Models:            map[string]activities.Model{"support": script(), "gpt": gpt},
		Checkpointer:      activities.TemporalCheckpointer{Store: activities.DirStore{Dir: "threads"}},
		Conversation:      activities.LastTurns(20),
		ConversationCache: activities.NewConversationCacheBytes(activities.DefaultCacheNodes, 256<<20),
		Observer:          &served{},
	}, nil
}

// clientOptions encrypt payloads (when a key file is given) and keep large
// ones in a blob directory.
func clientOptions(blobs blobstore.Store) (client.Options, error) {
	opts := client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")}
	opts.ExternalStorage = blobstore.ExternalStorage(blobs, 0)
	if file := os.Getenv("TULIP_KEYS"); file != "" {
		keys, err := codec.LoadKeyFile(file)
		if err != nil {
			return opts, err
		}
		if w := codec.KeyFileWarning(file); w != "" {
			log.Print(w)
		}
		keys.ClientOptions(&opts)
	} else {
		opts.DataConverter = codec.DetectDataConverter(nil) // names the key of an encrypted payload
		opts.FailureConverter = codec.FailureConverter(opts.DataConverter, false)
	}
	return opts, nil
}

// stored says whether the blob store holds data already.
func stored(ctx context.Context, blobs blobstore.Store, data []byte) bool {
	_, err := blobs.Get(ctx, blobstore.Key(data))
	return err == nil
}

// watch logs the run's call decisions as they are made.
func watch(ctx context.Context, c client.Client, workflowID string) error {
	return streams.Subscribe(ctx, c, workflowID, streams.SubscribeOptions{Topics: []string{activities.TopicCalls}},
		func(it streams.Item) error {
			var ci workflow.CallItem
			if err := it.Decode(&ci); err != nil {
				return err
			}
			log.Printf("turn %d: %s %s %s", ci.Turn, ci.CallID, ci.Tool, ci.Outcome)
			return nil
		})
}

// refundOrder runs the agent on the customer's thread, approving the page.
func refundOrder(ctx context.Context, c client.Client) error {
	h, err := agent.Start(ctx, c, agent.RunOptions{TaskQueue: queue, Model: "support", ThreadID: "customer-4821",
		Message: "Please refund order ord-4821", Hooks: []string{"upper_order", "approve_pages"},
		Limits: dedup.Limits{MaxBytes: 64 << 10}, Stream: &workflow.StreamOptions{Content: true},
		WorkflowExecutionTimeout: time.Hour})
	var busy *agent.ThreadBusyError
	if errors.As(err, &busy) {
		return fmt.Errorf("thread %s is busy with run %s", busy.ThreadID, busy.RunID)
	}
	if err != nil {
		return err
	}
	go watch(ctx, c, h.WorkflowID)
	res, err := agent.Await(ctx, c, h, "")
	var failed *agent.RunFailedError
	if errors.As(err, &failed) && failed.Type() == activities.ErrMaxTurns {
		return fmt.Errorf("the agent went round in circles: %w", err)
	}
	if err != nil {
		return err
	}
	if res.Status == workflow.StatusInterrupted {
		in := workflow.ResumeInput{InterruptID: res.Interrupt.ID, Answer: "approved", PerformDangling: true}
		if _, err := agent.Resume(ctx, c, h.WorkflowID, in); err != nil {
			return err
		}
		if res, err = agent.Await(ctx, c, h, res.Interrupt.ID); err != nil {
			return err
		}
	}
	trace, err := agent.Trace(ctx, c, h, res)
	if err != nil {
		return err
	}
	for _, l := range trace {
		if l.Outcome == workflow.OutcomeCached {
			log.Printf("%s served from record %d", l.CallID, *l.ServedFrom)
		}
	}
	recs, err := agent.Log(ctx, c, h)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Origin == dedup.Executed {
			log.Printf("record %d: %s ran with key %s", r.Seq, r.Tool, r.Key)
		}
	}
	thread, err := agent.Thread(ctx, c, h.WorkflowID)
	if err != nil {
		return err
	}
	log.Printf("%s: %s (%d messages on the thread)", res.Status, res.Answer, len(thread.Messages))
	return nil
}

// testInEnv plays the agent in the SDK's test environment, with the
// workflow, activities and interceptor registered by hand (test
// environments run no plugins) and the approval given by update.
func testInEnv() (*workflow.RunResult, error) {
	opts, err := workerOptions()
	if err != nil {
		return nil, err
	}
	opts.Checkpointer = nil // no thread: the environment has no server
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{interceptor.New()}})
	if err := tworker.Register(env, opts); err != nil {
		return nil, err
	}
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflow.QueryState)
		var st workflow.StateView
		if err != nil || v.Get(&st) != nil || st.Status != workflow.StatusInterrupted {
			return
		}
		env.UpdateWorkflow(workflow.UpdateResume, "", &testsuite.TestUpdateCallback{OnReject: func(err error) { log.Print(err) }},
			workflow.ResumeInput{InterruptID: st.Interrupt.ID, Answer: "approved", PerformDangling: true})
	}, time.Second)
	env.ExecuteWorkflow(workflow.WorkflowName, workflow.RunInput{Model: "support", Message: "Please refund order ord-4821",
		Hooks: []string{"upper_order", "approve_pages"}})
	if err := env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var res workflow.RunResult
	return &res, env.GetWorkflowResult(&res)
}

// must stops the program on an error.
func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

func main() {
	plugin := must(tworker.NewPlugin(must(workerOptions())))
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
