package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver, as an OpenTelemetry
// Collector's otlp receiver answers: protobuf ExportTraceServiceRequests
// on /v1/traces.
type otlpReceiver struct {
	mu       sync.Mutex
	requests []*coltrace.ExportTraceServiceRequest
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.requests = append(r.requests, &export)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// receivedSpan is a span as received, with its resource.
type receivedSpan struct {
	*tracepb.Span
	resource []*commonpb.KeyValue
}

func (r *otlpReceiver) spans() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, req := range r.requests {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, receivedSpan{Span: s, resource: rs.GetResource().GetAttributes()})
				}
			}
		}
	}
	return out
}

// dump is everything received, as text: what no payload value may appear in.
func (r *otlpReceiver) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, req := range r.requests {
		b.WriteString(protojson.Format(req))
	}
	return b.String()
}

func attr(kvs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			v := kv.Value
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue(), true
			default:
				return fmt.Sprint(v.GetIntValue()), true
			}
		}
	}
	return "", false
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

// startTracing turns tracing on as `approvals serve` does, from the OTEL_*
// environment, sending to a receiver started here; the returned flush
// sends what is left and turns tracing off.
func startTracing(t *testing.T) (*otlpReceiver, *bytes.Buffer, func()) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	var logs bytes.Buffer
	var mu sync.Mutex
	log, stop, err := app.StartTracing(context.Background(), slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_ = log
	var once sync.Once
	flush := func() { once.Do(stop) }
	t.Cleanup(flush)
	return recv, &logs, flush
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTracingFollowsASubmissionToItsEffect: an agent's submission carrying
// a traceparent, approved by a person through another process, delivered
// by a webhook, appears in the agent's trace as the OTLP receiver gets it:
// the server span a child of the agent's span, the submission a child of
// the server span, the wait for a person and the execution children of the
// submission, the delivery a child of the execution and continued by the
// receiver (its traceparent), the decision linked to the submission; the
// attributes name the tool, class, intent and outcome, and no payload value
// appears anywhere.
func TestTracingFollowsASubmissionToItsEffect(t *testing.T) {
	recv, _, flush := startTracing(t)

	var (
		hookMu      sync.Mutex
		traceparent string
	)
	delivered := make(chan struct{}, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hookMu.Lock()
		traceparent = r.Header.Get("traceparent")
		hookMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
		select {
		case delivered <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(hook.Close)
	reg, err := classify.Parse(fmt.Appendf(nil, `
tools:
  refund:
    class: at-most-once
    intent: "refund:{order}"
    executor: { webhook: %q, timeout: 10s }
`, hook.URL+"/hook"), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	submitter := apptest.Start(t, apptest.Options{Tools: reg, WebhookSecret: "trace-secret"})
	decider := submitter.AddServer(t, nil)
	token := submitter.Token(t, "agent")

	// The agent's span, as its framework would send it.
	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"tool": "refund", "payload": {"order": "o-1", "amount": 987654.321, "note": "secret-note-xyz"}}`
	req, _ := http.NewRequest(http.MethodPost, submitter.URL+"/api/v1/actions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %s", res.StatusCode, b)
	}
	var a queue.Action
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.State != queue.StatePending {
		t.Fatalf("submitted %s, want pending", a.State)
	}

	// A person approves it through the other process.
	apptest.Approve(t, decider.Service, a.ID)
	select {
	case <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was never delivered")
	}
	// The outcome is recorded after the answer; wait for it so the
	// execution's span has ended.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := submitter.Store.ActionGetByID(context.Background(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == queue.StateDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("action %s never done: %s", a.ID, got.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	flush()

	spans := recv.spans()
	byName := map[string][]receivedSpan{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	one := func(name string, where func(receivedSpan) bool) receivedSpan {
		t.Helper()
		var found []receivedSpan
		for _, s := range byName[name] {
			if where == nil || where(s) {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name+"@"+hexID(s.TraceId))
			}
			t.Fatalf("%d spans %q, want 1; received %v", len(found), name, names)
		}
		return found[0]
	}
	inAgentTrace := func(s receivedSpan) bool { return hexID(s.TraceId) == agentTrace }
	wantAttrs := func(s receivedSpan, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got, ok := attr(s.Attributes, k); !ok || got != v {
				t.Errorf("span %s: %s = %q (present %v), want %q", s.Name, k, got, ok, v)
			}
		}
	}

	server := one("POST /api/v1/actions", inAgentTrace)
	if hexID(server.ParentSpanId) != agentSpan || server.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("server span: parent %s kind %v, want the agent's span %s, server", hexID(server.ParentSpanId), server.Kind, agentSpan)
	}
	wantAttrs(server, map[string]string{"http.request.method": "POST", "http.route": "/api/v1/actions", "http.response.status_code": "201"})
	if v, _ := attr(server.resource, "service.name"); v != "approvals" {
		t.Errorf("service.name %q, want approvals", v)
	}
	if v, _ := attr(server.resource, "deployment.environment.name"); v != "test" {
		t.Errorf("OTEL_RESOURCE_ATTRIBUTES not applied: deployment.environment.name %q", v)
	}

	submit := one("approvals.submit", inAgentTrace)
	if !bytes.Equal(submit.ParentSpanId, server.SpanId) {
		t.Errorf("submission's parent %s, want the server span %s", hexID(submit.ParentSpanId), hexID(server.SpanId))
	}
	wantAttrs(submit, map[string]string{"gen_ai.tool.name": "refund", "approvals.tool.class": "at-most-once",
		"approvals.intent_key": "refund:o-1", "approvals.outcome": "created", "approvals.state": "pending",
		"approvals.action.id": a.ID})

	decide := one("approvals.decide", nil)
	if inAgentTrace(decide) {
		t.Errorf("the decision in another process is in the agent's trace; want its own trace, linked")
	}
	if len(decide.Links) != 1 || hexID(decide.Links[0].TraceId) != agentTrace || !bytes.Equal(decide.Links[0].SpanId, submit.SpanId) {
		t.Errorf("decision's links %v, want one to the submission %s", decide.Links, hexID(submit.SpanId))
	}
	wantAttrs(decide, map[string]string{"approvals.decision": "approved", "enduser.id": apptest.Approver, "approvals.channel": "dashboard"})

	wait := one("approvals.wait", inAgentTrace)
	if !bytes.Equal(wait.ParentSpanId, submit.SpanId) {
		t.Errorf("wait's parent %s, want the submission %s", hexID(wait.ParentSpanId), hexID(submit.SpanId))
	}
	if wait.EndTimeUnixNano < wait.StartTimeUnixNano {
		t.Errorf("wait ends before it starts")
	}
	wantAttrs(wait, map[string]string{"approvals.decision": "approved", "enduser.id": apptest.Approver})

	exec := one("approvals.execute", inAgentTrace)
	if !bytes.Equal(exec.ParentSpanId, submit.SpanId) {
		t.Errorf("execution's parent %s, want the submission %s", hexID(exec.ParentSpanId), hexID(submit.SpanId))
	}
	wantAttrs(exec, map[string]string{"approvals.executor": "webhook", "approvals.outcome": "done", "gen_ai.tool.name": "refund"})

	post := one("POST", inAgentTrace)
	if !bytes.Equal(post.ParentSpanId, exec.SpanId) || post.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("delivery: parent %s kind %v, want the execution %s, client", hexID(post.ParentSpanId), post.Kind, hexID(exec.SpanId))
	}
	wantAttrs(post, map[string]string{"http.request.method": "POST", "http.response.status_code": "200"})
	hookMu.Lock()
	got := traceparent
	hookMu.Unlock()
	if want := "00-" + agentTrace + "-" + hexID(post.SpanId) + "-01"; got != want {
		t.Errorf("the webhook got traceparent %q, want %q (the delivery's span in the agent's trace)", got, want)
	}

	dump := recv.dump()
	for _, secret := range []string{"secret-note-xyz", "987654.321", "987654", "trace-secret", "/hook"} {
		if strings.Contains(dump, secret) {
			t.Errorf("%q (of the payload, the secret or the webhook's path) appears in the spans", secret)
		}
	}
}

// bearerTransport sends an agent's token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTracingFollowsAnMCPCallUpstream: an MCP client's tools/call with a
// traceparent in its _meta, through the gateway to an upstream MCP server
// (the official Go SDK's), is one trace: the tools/call span a child of
// the agent's span, the submission its child, the upstream call a client
// span of the submission's execution, and the upstream receives in its
// own _meta a traceparent continuing it; no argument value appears.
func TestTracingFollowsAnMCPCallUpstream(t *testing.T) {
	recv, _, flush := startTracing(t)

	var (
		mu       sync.Mutex
		upstream map[string]any
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	readOnly := true
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"note":{"type":"string"}}}`)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			upstream = req.Params.Meta
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	file, err := classify.Parse(fmt.Appendf(nil, `
upstreams:
  crm:
    url: %s/mcp
    timeout: 5s
    import: all
    trust_annotations: true
`, ts.URL), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, reg, err := app.StartGateway(t.Context(), file, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	a := apptest.Start(t, apptest.Options{SQLite: true, Tools: reg, Upstreams: g.Manager})
	g.Serve(a.Tools)
	token := a.Token(t, "agent")

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: a.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const agentTrace, agentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{
		Meta:      mcp.Meta{"traceparent": "00-" + agentTrace + "-" + agentSpan + "-01", "gen_ai.tool.call.id": "toolu_01Mcp"},
		Name:      "crm_lookup",
		Arguments: map[string]any{"order": "o-9", "note": "private-words-qq"},
	})
	if err != nil || res.IsError {
		t.Fatalf("crm_lookup: %v %+v", err, res)
	}
	flush()

	var call, submit, execute, client *receivedSpan
	spans := recv.spans()
	for i, s := range spans {
		if hexID(s.TraceId) != agentTrace {
			continue
		}
		switch s.Name {
		case "tools/call crm_lookup":
			call = &spans[i]
		case "approvals.submit":
			submit = &spans[i]
		case "approvals.execute":
			execute = &spans[i]
		case "tools/call lookup":
			client = &spans[i]
		}
	}
	if call == nil || submit == nil || execute == nil || client == nil {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name+"@"+hexID(s.TraceId))
		}
		t.Fatalf("spans in the agent's trace: tools/call %v, submit %v, execute %v, upstream %v; received %v",
			call != nil, submit != nil, execute != nil, client != nil, names)
	}
	if hexID(call.ParentSpanId) != agentSpan || call.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("tools/call: parent %s kind %v, want the agent's span from _meta, server", hexID(call.ParentSpanId), call.Kind)
	}
	if v, _ := attr(call.Attributes, "gen_ai.tool.name"); v != "crm_lookup" {
		t.Errorf("tools/call gen_ai.tool.name %q", v)
	}
	if !bytes.Equal(submit.ParentSpanId, call.SpanId) {
		t.Errorf("submission's parent %s, want the tools/call span", hexID(submit.ParentSpanId))
	}
	// The agent's tool call id, from _meta, on the call and its submission.
	for _, s := range []*receivedSpan{call, submit} {
		if v, _ := attr(s.Attributes, "gen_ai.tool.call.id"); v != "toolu_01Mcp" {
			t.Errorf("%s: gen_ai.tool.call.id %q, want _meta's", s.Name, v)
		}
	}
	if v, _ := attr(submit.Attributes, "approvals.tool.class"); v != "at-least-once" {
		t.Errorf("submission class %q, want at-least-once", v)
	}
	if !bytes.Equal(execute.ParentSpanId, submit.SpanId) {
		t.Errorf("execution's parent %s, want the submission", hexID(execute.ParentSpanId))
	}
	if !bytes.Equal(client.ParentSpanId, execute.SpanId) || client.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("upstream call: parent %s kind %v, want the execution, client", hexID(client.ParentSpanId), client.Kind)
	}
	if v, _ := attr(client.Attributes, "approvals.outcome"); v != "done" {
		t.Errorf("upstream call outcome %q, want done", v)
	}
	mu.Lock()
	got, _ := upstream["traceparent"].(string)
	mu.Unlock()
	if want := "00-" + agentTrace + "-" + hexID(client.SpanId) + "-01"; got != want {
		t.Errorf("the upstream's _meta traceparent %q, want %q", got, want)
	}
	if dump := recv.dump(); strings.Contains(dump, "private-words-qq") {
		t.Errorf("an argument's value appears in the spans")
	}
}

// TestTracingLinksADecisionOnBothStores: on either store, the decision
// finds the submission's span from what the action keeps (its submitted
// event), links to it, and ends the wait in the submission's trace.
func TestTracingLinksADecisionOnBothStores(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	reg := apptest.ParseTools(t, `
tools:
  pay:
    class: at-most-once
    intent: "pay:{order}"
`, classify.Options{})
	for _, sqlite := range []bool{true, false} {
		t.Run(fmt.Sprintf("sqlite=%v", sqlite), func(t *testing.T) {
			exp.Reset()
			env := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: reg})
			agent, _ := trace.TraceIDFromHex("11112222333344445555666677778888")
			parent, _ := trace.SpanIDFromHex("1234567812345678")
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: agent, SpanID: parent, TraceFlags: trace.FlagsSampled, Remote: true}))
			res, err := env.Service.Submit(ctx, queue.SubmitRequest{Tool: "pay", Payload: json.RawMessage(`{"order":"o-3"}`), Agent: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			// Another process decides, with nothing of the agent's context.
			apptest.Approve(t, env.AddProcess().Service, res.Action.ID)
			var submit, decide, wait *tracetest.SpanStub
			spans := exp.GetSpans()
			for i, s := range spans {
				switch s.Name {
				case "approvals.submit":
					submit = &spans[i]
				case "approvals.decide":
					decide = &spans[i]
				case "approvals.wait":
					wait = &spans[i]
				}
			}
			if submit == nil || decide == nil || wait == nil {
				t.Fatalf("spans %v: want submit, decide and wait", spans.Snapshots())
			}
			if submit.Parent.SpanID() != parent || submit.SpanContext.TraceID() != agent {
				t.Errorf("submission not a child of the agent's span")
			}
			if len(decide.Links) != 1 || decide.Links[0].SpanContext.SpanID() != submit.SpanContext.SpanID() ||
				decide.SpanContext.TraceID() == agent {
				t.Errorf("decision: links %v, trace %s; want its own trace linked to the submission", decide.Links, decide.SpanContext.TraceID())
			}
			if wait.Parent.SpanID() != submit.SpanContext.SpanID() || wait.SpanContext.TraceID() != agent {
				t.Errorf("wait: parent %s trace %s, want the submission in the agent's trace", wait.Parent.SpanID(), wait.SpanContext.TraceID())
			}
		})
	}
}

// TestTracingLinksATicketResolution: an operator's finding on a stale
// ticket is a span linked to the agent's submission, naming the ticket, its
// kind and the outcome, on either store.
func TestTracingLinksATicketResolution(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	for _, sqlite := range []bool{true, false} {
		t.Run(fmt.Sprintf("sqlite=%v", sqlite), func(t *testing.T) {
			exp.Reset()
			env := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Clock: testclock.Frozen()})
			agent, _ := trace.TraceIDFromHex("99998888777766665555444433332222")
			parent, _ := trace.SpanIDFromHex("8765432187654321")
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: agent, SpanID: parent, TraceFlags: trace.FlagsSampled, Remote: true}))
			body := apptest.RefundBody("o-ticket", 12)
			payload, _ := json.Marshal(body["payload"])
			res, err := env.Service.Submit(ctx, queue.SubmitRequest{Tool: "issue_refund", Payload: payload, Agent: "agent"})
			if err != nil || res.Action.State != queue.StateInProgress {
				t.Fatalf("claim: %v %+v", err, res.Action)
			}
			env.Clock.Advance(3 * time.Minute)
			if _, err := env.Sweeper().Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
			stale, err := env.Store.ActionGetByID(t.Context(), res.Action.ID)
			if err != nil || stale.Ticket == nil {
				t.Fatalf("stale ticket: %v %+v", err, stale)
			}
			if _, _, err := env.AddProcess().Service.Tickets().Resolve(context.Background(), queue.ResolveRequest{TicketID: stale.Ticket.ID,
				By: "user:ops@example.com", Outcome: queue.StateFailed, Note: "no refund in the provider"}); err != nil {
				t.Fatal(err)
			}
			var submit, resolve *tracetest.SpanStub
			spans := exp.GetSpans()
			for i, s := range spans {
				switch s.Name {
				case "approvals.submit":
					submit = &spans[i]
				case "approvals.ticket.resolve":
					resolve = &spans[i]
				}
			}
			if submit == nil || resolve == nil {
				t.Fatalf("spans %v: want submit and ticket.resolve", spans.Snapshots())
			}
			if len(resolve.Links) != 1 || resolve.Links[0].SpanContext.SpanID() != submit.SpanContext.SpanID() ||
				resolve.Links[0].SpanContext.TraceID() != agent {
				t.Errorf("resolution's links %v, want the submission's span", resolve.Links)
			}
			want := map[string]string{"approvals.ticket.id": stale.Ticket.ID, "approvals.ticket.kind": string(queue.TicketStale),
				"approvals.outcome": "failed", "approvals.state": "failed", "gen_ai.tool.name": "issue_refund"}
			got := map[string]string{}
			for _, kv := range resolve.Attributes {
				got[string(kv.Key)] = kv.Value.String()
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("resolution %s = %q, want %q", k, got[k], v)
				}
			}
			for _, kv := range resolve.Attributes {
				if strings.Contains(kv.Value.String(), "no refund in the provider") {
					t.Errorf("the operator's note appears in %s", kv.Key)
				}
			}
		})
	}
}
