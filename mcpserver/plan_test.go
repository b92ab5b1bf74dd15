package mcpserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestPlanThroughMCP: propose_plan, get_plan with wait, and guarded calls
// that carry the plan's id, on both stores: one decision, each step let
// through once and performed as its class says; a call that differs from
// its step is refused.
func TestPlanThroughMCP(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		name := map[bool]string{false: "postgres", true: "sqlite"}[sqlite]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := apptest.Start(t, apptest.Options{SQLite: sqlite, Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
			e := &env{app: a, svc: a.Service, store: a.Store, url: a.URL + "/mcp"}
			cs := e.connect(t, e.token(t, "bot"))

			mail := map[string]any{"customer_id": "c-1", "topic": "refund", "to": "c@customer.org", "subject": "Your refund", "body": "On its way."}
			refund := map[string]any{"order_id": "o-1", "line_id": 1, "amount": 10, "currency": "EUR"}
			steps := []any{
				map[string]any{"tool": "issue_refund", "payload": refund},
				map[string]any{"tool": "send_customer_email", "payload": mail},
			}
			dry := call(t, cs, "propose_plan", map[string]any{"title": "refund and tell", "steps": steps, "dry_run": true})
			if dry.IsError || !strings.Contains(text(dry), "Dry run") {
				t.Fatalf("dry run: %s", text(dry))
			}
			// A NUL character in a step is named by the step's number, as
			// every other fault of a step is, not by its index from 0.
			nul := []any{steps[0], map[string]any{"tool": "send_customer_email", "payload": map[string]any{"body": "x\x00"}}}
			if r := wantRefusal(t, call(t, cs, "propose_plan", map[string]any{"title": "t", "steps": nul}), queue.CodeInvalidRequest); !strings.Contains(r.Detail, "steps[2]: payload.body contains a NUL") {
				t.Fatalf("a NUL in step 2: %q, want it named steps[2]: payload.body", r.Detail)
			}
			res := call(t, cs, "propose_plan", map[string]any{"title": "refund and tell", "steps": steps})
			if res.IsError {
				t.Fatalf("propose_plan: %s", text(res))
			}
			pl := decode[queue.Plan](t, res)
			if pl.State != queue.PlanPending || len(pl.Steps) != 2 || pl.Steps[0].Decision != queue.StepNone || pl.Steps[1].Decision != queue.StepHuman || !strings.Contains(text(res), "get_plan") {
				t.Fatalf("plan %+v / %s", pl, text(res))
			}
			// Before the decision, a step is refused.
			wantRefusal(t, call(t, cs, "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 10, "currency": "EUR", "plan": pl.ID}), queue.CodePlanNotApproved)

			apptest.AddStaff(t, e.store, "ann@example.com", accounts.RoleApprover)
			if _, err := e.svc.Plans().Decide(t.Context(), queue.PlanDecideRequest{ID: pl.ID, To: queue.PlanApproved, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			got := decode[queue.Plan](t, call(t, cs, "get_plan", map[string]any{"id": pl.ID, "wait": "1s", "state": "pending"}))
			if got.State != queue.PlanApproved {
				t.Fatalf("get_plan after the approval: %s", got.State)
			}

			// One field changed: refused, naming the step and the field.
			changed := map[string]any{"plan": pl.ID}
			for k, v := range mail {
				changed[k] = v
			}
			changed["body"] = "Something else."
			r := wantRefusal(t, call(t, cs, "send_customer_email", changed), queue.CodeNotInPlan)
			if !strings.Contains(r.Detail, "step 2") || !strings.Contains(r.Detail, "/body") {
				t.Fatalf("not_in_plan detail: %s", r.Detail)
			}

			claimed := wantAction(t, call(t, cs, "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 10, "currency": "EUR", "plan": pl.ID}), queue.StateInProgress)
			mail["plan"] = pl.ID
			approved := wantAction(t, call(t, cs, "send_customer_email", mail), queue.StateApproved)
			for _, a := range []queue.Action{claimed, approved} {
				if apptest.Deref(a.DecidedBy) != "plan:"+pl.ID {
					t.Fatalf("%s decided by %v, want the plan", a.Tool, apptest.Deref(a.DecidedBy))
				}
			}
			// The payload stored is the step's, without the plan argument.
			if !queue.JSONEqual(approved.Payload, []byte(`{"customer_id":"c-1","topic":"refund","to":"c@customer.org","subject":"Your refund","body":"On its way."}`)) {
				t.Fatalf("payload %s", approved.Payload)
			}
			// A repeated call replays the stored action.
			if again := wantAction(t, call(t, cs, "send_customer_email", mail), queue.StateApproved); again.ID != approved.ID {
				t.Fatalf("replay answered %s, want %s", again.ID, approved.ID)
			}
			wantRefusal(t, call(t, cs, "get_plan", map[string]any{"id": pl.ID, "state": "bogus", "wait": "1s"}), queue.CodeInvalidRequest)
			wantRefusal(t, call(t, cs, "get_plan", map[string]any{"id": queue.NewID(time.Now())}), queue.CodeNotFound)
			got = decode[queue.Plan](t, call(t, cs, "get_plan", map[string]any{"id": pl.ID}))
			if got.Steps[0].ActionID != claimed.ID || got.Steps[1].ActionID != approved.ID || got.Steps[1].ActionState != queue.StateApproved {
				t.Fatalf("steps %+v %+v", got.Steps[0], got.Steps[1])
			}
		})
	}
}
