package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// lockedBuffer is a log destination the gateway's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStartupDisablesAVerifierThatWrites: a process started with a tools
// file whose upstream verifier names a tool the upstream (the Go SDK's MCP
// server) lists without readOnlyHint checks it as tools check does once the
// upstream is listed: it logs the failure at ERROR, naming the tool, and
// never calls that tool; the sweep's check answers unknown saying why. A
// verifier whose tool is read-only, on the same upstream, is asked and
// settles its ticket.
func TestStartupDisablesAVerifierThatWrites(t *testing.T) {
	t.Parallel()
	var writes, reads atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)
	answer := func(calls *atomic.Int32) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunds"}},
				StructuredContent: map[string]any{"refunds": []any{map[string]any{"id": "re_1", "line_id": "l-1"}}}}, nil
		}
	}
	// refund_status has no readOnlyHint: as far as anyone can tell it may write.
	srv.AddTool(&mcp.Tool{Name: "refund_status", InputSchema: schema}, answer(&writes))
	srv.AddTool(&mcp.Tool{Name: "get_refunds", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, answer(&reads))
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })

	verify := func(tool string) string {
		return `
    claim_timeout: 2m
    verify:
      upstream: payments
      tool: ` + tool + `
      arguments: { order_id: "{order_id}" }
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      resolve: auto`
	}
	file, err := classify.Parse(fmt.Appendf(nil, `
upstreams:
  payments:
    url: %s
    timeout: 5s
    import: [get_refunds]
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"%s
  issue_credit:
    class: exactly-once
    intent: "credit:{order_id}:{line_id}"%s
`, ts.URL, verify("refund_status"), verify("get_refunds")), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	g, reg, err := app.StartGateway(t.Context(), file, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "VERIFIER DISABLED") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["level"] != "ERROR" || line["tool"] != "issue_refund" || line["upstream_tool"] != "refund_status" ||
		!strings.Contains(fmt.Sprint(line["err"]), "not read-only") {
		t.Fatalf("no loud log of the disabled verifier: %v\n%s", line, logs.String())
	}
	if strings.Count(logs.String(), "VERIFIER DISABLED") != 1 {
		t.Fatalf("the read-only verifier was disabled too:\n%s", logs.String())
	}

	a := apptest.Start(t, apptest.Options{SQLite: true, Tools: reg, Upstreams: g.Manager, Clock: testclock.Frozen()})
	g.Serve(a.Tools)
	ctx := context.Background()
	submit := func(tool string) *queue.Action {
		raw, _ := json.Marshal(map[string]any{"order_id": "o-1", "line_id": "l-1"})
		res, err := a.Service.Submit(ctx, queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
		if err != nil || res.Action.State != queue.StateInProgress {
			t.Fatalf("submit %s: %v %+v", tool, err, res)
		}
		return res.Action
	}
	refund, credit := submit("issue_refund"), submit("issue_credit")
	a.Clock.Advance(2*time.Minute + time.Second)
	if _, err := a.Sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := func(id string) *queue.Action {
		x, err := a.Store.ActionGetByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	if x := got(refund.ID); x.State != queue.StateInProgress || x.Ticket == nil || x.Ticket.State != queue.TicketOpen {
		t.Fatalf("the disabled verifier settled %s: %s", x.ID, x.State)
	}
	ev, ok, err := queue.LatestVerifyCheck(ctx, a.Store, refund.ID)
	var data struct{ Verdict, Reason string }
	if err != nil || !ok || json.Unmarshal(ev.Data, &data) != nil {
		t.Fatalf("no check recorded: %v", err)
	}
	if data.Verdict != "unknown" || !strings.Contains(data.Reason, "verifier disabled") || !strings.Contains(data.Reason, "not read-only") {
		t.Fatalf("check %+v, want unknown saying the verifier is disabled", data)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("the tool that is not read-only was called %d times", n)
	}
	if x := got(credit.ID); x.State != queue.StateDone || reads.Load() != 1 {
		t.Fatalf("the read-only verifier: action %s, asked %d times", x.State, reads.Load())
	}
}
