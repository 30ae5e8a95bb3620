package dedup_test

import (
	"fmt"

	"github.com/tulip-temporal/tulip/internal/dedup"
)

// The seed's example: the model re-emits issue_refund("ord-4821", 120.0).
// Across turns the call is compared by value, so even 120 matches 120.0;
// inside one response it is compared by sorted-key JSON, where it does not.
func Example() {
	log := dedup.NewLog()
	first, _ := dedup.Parse(`{"order_id": "ord-4821", "amount": 120.0}`, dedup.Limits{})
	turn1 := log.BeginResponse()
	log.Append(dedup.Record{Tool: "issue_refund", Response: turn1, Origin: dedup.Executed,
		Result: []byte(`{"refund_id":"rf-1"}`)}, first)

	sameTurn, _ := dedup.Parse(`{"amount": 120, "order_id": "ord-4821"}`, dedup.Limits{})
	rec, rel := log.FindMatchingExecution("issue_refund", sameTurn, turn1)
	fmt.Println("same response, 120 vs 120.0:", rec != nil, rel, sameTurn.SortedKeyJSON())

	turn2 := log.BeginResponse()
	rec, rel = log.FindMatchingExecution("issue_refund", sameTurn, turn2)
	fmt.Println("next turn, 120 vs 120.0:", rec != nil, rel, string(rec.Result))

	other, _ := dedup.Parse(`{"order_id": "ord-4822", "amount": 120.0}`, dedup.Limits{})
	rec, _ = log.FindMatchingExecution("issue_refund", other, turn2)
	fmt.Println("ord-4822:", rec != nil)
	// Output:
	// same response, 120 vs 120.0: false  {"amount": 120, "order_id": "ord-4821"}
	// next turn, 120 vs 120.0: true earlier_turn {"refund_id":"rf-1"}
	// ord-4822: false
}
