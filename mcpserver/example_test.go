package mcpserver_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withToken adds the agent token to every request to /mcp.
type withToken struct {
	token string
	next  http.RoundTripper
}

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// An agent connects with the SDK's client over Streamable HTTP and calls a
// guarded tool. (This example is compiled, not run: docs/mcp.md shows it.)
func Example_agentClient() {
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "refund-agent", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://localhost:8080/mcp",
		HTTPClient: &http.Client{Transport: withToken{
			token: os.Getenv("APPROVALS_TOKEN"), // from `approvals token create --name refund-agent`
			next:  http.DefaultTransport,
		}},
	}, nil)
	if err != nil {
		log.Fatal(err) // a missing, unknown or revoked token fails here (HTTP 401)
	}
	defer session.Close()

	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name:      "issue_refund",
		Arguments: map[string]any{"order_id": "A-1001", "line_id": "2", "amount": 19.9, "currency": "EUR"},
	})
	if err != nil {
		// Timed out or lost: never call issue_refund again blindly. Ask first:
		// find_actions {"intent_key": "refund:A-1001:2"}.
		log.Fatal(err)
	}
	// res.StructuredContent is the action (or, with res.IsError, the refusal:
	// {code, detail, action}); the first text block says what to do next.
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
}
