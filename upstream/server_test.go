package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests' upstream: a Go SDK MCP server with counting tools. It runs in the test process
// (over httptest) or as a re-executed test binary (over stdio); see TestMain.

const (
	envServer    = "UPSTREAM_TEST_SERVER"     // "stdio": this process is the upstream
	envCallsFile = "UPSTREAM_TEST_CALLS_FILE" // the stdio upstream appends each call's tool name here
	envToolsFile = "UPSTREAM_TEST_TOOLS_FILE" // holding "v2", the stdio upstream lists one more tool
	envReadyFile = "UPSTREAM_TEST_READY_FILE" // if set, the stdio upstream exits at once until this file exists
)

func TestMain(m *testing.M) {
	if os.Getenv(envServer) == "stdio" {
		runStdioServer()
		return
	}
	os.Exit(m.Run())
}

// counter counts calls per tool and lets a test wait for a call to start.
type counter struct {
	mu      sync.Mutex
	calls   map[string]int
	entered chan string // receives the tool name as a call starts, if a test listens
}

func newCounter() *counter { return &counter{calls: map[string]int{}, entered: make(chan string, 16)} }

func (c *counter) add(name string) {
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
	select {
	case c.entered <- name:
	default:
	}
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[name]
}

func boolPtr(b bool) *bool { return &b }

// newTestServer builds the upstream. record is called as each call starts; hang blocks until
// the caller gives up (the SDK cancels the handler's context) or release is closed.
func newTestServer(record func(string), release <-chan struct{}) *mcp.Server {
	// A page size of 2 makes the client read several pages of the tool list.
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	object := json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`)
	add := func(name string, ann *mcp.ToolAnnotations, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: object, Annotations: ann},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(name)
				return h(ctx, req)
			})
	}
	add("echo", &mcp.ToolAnnotations{ReadOnlyHint: true}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: "echo " + string(req.Params.Arguments)}},
			StructuredContent: map[string]any{"ok": true},
		}, nil
	})
	add("refuse", &mcp.ToolAnnotations{OpenWorldHint: boolPtr(false)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "card declined"}}}, nil
	})
	add("rpc_error", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32000, Message: "backend says no"}
	})
	add("long_error", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("é", 50<<10)}}}, nil
	})
	add("long_rpc_error", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32000, Message: strings.Repeat("no ", 40<<10)}
	})
	add("hang", nil, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil, fmt.Errorf("gave up")
	})
	add("crash", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3) // only meaningful in the stdio upstream: the process dies mid-call
		return nil, nil
	})
	return s
}

// runStdioServer serves the upstream over stdin/stdout and exits when stdin closes.
func runStdioServer() {
	if ready := os.Getenv(envReadyFile); ready != "" {
		if _, err := os.Stat(ready); err != nil {
			fmt.Fprintln(os.Stderr, "stdio upstream: not ready")
			os.Exit(1)
		}
	}
	record := func(name string) {
		f, err := os.OpenFile(os.Getenv(envCallsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			panic(err)
		}
		fmt.Fprintln(f, name)
		// Synced before the tool acts, so that a crash cannot lose the count.
		_ = f.Sync()
		_ = f.Close()
	}
	if err := os.WriteFile(os.Getenv(envCallsFile)+".pid", []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		panic(err)
	}
	s := newTestServer(record, nil)
	if data, _ := os.ReadFile(os.Getenv(envToolsFile)); strings.TrimSpace(string(data)) == "v2" {
		s.AddTool(&mcp.Tool{Name: "added", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record("added")
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil
			})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "stdio upstream:", err)
	}
}
