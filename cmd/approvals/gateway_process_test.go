package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// gatewayUpstream is a Go SDK MCP server that counts calls: "pay"
// (exactly-once) answers at once, "lookup" and "find" (at-least-once:
// read-only) answer at once, find with isError, and "send" (at-most-once)
// is held open until the test ends, telling the test when it arrives.
type gatewayUpstream struct {
	srv     *httptest.Server
	arrived chan string
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func newGatewayUpstream(t testing.TB) *gatewayUpstream {
	u := &gatewayUpstream{arrived: make(chan string, 10), release: make(chan struct{}), calls: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	no := false
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"to":{"type":"string"}}}`)
	s.AddTool(&mcp.Tool{Name: "pay", InputSchema: schema, Annotations: &mcp.ToolAnnotations{OpenWorldHint: &no}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.count("pay")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid " + string(req.Params.Arguments)}}}, nil
		})
	yes := true
	s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: yes}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.count("lookup")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found " + string(req.Params.Arguments)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "find", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: yes}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.count("find")
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such order"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "send", InputSchema: schema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.count("send")
			u.arrived <- "send"
			select {
			case <-ctx.Done():
			case <-u.release:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		})
	u.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(u.release) })
	return u
}

func (u *gatewayUpstream) count(tool string) {
	u.mu.Lock()
	u.calls[tool]++
	u.mu.Unlock()
}

func (u *gatewayUpstream) callCount(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

func TestServerProcessUpstreamGateway(t *testing.T) {
	t.Parallel()
	pgtest.BaseURL(t)
	bin := apptest.BuildBinary(t)
	up := newGatewayUpstream(t)
	d := deploy(t, bin, fmt.Sprintf(`
upstreams:
  crm:
    url: %s/mcp
    timeout: 2s
    import: all
    trust_annotations: true
tools:
  crm_pay:
    intent: "pay:{order}"
  crm_send:
    intent: "send:{to}"
    claim_timeout: 3s
`, up.srv.URL))
	first := d.Start()

	// Through /mcp, an exactly-once call runs upstream within the call,
	// and the tool's own content comes first.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: first.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{d.Token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_pay", Arguments: map[string]any{"order": "o-7"}})
	if err != nil || res.IsError || len(res.Content) < 2 {
		t.Fatalf("crm_pay: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != `paid {"order":"o-7"}` {
		t.Errorf("first content %q, want the upstream's", text)
	}
	var paid queue.Action
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &paid); err != nil || paid.State != queue.StateDone || up.callCount("pay") != 1 {
		t.Fatalf("crm_pay action: %v %s, %d upstream calls", err, b, up.callCount("pay"))
	}

	// An at-least-once call answers final with the upstream's answer,
	// through /mcp (the tool's content first) and REST (201) alike, and
	// runs again when repeated.
	for i := range 2 {
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"order": "o-7"}})
		if err != nil || res.IsError || len(res.Content) < 2 {
			t.Fatalf("crm_lookup %d: %v %+v", i, err, res)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; text != `found {"order":"o-7"}` {
			t.Errorf("first content %q, want the upstream's", text)
		}
		if text := res.Content[1].(*mcp.TextContent).Text; !strings.Contains(text, "Repeating it is harmless") {
			t.Errorf("crm_lookup's paragraph %q does not say repeating it is harmless", text)
		}
		var found queue.Action
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &found); err != nil || found.State != queue.StateDone || found.Error != nil {
			t.Fatalf("crm_lookup action %d: %v %s", i, err, b)
		}
	}
	if n := up.callCount("lookup"); n != 2 {
		t.Errorf("lookup called %d times, want 2", n)
	}
	if missing := d.Submit(first, "crm_find", map[string]any{"order": "o-7"}); missing.State != queue.StateFailed ||
		missing.Error == nil || *missing.Error != "no such order" || !strings.Contains(string(missing.Result), "no such order") {
		t.Fatalf("crm_find through REST: %s, error %v, result %s; want 201 failed with the tool's text", missing.State, missing.Error, missing.Result)
	}

	// An approved at-most-once call whose server is killed mid-call: no
	// second upstream call after restart, one stale ticket.
	a := d.Submit(first, "crm_send", map[string]any{"to": "ann"})
	d.Approve(a.ID)
	select {
	case <-up.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call never reached the upstream")
	}
	if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Exited
	second := d.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		open, err := d.Domain().Store.TicketList(context.Background(), queue.TicketListParams{ActionID: a.ID, State: queue.TicketOpen})
		if err != nil {
			t.Fatal(err)
		}
		if len(open) == 1 {
			break
		}
		if len(open) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d open tickets; state %s", len(open), d.Action(a.ID).State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The restarted server's executor has scanned (a later approval is
	// called), and the killed call was not repeated.
	b2 := d.Submit(second, "crm_send", map[string]any{"to": "bob"})
	d.Approve(b2.ID)
	select {
	case <-up.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the restarted server's executor called nothing")
	}
	got := d.Action(a.ID)
	if n := up.callCount("send"); n != 2 || got.State != queue.StateInProgress {
		t.Fatalf("send called %d times (want 2: the killed call and the later one); killed action %s", n, got.State)
	}
	if all, _ := d.Domain().Store.TicketList(context.Background(), queue.TicketListParams{ActionID: a.ID}); len(all) != 1 {
		t.Fatalf("%d tickets, want 1", len(all))
	}
	if kinds := strings.Join(d.Events(a.ID), " "); !strings.HasPrefix(kinds, "submitted approved claimed delivery_started") {
		t.Errorf("timeline: %s", kinds)
	}
}

// bearer adds the agent token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
