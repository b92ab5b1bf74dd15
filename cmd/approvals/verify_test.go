package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
)

// approvals verify test asks the file's verifier about stored actions and
// prints the verdict, reason and answer of each, writing nothing.
func TestVerifyTest(t *testing.T) {
	// Not parallel: the command reads APPROVALS_WEBHOOK_SECRET.
	t.Setenv("APPROVALS_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"order_id":"o-found"`) {
			_, _ = io.WriteString(w, `{"refunds":[{"id":"re_9","line_id":1}]}`)
			return
		}
		http.Error(w, "down", http.StatusBadGateway)
	}))
	t.Cleanup(provider.Close)
	file := `
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: ` + provider.URL + `
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      resolve: auto
  plain:
    class: exactly-once
    intent: "plain:{id}"
`
	for _, sqlite := range []bool{true, false} {
		e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: apptest.ParseTools(t, file, classify.Options{WebhookSecretSet: true})})
		found := e.Submit("issue_refund", map[string]any{"order_id": "o-found", "line_id": 1})
		down := e.Submit("issue_refund", map[string]any{"order_id": "o-down", "line_id": 1})
		plain := e.Submit("plain", map[string]any{"id": "1"})
		tools := filepath.Join(t.TempDir(), "tools.yaml")
		if err := os.WriteFile(tools, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		db := e.DatabaseURL
		if db == "" {
			db = "sqlite:" + e.SQLitePath
		}
		before := storeState(t, e)
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{"verify", "test", "--database-url", db, tools, found.ID, down.ID, plain.ID}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("verify test: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		got := out.String()
		for _, want := range []string{
			found.ID + "  issue_refund  in_progress: done (done holds for the answer)", `"re_9"`,
			down.ID + "  issue_refund  in_progress: unknown (no answer: status 502",
			plain.ID + "  plain  in_progress: the tool has no verifier",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		if after := storeState(t, e); after != before {
			t.Fatalf("verify test wrote:\nbefore %s\nafter  %s", before, after)
		}
	}
}

// approvals verify test never calls an upstream verifier's tool that is not
// read-only, as the server never does (tools check's refusal): asking must
// not be the effect itself. It says why instead.
func TestVerifyTestRefusesAWritingUpstreamTool(t *testing.T) {
	t.Parallel()
	var called atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "refund_line", Description: "Refund an order's line.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			called.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}},
				StructuredContent: map[string]any{"refunds": []any{map[string]any{"line_id": 1}}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	file := `
upstreams:
  payments:
    url: ` + ts.URL + `
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      upstream: payments
      tool: refund_line
      arguments: { order_id: "{order_id}" }
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
`
	e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: true, Tools: apptest.ParseTools(t, file, classify.Options{})})
	a := e.Submit("issue_refund", map[string]any{"order_id": "o-1", "line_id": 1})
	tools := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(tools, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"verify", "test", "--database-url", "sqlite:" + e.SQLitePath, tools, a.ID}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("verify test: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("verify test called the upstream's writing tool refund_line %d times:\n%s", n, out.String())
	}
	if got := out.String(); !strings.Contains(got, a.ID+"  issue_refund  in_progress: unknown") || !strings.Contains(got, "not read-only") {
		t.Fatalf("output does not say why nothing was asked:\n%s", got)
	}
}
