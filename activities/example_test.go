package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/tulip-temporal/tulip/activities"
)

// A tool whose schema is inferred from its argument type: the spec has no
// Parameters, so NewTool writes them from the struct's json and
// jsonschema tags.
func ExampleNewTool() {
	type refundArgs struct {
		OrderID string  `json:"order_id" jsonschema:"the order to refund"`
		Amount  float64 `json:"amount" jsonschema:"in the order's currency"`
		Reason  *string `json:"reason,omitempty"`
	}
	refund, err := activities.NewTool(activities.ToolSpec{Name: "issue_refund", Idempotent: true,
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
