package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

// lookupSpy counts token lookups on the real store.
type lookupSpy struct {
	storage.Store
	lookups atomic.Int64
}

func (s *lookupSpy) TokenGetByHash(ctx context.Context, hash string) (*accounts.Token, error) {
	s.lookups.Add(1)
	return s.Store.TokenGetByHash(ctx, hash)
}

// readSpy counts reads of one action on the real store.
type readSpy struct {
	queue.Store
	reads atomic.Int64
}

func (s *readSpy) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	s.reads.Add(1)
	return s.Store.ActionGetByID(ctx, id)
}

// rpc posts one JSON-RPC request to /mcp with token and returns the HTTP
// status and body.
func (e *env) rpc(t *testing.T, token, method string, params any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	return postRPC(t, e.url, token, string(body))
}

// toolCall is the params of a tools/call.
func toolCall(name string, args any) map[string]any {
	return map[string]any{"name": name, "arguments": args}
}

// A token seen valid is taken from memory for the calls whose statement
// checks it (submissions, drive calls): those cost no lookup. Every other
// method looks it up first.
func TestCachedTokenSkipsTheLookupOfGuardedCalls(t *testing.T) {
	t.Parallel()
	spy := &lookupSpy{}
	e := newEnv(t, envOptions{wrapAll: func(s storage.Store) storage.Store { spy.Store = s; return spy }})
	tok := e.token(t, "cached-agent")

	if st, b := e.rpc(t, tok, "tools/list", map[string]any{}); st != http.StatusOK {
		t.Fatalf("tools/list: %d %s", st, b)
	}
	if n := spy.lookups.Load(); n != 1 {
		t.Fatalf("first request: %d lookups, want 1", n)
	}
	before := spy.lookups.Load()
	for i := range 5 {
		isErr, sc := callTool(t, e, tok, "invalidate_cache", map[string]any{"path": fmt.Sprintf("/p/%d", i)})
		if isErr {
			t.Fatalf("invalidate_cache: %s", sc)
		}
	}
	// A claim and its completion: two guarded calls.
	isErr, sc := callTool(t, e, tok, "issue_refund", map[string]any{"order_id": "o1", "line_id": "l1", "amount": 5})
	if isErr {
		t.Fatalf("issue_refund: %s", sc)
	}
	var claim queue.Action
	if err := json.Unmarshal(sc, &claim); err != nil || claim.State != queue.StateInProgress {
		t.Fatalf("claim: %s (%v)", sc, err)
	}
	if isErr, sc := callTool(t, e, tok, "complete_action", map[string]any{"id": claim.ID, "result": map[string]any{"ok": true}}); isErr {
		t.Fatalf("complete_action: %s", sc)
	}
	if n := spy.lookups.Load() - before; n != 0 {
		t.Errorf("7 guarded calls with a cached token made %d lookups, want 0", n)
	}
	// A read tool and the tools' list look the token up each time.
	before = spy.lookups.Load()
	if isErr, sc := callTool(t, e, tok, "get_action", map[string]any{"id": claim.ID}); isErr {
		t.Fatalf("get_action: %s", sc)
	}
	if st, b := e.rpc(t, tok, "tools/list", map[string]any{}); st != http.StatusOK {
		t.Fatalf("tools/list: %d %s", st, b)
	}
	if n := spy.lookups.Load() - before; n != 2 {
		t.Errorf("a read tool's call and tools/list made %d lookups, want 2", n)
	}
	// A refused guarded call (bad arguments) may be refused before its
	// statement, so the token is looked up before the refusal is answered.
	before = spy.lookups.Load()
	if isErr, sc := callTool(t, e, tok, "issue_refund", map[string]any{"order_id": "o2"}); !isErr {
		t.Fatalf("a refund without its line and amount was not refused: %s", sc)
	}
	if n := spy.lookups.Load() - before; n != 1 {
		t.Errorf("a refused guarded call made %d lookups, want 1", n)
	}
}

// callTool calls tool with a raw tools/call and decodes its 200 answer.
func callTool(t *testing.T, e *env, tok, tool string, args any) (isError bool, structured json.RawMessage) {
	t.Helper()
	status, b := e.rpc(t, tok, "tools/call", toolCall(tool, args))
	var m struct {
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &m) != nil || m.Error != nil {
		t.Fatalf("want a 200 tool result, got %d %s", status, b)
	}
	return m.Result.IsError, m.Result.StructuredContent
}

// A token revoked after it was cached gets 401 on its next request whatever
// the request is, and nothing it asked for happens.
func TestCachedTokenRevokedIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	spy := &readSpy{}
	e := newEnv(t, envOptions{wrapStore: func(s queue.Store) queue.Store { spy.Store = s; return spy }})
	ctx := context.Background()
	held := pendingEmail(t, e, e.token(t, "holder"), "held")

	// An approved email and a claimed refund, held by agents that are
	// about to lose their tokens.
	for _, tc := range []struct {
		name   string
		method string
		params func(tok string) any
		// check says what must not have happened.
		check func(t *testing.T)
	}{
		{"submission", "tools/call", func(string) any {
			return toolCall("invalidate_cache", map[string]any{"path": "/revoked/submission"})
		}, func(t *testing.T) {
			list, _, err := e.svc.List(ctx, queue.ListRequest{Tool: "invalidate_cache", IntentKey: "", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range list {
				if strings.Contains(string(a.Payload), "/revoked/submission") {
					t.Errorf("a revoked token's submission was recorded: %s", a.ID)
				}
			}
		}},
		{"refused submission", "tools/call", func(string) any {
			return toolCall("issue_refund", map[string]any{"order_id": "only"})
		}, nil},
		{"tools/list", "tools/list", func(string) any { return map[string]any{} }, nil},
		{"read tool", "tools/call", func(string) any { return toolCall("list_tools", map[string]any{}) }, nil},
		// A long-poll is refused before it reads or waits.
		{"waiting read", "tools/call", func(string) any {
			spy.reads.Store(0)
			return toolCall("get_action", map[string]any{"id": held.ID, "wait": "30s"})
		}, func(t *testing.T) {
			if n := spy.reads.Load(); n != 0 {
				t.Errorf("get_action with a revoked token read the action %d times", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "revokee-" + strings.ReplaceAll(tc.name, "/", "-")
			name = strings.ReplaceAll(name, " ", "-")
			tok := e.token(t, name)
			if st, b := e.rpc(t, tok, "tools/list", map[string]any{}); st != http.StatusOK { // now cached
				t.Fatalf("warm up: %d %s", st, b)
			}
			if err := e.store.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: name, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			wantUnauthorized(t, e, tok, tc.method, tc.params(tok))
			if tc.check != nil {
				tc.check(t)
			}
			// Refused once, the token stays refused (it left the cache).
			wantUnauthorized(t, e, tok, "tools/call", toolCall("invalidate_cache", map[string]any{"path": "/again"}))
		})
	}

	// Drive calls: an approved email is not taken for execution, a claimed
	// refund is not completed. Each token is cached by its own submission.
	t.Run("drive calls", func(t *testing.T) {
		executor, completer := e.token(t, "revokee-executor"), e.token(t, "revokee-completer")
		email := pendingEmail(t, e, executor, "drive")
		if _, err := e.svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: email.ID, By: "user:ops@example.com"}); err != nil {
			t.Fatal(err)
		}
		isErr, sc := callTool(t, e, completer, "issue_refund", map[string]any{"order_id": "o9", "line_id": "l9", "amount": 1})
		var claim queue.Action
		if isErr || json.Unmarshal(sc, &claim) != nil || claim.State != queue.StateInProgress {
			t.Fatalf("claim: %s", sc)
		}
		for _, name := range []string{"revokee-executor", "revokee-completer"} {
			if err := e.store.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: name, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		wantUnauthorized(t, e, executor, "tools/call", toolCall("execute_action", map[string]any{"id": email.ID}))
		if a, err := e.store.ActionGetByID(ctx, email.ID); err != nil || a.State != queue.StateApproved {
			t.Errorf("after a revoked execute_action: %v %v, want approved", a, err)
		}
		wantUnauthorized(t, e, completer, "tools/call", toolCall("complete_action", map[string]any{"id": claim.ID, "result": map[string]any{"ok": true}}))
		if a, err := e.store.ActionGetByID(ctx, claim.ID); err != nil || a.State != queue.StateInProgress {
			t.Errorf("after a revoked complete_action: %v %v, want in_progress", a, err)
		}
	})
}

// pendingEmail submits an email as the agent of tok.
func pendingEmail(t *testing.T, e *env, tok, topic string) queue.Action {
	t.Helper()
	isErr, sc := callTool(t, e, tok, "send_customer_email", map[string]any{
		"customer_id": "c1", "topic": topic, "to": "c1@example.com", "subject": "s", "body": "b"})
	var a queue.Action
	if isErr || json.Unmarshal(sc, &a) != nil || a.State != queue.StatePending {
		t.Fatalf("submit email: %v %s", isErr, sc)
	}
	return a
}

func wantUnauthorized(t *testing.T, e *env, tok, method string, params any) {
	t.Helper()
	st, b := e.rpc(t, tok, method, params)
	var p problem.Details
	if st != http.StatusUnauthorized || json.Unmarshal(b, &p) != nil || p.Code != queue.CodeUnauthorized {
		t.Errorf("%s with a revoked token: %d %s, want 401 unauthorized", method, st, b)
	}
}
