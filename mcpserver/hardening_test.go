package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// TestArgumentsWithDuplicateKeysRefused: MCP arguments naming a key twice
// are an isError invalid_request naming the key, for a guarded tool and an
// action tool alike, and nothing is submitted.
func TestArgumentsWithDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "mailer"))
	for _, tc := range []struct{ tool, args, mention string }{
		{"send_customer_email", `{"customer_id":"c1","topic":"t","to":"a@example.com","to":"evil@example.com","subject":"s","body":"b"}`, `"to" at /to`},
		{"invalidate_cache", `{"path":"/a","intent_key":"k1","intent_key":"k2"}`, `"intent_key"`},
		{"get_action", `{"id":"x","id":"y"}`, `"id"`},
		{"complete_action", `{"id":"x","result":{"sent":true,"sent":false}}`, `"sent" at /result/sent`},
	} {
		r := wantRefusal(t, call(t, cs, tc.tool, json.RawMessage(tc.args)), queue.CodeInvalidRequest)
		if !strings.Contains(r.Detail, tc.mention) {
			t.Errorf("%s: detail %q does not name %s", tc.tool, r.Detail, tc.mention)
		}
	}
	list, err := e.store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("%d actions stored from refused calls", len(list))
	}
}

// TestArgumentsOutOfRangeRefused: a number past the limits or nesting
// deeper than 64 from the request body's outermost value (the arguments
// lie at depth 3 of the JSON-RPC request) is an isError invalid_request
// naming where, and nothing is submitted. The requests are written by hand:
// the SDK's client cannot even send 1e999999.
func TestArgumentsOutOfRangeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tok := e.token(t, "mailer")
	callRaw := func(tool, args string) map[string]any {
		t.Helper()
		status, body := postCall(t, e.url, tok, tool, args)
		var answer struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(body, &answer); err != nil || status != http.StatusOK {
			t.Fatalf("%s: %d %v, want 200 with a tool result", tool, status, err)
		}
		return answer.Result
	}
	nest := func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }
	email := `"customer_id":"c1","topic":"t","to":"a@example.com","subject":"s","body":"b"`
	for _, tc := range []struct{ tool, args, mention string }{
		{"send_customer_email", `{` + email + `,"n":1e999999}`, "/n"},
		{"send_customer_email", `{` + email + `,"n":` + strings.Repeat("9", 101) + `}`, "100 significant digits"},
		{"send_customer_email", `{` + email + `,"deep":` + nest(62) + `}`, "deeper than 64"},
		{"complete_action", `{"id":"x","result":{"amount":1e401}}`, "/result/amount"},
	} {
		r := callRaw(tc.tool, tc.args)
		sc, _ := r["structuredContent"].(map[string]any)
		if r["isError"] != true || sc["code"] != string(queue.CodeInvalidRequest) || !strings.Contains(fmt.Sprint(sc["detail"]), tc.mention) {
			t.Errorf("%s: %v, want isError invalid_request naming %s", tc.tool, r, tc.mention)
		}
	}
	list, err := e.store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("%d actions stored from refused calls", len(list))
	}
	// 61 levels inside the arguments' own value are within the limit.
	if r := callRaw("post_partner_message", `{"intent_key":"p:deep","deep":`+nest(61)+`}`); r["isError"] == true {
		t.Fatalf("at the limit: %v, want the action", r)
	}
}

// TestWaitPastTheWaiterCapRefused: a get_action wait of an agent already
// holding its 100 waiters is an isError too_many_waiters; a read without
// wait still answers.
func TestWaitPastTheWaiterCapRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "poller"))
	a := wantAction(t, call(t, cs, "send_customer_email", map[string]any{"customer_id": "c1", "topic": "t",
		"to": "c@example.com", "subject": "s", "body": "b"}), queue.StatePending)
	perHolder := longpoll.WaiterLimits{}.WithDefaults().PerHolder
	for range perHolder {
		release, err := e.app.Polls.AcquireWaiter("agent:poller")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	wantRefusal(t, call(t, cs, "get_action", map[string]any{"id": a.ID, "wait": "1s"}), queue.CodeTooManyWaiters)
	wantAction(t, call(t, cs, "get_action", map[string]any{"id": a.ID}), queue.StatePending)
}

// TestNoStreamWaitsUncounted: the endpoint opens no stream that outlives
// its answer, so the only long-lived MCP request is a get_action wait, which
// the waiter cap counts. A GET (the standalone SSE stream of a stateful
// server) is 405 at once, and a subscriptions/listen (the stream that
// replaces it from protocol version 2026-07-28) is acknowledged with no
// subscription and ends at once. Should either ever stay open, it must take
// a waiter slot like get_action's wait does.
func TestNoStreamWaitsUncounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tok := e.token(t, "listener")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	do := func(method, body string, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, e.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: the answer did not end: %v", method, err)
		}
		return resp, string(b)
	}

	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		resp, body := do(http.MethodGet, "", map[string]string{"Accept": "text/event-stream", "MCP-Protocol-Version": version})
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("GET with protocol %s: %d Allow %q %q, want 405 Allow POST", version, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}

	listen := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"listener","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true,"resourcesListChanged":true}}}`
	resp, body := do(http.MethodPost, listen, map[string]string{"Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"notifications":{}`) || !strings.Contains(body, `"id":7,"result"`) {
		t.Fatalf("subscriptions/listen: %d %q, want 200, no subscription acknowledged and the result", resp.StatusCode, body)
	}
}

// TestQueryParametersRefused: /mcp reads no query parameter, so one is a
// 400 problem naming it (after the token check), never ignored.
func TestQueryParametersRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tok := e.token(t, "mailer")
	for _, tc := range []struct {
		token  string
		status int
	}{{tok, http.StatusBadRequest}, {"bad-token", http.StatusUnauthorized}} {
		status, b := postCall(t, e.url+"?dry_run=true", tc.token, "post_partner_message", `{"intent_key":"p:q","text":"x"}`)
		if status != tc.status || (tc.status == http.StatusBadRequest && !strings.Contains(string(b), `\"dry_run\"`)) {
			t.Fatalf("token %q: %d %s, want %d", tc.token, status, b, tc.status)
		}
	}
	list, err := e.store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
	if err != nil || len(list) != 0 {
		t.Fatalf("%d actions (%v) after refused calls", len(list), err)
	}
}

// postCall sends one tools/call request written by hand (protocol version
// 2025-06-18, which needs no per-call headers) and returns the status and
// body.
func postCall(t *testing.T, url, token, tool, args string) (int, []byte) {
	t.Helper()
	return postRPC(t, url, token, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
}

// postRPC posts one JSON-RPC request body to url with token and returns
// the HTTP status and body.
func postRPC(t *testing.T, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestInvisibleIntentKeysRefused: an intent key with an invisible character
// is an isError invalid_request naming the character and its position,
// whether the agent passes it as the intent_key argument (of a submission
// or of find_actions) or the tool's intent template renders it from the
// arguments; nothing is submitted. On both stores.
func TestInvisibleIntentKeysRefused(t *testing.T) {
	t.Parallel()
	characters := []struct{ char, code string }{
		// Taken for printable by unicode.IsPrint until round 3.
		{"\u3164", "U+3164"}, {"\u115f", "U+115F"}, {"\u034f", "U+034F"}, {"\U000E0101", "U+E0101"},
		// Refused before as non-printable.
		{"\u200b", "U+200B"}, {"\u202e", "U+202E"}, {"\ufeff", "U+FEFF"}, {"\U000E0041", "U+E0041"},
	}
	for _, store := range []string{"postgres", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{sqlite: store == "sqlite"})
			cs := e.connect(t, e.token(t, "mailer"))
			for _, c := range characters {
				// "partner:" is 8 characters, so the character is the 9th.
				mention := "invisible character (" + c.code + ") at character 9"
				for _, tc := range []struct {
					tool string
					args map[string]any
				}{
					{"post_partner_message", map[string]any{"intent_key": "partner:" + c.char + "42", "text": "hi"}},
					{"find_actions", map[string]any{"intent_key": "partner:" + c.char + "42"}},
					// email:{customer_id}:{topic} renders "email:c-" first: 8 characters.
					{"send_customer_email", map[string]any{"customer_id": "c-" + c.char, "topic": "t", "to": "a@example.com", "subject": "s", "body": "b"}},
				} {
					r := wantRefusal(t, call(t, cs, tc.tool, tc.args), queue.CodeInvalidRequest)
					if !strings.Contains(r.Detail, mention) {
						t.Errorf("%s with %s: detail %q, want it to name %s", tc.tool, c.code, r.Detail, mention)
					}
				}
			}
			list, err := e.store.ActionList(context.Background(), queue.ActionListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 {
				t.Fatalf("%d actions stored from refused calls", len(list))
			}
		})
	}
}
