package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
)

// parseUpstreams reads upstreams as a tools file would give them, with env as the environment.
func parseUpstreams(t *testing.T, yaml string, env map[string]string) []classify.Upstream {
	t.Helper()
	r, err := classify.Parse([]byte(yaml), classify.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r.Upstreams()
}

// changes returns Options that signal every change on the returned channel.
func changes(opts Options) (Options, chan struct{}) {
	ch := make(chan struct{}, 1)
	opts.OnChange = func() { signal(ch) }
	return opts, ch
}

// waitListing waits until cond holds for the upstream's listing; a change wakes it, so the
// deadline is only a bound on a broken test, never a pause.
func waitListing(t *testing.T, m *Manager, ch <-chan struct{}, upstream string, cond func(classify.UpstreamListing) bool) classify.UpstreamListing {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l := m.Listings()[upstream]
		if cond(l) {
			return l
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("upstream %s: listing never reached the expected state; last: %+v", upstream, l)
		}
	}
}

func toolNames(l classify.UpstreamListing) []string {
	var out []string
	for _, tool := range l.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// startHTTPUpstream serves the test upstream over Streamable HTTP, requiring the bearer token.
func startHTTPUpstream(t *testing.T, token string) (*httptest.Server, *counter, *mcp.Server) {
	t.Helper()
	calls := newCounter()
	release := make(chan struct{})
	srv := newTestServer(calls.add, release)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(release) // no handler outlives the test
		// Streams of sessions whose client vanished (TestHTTPKilledMidCallIsUnknown) would
		// hold Close for seconds.
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts, calls, srv
}

func TestCallOutcomesHTTP(t *testing.T) {
	t.Parallel()
	ts, calls, _ := startHTTPUpstream(t, "s3cret")
	ups := parseUpstreams(t, `
upstreams:
  crm:
    url: `+ts.URL+`
    headers: { Authorization: "Bearer ${CRM_TOKEN}" }
    timeout: 300ms
`, map[string]string{"CRM_TOKEN": "s3cret"})
	m := Start(t.Context(), ups, Options{ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = m.Close() })

	l := m.Listings()["crm"]
	if l.Unavailable != "" {
		t.Fatalf("crm unavailable: %s", l.Unavailable)
	}
	if got, want := toolNames(l), []string{"crash", "echo", "hang", "long_error", "long_rpc_error", "refuse", "rpc_error"}; !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v (every page)", got, want)
	}
	echo := l.Tools[slices.IndexFunc(l.Tools, func(u classify.UpstreamTool) bool { return u.Name == "echo" })]
	if echo.Description != "The echo tool." || !strings.Contains(string(echo.InputSchema), `"to"`) || echo.Annotations.ReadOnlyHint == nil || !*echo.Annotations.ReadOnlyHint {
		t.Errorf("echo listed as %+v", echo)
	}

	tests := []struct {
		tool       string
		args       string
		kind       Kind
		errText    string // substring of Outcome.Error
		resultText string // substring of Outcome.Result
		calls      int    // how often the upstream saw the tool called
	}{
		{"echo", `{"to":"ann"}`, Done, "", `"content":[{"type":"text","text":"echo {\"to\":\"ann\"}"}],"structuredContent":{"ok":true}`, 1},
		{"refuse", `{}`, Failed, "card declined", `"isError":true`, 1},
		{"rpc_error", ``, Failed, "backend says no", "", 1},
		{"no_such_tool", `{}`, Failed, "no_such_tool", "", 0},
		{"hang", `{}`, Unknown, "did not answer within its timeout of 300ms", "", 1},
		{"echo_array", `[1]`, NotSent, "must be a JSON object", "", 0},
		// The upstream's text is stored up to MaxErrorText, cut at a character.
		{"long_error", `{}`, Failed, "éé … (cut at 8 KiB)", `"isError":true`, 1},
		{"long_rpc_error", `{}`, Failed, "no no … (cut at 8 KiB)", "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			o := m.Call(t.Context(), "crm", tc.tool, json.RawMessage(tc.args))
			if o.Kind != tc.kind || !strings.Contains(o.Error, tc.errText) || !strings.Contains(string(o.Result), tc.resultText) {
				t.Fatalf("Call(%s) = %s, error %q, result %s; want %s, error ~%q, result ~%s", tc.tool, o.Kind, o.Error, o.Result, tc.kind, tc.errText, tc.resultText)
			}
			if len(o.Error) > MaxErrorText || !utf8.ValidString(o.Error) {
				t.Fatalf("Call(%s): error of %d bytes (valid UTF-8 %v), want at most %d", tc.tool, len(o.Error), utf8.ValidString(o.Error), MaxErrorText)
			}
			if got := calls.get(tc.tool); got != tc.calls {
				t.Fatalf("upstream saw %s called %d times, want %d: a call is never repeated", tc.tool, got, tc.calls)
			}
		})
	}
}

func TestHTTPKilledMidCallIsUnknown(t *testing.T) {
	t.Parallel()
	ts, calls, _ := startHTTPUpstream(t, "t")
	ups := parseUpstreams(t, "upstreams:\n  crm:\n    url: "+ts.URL+"\n    headers: { Authorization: Bearer t }\n    timeout: 60s\n", nil)
	opts, ch := changes(Options{MinBackoff: 10 * time.Millisecond})
	m := Start(t.Context(), ups, opts)
	t.Cleanup(func() { _ = m.Close() })

	go func() {
		<-calls.entered // the call reached the tool: now the upstream goes away
		ts.CloseClientConnections()
	}()
	start := time.Now()
	o := m.Call(t.Context(), "crm", "hang", nil)
	if o.Kind != Unknown || strings.Contains(o.Error, "timeout") || time.Since(start) > 30*time.Second {
		t.Fatalf("Call = %s (%q) after %s; want unknown from the lost connection, long before the 60s timeout", o.Kind, o.Error, time.Since(start))
	}
	// The manager reconnects (the server is still listening), and never repeats the call.
	waitListing(t, m, ch, "crm", func(l classify.UpstreamListing) bool { return l.Unavailable == "" })
	if o := m.Call(t.Context(), "crm", "echo", nil); o.Kind != Done {
		t.Fatalf("after reconnect: echo = %s (%s)", o.Kind, o.Error)
	}
	if got := calls.get("hang"); got != 1 {
		t.Fatalf("hang called %d times, want exactly 1", got)
	}
}

func TestUpstreamDownAtStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens here now
	ts, _, _ := startHTTPUpstream(t, "right")
	ups := parseUpstreams(t, `
upstreams:
  gone:
    url: http://`+addr+`/mcp?token=SECRET-IN-QUERY
  badtoken:
    url: `+ts.URL+`
    headers: { Authorization: "Bearer wrong" }
  noprogram:
    command: [`+filepath.Join(t.TempDir(), "no-such-program")+`]
`, nil)
	start := time.Now()
	m := Start(t.Context(), ups, Options{ConnectTimeout: 5 * time.Second, MinBackoff: time.Hour})
	t.Cleanup(func() { _ = m.Close() })
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Start took %s; a down upstream must not hold up startup", d)
	}
	for name, want := range map[string]string{"gone": "connect", "badtoken": "Unauthorized", "noprogram": "no-such-program"} {
		l := m.Listings()[name]
		if !strings.Contains(l.Unavailable, want) {
			t.Errorf("%s: Unavailable = %q; want a reason mentioning %q", name, l.Unavailable, want)
		}
		o := m.Call(t.Context(), name, "echo", nil)
		if o.Kind != NotSent || !o.Unavailable || !strings.Contains(o.Error, "is unavailable") {
			t.Errorf("%s: Call = %+v; want not_sent, unavailable", name, o)
		}
		// The reason and the error reach logs, the API and agents: a
		// credential in the URL must not.
		if strings.Contains(l.Unavailable, "SECRET-IN-QUERY") || strings.Contains(o.Error, "SECRET-IN-QUERY") {
			t.Errorf("%s: the URL's token leaked: %q / %q", name, l.Unavailable, o.Error)
		}
	}
}

// A stdio upstream inherits what a program needs to run, never the
// secrets of approvals' own environment; what it needs besides is its env:.
func TestInheritedEnvKeepsSecretsOut(t *testing.T) {
	t.Setenv("APPROVALS_WEBHOOK_SECRET", "whsec_secret")
	t.Setenv("DATABASE_URL", "postgres://u:pw@db/approvals")
	t.Setenv("PATH", "/usr/bin:/bin")
	env := strings.Join(inheritedEnv(), "\n")
	if strings.Contains(env, "whsec_secret") || strings.Contains(env, "pw@db") {
		t.Fatalf("secrets passed to a stdio upstream:\n%s", env)
	}
	if !strings.Contains(env, "PATH=/usr/bin:/bin") {
		t.Fatalf("PATH not passed:\n%s", env)
	}
}

// TestStdioCrashRestartRelist: a stdio upstream that dies mid-call gives an unknown outcome
// and exactly one call; the manager restarts it and sees the tool list it now serves.
func TestStdioCrashRestartRelist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	callsFile, toolsFile := filepath.Join(dir, "calls"), filepath.Join(dir, "tools")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ups := parseUpstreams(t, `
upstreams:
  files:
    command: [`+exe+`, -test.run=^$]
    env: { `+envServer+`: stdio, `+envCallsFile+`: "${CALLS}", `+envToolsFile+`: "${TOOLS}" }
    import: all
`, map[string]string{"CALLS": callsFile, "TOOLS": toolsFile})
	opts, ch := changes(Options{MinBackoff: 10 * time.Millisecond})
	m := Start(t.Context(), ups, opts)
	t.Cleanup(func() { _ = m.Close() })

	l := m.Listings()["files"]
	if l.Unavailable != "" || slices.Contains(toolNames(l), "added") {
		t.Fatalf("listing = %+v; want the first tool list", l)
	}
	if o := m.Call(t.Context(), "files", "echo", json.RawMessage(`{"to":"x"}`)); o.Kind != Done || !strings.Contains(string(o.Result), "echo") {
		t.Fatalf("echo = %+v", o)
	}
	if err := os.WriteFile(toolsFile, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := m.Call(t.Context(), "files", "crash", nil)
	if o.Kind != Unknown {
		t.Fatalf("crash = %+v; want unknown", o)
	}
	l = waitListing(t, m, ch, "files", func(l classify.UpstreamListing) bool { return slices.Contains(toolNames(l), "added") })
	if l.Unavailable != "" {
		t.Fatalf("after restart: %+v", l)
	}
	if o := m.Call(t.Context(), "files", "added", nil); o.Kind != Done {
		t.Fatalf("added = %+v", o)
	}
	data, err := os.ReadFile(callsFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(data)), []string{"echo", "crash", "added"}; !slices.Equal(got, want) {
		t.Fatalf("upstream calls = %v, want %v: the crashed call is never repeated", got, want)
	}

	// Close stops the process it started.
	pidText, err := os.ReadFile(callsFile + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("upstream process %d not running before Close: %v", pid, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("upstream process %d after Close: kill -0 = %v; want it gone", pid, err)
	}
}

// TestHTTPToolListChanged: a tool the upstream adds while connected is listed, without a
// reconnect, because the upstream says its list changed.
func TestHTTPToolListChanged(t *testing.T) {
	t.Parallel()
	ts, _, srv := startHTTPUpstream(t, "t")
	ups := parseUpstreams(t, "upstreams:\n  crm:\n    url: "+ts.URL+"\n    headers: { Authorization: Bearer t }\n", nil)
	opts, ch := changes(Options{})
	m := Start(t.Context(), ups, opts)
	t.Cleanup(func() { _ = m.Close() })
	if l := m.Listings()["crm"]; l.Unavailable != "" || slices.Contains(toolNames(l), "late") {
		t.Fatalf("listing = %+v", l)
	}
	srv.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	waitListing(t, m, ch, "crm", func(l classify.UpstreamListing) bool { return slices.Contains(toolNames(l), "late") })
}

// TestCallErrorClassification pins the rule for errors the SDK returns: only an error the
// upstream answered means the tool did not run; codes the SDK makes up on our side, and
// everything else, leave the effect unknown.
func TestCallErrorClassification(t *testing.T) {
	t.Parallel()
	m := &Manager{}
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"upstream error", fmt.Errorf("calling: %w", &jsonrpc.Error{Code: -32000, Message: "no"}), Failed},
		{"invalid params", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool"}, Failed},
		{"rejected by transport", fmt.Errorf("sending: %w: EOF", &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}), Unknown},
		{"client closing", &jsonrpc.Error{Code: codeClientClosing, Message: "client is closing"}, Unknown},
		{"server closing", &jsonrpc.Error{Code: codeServerClosing, Message: "server is closing"}, Unknown},
		{"connection closed", fmt.Errorf("%w: calling: EOF", mcp.ErrConnectionClosed), Unknown},
		{"anything else", errors.New("unexpected EOF"), Unknown},
	} {
		c := &conn{cfg: classify.Upstream{Name: "crm", Timeout: time.Second}, lost: make(chan *mcp.ClientSession, 1)}
		if got := m.callError(c, nil, t.Context(), t.Context(), tc.err); got.Kind != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.Kind, got.Error, tc.want)
		}
	}
}

// TestStdioUpstreamRetriedUntilItStarts: an upstream that cannot start is unavailable, with
// the reason, and is retried in the background until it comes up.
func TestStdioUpstreamRetriedUntilItStarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ups := parseUpstreams(t, `
upstreams:
  files:
    command: [`+exe+`, -test.run=^$]
    env: { `+envServer+`: stdio, `+envCallsFile+`: "${CALLS}", `+envReadyFile+`: "${READY}" }
`, map[string]string{"CALLS": filepath.Join(dir, "calls"), "READY": ready})
	opts, ch := changes(Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Stderr: io.Discard})
	m := Start(t.Context(), ups, opts)
	t.Cleanup(func() { _ = m.Close() })
	if l := m.Listings()["files"]; l.Unavailable == "" {
		t.Fatalf("listing = %+v; want unavailable while the process exits at once", l)
	}
	if o := m.Call(t.Context(), "files", "echo", nil); o.Kind != NotSent || !o.Unavailable {
		t.Fatalf("Call while down = %+v; want not_sent, unavailable", o)
	}
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitListing(t, m, ch, "files", func(l classify.UpstreamListing) bool { return l.Unavailable == "" })
	if o := m.Call(t.Context(), "files", "echo", nil); o.Kind != Done {
		t.Fatalf("Call after start = %+v", o)
	}
}
