package app_test

import (
	"bytes"
	"context"
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
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/notifier/webhook"
	"github.com/approvals/approvals/queue"
)

// headerLog keeps the traceparent of every request a test server got.
type headerLog struct {
	mu  sync.Mutex
	got []string
}

func (h *headerLog) handler(answer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.got = append(h.got, r.Header.Get("traceparent"))
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, answer)
	}
}

func (h *headerLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// TestTracingFollowsAStaleRefundToItsVerifier: an agent submits a refund
// (exactly-once, claimed at once) and a note (at-most-once, pending) with
// a traceparent and an X-Tool-Call-Id; its answer is lost. The sweep
// expires the note and opens the refund's ticket, whose verifier asks the
// payment provider by a signed webhook; the ticket's channel hears of it.
// Each is a span of the agent's trace: approvals.expire and
// approvals.ticket.open children of their submissions, a reconciliation
// span whose check (approvals.verify: tool, verdict, ticket, attempt) is
// its child, the verifier's request a client span of the check whose
// traceparent the provider receives, and the channel's message a span
// whose traceparent the channel's webhook receives. The submission carries
// gen_ai.tool.call.id; no payload value (but the intent key the tools
// file makes of it) nor the provider's answer appears in any span.
func TestTracingFollowsAStaleRefundToItsVerifier(t *testing.T) {
	recv, _, flush := startTracing(t)
	var provider, channel headerLog
	prov := httptest.NewServer(provider.handler(`{"refunds":[{"id":"re_42","line_id":"l-7"}]}`))
	t.Cleanup(prov.Close)
	hook := httptest.NewServer(channel.handler(`{}`))
	t.Cleanup(hook.Close)
	reg, err := classify.Parse(fmt.Appendf(nil, `
channels:
  ops: { webhook: %q, secret: events-secret, events: [ticket.opened] }
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: %q
      timeout: 5s
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      resolve: auto
  send_note:
    class: at-most-once
    intent: "note:{order_id}"
    expires_after: 1m
`, hook.URL+"/events", prov.URL+"/refunds/lookup"), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, apptest.Options{SQLite: true, Tools: reg, WebhookSecret: "trace-secret", Clock: testclock.Frozen(), ManualOutbox: true})
	token := a.Token(t, "agent")
	const agentTrace, agentSpan, callID = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8", "call_Xy7refund"
	submit := func(body string) queue.Action {
		req, _ := http.NewRequest(http.MethodPost, a.URL+"/api/v1/actions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
		req.Header.Set("X-Tool-Call-Id", callID)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var x queue.Action
		if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &x) != nil {
			t.Fatalf("submit: %d %s", res.StatusCode, b)
		}
		return x
	}
	refund := submit(`{"tool": "issue_refund", "payload": {"order_id": "o-secret-55", "line_id": "l-7", "amount": 987654.321, "note": "secret-note-xyz"}}`)
	note := submit(`{"tool": "send_note", "payload": {"order_id": "o-secret-56", "note": "secret-note-xyz"}}`)

	a.Clock.Advance(2*time.Minute + time.Second)
	ctx := context.Background()
	res, err := a.Sweeper.Sweep(ctx)
	if err != nil || len(res.Expired) != 1 || len(res.Tickets) != 1 || res.Verified != 1 {
		t.Fatalf("sweep: %v %+v", err, res)
	}
	if got, _ := a.Store.ActionGetByID(ctx, refund.ID); got.State != queue.StateDone {
		t.Fatalf("the verifier did not settle the refund: %s", got.State)
	}
	wh, err := webhook.New(webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	outbox := maintenance.NewOutbox(a.Service, a.Store, maintenance.OutboxConfig{Notifiers: map[string]queue.Notifier{
		classify.KindWebhook: maintenance.ChannelNotifier[[]byte](classify.KindWebhook, wh, a.Store, nil)}})
	if _, err := outbox.FanOut(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	flush()

	spans := recv.spans()
	inTrace := func(name string, where func(receivedSpan) bool) []receivedSpan {
		var out []receivedSpan
		for _, s := range spans {
			if s.Name == name && hexID(s.TraceId) == agentTrace && (where == nil || where(s)) {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(name string, where func(receivedSpan) bool) receivedSpan {
		t.Helper()
		found := inTrace(name, where)
		if len(found) != 1 {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name+"@"+hexID(s.TraceId))
			}
			t.Fatalf("%d spans %q in the agent's trace, want 1; received %v", len(found), name, names)
		}
		return found[0]
	}
	of := func(id string) func(receivedSpan) bool {
		return func(s receivedSpan) bool { v, _ := attr(s.Attributes, "approvals.action.id"); return v == id }
	}
	wantAttrs := func(s receivedSpan, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got, ok := attr(s.Attributes, k); !ok || got != v {
				t.Errorf("span %s: %s = %q (present %v), want %q", s.Name, k, got, ok, v)
			}
		}
	}
	childOf := func(child, parent receivedSpan) {
		t.Helper()
		if !bytes.Equal(child.ParentSpanId, parent.SpanId) {
			t.Errorf("span %s: parent %s, want %s %s", child.Name, hexID(child.ParentSpanId), parent.Name, hexID(parent.SpanId))
		}
	}

	submitRefund, submitNote := one("approvals.submit", of(refund.ID)), one("approvals.submit", of(note.ID))
	wantAttrs(submitRefund, map[string]string{"gen_ai.tool.call.id": callID, "gen_ai.tool.name": "issue_refund"})
	expire := one("approvals.expire", nil)
	childOf(expire, submitNote)
	wantAttrs(expire, map[string]string{"approvals.action.id": note.ID, "approvals.state": "expired", "gen_ai.tool.name": "send_note"})
	open := one("approvals.ticket.open", nil)
	childOf(open, submitRefund)
	wantAttrs(open, map[string]string{"approvals.action.id": refund.ID, "approvals.ticket.kind": "stale"})
	ticketID, _ := attr(open.Attributes, "approvals.ticket.id")

	reconcile := one("approvals.reconcile", nil)
	childOf(reconcile, submitRefund)
	wantAttrs(reconcile, map[string]string{"approvals.ticket.id": ticketID, "approvals.action.id": refund.ID})
	check := one("approvals.verify", nil)
	childOf(check, reconcile)
	wantAttrs(check, map[string]string{"approvals.verify.verdict": "done", "approvals.ticket.id": ticketID,
		"gen_ai.tool.name": "issue_refund", "approvals.attempt": "1", "approvals.verify.asked_by": "system"})
	ask := one("POST", func(s receivedSpan) bool { return bytes.Equal(s.ParentSpanId, check.SpanId) })
	if ask.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("the verifier's request: kind %v, want client", ask.Kind)
	}
	wantAttrs(ask, map[string]string{"http.response.status_code": "200"})
	if got, want := provider.all(), "00-"+agentTrace+"-"+hexID(ask.SpanId)+"-01"; len(got) != 1 || got[0] != want {
		t.Errorf("the provider got traceparent %q, want %q", got, want)
	}

	notify := inTrace("approvals.notify", nil)
	heard := channel.all()
	if len(notify) == 0 || len(heard) != len(notify) {
		t.Fatalf("%d notify spans, the channel got %d requests", len(notify), len(heard))
	}
	for i, n := range notify {
		childOf(n, submitRefund)
		wantAttrs(n, map[string]string{"approvals.channel.kind": "webhook", "approvals.action.id": refund.ID})
		found := false
		for _, tp := range heard {
			found = found || tp == "00-"+agentTrace+"-"+hexID(n.SpanId)+"-01"
		}
		if !found {
			t.Errorf("notification %d: no channel request carried its traceparent; got %q", i, heard)
		}
	}

	dump := recv.dump()
	for _, secret := range []string{"secret-note-xyz", "987654", "re_42"} {
		if strings.Contains(dump, secret) {
			t.Errorf("a span carries %q, a payload or answer value", secret)
		}
	}
}

// TestTracingFollowsAnUpstreamVerifier: the check of an upstream verifier
// (a read-only tool of the Go SDK's MCP server) is an approvals.verify
// span whose child is the client span of the upstream call, and the
// upstream receives in its _meta a traceparent continuing that call.
func TestTracingFollowsAnUpstreamVerifier(t *testing.T) {
	recv, _, flush := startTracing(t)
	var (
		mu   sync.Mutex
		meta map[string]any
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "get_refunds", InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			meta = req.Params.Meta
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunds"}},
				StructuredContent: map[string]any{"refunds": []any{map[string]any{"id": "re_up", "line_id": "l-1"}}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	file, err := classify.Parse(fmt.Appendf(nil, `
upstreams:
  payments:
    url: %s
    timeout: 5s
    import: [get_refunds]
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      upstream: payments
      tool: get_refunds
      arguments: { order_id: "{order_id}" }
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      resolve: auto
`, ts.URL), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, reg, err := app.StartGateway(t.Context(), file, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	a := apptest.Start(t, apptest.Options{SQLite: true, Tools: reg, Upstreams: g.Manager, Clock: testclock.Frozen()})
	g.Serve(a.Tools)
	ctx := context.Background()
	res, err := a.Service.Submit(ctx, queue.SubmitRequest{Tool: "issue_refund", Payload: json.RawMessage(`{"order_id":"o-1","line_id":"l-1"}`), Agent: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	a.Clock.Advance(2*time.Minute + time.Second)
	if _, err := a.Sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Store.ActionGetByID(ctx, res.Action.ID); got.State != queue.StateDone {
		t.Fatalf("the upstream verifier did not settle it: %s", got.State)
	}
	flush()
	var check, call *receivedSpan
	spans := recv.spans()
	for i, s := range spans {
		switch s.Name {
		case "approvals.verify":
			check = &spans[i]
		case "tools/call get_refunds":
			call = &spans[i]
		}
	}
	if check == nil || call == nil {
		t.Fatalf("check %v, upstream call %v:\n%s", check != nil, call != nil, recv.dump())
	}
	if !bytes.Equal(call.ParentSpanId, check.SpanId) || call.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("upstream call: parent %s kind %v, want the check %s, client", hexID(call.ParentSpanId), call.Kind, hexID(check.SpanId))
	}
	mu.Lock()
	got, _ := meta["traceparent"].(string)
	mu.Unlock()
	if want := "00-" + hexID(call.TraceId) + "-" + hexID(call.SpanId) + "-01"; got != want {
		t.Errorf("the upstream got traceparent %q, want %q", got, want)
	}
}
