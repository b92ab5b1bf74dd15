package handlers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// TestConflictHoldsIntentAcrossServers: an operator resolved a stale claim
// failed, and the agent's late complete through one server opened a
// conflict ticket. A new submission of the intent through another server
// on the same database (its own pool, batcher and holder hint, which saw
// the intent held) is refused with 409 intent_under_review naming the
// ticket, and nothing is stored, until the ticket is resolved.
func TestConflictHoldsIntentAcrossServers(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{Clock: testclock.Frozen()})
	other := e.App.AddServer(t, nil)
	body := apptest.RefundBody("o-review", 12)
	first := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", body)
	if first.Status != 201 {
		t.Fatalf("claim: %d %s", first.Status, first.Body)
	}
	a := first.Action(t)
	if r := e.Do(other.URL, e.AgentToken, "POST", "/api/v1/actions", body); r.Status != 409 || r.Problem(t).Code != queue.CodeInProgress {
		t.Fatalf("mid-flight through the other server: %d %s", r.Status, r.Body)
	}

	// The claim goes stale; an operator finds it failed.
	e.Advance(3 * time.Minute)
	if _, err := e.App.Sweeper.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	stale, err := e.Store.ActionGetByID(t.Context(), a.ID)
	if err != nil || stale.Ticket == nil || stale.Ticket.Kind != queue.TicketStale {
		t.Fatalf("stale ticket: %v %+v", err, stale)
	}
	if _, _, err := e.App.Service.Tickets().Resolve(t.Context(), queue.ResolveRequest{TicketID: stale.Ticket.ID,
		By: "user:ops@example.com", Outcome: queue.StateFailed, Note: "no refund in the provider"}); err != nil {
		t.Fatal(err)
	}
	// The agent's late complete contradicts it.
	late := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/complete", `{"result":{"id":"re_late"}}`)
	lp := late.Problem(t)
	if late.Status != 409 || lp.Code != queue.CodeOutcomeConflict || lp.Action.Ticket == nil || lp.Action.Ticket.Kind != queue.TicketConflict {
		t.Fatalf("late complete: %d %s", late.Status, late.Body)
	}
	ticket := lp.Action.Ticket.ID

	for _, base := range []string{other.URL, e.URL, other.URL} {
		r := e.Do(base, e.AgentToken, "POST", "/api/v1/actions", body)
		p := r.Problem(t)
		if r.Status != 409 || p.Code != queue.CodeIntentUnderReview {
			t.Fatalf("submission while the conflict is open: %d %s", r.Status, r.Body)
		}
		if p.Action == nil || p.Action.ID != a.ID || p.Action.Ticket == nil || p.Action.Ticket.ID != ticket || p.Action.Ticket.State != queue.TicketOpen {
			t.Fatalf("the refusal names %+v, want action %s with its open ticket %s", p.Action, a.ID, ticket)
		}
		if !strings.Contains(p.Detail, ticket) || !strings.Contains(p.Detail, a.ID) {
			t.Fatalf("detail %q: must name the ticket and the action", p.Detail)
		}
		if p.Guidance != problem.Guidance(queue.CodeIntentUnderReview, problem.FaceREST) || !strings.Contains(p.Guidance, "do not call again for this intent") {
			t.Fatalf("guidance %q: must say not to call again, in the words of MCP and the SDKs", p.Guidance)
		}
	}
	// A dry run says so, naming the attempt under review.
	dry := e.Do(other.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", body)
	var dr struct {
		Outcome string       `json:"outcome"`
		Action  queue.Action `json:"action"`
	}
	if err := json.Unmarshal(dry.Body, &dr); err != nil || dry.Status != 200 || dr.Outcome != queue.DryRunUnderReview || dr.Action.ID != a.ID {
		t.Fatalf("dry run while the conflict is open: %d %s", dry.Status, dry.Body)
	}
	list, err := e.Store.ActionList(t.Context(), queue.ActionListParams{IntentKey: a.IntentKey, Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("actions of the intent under review: %v %d, want only the first", err, len(list))
	}

	// Resolved, the intent takes a new attempt again.
	if _, _, err := e.App.Service.Tickets().Resolve(t.Context(), queue.ResolveRequest{TicketID: ticket,
		By: "user:ops@example.com", Outcome: queue.StateFailed, Note: "the late report was a retry of a declined call"}); err != nil {
		t.Fatal(err)
	}
	next := e.Do(other.URL, e.AgentToken, "POST", "/api/v1/actions", body)
	if next.Status != 201 || next.Action(t).Attempt != 2 {
		t.Fatalf("after the resolution: %d %s", next.Status, next.Body)
	}
}
