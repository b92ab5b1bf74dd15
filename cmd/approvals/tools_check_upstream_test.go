package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolsCheckUpstreams: tools check connects to the upstreams and lists their imported
// tools with class and why; an upstream that is down is reported, not fatal.
func TestToolsCheckUpstreams(t *testing.T) {
	t.Setenv("APPROVALS_WEBHOOK_SECRET", "")
	t.Setenv("CRM_TOKEN", "tok")
	srv := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	_ = l.Close()

	path := filepath.Join(t.TempDir(), "tools.yaml")
	file := "upstreams:\n" +
		"  crm:\n    url: " + ts.URL + "\n    headers: { Authorization: \"Bearer ${CRM_TOKEN}\" }\n    import: all\n    trust_annotations: true\n" +
		"  gone:\n    url: http://" + down + "/mcp\n    import: [send]\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"tools", "check", path}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{
		"upstream crm (http): connected, 1 tools",
		"upstream gone (http): unavailable: connect",
		"crm_lookup", "at-least-once  [upstream crm tool lookup] upstream crm's annotations: readOnlyHint is true",
		"gone_send", "at-most-once   [upstream gone tool send] upstream gone has not listed this tool", "unavailable: upstream gone is unavailable",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
