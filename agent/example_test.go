package agent_test

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// approve runs an agent on a thread and approves each interrupt until the
// run answers. Against a server it is the whole client side of a run.
func approve(ctx context.Context, c client.Client, thread, message string) (*agent.Result, error) {
	run, err := agent.Start(ctx, c, agent.Options{TaskQueue: "tulip", Model: "support", ThreadID: thread, Message: message})
	if tulip.Is(err, tulip.ThreadBusy) {
		return nil, fmt.Errorf("thread %s has an open run: resume it first", thread)
	}
	if err != nil {
		return nil, err
	}
	for {
		res, err := run.Await(ctx)
		if err != nil || res.Status != agent.Interrupted {
			return res, err
		}
		if _, err := run.Resume(ctx, agent.Approve(res.Interrupt.ID)); err != nil {
			return nil, err
		}
	}
}

// A client starts a run, waits for it and answers its interrupts. (This
// example needs a Temporal server with a tulip worker; the module's tests
// run it on the embedded one.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(client.Options{HostPort: "localhost:7233"})
	if err != nil {
		fmt.Println("no server:", err != nil)
		return
	}
	defer c.Close()
	res, err := approve(ctx, c, "customer-4821", "Please refund order ord-4821")
	if err != nil {
		fmt.Println(tulip.KindOf(err), err)
		return
	}
	for _, l := range res.Trace {
		fmt.Println(l.Tool, l.Outcome, l.Outcome == agent.Cached)
	}
	fmt.Println(res.Answer)
}

// Approve runs the held calls, the interrupted one with exactly the
// arguments it was held with; Decline runs none and tells the model why.
func ExampleApprove() {
	fmt.Printf("%+v\n", agent.Approve("int-1"))
	fmt.Printf("%+v\n", agent.Decline("int-1", "not tonight"))
	// Output:
	// {InterruptID:int-1 Answer:approved PerformDangling:true Results:[]}
	// {InterruptID:int-1 Answer:not tonight PerformDangling:false Results:[]}
}

// Options a run cannot start without are refused before anything is
// sent, with kind tulip.BadInput.
func ExampleStart_badInput() {
	_, err := agent.Start(context.Background(), nil, agent.Options{Model: "support"})
	fmt.Println(err)
	fmt.Println(tulip.KindOf(err))
	// Output:
	// agent: Options.TaskQueue is required
	// tulip.BadInput
}
