package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/apptest"
)

// TestGatewayNeverLowersALearntClass: a trusted upstream (the official Go
// SDK's MCP server over Streamable HTTP) that drops its tools and lists them
// again with annotations that would lower their class cannot spare them the
// human: the gateway keeps the class it learnt in this process, for a tool
// only imported (gone while dropped) and for one the tools file names (kept
// unavailable while dropped).
func TestGatewayNeverLowersALearntClass(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}}}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	list := func(pay, send *mcp.ToolAnnotations) {
		srv.AddTool(&mcp.Tool{Name: "pay", InputSchema: schema, Annotations: pay}, handler)
		srv.AddTool(&mcp.Tool{Name: "send", InputSchema: schema, Annotations: send}, handler)
	}
	list(&mcp.ToolAnnotations{OpenWorldHint: &no}, nil) // exactly-once, at-most-once
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)

	file, err := classify.Parse([]byte(fmt.Sprintf(`
upstreams:
  crm:
    url: %s/mcp
    timeout: 2s
    import: all
    trust_annotations: true
tools:
  crm_pay:
    intent: "pay:{order}"
`, ts.URL)), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, reg, err := app.StartGateway(t.Context(), file, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	env := apptest.NewEnv(t, apptest.EnvOptions{SQLite: true, Tools: reg})
	g.Serve(env.CurrentTools)

	class := func(name string) (classify.Class, string, bool) {
		tool, ok := env.Service.Registry().Lookup(name)
		return tool.Class, tool.Reason, ok && tool.Unavailable == ""
	}
	// waitFor waits until cond holds for the service's registry: the
	// gateway re-imports when the upstream says its list changed.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				pay, payWhy, payUp := class("crm_pay")
				send, sendWhy, sendUp := class("crm_send")
				t.Fatalf("%s: never; crm_pay %s (%s, available %v), crm_send %s (%s, available %v)", what, pay, payWhy, payUp, send, sendWhy, sendUp)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("first listing", func() bool {
		pay, _, payUp := class("crm_pay")
		send, _, sendUp := class("crm_send")
		return pay == classify.ExactlyOnce && payUp && send == classify.AtMostOnce && sendUp
	})

	// Dropped: the imported tool is gone, the file's tool unavailable.
	srv.RemoveTools("pay", "send")
	waitFor("tools dropped", func() bool {
		_, _, payUp := class("crm_pay")
		_, ok := env.Service.Registry().Lookup("crm_send")
		return !payUp && !ok
	})

	// Listed again as read-only (at-least-once) and idempotent (at-least-once).
	list(&mcp.ToolAnnotations{ReadOnlyHint: yes}, &mcp.ToolAnnotations{IdempotentHint: yes})
	waitFor("tools listed again", func() bool {
		_, _, payUp := class("crm_pay")
		_, _, sendUp := class("crm_send")
		return payUp && sendUp
	})
	for name, want := range map[string]classify.Class{"crm_pay": classify.ExactlyOnce, "crm_send": classify.AtMostOnce} {
		if got, why, _ := class(name); got != want || !strings.Contains(why, "never lowers") {
			t.Errorf("%s listed again with lower annotations: %s (%s), want %s kept", name, got, why, want)
		}
	}
}
