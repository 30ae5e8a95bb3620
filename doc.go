// Package tulip makes an LLM agent's tool calls safe to repeat, on
// Temporal. An agent run is a Temporal workflow; the model is called in an
// activity and each tool call is an activity routed through tulip's
// execution log. A tool marked idempotent is run once per distinct call in
// a run (and across the runs of a thread): an identical later call is
// served from the log, its body does not run again and it adds no history
// event.
//
// A worker gets tulip from one plugin:
//
//	refund := tulip.MustTool(tulip.ToolSpec{Name: "issue_refund", Idempotent: true}, issueRefund)
//	plugin, err := tulip.NewPlugin(tulip.Options{
//		Tools:  []tulip.Toolset{refund},
//		Models: map[string]tulip.Model{"gpt": model},
//	})
//	w := worker.New(c, "tulip", worker.Options{Plugins: []worker.Plugin{plugin}})
//
// A client starts runs with package agent, and MCP servers become toolsets
// with the module github.com/tulip-temporal/tulip/mcp. The contract
// (what matches, what is served, what a hook may do) is in docs/rules.md;
// the wire names (workflow type tulip.AgentRun, activities tulip.tool.NAME,
// queries, updates and error types) in docs/protocol.md.
package tulip
