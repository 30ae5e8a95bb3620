package tulip_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// A Go tool is a typed function; Idempotent lets an identical later call
// in a run (or on its thread) be served from the execution log.
func ExampleNewTool() {
	type refundArgs struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	refund, err := tulip.NewTool(tulip.ToolSpec{Name: "issue_refund", Description: "Refund an order.", Idempotent: true},
		func(ctx context.Context, a refundArgs) (string, error) {
			key := tulip.IdempotencyKey(ctx) // the same on every attempt, replay and served call
			return "refunded " + a.OrderID + " with key " + key, nil
		})
	if err != nil {
		panic(err)
	}
	fmt.Println(refund.Name(), refund.Spec().Idempotent)
	// Output: issue_refund true
}

// A worker gets tulip from one plugin: tools (Go tools and toolsets
// alike), hooks and models by name.
func ExampleNewPlugin() {
	lookup := tulip.MustTool(tulip.ToolSpec{Name: "lookup_order", Idempotent: true, Local: true},
		func(_ context.Context, a struct {
			OrderID string `json:"order_id"`
		}) (string, error) {
			return "order " + a.OrderID + ": shipped", nil
		})
	model := tulip.ModelFunc(func(context.Context, tulip.ModelRequest) (tulip.ModelResponse, error) {
		return tulip.ModelResponse{Text: "It shipped."}, nil
	})
	plugin, err := tulip.NewPlugin(tulip.Options{
		Tools:  []tulip.Toolset{lookup},
		Hooks:  map[string]tulip.Hook{"no_pages": tulip.Block("page_oncall", "paging is off tonight")},
		Models: map[string]tulip.Model{"support": model},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(plugin.Name())
	// Then: worker.New(c, "tulip", worker.Options{Plugins: []worker.Plugin{plugin}})

	// Output: tulip
}

// Two tools of one name are refused when the plugin is made, not at a run.
func ExampleNewPlugin_clash() {
	body := func(context.Context, struct{}) (string, error) { return "", nil }
	_, err := tulip.NewPlugin(tulip.Options{Tools: []tulip.Toolset{
		tulip.MustTool(tulip.ToolSpec{Name: "issue_refund"}, body),
		tulip.MustTool(tulip.ToolSpec{Name: "issue_refund"}, body),
	}})
	fmt.Println(err != nil)
	// Output: true
}

// A hook sees each call before the log matches it: here it normalises
// an order id, so "ord-1" and "ORD-1" are one call to the log.
func ExampleHook() {
	upper := func(c *tulip.Call) tulip.Verdict {
		if v := c.Arg("order_id"); v != nil && v.Kind() == tulip.String {
			c.SetArg("order_id", tulip.StringValue(toUpper(v.Str())))
		}
		return tulip.Verdict{}
	}
	args, _ := tulip.ParseValue(`{"order_id": "ord-1", "amount": 120.0}`)
	call := tulip.NewCall("c1", "issue_refund", args)
	fmt.Println(upper(call) == tulip.Verdict{}, call.Changed(), call.Args().JSON())
	// Then: tulip.Options{Hooks: map[string]tulip.Hook{"upper_order_id": upper}}

	// Output: true true {"order_id":"ORD-1","amount":120.0}
}

func toUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// KindOf reads a failure's kind wherever it came from: a failed run's
// error, an update's, a tool's.
func ExampleKindOf() {
	err := fmt.Errorf("starting run 7: %w",
		temporal.NewNonRetryableApplicationError("thread case-9: run r1 was deleted", string(tulip.ThreadLost), nil))
	fmt.Println(tulip.KindOf(err), tulip.Is(err, tulip.ThreadLost))
	fmt.Println(tulip.KindOf(errors.New("connection refused")) == "")
	// Output:
	// tulip.ThreadLost true
	// true
}

// A tool whose schema is inferred from its argument type: the spec has no
// Parameters, so NewTool writes them from the struct's json and
// jsonschema tags.
func ExampleNewTool_schema() {
	type refundArgs struct {
		OrderID string  `json:"order_id" jsonschema:"the order to refund"`
		Amount  float64 `json:"amount" jsonschema:"in the order's currency"`
		Reason  *string `json:"reason,omitempty"`
	}
	refund, err := tulip.NewTool(tulip.ToolSpec{Name: "issue_refund", Idempotent: true,
		Description: "Refund an order."},
		func(ctx context.Context, a refundArgs) (string, error) {
			return "rf-" + a.OrderID, nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	var out bytes.Buffer
	_ = json.Indent(&out, refund.Spec().Parameters, "", "  ")
	fmt.Println(out.String())
	// Output:
	// {
	//   "type": "object",
	//   "properties": {
	//     "order_id": {
	//       "type": "string",
	//       "description": "the order to refund"
	//     },
	//     "amount": {
	//       "type": "number",
	//       "description": "in the order's currency"
	//     },
	//     "reason": {
	//       "type": [
	//         "null",
	//         "string"
	//       ]
	//     }
	//   },
	//   "required": [
	//     "order_id",
	//     "amount"
	//   ],
	//   "additionalProperties": false
	// }
}
