package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// TestIntentUnderReviewThroughMCP: a late complete after a fail opened a
// conflict ticket on the intent's latest attempt; calling the guarded tool
// again for the intent is an isError result with intent_under_review, the
// attempt and its ticket, and advice not to do it another way. Nothing is
// claimed until the ticket is resolved.
func TestIntentUnderReviewThroughMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	cs := e.connect(t, e.token(t, "owner"))
	args := map[string]any{"order_id": "o-review", "line_id": "l-1", "amount": 3}

	first := wantAction(t, call(t, cs, "issue_refund", args), queue.StateInProgress)
	wantAction(t, call(t, cs, "fail_action", map[string]any{"id": first.ID, "error": "timed out, declined"}), queue.StateFailed)
	late := wantRefusal(t, call(t, cs, "complete_action", map[string]any{"id": first.ID, "result": map[string]any{"refund": "re_1"}}), queue.CodeOutcomeConflict)
	if late.Action == nil || late.Action.Ticket == nil || late.Action.Ticket.Kind != queue.TicketConflict {
		t.Fatalf("late complete: %+v, want the action with its conflict ticket", late)
	}
	ticket := late.Action.Ticket.ID

	res := call(t, cs, "issue_refund", args)
	r := wantRefusal(t, res, queue.CodeIntentUnderReview)
	if r.Action == nil || r.Action.ID != first.ID || r.Action.Ticket == nil || r.Action.Ticket.ID != ticket {
		t.Fatalf("refusal %+v, want action %s with its ticket %s", r, first.ID, ticket)
	}
	for _, want := range []string{ticket, first.ID, "this call did nothing", "do not call again for this intent until the ticket is resolved", "Do not perform issue_refund another way", "find_actions", first.IntentKey,
		problem.Guidance(queue.CodeIntentUnderReview, problem.FaceMCP)} {
		if !strings.Contains(text(res), want) {
			t.Errorf("the refusal's text lacks %q: %s", want, text(res))
		}
	}
	list, err := e.store.ActionList(t.Context(), queue.ActionListParams{IntentKey: first.IntentKey, Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("actions of the intent under review: %v %d, want only the first", err, len(list))
	}

	if _, _, err := e.svc.Tickets().Resolve(t.Context(), queue.ResolveRequest{TicketID: ticket, By: "user:ops@example.com",
		Outcome: queue.StateFailed, Note: "no refund in the provider"}); err != nil {
		t.Fatal(err)
	}
	next := wantAction(t, call(t, cs, "issue_refund", args), queue.StateInProgress)
	if next.Attempt != 2 {
		t.Fatalf("after the resolution: attempt %d, want 2", next.Attempt)
	}
}
