// Package serve is tulip's OpenAI-compatible API as an http.Handler: the
// Responses API (POST /v1/responses, GET /v1/responses/{id}), Chat
// Completions (POST /v1/chat/completions) and GET /v1/models, in front of
// durable agent threads on Temporal (docs/serve.md). Any OpenAI client or
// agent framework talks to an agent as to a model; a request is a run on
// a thread, and a tool call the model repeats on the thread is served
// from its execution log.
//
// The handler only starts, answers and reads runs: workers with the tulip
// plugin, polling Options.TaskQueue, run them. Mount it in your own
// server, behind your own middleware; Options.Tenant names the tenant a
// request acts for (your authentication: OIDC, JWT, mTLS), and a thread
// belongs to the tenant that made it. 'tulip serve' is a command over it.
package serve
