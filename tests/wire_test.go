package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/protocol"
	"github.com/tulip-temporal/tulip/internal/streams"
)

// wireSchemas are docs/schemas compiled by a real JSON Schema validator
// (draft 2020-12), plus "log": the tulip.log answer, an array of records.
type wireSchemas map[string]*jsonschema.Schema

func loadWireSchemas(t testing.TB) wireSchemas {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "docs", "schemas"))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	logURL := "file://" + filepath.ToSlash(filepath.Join(dir, "x-tulip-log.json"))
	require.NoError(t, c.AddResource(logURL, map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "array", "items": map[string]any{"$ref": "record.json"},
	}))
	out := wireSchemas{}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		s, err := c.Compile("file://" + filepath.ToSlash(f))
		require.NoError(t, err, "schema %s", f)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = s
	}
	out["log"], err = c.Compile(logURL)
	require.NoError(t, err)
	return out
}

// validate checks a JSON document against the named schema.
func (s wireSchemas) validate(name string, data []byte) error {
	sch, ok := s[name]
	if !ok {
		return fmt.Errorf("no schema %q", name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

// The schema of each tulip query's answer.
var queryAnswerSchemas = map[string]string{
	agentrun.QueryState:  "run-result",
	agentrun.QueryLog:    "log",
	agentrun.QueryThread: "checkpoint",
	agentrun.QueryPage:   "page",
}

// wireProxy is a gRPC proxy in front of a Temporal frontend. Clients (the
// TypeScript SDK, the Go SDK) connect to it as to the server; it forwards
// every call unchanged and checks every tulip payload the client receives
// against docs/schemas: run results (completed runs' results), failure
// details, query answers, update results, and the tulip_interrupt memo.
type wireProxy struct {
	schemas wireSchemas
	addr    string

	mu      sync.Mutex
	seen    map[string]int    // what was checked, by kind ("query tulip.state", "failure tulip.BadInput", ...)
	bad     []string          // every violation
	updates map[string]string // update id → update name
}

func startWireProxy(t testing.TB, backend string) *wireProxy {
	t.Helper()
	p := &wireProxy{schemas: loadWireSchemas(t), seen: map[string]int{}, updates: map[string]string{}}
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = l.Addr().String()
	srv := grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(256<<20), grpc.MaxSendMsgSize(256<<20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error { return p.forward(conn, ss) }),
	)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		conn.Close()
	})
	return p
}

// rawFrame is one gRPC message as bytes; rawCodec passes it through.
type rawFrame struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*rawFrame).b, nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	v.(*rawFrame).b = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// forward relays one unary call (every WorkflowService method is unary).
func (p *wireProxy) forward(conn *grpc.ClientConn, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	var req rawFrame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	in, _ := metadata.FromIncomingContext(ss.Context())
	md := metadata.MD{}
	for k, v := range in {
		if strings.HasPrefix(k, ":") || k == "content-type" || k == "user-agent" || strings.HasPrefix(k, "grpc-") {
			continue
		}
		md[k] = v
	}
	ctx := metadata.NewOutgoingContext(ss.Context(), md)
	var resp rawFrame
	var header, trailer metadata.MD
	err := conn.Invoke(ctx, method, &req, &resp, grpc.ForceCodec(rawCodec{}), grpc.Header(&header), grpc.Trailer(&trailer))
	header.Delete("content-type")
	if len(header) > 0 {
		_ = ss.SetHeader(header)
	}
	ss.SetTrailer(trailer)
	if err != nil {
		return err
	}
	p.inspect(path.Base(method), req.b, resp.b)
	return ss.SendMsg(&resp)
}

func (p *wireProxy) violation(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bad = append(p.bad, fmt.Sprintf(format, args...))
}

func (p *wireProxy) saw(kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[kind]++
}

// Seen returns how many payloads of each kind were checked.
func (p *wireProxy) Seen() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.seen))
	for k, v := range p.seen {
		out[k] = v
	}
	return out
}

// Violations returns every payload that did not validate.
func (p *wireProxy) Violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.bad)
}

// check validates a payload list's first payload (JSON) against schema.
func (p *wireProxy) check(kind, schema string, ps *commonpb.Payloads) {
	if len(ps.GetPayloads()) == 0 {
		p.violation("%s: no payload", kind)
		return
	}
	p.checkPayload(kind, schema, ps.GetPayloads()[0])
}

func (p *wireProxy) checkPayload(kind, schema string, pl *commonpb.Payload) {
	p.saw(kind)
	if enc := string(pl.GetMetadata()["encoding"]); enc != "json/plain" {
		p.violation("%s: payload encoding %q, not json/plain", kind, enc)
		return
	}
	if err := p.schemas.validate(schema, pl.GetData()); err != nil {
		p.violation("%s: %v\npayload: %s", kind, err, clip(pl.GetData()))
	}
}

// checkPoll checks a stream poll's answer (docs/protocol.md, Live runs):
// the envelope, and each item's payload against its topic's schema.
func (p *wireProxy) checkPoll(ps *commonpb.Payloads) {
	kind := "update " + streams.PollUpdate
	p.saw(kind)
	if len(ps.GetPayloads()) == 0 {
		p.violation("%s: no payload", kind)
		return
	}
	var res streams.PollResult
	dec := json.NewDecoder(bytes.NewReader(ps.GetPayloads()[0].GetData()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		p.violation("%s: %v", kind, err)
		return
	}
	if res.Items == nil {
		p.violation("%s: items is null", kind)
	}
	for _, it := range res.Items {
		pl, err := streams.DecodePayload(it.Data)
		if err != nil {
			p.violation("%s: item %d: %v", kind, it.Offset, err)
			continue
		}
		switch it.Topic {
		case protocol.TopicCalls:
			p.checkPayload("stream item "+it.Topic, "call-item", pl)
		case protocol.TopicText:
			p.checkPayload("stream item "+it.Topic, "text-item", pl)
		default:
			p.violation("%s: item %d on an unknown topic %q", kind, it.Offset, it.Topic)
		}
	}
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// checkFailure checks a run's failure: an application failure of a stable
// type, one line, non-retryable, whose first detail is the RunResult so
// far. Terminations, timeouts and cancellations carry no details.
func (p *wireProxy) checkFailure(f *failurepb.Failure) {
	app := f.GetApplicationFailureInfo()
	if app == nil {
		p.saw("failure (not an application failure)")
		return
	}
	kind := "failure " + app.GetType()
	if app.GetType() == "" {
		p.violation("a run failed with an application failure with no type: %s", f.GetMessage())
	}
	if strings.Contains(f.GetMessage(), "\n") {
		p.violation("%s: the message is not one line: %q", kind, f.GetMessage())
	}
	if !app.GetNonRetryable() {
		p.violation("%s: retryable", kind)
	}
	if len(app.GetDetails().GetPayloads()) == 0 {
		p.violation("%s: no details (every run failure's details are a RunResult)", kind)
		p.saw(kind)
		return
	}
	p.check(kind, "run-result", app.GetDetails())
}

func (p *wireProxy) checkMemo(m *commonpb.Memo) {
	pl := m.GetFields()[agentrun.MemoInterrupt]
	if pl == nil {
		return
	}
	p.saw("memo " + agentrun.MemoInterrupt)
	var id string
	if enc := string(pl.GetMetadata()["encoding"]); enc != "json/plain" {
		p.violation("memo %s: encoding %q", agentrun.MemoInterrupt, enc)
	} else if err := json.Unmarshal(pl.GetData(), &id); err != nil {
		p.violation("memo %s is not a JSON string: %s", agentrun.MemoInterrupt, pl.GetData())
	}
}

func (p *wireProxy) inspect(method string, reqB, respB []byte) {
	unmarshal := func(b []byte, m proto.Message) bool {
		if err := proto.Unmarshal(b, m); err != nil {
			p.violation("%s: %v", method, err)
			return false
		}
		return true
	}
	switch method {
	case "QueryWorkflow":
		var req workflowservice.QueryWorkflowRequest
		var resp workflowservice.QueryWorkflowResponse
		if !unmarshal(reqB, &req) || !unmarshal(respB, &resp) || resp.GetQueryRejected() != nil {
			return
		}
		qt := req.GetQuery().GetQueryType()
		schema, ok := queryAnswerSchemas[qt]
		switch {
		case ok:
			p.check("query "+qt, schema, resp.GetQueryResult())
		case strings.HasPrefix(qt, "tulip."):
			p.violation("query %s: its answer has no schema in docs/schemas", qt)
		}
	case "GetWorkflowExecutionHistory", "GetWorkflowExecutionHistoryReverse":
		var resp workflowservice.GetWorkflowExecutionHistoryResponse
		if method == "GetWorkflowExecutionHistoryReverse" {
			var rev workflowservice.GetWorkflowExecutionHistoryReverseResponse
			if !unmarshal(respB, &rev) {
				return
			}
			resp.History = rev.GetHistory()
		} else if !unmarshal(respB, &resp) {
			return
		}
		for _, ev := range resp.GetHistory().GetEvents() {
			if a := ev.GetWorkflowExecutionCompletedEventAttributes(); a != nil {
				p.check("result", "run-result", a.GetResult())
			}
			if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
				p.checkFailure(a.GetFailure())
			}
		}
	case "UpdateWorkflowExecution":
		var req workflowservice.UpdateWorkflowExecutionRequest
		var resp workflowservice.UpdateWorkflowExecutionResponse
		if !unmarshal(reqB, &req) || !unmarshal(respB, &resp) {
			return
		}
		name := req.GetRequest().GetInput().GetName()
		p.mu.Lock()
		p.updates[req.GetRequest().GetMeta().GetUpdateId()] = name
		p.mu.Unlock()
		p.checkUpdate(name, resp.GetOutcome())
	case "PollWorkflowExecutionUpdate":
		var req workflowservice.PollWorkflowExecutionUpdateRequest
		var resp workflowservice.PollWorkflowExecutionUpdateResponse
		if !unmarshal(reqB, &req) || !unmarshal(respB, &resp) {
			return
		}
		p.mu.Lock()
		name := p.updates[req.GetUpdateRef().GetUpdateId()]
		p.mu.Unlock()
		p.checkUpdate(name, resp.GetOutcome())
	case "DescribeWorkflowExecution":
		var resp workflowservice.DescribeWorkflowExecutionResponse
		if unmarshal(respB, &resp) {
			p.checkMemo(resp.GetWorkflowExecutionInfo().GetMemo())
		}
	case "ListWorkflowExecutions":
		var resp workflowservice.ListWorkflowExecutionsResponse
		if unmarshal(respB, &resp) {
			for _, e := range resp.GetExecutions() {
				p.checkMemo(e.GetMemo())
			}
		}
	}
}

// checkUpdate checks an update's outcome: tulip.resume answers a
// ResumeResult; tulip.hooks answers nothing; a refusal is an application
// failure of a stable type, one line.
func (p *wireProxy) checkUpdate(name string, o *updatepb.Outcome) {
	if o.GetSuccess() == nil && o.GetFailure() == nil {
		return // not completed yet
	}
	if f := o.GetFailure(); f != nil {
		app := f.GetApplicationFailureInfo()
		kind := "update " + name + " refused " + app.GetType()
		p.saw(kind)
		if app == nil || app.GetType() == "" {
			p.violation("update %s refused with no failure type: %s", name, f.GetMessage())
		}
		if strings.Contains(f.GetMessage(), "\n") {
			p.violation("%s: the message is not one line: %q", kind, f.GetMessage())
		}
		return
	}
	switch name {
	case agentrun.UpdateResume:
		p.check("update "+name, "resume-result", o.GetSuccess())
	case agentrun.UpdateHooks:
		p.saw("update " + name)
	case streams.PollUpdate:
		p.checkPoll(o.GetSuccess())
	default:
		p.violation("update %q: not a tulip update", name)
	}
}
