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

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
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
