// Package demo is the demo toolbox and hooks of the conformance format
// (docs/scenarios.md): eight tools whose bodies count their real executions, and
// three hooks. The CLI, the tests and the examples use it.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/dedup"
	"github.com/tulip-temporal/tulip/internal/demo/billing"
	"github.com/tulip-temporal/tulip/internal/demo/pager"
	"github.com/tulip-temporal/tulip/internal/hooks"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// ToolNames lists the demo tools in a fixed order.
var ToolNames = []string{"issue_refund", "page_oncall", "deploy_service", "audit_append",
	"isolate_host", "charge_card", "lookup_order", "mint_case_id"}

// Toolbox is a set of demo tools with per-tool execution counters. Each
// Toolbox counts on its own.
type Toolbox struct {
	mu     sync.Mutex
	counts map[string]int
	tools  []*activities.Tool
	// Refund, when set, performs issue_refund's side effect (for example
	// over HTTP to a billing service) and returns the refund id; the
	// default makes "rf-N" locally.
	Refund func(ctx context.Context, orderID string, amount json.Number) (string, error)
	// Page, when set, performs page_oncall's side effect (for example over
	// HTTP to a pager service) and returns the page id; the default pages
	// no one.
	Page func(ctx context.Context, caseID, summary string) (string, error)
}

// UsePager makes page_oncall page through a pager service over HTTP.
func (tb *Toolbox) UsePager(c pager.Client) {
	tb.Page = func(ctx context.Context, caseID, summary string) (string, error) {
		p, err := c.Page(ctx, caseID, summary)
		return p.PageID, err
	}
}

// UseBilling makes issue_refund refund through a billing service over
// HTTP, with the execution's idempotency key.
func (tb *Toolbox) UseBilling(c billing.Client) {
	tb.Refund = func(ctx context.Context, orderID string, amount json.Number) (string, error) {
		rc, err := c.Refund(ctx, orderID, amount)
		return rc.RefundID, err
	}
}

// Invocations returns how many times each tool body ran, every demo tool
// listed.
func (tb *Toolbox) Invocations() map[string]int {
	if tb == nil {
		return map[string]int{}
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := make(map[string]int, len(ToolNames))
	for _, n := range ToolNames {
		out[n] = tb.counts[n]
	}
	return out
}

func (tb *Toolbox) count(tool string) int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.counts[tool]++
	return tb.counts[tool]
}

// Tools returns the demo tools.
func (tb *Toolbox) Tools() []*activities.Tool { return tb.tools }

// Models are the demo's models by name: "demo" plays the scripted refund
// story, SupportModelName acts on the message's words.
func Models() map[string]activities.Model {
	return map[string]activities.Model{"demo": RefundStory().Runs[0].Model(), SupportModelName: SupportModel()}
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%s},"required":%s}`, props, req))
}

type refundArgs struct {
	OrderID string      `json:"order_id"`
	Amount  json.Number `json:"amount"`
}

type pageArgs struct {
	CaseID  string `json:"case_id"`
	Summary string `json:"summary"`
}

type deployArgs struct {
	Service string `json:"service"`
	Version string `json:"version"`
	Canary  bool   `json:"canary"`
}

type hostArgs struct {
	Host string `json:"host"`
}

type cardArgs struct {
	Card   string      `json:"card"`
	Amount json.Number `json:"amount"`
}

type orderArgs struct {
	OrderID string `json:"order_id"`
}

// NewToolbox returns a fresh demo toolbox.
func NewToolbox() *Toolbox {
	tb := &Toolbox{counts: map[string]int{}}
	tb.tools = []*activities.Tool{
		activities.MustTool(protocol.ToolSpec{Name: "issue_refund", Idempotent: true,
			// A business key: every agent and every run that refunds this
			// order and amount reaches billing with the same key.
			KeyTemplate: "refund:{order_id}:{amount}:v1",
			Description: "Refund an order. Re-fires within a run return the recorded receipt.",
			Parameters:  schema(`"order_id":{"type":"string"},"amount":{"type":"number"}`, "order_id", "amount")},
			func(ctx context.Context, a refundArgs) (map[string]any, error) {
				n := tb.count("issue_refund")
				id := fmt.Sprintf("rf-%d", n)
				if tb.Refund != nil {
					var err error
					if id, err = tb.Refund(ctx, a.OrderID, a.Amount); err != nil {
						return nil, err
					}
				}
				return map[string]any{"refund_id": id, "order_id": a.OrderID, "amount": a.Amount}, nil
			}),
		activities.MustTool(protocol.ToolSpec{Name: "page_oncall", Idempotent: true,
			Description: "Page the on-call engineer about a case.",
			Parameters:  schema(`"case_id":{"type":"string"},"summary":{"type":"string"}`, "case_id", "summary")},
			func(ctx context.Context, a pageArgs) (map[string]any, error) {
				tb.count("page_oncall")
				if tb.Page != nil {
					id, err := tb.Page(ctx, a.CaseID, a.Summary)
					if err != nil {
						return nil, err
					}
					return map[string]any{"paged": a.CaseID, "page_id": id}, nil
				}
				return map[string]any{"paged": a.CaseID}, nil
			}),
		activities.MustTool(protocol.ToolSpec{Name: "deploy_service", Idempotent: true,
			Description: "Deploy a service version, optionally as a canary.",
			Parameters:  schema(`"service":{"type":"string"},"version":{"type":"string"},"canary":{"type":"boolean","default":false}`, "service", "version")},
			func(ctx context.Context, a deployArgs) (map[string]any, error) {
				n := tb.count("deploy_service")
				return map[string]any{"deployment": fmt.Sprintf("dep-%d", n)}, nil
			}),
		activities.MustTool(protocol.ToolSpec{Name: "audit_append", Idempotent: true,
			Description: "Append an entry to the audit log.", Parameters: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, a map[string]any) (map[string]any, error) {
				n := tb.count("audit_append")
				return map[string]any{"seq": n}, nil
			}),
		activities.MustTool(protocol.ToolSpec{Name: "isolate_host", Idempotent: true,
			Description: "Isolate a host from the network.",
			Parameters:  schema(`"host":{"type":"string"}`, "host")},
			func(ctx context.Context, a hostArgs) (map[string]any, error) {
				tb.count("isolate_host")
				return map[string]any{"isolated": a.Host}, nil
			}),
		activities.MustTool(protocol.ToolSpec{Name: "charge_card", Idempotent: true,
			Description: "Charge a card.",
			Parameters:  schema(`"card":{"type":"string"},"amount":{"type":"number"}`, "card", "amount")},
			func(ctx context.Context, a cardArgs) (map[string]any, error) {
				tb.count("charge_card")
				return nil, activities.ToolError("card declined: "+a.Card, "demo.CardDeclined", true)
			}),
		activities.MustTool(protocol.ToolSpec{Name: "lookup_order",
			Description: "Look up an order's status (read-only).",
			Parameters:  schema(`"order_id":{"type":"string"}`, "order_id")},
			func(ctx context.Context, a orderArgs) (map[string]any, error) {
				tb.count("lookup_order")
				return map[string]any{"order_id": a.OrderID, "status": "shipped"}, nil
			}),
		activities.MustTool(protocol.ToolSpec{Name: "mint_case_id",
			Description: "Mint a new support case id.", Parameters: schema("")},
			func(ctx context.Context, _ struct{}) (map[string]any, error) {
				n := tb.count("mint_case_id")
				return map[string]any{"case_id": fmt.Sprintf("case-%d", n)}, nil
			}),
	}
	return tb
}

// Hooks returns the demo hooks by name.
func Hooks() map[string]hooks.Hook {
	return map[string]hooks.Hook{
		"upper_order_id":       UpperOrderID,
		"block_page_oncall":    hooks.Block("page_oncall", "paging is disabled"),
		"approve_isolate_host": hooks.Approve("isolate_host", "isolating a host needs human approval"),
	}
}

// UpperOrderID upper-cases a string order_id argument: the demo's
// normalising hook.
func UpperOrderID(c *hooks.Call) hooks.Decision {
	if v := c.Arg("order_id"); v != nil && v.Kind() == dedup.String {
		if up := strings.ToUpper(v.Str()); up != v.Str() {
			c.SetArg("order_id", dedup.StringValue(up))
		}
	}
	return hooks.Decision{}
}
