package verifier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/upstream"
	"github.com/approvals/approvals/verifier"
)

// An upstream verifier asks a read-only tool of a real MCP server (the Go
// SDK's) through the gateway's manager, its arguments filled from the
// payload; the stale refund it finds is settled with the provider's record.
func TestUpstreamVerifier(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "get_refunds", Description: "List the refunds of an order.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			asked.Add(1)
			var args struct {
				OrderID string `json:"order_id"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			refunds := []any{}
			if args.OrderID == "o-up" {
				refunds = append(refunds, map[string]any{"id": "re_up", "line_id": "l-1"})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunds"}},
				StructuredContent: map[string]any{"refunds": refunds}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })

	reg, err := classify.Parse([]byte(`
upstreams:
  payments:
    url: `+ts.URL+`
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
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      resolve: auto
`), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := upstream.Start(t.Context(), reg.Upstreams(), upstream.Options{ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = m.Close() })
	if err := reg.CheckVerifierUpstreams(m.Listings()); err != nil {
		t.Fatalf("tools check: %v", err)
	}
	asker, err := verifier.New(verifier.Config{Upstream: m})
	if err != nil {
		t.Fatal(err)
	}
	e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: true, Tools: reg, Clock: testclock.Frozen(), Service: queue.Options{Verifier: asker}})
	a := e.Submit("issue_refund", map[string]any{"order_id": "o-up", "line_id": "l-1"})
	e.Clock.Advance(2*time.Minute + time.Second)
	sweep(t, e)
	got := get(t, e, a.ID)
	if got.State != queue.StateDone || !strings.Contains(string(got.Result), "re_up") || asked.Load() != 1 {
		t.Fatalf("action %s result %s, asked %d", got.State, got.Result, asked.Load())
	}
	// An upstream tool that is not read-only is refused by tools check.
	listings := m.Listings()
	l := listings["payments"]
	l.Tools = append([]classify.UpstreamTool(nil), l.Tools...)
	l.Tools[0].Annotations.ReadOnlyHint = nil
	listings["payments"] = l
	if err := reg.CheckVerifierUpstreams(listings); err == nil || !strings.Contains(err.Error(), "not read-only") {
		t.Fatalf("a writing tool: %v", err)
	}
}
