package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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

// TestWaitPastTheWaiterCapRefused: a get_action wait of an agent already
// holding its 100 waiters is an isError too_many_waiters; a read without
// wait still answers.
func TestWaitPastTheWaiterCapRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "poller"))
	a := wantAction(t, call(t, cs, "send_customer_email", map[string]any{"customer_id": "c1", "topic": "t",
		"to": "c@example.com", "subject": "s", "body": "b"}), queue.StatePending)
	perHolder := queue.WaiterLimits{}.WithDefaults().PerHolder
	for range perHolder {
		release, err := e.svc.AcquireWaiter("agent:poller")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	wantRefusal(t, call(t, cs, "get_action", map[string]any{"id": a.ID, "wait": "1s"}), queue.CodeTooManyWaiters)
	wantAction(t, call(t, cs, "get_action", map[string]any{"id": a.ID}), queue.StatePending)
}
