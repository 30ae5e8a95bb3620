// Package openaimodel is a model for OpenAI-compatible chat-completions
// endpoints: OpenAI, Azure OpenAI, vLLM, Ollama, LM Studio, llama.cpp.
//
// It runs in the model activity. Temporal owns retries: the HTTP client
// never retries; 408, 409, 429 (honouring Retry-After), 5xx and transport
// errors are retryable activity failures; other 4xx are non-retryable
// (ErrRejected); a response that is not a valid completion is
// non-retryable (ErrBadResponse). The API key is read on the worker, from
// the environment, at each request: it never enters workflow history.
package openaimodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tulip-temporal/tulip"
)

// Stable error types of the adapter's failures.
const (
	// ErrRejected: the endpoint refused the request (a 4xx other than 408,
	// 409 and 429). Non-retryable.
	ErrRejected = "openai.Rejected"
	// ErrRetryable: a transient failure (408, 409, 429, 5xx, transport).
	ErrRetryable = "openai.Unavailable"
	// ErrBadResponse: the body is not a valid chat completion.
	// Non-retryable.
	ErrBadResponse = "openai.BadResponse"
)

// Options configure a Model. BaseURL and Model are required.
type Options struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1 (Ollama). "/chat/completions" is appended.
	BaseURL string
	// Model is the model name sent with each request.
	Model string
	// APIKeyEnv names the environment variable holding the API key, read on
	// the worker at each request. Zero value: OPENAI_API_KEY. An empty key
	// sends no Authorization header (local servers need none).
	APIKeyEnv string
	// KeyHeader is the header that carries the key. Zero value:
	// "Authorization", as "Bearer KEY"; any other name (Azure OpenAI's
	// "api-key") carries the key as is.
	KeyHeader string
	// Timeout bounds one HTTP request whole, a streamed answer's body
	// included. Zero value: 10 minutes. A long answer is bounded by its
	// progress instead (IdleTimeout).
	Timeout time.Duration
	// IdleTimeout bounds each wait without progress: for a streamed
	// answer's headers, and then for each read of the body (a streamed
	// answer's next piece). An unstreamed answer's headers come when it
	// is whole: Timeout bounds that wait. Zero value: 60 s.
	IdleTimeout time.Duration
	// ContextWindow is the model's context window in tokens, which a
	// worker's default context budget is made from (tulip.Options.
	// ContextTokens). Zero value: the window of a known model (KnownWindows,
	// by Model), else none.
	ContextWindow int
	// SystemPrompt, when set, is sent first (a run's Instructions follow
	// it in the same system message).
	SystemPrompt string
	// Temperature, when set, is sent (a run's Params.Temperature is sent
	// in its place).
	Temperature *float64
	// HTTPClient sends the requests. Zero value: a plain client (no
	// retries) with Timeout.
	HTTPClient *http.Client
}

// Model is an OpenAI-compatible chat model. It implements
// tulip.Model.
type Model struct {
	opts     Options
	endpoint string
	client   *http.Client
}

// New validates opts and returns the model.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: Options.Model is required")
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL", opts.BaseURL)
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = "OPENAI_API_KEY"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	c := opts.HTTPClient
	if c == nil {
		c = &http.Client{}
	}
	return &Model{opts: opts, endpoint: strings.TrimRight(opts.BaseURL, "/") + "/chat/completions", client: c}, nil
}

// Wire format.
type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireCallFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type wireToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireCallFunction `json:"function"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireRequest struct {
	Model         string             `json:"model"`
	Messages      []wireMessage      `json:"messages"`
	Tools         []wireTool         `json:"tools,omitempty"`
	Temperature   *float64           `json:"temperature,omitempty"`
	TopP          *float64           `json:"top_p,omitempty"`
	MaxTokens     *int               `json:"max_tokens,omitempty"`
	Stream        bool               `json:"stream,omitempty"`
	StreamOptions *wireStreamOptions `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireResponse struct {
	Choices []struct {
		Message wireMessage `json:"message"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *wireUsage) usage() *tulip.Usage {
	if u == nil {
		return nil
	}
	out := &tulip.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens
	}
	return out
}

func str(s string) *string { return &s }

// servedContent is what the model reads for a call served from the log: the
// original result, marked as served.
func servedContent(content string) string {
	if json.Valid([]byte(content)) {
		return `{"served_from_log":true,"result":` + content + `}`
	}
	b, _ := json.Marshal(map[string]any{"served_from_log": true, "result": content})
	return string(b)
}

// joinSystem is the system message: the model's prompt, then the run's
// instructions, a blank line between.
func joinSystem(prompt, instructions string) string {
	switch {
	case prompt == "":
		return instructions
	case instructions == "":
		return prompt
	}
	return prompt + "\n\n" + instructions
}

// Body builds the request body for req (exported for tests and debugging).
func (m *Model) Body(req tulip.ModelRequest) ([]byte, error) {
	w := wireRequest{Model: m.opts.Model, Temperature: m.opts.Temperature}
	if p := req.Params; p != nil {
		if p.Temperature != nil {
			w.Temperature = p.Temperature
		}
		w.TopP, w.MaxTokens = p.TopP, p.MaxOutputTokens
	}
	if req.OnText != nil {
		w.Stream, w.StreamOptions = true, &wireStreamOptions{IncludeUsage: true}
	}
	if system := joinSystem(m.opts.SystemPrompt, req.Instructions); system != "" {
		w.Messages = append(w.Messages, wireMessage{Role: "system", Content: str(system)})
	}
	for _, msg := range req.Messages {
		wm := wireMessage{Role: msg.Role, ToolCallID: msg.ToolCallID}
		switch msg.Role {
		case "assistant":
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				wm.Content = str(msg.Content)
			}
			for _, c := range msg.ToolCalls {
				args, _ := json.Marshal(c.Arguments) // the text exactly as the model sent it
				wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: c.ID, Type: "function",
					Function: wireCallFunction{Name: c.Name, Arguments: args}})
			}
		case "tool":
			content := msg.Content
			if msg.Served {
				content = servedContent(content)
			}
			wm.Content = str(content)
		default:
			wm.Content = str(msg.Content)
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return json.Marshal(w)
}

// The zero values of Options.Timeout and Options.IdleTimeout.
const (
	DefaultTimeout     = 10 * time.Minute
	DefaultIdleTimeout = 60 * time.Second
)

// idleReader cancels its request when no read makes progress within
// idle: a stalled server ends the attempt, a slow one that keeps sending
// does not.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.idle)
	}
	return n, err
}

// Respond implements tulip.Model.
func (m *Model) Respond(ctx context.Context, req tulip.ModelRequest) (tulip.ModelResponse, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, m.opts.Timeout, errWholeTimeout)
	defer cancel()
	ctx, cancelIdle := context.WithCancelCause(ctx)
	defer cancelIdle(nil)
	idle := time.AfterFunc(m.opts.IdleTimeout, func() { cancelIdle(errIdleTimeout) })
	defer idle.Stop()
	if req.OnText == nil {
		// An unstreamed answer's headers come when it is whole: their
		// wait is bounded by Timeout alone, the body's reads by idle.
		idle.Stop()
	}
	resp, err := m.respond(ctx, req, idle)
	if err != nil && ctx.Err() != nil && context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), errIdleTimeout) {
		return resp, temporal.NewApplicationErrorWithCause(fmt.Sprintf("openai: no progress for %s (Options.IdleTimeout)", m.opts.IdleTimeout), ErrRetryable, err)
	}
	if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), errWholeTimeout) {
		return resp, temporal.NewApplicationErrorWithCause(fmt.Sprintf("openai: the answer took over %s (Options.Timeout)", m.opts.Timeout), ErrRetryable, err)
	}
	return resp, err
}

var (
	errIdleTimeout  = errors.New("openai: idle timeout")
	errWholeTimeout = errors.New("openai: timeout")
)

func (m *Model) respond(ctx context.Context, req tulip.ModelRequest, idle *time.Timer) (tulip.ModelResponse, error) {
	body, err := m.Body(req)
	if err != nil {
		return tulip.ModelResponse{}, temporal.NewNonRetryableApplicationError("openai: encode request: "+err.Error(), ErrRejected, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.endpoint, bytes.NewReader(body))
	if err != nil {
		return tulip.ModelResponse{}, temporal.NewNonRetryableApplicationError("openai: "+err.Error(), ErrRejected, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if key := os.Getenv(m.opts.APIKeyEnv); key != "" {
		if m.opts.KeyHeader == "" || strings.EqualFold(m.opts.KeyHeader, "Authorization") {
			hreq.Header.Set("Authorization", "Bearer "+key)
		} else {
			hreq.Header.Set(m.opts.KeyHeader, key)
		}
	}
	resp, err := m.client.Do(hreq)
	if err != nil {
		return tulip.ModelResponse{}, temporal.NewApplicationErrorWithCause("openai: "+err.Error(), ErrRetryable, err)
	}
	defer resp.Body.Close()
	idle.Reset(m.opts.IdleTimeout)
	rbody := &idleReader{r: resp.Body, timer: idle, idle: m.opts.IdleTimeout}
	if req.OnText != nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return readStream(rbody, req.OnText)
	}
	data, err := io.ReadAll(io.LimitReader(rbody, 32<<20))
	if err != nil {
		return tulip.ModelResponse{}, temporal.NewApplicationErrorWithCause("openai: reading the response: "+err.Error(), ErrRetryable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return tulip.ModelResponse{}, statusError(resp, data)
	}
	return parseResponse(data)
}

func statusError(resp *http.Response, data []byte) error {
	msg := fmt.Sprintf("openai: %s: %s", resp.Status, clip(string(bytes.TrimSpace(data)), 300))
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode == http.StatusBadRequest && json.Unmarshal(data, &body) == nil && body.Error.Code == "context_length_exceeded" {
		// The provider's typed refusal: the run compacts and asks again.
		return temporal.NewNonRetryableApplicationError(msg, string(tulip.ContextTooLong), nil)
	}
	switch code := resp.StatusCode; {
	case code == http.StatusRequestTimeout || code == http.StatusConflict || code >= 500:
		return temporal.NewApplicationError(msg, ErrRetryable)
	case code == http.StatusTooManyRequests:
		return temporal.NewApplicationErrorWithOptions(msg, ErrRetryable, temporal.ApplicationErrorOptions{NextRetryDelay: retryAfter(resp)})
	default:
		return temporal.NewNonRetryableApplicationError(msg, ErrRejected, nil)
	}
}

// retryAfter reads Retry-After (seconds or an HTTP date); zero leaves the
// retry policy's own backoff.
func retryAfter(resp *http.Response) time.Duration {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func badResponse(format string, a ...any) error {
	return temporal.NewNonRetryableApplicationError("openai: invalid completion: "+fmt.Sprintf(format, a...), ErrBadResponse, nil)
}

func parseResponse(data []byte) (tulip.ModelResponse, error) {
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return tulip.ModelResponse{}, badResponse("%v: %s", err, clip(string(data), 200))
	}
	if len(w.Choices) == 0 {
		return tulip.ModelResponse{}, badResponse("no choices")
	}
	msg := w.Choices[0].Message
	out := tulip.ModelResponse{Usage: w.Usage.usage()}
	if msg.Content != nil {
		out.Text = *msg.Content
	}
	for i, c := range msg.ToolCalls {
		if c.ID == "" || c.Function.Name == "" {
			return tulip.ModelResponse{}, badResponse("tool call %d has no id or no function name", i+1)
		}
		// Arguments are a JSON string holding the argument text; keep the
		// text exactly (120.0 stays 120.0). Some servers send an object:
		// keep its JSON text as sent. Anything else reaches the rejection
		// rule as it is.
		var text string
		args := bytes.TrimSpace(c.Function.Arguments)
		switch {
		case len(args) == 0 || string(args) == "null":
			text = ""
		case args[0] == '"':
			if err := json.Unmarshal(args, &text); err != nil {
				return tulip.ModelResponse{}, badResponse("tool call %q: arguments: %v", c.ID, err)
			}
		default:
			text = string(args)
		}
		out.ToolCalls = append(out.ToolCalls, tulip.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: text})
	}
	return out, nil
}

// KnownWindows are the context windows, in tokens, of the OpenAI models
// this package knows by name (as published by OpenAI; a dated snapshot
// such as gpt-4o-2024-08-06 takes its family's). ContextWindow reads it.
var KnownWindows = map[string]int{
	"gpt-5":         400000,
	"gpt-5-mini":    400000,
	"gpt-5-nano":    400000,
	"gpt-4.1":       1047576,
	"gpt-4.1-mini":  1047576,
	"gpt-4.1-nano":  1047576,
	"gpt-4o":        128000,
	"gpt-4o-mini":   128000,
	"o3":            200000,
	"o3-mini":       200000,
	"o4-mini":       200000,
	"gpt-4-turbo":   128000,
	"gpt-3.5-turbo": 16385,
}

// ContextWindow is the model's context window: Options.ContextWindow, else
// the known window of Options.Model (or of its family, for a dated
// snapshot), else 0.
func (m *Model) ContextWindow() int {
	if m.opts.ContextWindow > 0 {
		return m.opts.ContextWindow
	}
	name := m.opts.Model
	for {
		if w, ok := KnownWindows[name]; ok {
			return w
		}
		i := strings.LastIndex(name, "-")
		if i < 0 {
			return 0
		}
		name = name[:i]
	}
}
