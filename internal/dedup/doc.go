// Package dedup decides whether an agent's tool call matches an earlier
// record, and holds the execution log (the seed's tool_executions).
//
// It is the contract of the Tulip idempotency page, made exact for Go (see
// docs/rules.md), and it imports nothing from Temporal.
//
// A call's argument text is parsed once, by [Parse], into an [Args]: a value
// tree that keeps integers exact at any size, the int/float distinction of the
// original spelling, and unescaped strings. Two relations compare Args:
//
//   - value equality ([Args.ValueEqual]), for records of earlier turns: Python's
//     dict == dict on JSON values, so 120 equals 120.0 and key order is
//     irrelevant, but true is not 1 and an omitted key is not a default;
//   - sorted-key JSON ([Args.SortedKeyJSON]), for earlier calls of the same
//     model response: Python's json.dumps(args, sort_keys=True) compared as
//     text, so 120 differs from 120.0.
//
// Each relation has a canonical encoding ([Args.ValueKey],
// [Args.SortedKeyJSON]). The [Log] indexes its records by a hash of the value
// encoding, which serves both relations (sorted-key JSON equality implies
// value equality), so [Log.FindMatchingExecution] is an expected O(1) lookup
// rather than a scan.
package dedup
