package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/queue"
)

// A change request ends get_action's wait at once (the state is final for
// the attempt), and the text tells the model to revise the payload as the
// note asks and submit again with the same intent key; that next attempt
// waits for a fresh approval.
func TestChangesRequestedThroughMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "mailer"))
	args := map[string]any{"customer_id": 7, "topic": "refund", "to": "c7@example.com", "subject": "Refund", "body": "We refund 10 EUR."}
	a := wantAction(t, call(t, cs, "send_customer_email", args), queue.StatePending)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "send_customer_email" && !strings.Contains(tl.Description, "revise the payload as the note") {
			t.Errorf("the tool's description does not say what to do after a change request: %q", tl.Description)
		}
	}
	waited := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_action", Arguments: map[string]any{"id": a.ID, "wait": "30s", "state": "pending"}})
		if err != nil {
			t.Errorf("get_action wait: %v", err)
		}
		waited <- res
	}()
	if _, err := e.svc.Decide(context.Background(), queue.DecideRequest{To: queue.StateChangesRequested, ID: a.ID, By: "user:ops@example.com", Note: "Refund 12 EUR, not 10"}); err != nil {
		t.Fatal(err)
	}
	var res *mcp.CallToolResult
	select {
	case res = <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("get_action with wait did not answer after the change request")
	}
	got := wantAction(t, res, queue.StateChangesRequested)
	if got.DecisionNote == nil || *got.DecisionNote != "Refund 12 EUR, not 10" {
		t.Fatalf("decision_note %v", got.DecisionNote)
	}
	for _, want := range []string{"Refund 12 EUR, not 10", "Revise the payload", "same intent key", "attempt 2", "fresh approval"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("text %q lacks %q", text(res), want)
		}
	}
	// Waiting on the final state answers at once.
	start := time.Now()
	wantAction(t, call(t, cs, "get_action", map[string]any{"id": a.ID, "wait": "30s"}), queue.StateChangesRequested)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a wait on changes_requested took %s", d)
	}
	args["body"] = "We refund 12 EUR."
	next := wantAction(t, call(t, cs, "send_customer_email", args), queue.StatePending)
	if next.Attempt != 2 || next.IntentKey != a.IntentKey {
		t.Fatalf("revision: attempt %d key %q", next.Attempt, next.IntentKey)
	}
}
