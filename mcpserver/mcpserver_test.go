package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/mcpserver"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

const toolsYAML = `
tools:
  send_customer_email:
    class: at-most-once
    description: Send one email to a customer.
    intent: "email:{customer_id}:{topic}"
    schema:
      type: object
      required: [customer_id, topic, to, subject, body]
      additionalProperties: false
      properties:
        customer_id: { type: [string, integer] }
        topic: { type: string, minLength: 1 }
        to: { type: string }
        subject: { type: string }
        body: { type: string }
  post_partner_message:
    description: Send a message to a partner.
  issue_refund:
    class: exactly-once
    description: Refund one order line through the payment provider.
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    check: "List refunds on the order line in the payment provider."
    schema:
      type: object
      required: [order_id, line_id, amount]
      properties:
        order_id: { type: string }
        line_id: { type: string }
        amount: { type: number, exclusiveMinimum: 0 }
  invalidate_cache:
    description: Drop cached pages for a path.
    annotations: { idempotentHint: true }
`

// env is one whole approvals process (apptest: the assembly cmd/approvals
// runs, with the MCP endpoint mounted) over its own PostgreSQL schema (or
// SQLite file).
type env struct {
	app   *apptest.App
	svc   *queue.Service
	store storage.Store
	url   string // the /mcp endpoint
}

// envOptions change what newEnv assembles.
type envOptions struct {
	// wrapMCP wraps the MCP handler (to hold a response back).
	wrapMCP func(http.Handler) http.Handler
	// wrapStore wraps the store the service uses (to inject a fault).
	wrapStore func(queue.Store) queue.Store
	// maxBody is APPROVALS_MAX_BODY (0: the default).
	maxBody int64
	// wrapAll wraps the storage of the whole process (a spy on accounts).
	wrapAll func(storage.Store) storage.Store
	// sqlite runs the process on a SQLite file instead of PostgreSQL.
	sqlite bool
}

// newEnv starts a server.
func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	reg, err := classify.Parse([]byte(toolsYAML), classify.Options{})
	if err != nil {
		t.Fatalf("parse tools: %v", err)
	}
	a := apptest.Start(t, apptest.Options{Tools: reg, WrapStore: opts.wrapStore, WrapMCP: opts.wrapMCP, MaxBody: opts.maxBody, WrapAll: opts.wrapAll, SQLite: opts.sqlite})
	return &env{app: a, svc: a.Service, store: a.Store, url: a.URL + "/mcp"}
}

// token creates an agent token named name.
func (e *env) token(t testing.TB, name string) string {
	t.Helper()
	return e.app.Token(t, name)
}

// bearer adds an agent token to every request of an MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// dial connects the SDK's client over Streamable HTTP with token.
func (e *env) dial(ctx context.Context, token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "scripted-agent", Version: "1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

func (e *env) connect(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := e.dial(context.Background(), token)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool and fails the test on a protocol error: every answer of
// this endpoint, refusals included, must be a tool result.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: protocol error %v", name, err)
	}
	t.Logf("%s -> %s", name, text(res))
	return res
}

func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structured content: %v", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode structured content %s: %v", b, err)
	}
	return v
}

// wantAction asserts a successful result and returns its action.
func wantAction(t *testing.T, res *mcp.CallToolResult, state queue.State) queue.Action {
	t.Helper()
	if res.IsError {
		t.Fatalf("result is an error: %s", text(res))
	}
	a := decode[queue.Action](t, res)
	if a.State != state {
		t.Fatalf("state = %s, want %s (text: %s)", a.State, state, text(res))
	}
	if text(res) == "" || strings.Contains(text(res), "\n") {
		t.Fatalf("want one paragraph of text, got %q", text(res))
	}
	return a
}

// wantRefusal asserts an isError result with code.
func wantRefusal(t *testing.T, res *mcp.CallToolResult, code queue.Code) mcpserver.Refusal {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want isError %s, got a result: %s", code, text(res))
	}
	r := decode[mcpserver.Refusal](t, res)
	if r.Code != code {
		t.Fatalf("code = %s, want %s (text: %s)", r.Code, code, text(res))
	}
	if r.Detail == "" || !strings.Contains(text(res), string(code)) {
		t.Fatalf("refusal %s: want a detail and the code in the text, got %+v / %q", code, r, text(res))
	}
	return r
}

func TestListToolsShowsGuardedAndActionTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "lister"))

	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	want := []string{"send_customer_email", "post_partner_message", "issue_refund", "invalidate_cache",
		"get_action", "find_actions", "list_tools", "execute_action", "complete_action", "fail_action", "cancel_action", "verify_action",
		"propose_plan", "get_plan"}
	if len(tools) != len(want) {
		t.Errorf("got %d tools, want %d", len(tools), len(want))
	}
	for _, name := range want {
		if tools[name] == nil {
			t.Fatalf("tool %s is missing", name)
		}
	}

	guarded := []struct {
		name      string
		class     classify.Class
		openWorld bool
		fields    []string // properties besides intent_key
	}{
		{"send_customer_email", classify.AtMostOnce, true, []string{"customer_id", "topic", "to", "subject", "body"}},
		{"post_partner_message", classify.AtMostOnce, true, nil},
		{"issue_refund", classify.ExactlyOnce, false, []string{"order_id", "line_id", "amount"}},
		{"invalidate_cache", classify.AtLeastOnce, false, nil},
	}
	for _, g := range guarded {
		tl := tools[g.name]
		a := tl.Annotations
		if a == nil || !a.IdempotentHint || a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint != g.openWorld {
			t.Errorf("%s: annotations %+v, want idempotent, not read-only, openWorld %v", g.name, a, g.openWorld)
		}
		if !strings.Contains(tl.Description, classify.Guidance(g.class)) {
			t.Errorf("%s: description %q lacks the %s guidance", g.name, tl.Description, g.class)
		}
		schema, _ := tl.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		if schema["type"] != "object" || props == nil {
			t.Fatalf("%s: input schema %v is not an object schema with properties", g.name, schema)
		}
		key, _ := props["intent_key"].(map[string]any)
		if key == nil || key["type"] != "string" {
			t.Errorf("%s: schema lacks the intent_key string property: %v", g.name, props)
		}
		if p, _ := props["plan"].(map[string]any); p == nil || p["type"] != "string" {
			t.Errorf("%s: schema lacks the optional plan string property: %v", g.name, props)
		}
		if req, _ := schema["required"].([]any); containsAny(req, "intent_key") || containsAny(req, "plan") {
			t.Errorf("%s: intent_key must be optional, schema requires it", g.name)
		}
		for _, f := range g.fields {
			if props[f] == nil {
				t.Errorf("%s: schema lacks the tool's property %s", g.name, f)
			}
		}
	}
	if s, _ := tools["send_customer_email"].InputSchema.(map[string]any); s["additionalProperties"] != false {
		t.Errorf("the tool's own schema keywords are kept: %v", s)
	}

	for _, name := range []string{"get_action", "find_actions", "list_tools", "get_plan"} {
		if a := tools[name].Annotations; a == nil || !a.ReadOnlyHint {
			t.Errorf("%s: want readOnlyHint true, got %+v", name, a)
		}
	}
	for _, name := range []string{"execute_action", "complete_action", "fail_action", "cancel_action", "verify_action"} {
		if a := tools[name].Annotations; a == nil || a.ReadOnlyHint {
			t.Errorf("%s: want readOnlyHint false, got %+v", name, a)
		}
	}

	lt := call(t, cs, "list_tools", nil)
	type toolList struct {
		Tools    []agentapi.ToolView `json:"tools"`
		Guidance string              `json:"guidance"`
	}
	listed := decode[toolList](t, lt)
	if lt.IsError || len(listed.Tools) != 4 || listed.Guidance == "" {
		t.Fatalf("list_tools: %+v (%s)", listed, text(lt))
	}
}

func containsAny(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// An at-most-once action, end to end through a real MCP client: submitted,
// followed with get_action + wait while a person approves it, executed once,
// completed; every event the agent caused is on channel mcp.
func TestAtMostOnceThroughMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "mailer"))
	ctx := context.Background()
	args := map[string]any{"customer_id": 42, "topic": "late-delivery", "to": "c42@example.com",
		"subject": "Your order", "body": "It ships today & arrives tomorrow."}

	res := call(t, cs, "send_customer_email", args)
	a := wantAction(t, res, queue.StatePending)
	if a.IntentKey != "email:42:late-delivery" || a.RequestedBy != "agent:mailer" || a.Class != classify.AtMostOnce {
		t.Fatalf("submitted action: %+v", a)
	}
	if !strings.Contains(text(res), "get_action") {
		t.Errorf("the text must say to follow it with get_action: %q", text(res))
	}
	if !queue.JSONEqual(a.Payload, mustJSON(t, args)) {
		t.Errorf("payload %s, want the arguments as written", a.Payload)
	}

	// Calling again for the same intent replays the stored action.
	again := wantAction(t, call(t, cs, "send_customer_email", args), queue.StatePending)
	if again.ID != a.ID {
		t.Fatalf("replay returned %s, want %s", again.ID, a.ID)
	}

	// Follow it while a person approves it.
	waited := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_action", Arguments: map[string]any{"id": a.ID, "wait": "30s", "state": "pending"}})
		if err != nil {
			t.Errorf("get_action wait: %v", err)
		}
		waited <- res
	}()
	// Approve once the call holds its long-poll; the fallback re-read (a
	// minute) outlasts the wait, so the approval's notification ends it.
	e.app.AwaitWaiters(t, 1)
	if _, err := e.svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ops@example.com", Note: "fine"}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	var got *mcp.CallToolResult
	select {
	case got = <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("get_action with wait did not answer after the approval")
	}
	if got == nil {
		t.FailNow()
	}
	approved := wantAction(t, got, queue.StateApproved)
	if approved.DecidedBy == nil || *approved.DecidedBy != "user:ops@example.com" || !strings.Contains(text(got), "execute_action") {
		t.Fatalf("approved action: %+v, text %q", approved, text(got))
	}

	exec := wantAction(t, call(t, cs, "execute_action", map[string]any{"id": a.ID}), queue.StateInProgress)
	if !queue.JSONEqual(exec.ApprovedPayload, a.Payload) {
		t.Errorf("approved_payload %s, want %s", exec.ApprovedPayload, a.Payload)
	}
	// A second execute is never permission to send.
	r := wantRefusal(t, call(t, cs, "execute_action", map[string]any{"id": a.ID}), queue.CodeInProgress)
	if r.Action == nil || r.Action.ID != a.ID {
		t.Errorf("the refusal carries the action: %+v", r)
	}

	result := map[string]any{"message_id": "m-1"}
	done := wantAction(t, call(t, cs, "complete_action", map[string]any{"id": a.ID, "result": result}), queue.StateDone)
	if !queue.JSONEqual(done.Result, mustJSON(t, result)) {
		t.Errorf("result %s", done.Result)
	}
	replay := call(t, cs, "complete_action", map[string]any{"id": a.ID, "result": result})
	wantAction(t, replay, queue.StateDone)
	if !strings.Contains(text(replay), "Already recorded") {
		t.Errorf("a repeated complete is a replay: %q", text(replay))
	}

	evs, err := queue.Timeline(ctx, e.store, a.ID)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
		want := mcpserver.Channel
		if ev.Kind == queue.EventApproved {
			want = "dashboard"
		}
		if ev.Channel != want {
			t.Errorf("event %s has channel %q, want %q", ev.Kind, ev.Channel, want)
		}
		if ev.Kind != queue.EventApproved && ev.Actor != "agent:mailer" {
			t.Errorf("event %s has actor %q, want agent:mailer", ev.Kind, ev.Actor)
		}
	}
	for _, k := range []string{queue.EventSubmitted, queue.EventReplayed, queue.EventApproved, queue.EventClaimed, queue.EventCompleted} {
		if !strings.Contains(strings.Join(kinds, " "), k) {
			t.Errorf("timeline %v lacks %s", kinds, k)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The MCP face and the REST face are one service: the same intent submitted
// through either is one action.
func TestMCPAndRESTShareIntents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tok := e.token(t, "both")
	cs := e.connect(t, tok)
	body := `{"tool":"issue_refund","payload":{"order_id":"o-9","line_id":"l-1","amount":5}}`
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(e.url, "/mcp")+"/api/v1/actions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("REST submit: %d %s", resp.StatusCode, b)
	}
	// Same tool and payload, other key order and number spelling: the claim
	// is held, so the MCP call is refused in_progress with the action.
	r := wantRefusal(t, call(t, cs, "issue_refund", map[string]any{"amount": 5.0, "line_id": "l-1", "order_id": "o-9"}), queue.CodeInProgress)
	if r.Action == nil || r.Action.IntentKey != "refund:o-9:l-1" {
		t.Fatalf("refusal action: %+v", r.Action)
	}
	// Another payload for the held intent: intent_key_reused, nothing done;
	// the text says so in the words of REST and the SDKs, naming find_actions.
	res := call(t, cs, "issue_refund", map[string]any{"amount": 7, "line_id": "l-1", "order_id": "o-9"})
	wantRefusal(t, res, queue.CodeIntentKeyReused)
	if g := problem.Guidance(queue.CodeIntentKeyReused, problem.FaceMCP); !strings.Contains(text(res), g) {
		t.Errorf("the refusal's text lacks the guidance %q: %s", g, text(res))
	}
	if strings.Contains(strings.ToLower(text(res)), "nothing was done") {
		t.Errorf("the refusal reads as if the effect did not happen: %s", text(res))
	}
}

// An MCP payload is stored as the client wrote it, as a REST payload is:
// key order and number spelling survive, and only intent_key is taken out.
func TestPayloadStoredAsSubmitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "exact"))
	ctx := context.Background()
	for _, tc := range []struct {
		tool, args, payload string
	}{
		{"issue_refund", `{"order_id":"o-7","line_id":"l-3","amount":1.50}`, `{"order_id":"o-7","line_id":"l-3","amount":1.50}`},
		{"post_partner_message", `{"text":"<b>\u00e9","intent_key":"partner:acme:q4","amount":1.50,"meta":{"z":1e2,"b":[2.0,0]}}`,
			`{"text":"<b>\u00e9","amount":1.50,"meta":{"z":1e2,"b":[2.0,0]}}`},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tc.tool, err, text(res))
		}
		var id struct{ ID string }
		if err := decodeResult(res, &id); err != nil {
			t.Fatal(err)
		}
		a, err := e.store.ActionGetByID(ctx, id.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(a.Payload) != tc.payload {
			t.Errorf("%s: stored payload %s, want %s", tc.tool, a.Payload, tc.payload)
		}
	}
}

// MCP holds a call's arguments to APPROVALS_MAX_BODY, as REST holds a body.
func TestMaxBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBody: 4 << 10})
	cs := e.connect(t, e.token(t, "big"))
	wantAction(t, call(t, cs, "invalidate_cache", map[string]any{"path": strings.Repeat("p", 3<<10)}), queue.StateRecorded)
	r := wantRefusal(t, call(t, cs, "invalidate_cache", map[string]any{"path": strings.Repeat("p", 5<<10)}), queue.CodePayloadTooLarge)
	if !strings.Contains(r.Detail, "4096") {
		t.Errorf("detail %q does not name the limit", r.Detail)
	}
	wantRefusal(t, call(t, cs, "complete_action", map[string]any{"id": "x", "result": strings.Repeat("r", 5<<10)}), queue.CodePayloadTooLarge)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	for _, tc := range []struct {
		name, authz, body string
	}{
		{"no token", "", initialize},
		{"not bearer", "Basic Zm9vOmJhcg==", list},
		{"unknown token", "Bearer apv_unknown", list},
		{"empty token", "Bearer ", list},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.authz != "" {
			req.Header.Set("Authorization", tc.authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p problem.Details
		_ = json.Unmarshal(b, &p)
		if resp.StatusCode != http.StatusUnauthorized || p.Code != queue.CodeUnauthorized ||
			resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s %q, want 401 problem unauthorized", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}

	// The SDK client cannot even connect without a valid token.
	if cs, err := e.dial(ctx, "apv_bogus"); err == nil {
		cs.Close()
		t.Error("connect with a bad token succeeded")
	}

	// A token revoked mid-session stops working on its next request.
	tok := e.token(t, "revokee")
	cs := e.connect(t, tok)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("list tools before revoking: %v", err)
	}
	if err := e.store.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: "revokee", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err == nil {
		t.Error("list tools with a revoked token succeeded")
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "invalidate_cache", Arguments: map[string]any{"path": "/x"}}); err == nil {
		t.Errorf("call with a revoked token succeeded: %+v", res)
	}
	// A new session with the revoked token is refused too, and nothing was
	// recorded by the refused call.
	if cs, err := e.dial(ctx, tok); err == nil {
		cs.Close()
		t.Error("connect with a revoked token succeeded")
	}
	list2, _, err := e.svc.List(ctx, queue.ListRequest{Tool: "invalidate_cache", Limit: 10})
	if err != nil || len(list2) != 0 {
		t.Errorf("a refused call recorded %d actions (%v)", len(list2), err)
	}

	// A dashboard-style request with a cookie and no token is refused too.
	req, _ := http.NewRequest(http.MethodPost, e.url, bytes.NewReader([]byte(list)))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: "approvals_session", Value: "x"})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("cookie only: %d, want 401", resp.StatusCode)
	}
}

// Bad arguments come back as isError results with the code the REST API
// would give, and the session keeps working after each.
func TestBadArgumentsAreToolErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "sloppy"))
	other := e.connect(t, e.token(t, "other"))
	ctx := context.Background()

	held := wantAction(t, call(t, cs, "issue_refund", map[string]any{"order_id": "o-1", "line_id": "l-1", "amount": 3}), queue.StateInProgress)
	mail := wantAction(t, call(t, cs, "post_partner_message", map[string]any{"intent_key": "partner:acme:q3", "text": "hi"}), queue.StatePending)

	email := func(over map[string]any) map[string]any {
		m := map[string]any{"customer_id": "c1", "topic": "t", "to": "a@example.com", "subject": "s", "body": "b"}
		for k, v := range over {
			if v == nil {
				delete(m, k)
				continue
			}
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		tool string
		args any
		code queue.Code
	}{
		{"wrong type for the schema", "issue_refund", map[string]any{"order_id": true, "line_id": "l", "amount": 1}, queue.CodeInvalidPayload},
		{"missing template field", "issue_refund", map[string]any{"order_id": "o", "amount": 1}, queue.CodeInvalidPayload},
		{"template field of a wrong type", "send_customer_email", email(map[string]any{"customer_id": 1.5}), queue.CodeInvalidPayload},
		{"field outside the schema", "send_customer_email", email(map[string]any{"cc": "x"}), queue.CodeInvalidPayload},
		{"no arguments", "issue_refund", nil, queue.CodeInvalidPayload},
		{"intent_key not a string", "post_partner_message", map[string]any{"intent_key": 7}, queue.CodeInvalidRequest},
		{"intent_key with a control character", "post_partner_message", map[string]any{"intent_key": "a\tb"}, queue.CodeInvalidRequest},
		{"intent_key too long", "post_partner_message", map[string]any{"intent_key": strings.Repeat("k", 256)}, queue.CodeInvalidRequest},
		{"NUL in a payload string", "invalidate_cache", map[string]any{"path": "/a\x00b"}, queue.CodeInvalidRequest},
		{"NUL in a nested key", "invalidate_cache", map[string]any{"opts": map[string]any{"a\x00": 1}}, queue.CodeInvalidRequest},
		{"arguments not an object", "invalidate_cache", []any{1, 2}, queue.CodeInvalidRequest},
		{"no intent key and no template", "post_partner_message", map[string]any{"text": "hi"}, queue.CodeIntentKeyRequired},
		{"key differs from the template's", "issue_refund", map[string]any{"order_id": "o", "line_id": "l", "amount": 1, "intent_key": "refund:x"}, queue.CodeIntentKeyMismatch},
		{"held intent, other payload", "issue_refund", map[string]any{"order_id": "o-1", "line_id": "l-1", "amount": 4}, queue.CodeIntentKeyReused},
		{"held intent, same payload, claimed", "issue_refund", map[string]any{"order_id": "o-1", "line_id": "l-1", "amount": 3}, queue.CodeInProgress},
		{"oversized arguments", "invalidate_cache", map[string]any{"blob": strings.Repeat("x", 300<<10)}, queue.CodePayloadTooLarge},
		{"get_action without id", "get_action", map[string]any{}, queue.CodeInvalidRequest},
		{"get_action id of a wrong type", "get_action", map[string]any{"id": 12}, queue.CodeInvalidRequest},
		{"get_action unknown id", "get_action", map[string]any{"id": "0190a6c4-0000-7000-8000-000000000000"}, queue.CodeNotFound},
		{"get_action malformed id", "get_action", map[string]any{"id": "nope"}, queue.CodeNotFound},
		{"get_action wait too long", "get_action", map[string]any{"id": held.ID, "wait": "61s"}, queue.CodeInvalidRequest},
		{"get_action wait not a duration", "get_action", map[string]any{"id": held.ID, "wait": "soon"}, queue.CodeInvalidRequest},
		{"get_action wait as a number", "get_action", map[string]any{"id": held.ID, "wait": 30}, queue.CodeInvalidRequest},
		{"get_action unknown state", "get_action", map[string]any{"id": held.ID, "wait": "1s", "state": "limbo"}, queue.CodeInvalidRequest},
		{"get_action unknown argument", "get_action", map[string]any{"id": held.ID, "verbose": true}, queue.CodeInvalidRequest},
		{"find_actions without intent_key", "find_actions", map[string]any{}, queue.CodeInvalidRequest},
		{"find_actions limit too big", "find_actions", map[string]any{"intent_key": "k", "limit": 500}, queue.CodeInvalidRequest},
		{"find_actions limit not whole", "find_actions", map[string]any{"intent_key": "k", "limit": 2.5}, queue.CodeInvalidRequest},
		{"find_actions bad cursor", "find_actions", map[string]any{"intent_key": "k", "cursor": "zz"}, queue.CodeInvalidRequest},
		{"list_tools with an argument", "list_tools", map[string]any{"all": true}, queue.CodeInvalidRequest},
		{"complete_action without result", "complete_action", map[string]any{"id": held.ID}, queue.CodeInvalidRequest},
		{"complete_action NUL in the result", "complete_action", map[string]any{"id": held.ID, "result": map[string]any{"note": "\x00"}}, queue.CodeInvalidRequest},
		{"fail_action without error", "fail_action", map[string]any{"id": held.ID}, queue.CodeInvalidRequest},
		{"fail_action blank error", "fail_action", map[string]any{"id": held.ID, "error": "  "}, queue.CodeInvalidRequest},
		{"fail_action error not a string", "fail_action", map[string]any{"id": held.ID, "error": false}, queue.CodeInvalidRequest},
		{"execute_action on an exactly-once action", "execute_action", map[string]any{"id": held.ID}, queue.CodeInvalidTransition},
		{"execute_action on a pending action", "execute_action", map[string]any{"id": mail.ID}, queue.CodeInvalidTransition},
		{"cancel_action on a claimed action", "cancel_action", map[string]any{"id": held.ID}, queue.CodeInvalidTransition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			wantRefusal(t, res, tc.code)
		})
	}

	// Only the submitting agent drives an action.
	wantRefusal(t, call(t, other, "complete_action", map[string]any{"id": held.ID, "result": 1}), queue.CodeForbidden)
	wantRefusal(t, call(t, other, "cancel_action", map[string]any{"id": mail.ID}), queue.CodeForbidden)

	// Nothing above crashed the session or changed the claimed action.
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("the session broke: %v", err)
	}
	got := wantAction(t, call(t, cs, "get_action", map[string]any{"id": held.ID}), queue.StateInProgress)
	if got.Result != nil && string(got.Result) != "null" {
		t.Errorf("the claimed action changed: %+v", got)
	}
	// The NUL check names the argument.
	r := wantRefusal(t, call(t, cs, "invalidate_cache", map[string]any{"path": "/a\x00b"}), queue.CodeInvalidRequest)
	if !strings.Contains(r.Detail, "path") {
		t.Errorf("detail %q does not name the argument", r.Detail)
	}
	// The at-most-once action can still be withdrawn, once, and a repeat is a replay.
	wantAction(t, call(t, cs, "cancel_action", map[string]any{"id": mail.ID}), queue.StateCancelled)
	if res := call(t, cs, "cancel_action", map[string]any{"id": mail.ID}); !strings.Contains(text(res), "Already cancelled") {
		t.Errorf("repeated cancel: %q", text(res))
	}
	// An at-least-once call is recorded every time.
	for range 2 {
		wantAction(t, call(t, cs, "invalidate_cache", map[string]any{"path": "/p"}), queue.StateRecorded)
	}
}

// panickyStore panics on every listing, as a bug deep in the service would.
type panickyStore struct{ queue.Store }

func (panickyStore) ActionList(context.Context, queue.ActionListParams) ([]*queue.Action, error) {
	panic("a bug")
}

// A panic inside a call is an isError result, not the end of the process.
func TestPanicIsAnInternalToolError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{wrapStore: func(s queue.Store) queue.Store { return panickyStore{s} }})
	cs := e.connect(t, e.token(t, "unlucky"))
	r := wantRefusal(t, call(t, cs, "find_actions", map[string]any{"intent_key": "k"}), "internal")
	if strings.Contains(r.Detail, "a bug") {
		t.Errorf("the refusal reveals internals: %q", r.Detail)
	}
	wantAction(t, call(t, cs, "invalidate_cache", map[string]any{"path": "/"}), queue.StateRecorded)
}

// BenchmarkCallOverMCP measures one tool call through the whole stack (SDK
// client, Streamable HTTP, authentication, the service, PostgreSQL).
func BenchmarkCallOverMCP(b *testing.B) {
	e := newEnv(b, envOptions{})
	cs := e.connect(b, e.token(b, "bench"))
	ctx := context.Background()
	recorded, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "invalidate_cache", Arguments: map[string]any{"path": "/"}})
	if err != nil || recorded.IsError {
		b.Fatalf("%v %v", err, recorded)
	}
	var a queue.Action
	if err := decodeResult(recorded, &a); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		tool string
		args func(i int) any
	}{
		{"submit_at_least_once", "invalidate_cache", func(int) any { return map[string]any{"path": "/p"} }},
		{"submit_exactly_once", "issue_refund", func(i int) any {
			return map[string]any{"order_id": "o", "line_id": fmt.Sprint(i), "amount": 1}
		}},
		{"get_action", "get_action", func(int) any { return map[string]any{"id": a.ID} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: bc.tool, Arguments: bc.args(i)})
				if err != nil || res.IsError {
					b.Fatalf("%v %v", err, res)
				}
			}
		})
	}
}

// The refusals an agent can meet that TestRefusalsAreToolErrors does not
// reach: a conflicting outcome, another agent's execute and fail, and
// storage that is down; each is the REST code, as an isError result.
func TestRefusalsOfEveryAgentCode(t *testing.T) {
	t.Parallel()
	var outage apptest.Outage
	e := newEnv(t, envOptions{wrapStore: outage.Wrap})
	cs := e.connect(t, e.token(t, "owner"))
	other := e.connect(t, e.token(t, "intruder"))
	ctx := context.Background()

	held := wantAction(t, call(t, cs, "issue_refund", map[string]any{"order_id": "o-7", "line_id": "l-1", "amount": 3}), queue.StateInProgress)
	mail := wantAction(t, call(t, cs, "send_customer_email", map[string]any{"customer_id": "c7", "topic": "t", "to": "a@example.com", "subject": "s", "body": "b"}), queue.StatePending)
	if _, err := e.svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: mail.ID, By: "user:ops@example.com"}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, call(t, other, "execute_action", map[string]any{"id": mail.ID}), queue.CodeForbidden)
	wantRefusal(t, call(t, other, "fail_action", map[string]any{"id": held.ID, "error": "not mine"}), queue.CodeForbidden)
	wantAction(t, call(t, cs, "complete_action", map[string]any{"id": held.ID, "result": map[string]any{"refund": "re_1"}}), queue.StateDone)
	wantRefusal(t, call(t, cs, "fail_action", map[string]any{"id": held.ID, "error": "declined"}), queue.CodeOutcomeConflict)
	wantRefusal(t, call(t, cs, "complete_action", map[string]any{"id": held.ID, "result": map[string]any{"refund": "re_2"}}), queue.CodeOutcomeConflict)

	outage.Begin()
	r := wantRefusal(t, call(t, cs, "get_action", map[string]any{"id": held.ID}), queue.CodeUnavailable)
	if strings.Contains(r.Detail, "refused") {
		t.Errorf("the refusal reveals internals: %q", r.Detail)
	}
	outage.End()
	wantAction(t, call(t, cs, "get_action", map[string]any{"id": held.ID}), queue.StateDone)
}
