// Package anthropicmodel is a tulip model for Anthropic's Messages API, on
// the official Go SDK (github.com/anthropics/anthropic-sdk-go/v2). It is
// its own module, so the library does not depend on the SDK.
//
// It runs in the model activity. The conversation becomes Messages API
// content blocks: an assistant's calls are tool_use blocks, and the results
// of one assistant turn's calls are tool_result blocks in one user message.
// The stable prefix is marked for prompt caching (see Options). When the
// run streams text (ModelRequest.OnText), the streaming endpoint is used.
//
// Errors: the SDK retries a request a few times in the activity
// (Options.MaxRetries), honouring the API's retry-after, retry-after-ms and
// anthropic-ratelimit-*-reset headers; what is still failing after that is
// a retryable activity failure (ErrRetryable, with the server's delay as
// the next retry's delay), so Temporal retries the activity. A refused
// request (400, 401, 403, 404, 413, other 4xx) is non-retryable
// (ErrRejected); an answer that is not a valid message is non-retryable
// (ErrBadResponse). The API key is read on the worker, from the
// environment, at each request: it never enters workflow history.
package anthropicmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// Stable error types of the model's failures.
const (
	// ErrRejected: the API refused the request (400 invalid request, 401,
	// 403, 404, 413 and other 4xx but 408, 409 and 429), or the worker has
	// no key for Anthropic's own endpoint. Non-retryable.
	ErrRejected = "anthropic.Rejected"
	// ErrRetryable: a transient failure (408, 409, 429, 5xx, 529
	// overloaded, a transport error, a stream cut short), after the SDK's
	// own retries. Retryable.
	ErrRetryable = "anthropic.Unavailable"
	// ErrBadResponse: the answer is not a valid message (a tool_use block
	// without an id or a name). Non-retryable.
	ErrBadResponse = "anthropic.BadResponse"
)

// Defaults of Options' zero values.
const (
	DefaultAPIKeyEnv  = "ANTHROPIC_API_KEY"
	DefaultMaxTokens  = 4096
	DefaultMaxRetries = 2
	DefaultTimeout    = 90 * time.Second
)

// maxInProcessWait bounds a delay the SDK waits in the activity before it
// retries; a longer one (a rate limit reset a minute away) ends the attempt
// and becomes the activity's next retry delay, so the activity does not
// sleep through its own timeout.
const maxInProcessWait = 20 * time.Second

// Options configure a Model. Model is required.
type Options struct {
	// Model is the model name sent with each request, e.g.
	// "claude-sonnet-4-5".
	Model string
	// BaseURL is the API root; "/v1/messages" is appended. Zero value:
	// Anthropic's, https://api.anthropic.com. ANTHROPIC_BASE_URL is not
	// read.
	BaseURL string
	// APIKeyEnv names the environment variable holding the API key, read on
	// the worker at each request and sent as the x-api-key header. Zero
	// value: ANTHROPIC_API_KEY. An empty key fails Anthropic's own endpoint
	// with ErrRejected; another BaseURL (a gateway that adds its own
	// credentials) gets no x-api-key header. No other credential source
	// (ANTHROPIC_AUTH_TOKEN, profiles) is used.
	APIKeyEnv string
	// MaxTokens bounds the answer's length. Zero value: 4096.
	MaxTokens int
	// SystemPrompt, when set, is sent as the system prompt (and cached).
	SystemPrompt string
	// Temperature, when set, is sent (some newer models refuse it: leave it
	// unset for them).
	Temperature *float64
	// Timeout bounds one HTTP attempt, a streamed answer's body included.
	// Zero value: 90 s (the model activity's attempt has two minutes).
	Timeout time.Duration
	// HTTPClient sends the requests. Zero value: a plain client.
	HTTPClient *http.Client
	// MaxRetries is how many times the SDK retries a failed request in the
	// activity (connection errors, 408, 409, 429, 5xx) before the failure
	// goes to Temporal, which retries the activity. Zero value: 2; a
	// negative value: none (Temporal alone retries).
	MaxRetries int
}

// Model is an Anthropic Messages API model. It implements tulip.Model.
type Model struct {
	opts    Options
	client  anthropic.Client
	ownHost bool // the endpoint is Anthropic's: a key is required
}

// New validates opts and returns the model.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("anthropic: Options.Model is required")
	}
	own := opts.BaseURL == ""
	if !own {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("anthropic: base URL %q is not an http(s) URL", opts.BaseURL)
		}
		own = u.Host == "api.anthropic.com"
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = DefaultAPIKeyEnv
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	switch {
	case opts.MaxRetries == 0:
		opts.MaxRetries = DefaultMaxRetries
	case opts.MaxRetries < 0:
		opts.MaxRetries = 0
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	copts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(opts.MaxRetries),
		option.WithRequestTimeout(opts.Timeout),
		option.WithMiddleware(retryDelays),
	}
	if opts.BaseURL != "" {
		copts = append(copts, option.WithBaseURL(opts.BaseURL))
	}
	return &Model{opts: opts, client: anthropic.NewClient(copts...), ownHost: own}, nil
}

// servedContent is what the model reads for a call served from the log: the
// original result, marked as served.
func servedContent(content string) string {
	if json.Valid([]byte(content)) {
		return `{"served_from_log":true,"result":` + content + `}`
	}
	b, _ := json.Marshal(map[string]any{"served_from_log": true, "result": content})
	return string(b)
}

// toolInput is a call's argument text as a tool_use block's input, which
// must be a JSON object: the text exactly as the model sent it when it is
// one ("120.0" stays "120.0"), {} when empty, and otherwise the text under
// "invalid_arguments" (the call was rejected; the model reads why in its
// result).
func toolInput(args string) json.RawMessage {
	t := strings.TrimSpace(args)
	if t == "" {
		return json.RawMessage(`{}`)
	}
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{"invalid_arguments": args})
	return b
}

var ephemeral = anthropic.NewCacheControlEphemeralParam()

// turn is one message of the request being built.
type turn struct {
	user   bool
	blocks []anthropic.ContentBlockParamUnion
}

// messages maps tulip's conversation to Messages API messages. Consecutive
// messages of one role become one message (the API alternates roles), so
// the tool results of one assistant turn are the tool_result blocks of one
// user message; a user message that follows them adds its text after them.
// Empty messages are left out (the API refuses empty text blocks).
func messages(msgs []tulip.Message) []turn {
	var out []turn
	add := func(user bool, b anthropic.ContentBlockParamUnion) {
		if n := len(out); n > 0 && out[n-1].user == user {
			out[n-1].blocks = append(out[n-1].blocks, b)
			return
		}
		out = append(out, turn{user: user, blocks: []anthropic.ContentBlockParamUnion{b}})
	}
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			if m.Content != "" {
				add(false, anthropic.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				add(false, anthropic.NewToolUseBlock(c.ID, toolInput(c.Arguments), c.Name))
			}
		case "tool":
			content := m.Content
			if m.Served {
				content = servedContent(content)
			}
			r := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if content != "" {
				r.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: content}}}
			}
			add(true, anthropic.ContentBlockParamUnion{OfToolResult: &r})
		default:
			if m.Content != "" {
				add(true, anthropic.NewTextBlock(m.Content))
			}
		}
	}
	return out
}

// markCached sets a cache breakpoint on block b.
func markCached(b *anthropic.ContentBlockParamUnion) {
	switch {
	case b.OfText != nil:
		b.OfText.CacheControl = ephemeral
	case b.OfToolUse != nil:
		b.OfToolUse.CacheControl = ephemeral
	case b.OfToolResult != nil:
		b.OfToolResult.CacheControl = ephemeral
	}
}

// Params builds the request for req (exported for tests and debugging).
//
// Prompt caching: at most four cache breakpoints, on the stable prefix:
// the last tool definition (the tools come first in the prompt), the
// system prompt, the last block of the earlier turns (the conversation
// before the newest user or tool turn, which the previous request wrote to
// the cache), and the last block of the newest turn (written now, read by
// the next request). A long thread pays full price for its newest turn
// only.
func (m *Model) Params(req tulip.ModelRequest) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.opts.Model),
		MaxTokens: int64(m.opts.MaxTokens),
	}
	// The SDK's params have no temperature or top_p field (newer models
	// refuse them); the API takes them on the models that accept them.
	extra := map[string]any{}
	if m.opts.Temperature != nil {
		extra["temperature"] = *m.opts.Temperature
	}
	if rp := req.Params; rp != nil {
		if rp.Temperature != nil {
			extra["temperature"] = *rp.Temperature
		}
		if rp.TopP != nil {
			extra["top_p"] = *rp.TopP
		}
		if rp.MaxOutputTokens != nil && *rp.MaxOutputTokens > 0 {
			p.MaxTokens = int64(*rp.MaxOutputTokens)
		}
	}
	if len(extra) > 0 {
		p.SetExtraFields(extra)
	}
	if m.opts.SystemPrompt != "" {
		p.System = []anthropic.TextBlockParam{{Text: m.opts.SystemPrompt, CacheControl: ephemeral}}
	}
	if req.Instructions != "" {
		// After the cached system prompt, uncached: a run's own.
		p.System = append(p.System, anthropic.TextBlockParam{Text: req.Instructions})
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tp := anthropic.ToolParam{
			Name:        t.Name,
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	if n := len(p.Tools); n > 0 {
		p.Tools[n-1].OfTool.CacheControl = ephemeral
	}
	turns := messages(req.Messages)
	if n := len(turns); n > 0 {
		if n > 1 {
			prev := turns[n-2].blocks
			markCached(&prev[len(prev)-1])
		}
		last := turns[n-1].blocks
		markCached(&last[len(last)-1])
	}
	for _, t := range turns {
		if t.user {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(t.blocks...))
		} else {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(t.blocks...))
		}
	}
	return p
}

// Respond implements tulip.Model.
func (m *Model) Respond(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
	var ropts []option.RequestOption
	if key := os.Getenv(m.opts.APIKeyEnv); key != "" {
		// The x-api-key header, as the API documents it (the SDK's
		// WithAPIKey sends the key as a bearer token).
		ropts = append(ropts, option.WithHeader("x-api-key", key))
	} else if m.ownHost {
		return tulip.ModelResponse{}, temporal.NewNonRetryableApplicationError(
			"anthropic: no API key: $"+m.opts.APIKeyEnv+" is not set on the worker", ErrRejected, nil)
	}
	p := m.Params(req)
	if req.OnText != nil {
		stream := m.client.Messages.NewStreaming(ctx, p, ropts...)
		defer stream.Close()
		return readStream(stream, req.OnText)
	}
	msg, err := m.client.Messages.New(ctx, p, ropts...)
	if err != nil {
		return tulip.ModelResponse{}, classify(err)
	}
	return response(msg)
}

func usage(u anthropic.Usage) *tulip.Usage {
	// PromptTokens counts the whole prompt: uncached, read from the cache
	// and written to it (input_tokens counts the uncached part only).
	return &tulip.Usage{
		PromptTokens:     int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
		CompletionTokens: int(u.OutputTokens),
		CachedTokens:     int(u.CacheReadInputTokens),
	}
}

func badResponse(format string, a ...any) error {
	return temporal.NewNonRetryableApplicationError("anthropic: invalid message: "+fmt.Sprintf(format, a...), ErrBadResponse, nil)
}

// response maps a message: its text blocks joined, its tool_use blocks as
// calls (the input's JSON text as the argument text).
func response(msg *anthropic.Message) (tulip.ModelResponse, error) {
	out := tulip.ModelResponse{Usage: usage(msg.Usage)}
	var text strings.Builder
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return tulip.ModelResponse{}, badResponse("tool_use block %d has no id or no name", i+1)
			}
			args := strings.TrimSpace(string(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, tulip.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Text = text.String()
	return out, nil
}

// promptTooLong begins the Messages API's refusal of a prompt over the
// model's context window ("prompt is too long: 210000 tokens > 200000
// maximum").
const promptTooLong = "prompt is too long"

// classify turns an SDK error into the activity's failure: retryable unless
// the API refused the request.
func classify(err error) error {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return temporal.NewApplicationErrorWithCause("anthropic: "+err.Error(), ErrRetryable, err)
	}
	msg := fmt.Sprintf("anthropic: %d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
	if t := string(apiErr.Type()); t != "" {
		msg += ": " + t
	}
	if apiErr.Message != "" {
		msg += ": " + clip(apiErr.Message, 300)
	}
	if apiErr.RequestID != "" {
		msg += " (request-id " + apiErr.RequestID + ")"
	}
	if apiErr.StatusCode == http.StatusBadRequest && string(apiErr.Type()) == "invalid_request_error" && strings.HasPrefix(apiErr.Message, promptTooLong) {
		// The API's refusal of a prompt over the window carries no code
		// of its own: its documented message is the only mark. Typed, the
		// run compacts and asks again (docs/context.md).
		return temporal.NewNonRetryableApplicationError(msg, string(tulip.ContextTooLong), nil)
	}
	if retryableStatus(apiErr.StatusCode, string(apiErr.Type())) {
		var delay time.Duration
		if apiErr.Response != nil {
			delay, _ = serverDelay(apiErr.Response.Header, time.Now())
		}
		return temporal.NewApplicationErrorWithOptions(msg, ErrRetryable, temporal.ApplicationErrorOptions{NextRetryDelay: delay})
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrRejected, nil)
}

// retryableStatus says whether a failure is transient: by its status, or,
// for an error event in a stream (status 200), by its type.
func retryableStatus(code int, typ string) bool {
	switch {
	case code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500:
		return true
	case code >= 400:
		return false
	}
	switch typ {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large", "billing_error":
		return false
	}
	return true
}

// serverDelay is the wait the API asks for before a retry: retry-after-ms,
// retry-after (seconds or an HTTP date), or else the latest of the
// anthropic-ratelimit-*-reset times (RFC 3339) that has not passed.
func serverDelay(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(0, t.Sub(now)), true
		}
	}
	var latest time.Duration
	found := false
	for k, vs := range h {
		k = strings.ToLower(k)
		if !strings.HasPrefix(k, "anthropic-ratelimit-") || !strings.HasSuffix(k, "-reset") || len(vs) == 0 {
			continue
		}
		t, err := time.Parse(time.RFC3339, vs[0])
		if err != nil {
			continue
		}
		if d := t.Sub(now); d > 0 {
			latest, found = max(latest, d), true
		}
	}
	return latest, found
}

// retryDelays is a middleware under the SDK's retry loop. On a failed
// response it puts the wait the API asked for (serverDelay) in
// Retry-After-Ms, which the SDK's backoff honours (the SDK reads
// retry-after and retry-after-ms itself but not the rate-limit reset
// headers, and reads an HTTP date in one layout only); and when that wait
// is longer than maxInProcessWait or outlasts the attempt's context, it
// sets x-should-retry: false, so the SDK returns and Temporal retries the
// activity after the wait instead.
func retryDelays(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	d, ok := serverDelay(res.Header, time.Now())
	if !ok {
		return res, err
	}
	res.Header.Set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
	deadline, has := req.Context().Deadline()
	if d > maxInProcessWait || (has && time.Now().Add(d).After(deadline)) {
		res.Header.Set("X-Should-Retry", "false")
	}
	return res, err
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
