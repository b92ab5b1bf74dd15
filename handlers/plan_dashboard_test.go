package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestPlanOnDashboard: a pending plan is one item of the queue; its page
// shows every step; approve, reject and request changes are forms with
// CSRF that decide once, refuse who may not decide, and want a note to
// reject.
func TestPlanOnDashboard(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "sqlite"}[sqlite], func(t *testing.T) {
			t.Parallel()
			d := apptest.StartDashboard(t, apptest.Options{SQLite: sqlite, Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
			propose := func(customer string) *queue.Plan {
				t.Helper()
				res, err := d.Service.Plans().Propose(t.Context(), queue.PlanRequest{Title: "Refund " + customer + " <b>now</b>", Agent: "bot", Channel: "api",
					Steps: []queue.PlanStepRequest{
						{Tool: "issue_refund", Payload: []byte(`{"order_id":"` + customer + `","line_id":1,"amount":10,"currency":"EUR"}`)},
						{Tool: "send_customer_email", Payload: []byte(`{"customer_id":"` + customer + `","topic":"refund","to":"c@customer.org","subject":"Refunded","body":"Done."}`)},
					}})
				if err != nil {
					t.Fatal(err)
				}
				return res.Plan
			}
			pl := propose("c-1")
			ann := d.SignIn("ann@example.com", accounts.RoleApprover)
			page := ann.Get("/")
			page.WantStatus(t, http.StatusOK)
			page.WantContains(t, `data-testid="pending-plan"`, "/plans/"+pl.ID, "Refund c-1 &lt;b&gt;now&lt;/b&gt;")

			page = ann.Get("/plans/" + pl.ID)
			page.WantStatus(t, http.StatusOK)
			page.WantContains(t, `data-testid="plan-step"`, "refund:c-1:1", "email:c-1:refund", "a person decides", "needs nobody",
				"not submitted", `data-testid="plan-approve"`, `name="_csrf"`)

			// Without the CSRF token nothing changes.
			ann.Post("/plans/"+pl.ID+"/approve", url.Values{"_csrf": {"wrong"}}).WantStatus(t, http.StatusForbidden)
			// Someone outside support-leads may not decide the email step.
			cy := d.SignIn("cy@example.com", accounts.RoleApprover)
			if strings.Contains(cy.Get("/plans/"+pl.ID).Body, `data-testid="plan-approve"`) {
				t.Fatal("the approve form is shown to someone who may not decide every step")
			}
			cy.Post("/plans/"+pl.ID+"/approve", nil).WantStatus(t, http.StatusForbidden)
			// A viewer's role decides nothing.
			d.SignIn("vi@example.com", accounts.RoleViewer).Post("/plans/"+pl.ID+"/approve", nil).WantStatus(t, http.StatusForbidden)
			// Reject without a reason: the page again, 400, nothing decided.
			res := ann.Post("/plans/"+pl.ID+"/reject", url.Values{"note": {" "}})
			res.WantStatus(t, http.StatusBadRequest)
			res.WantContains(t, "note is required")
			if got, _ := d.Service.Plans().Get(t.Context(), pl.ID); got.State != queue.PlanPending {
				t.Fatalf("a refused rejection decided the plan: %s", got.State)
			}

			ann.Post("/plans/"+pl.ID+"/approve", url.Values{"note": {"fine"}}).WantRedirect(t, "/plans/"+pl.ID)
			got, _ := d.Service.Plans().Get(t.Context(), pl.ID)
			if got.State != queue.PlanApproved || len(got.Approvals) != 1 || got.Approvals[0].Note != "fine" {
				t.Fatalf("after the approval: %+v", got)
			}
			// The same person again: the same answer; another decision: 409.
			ann.Post("/plans/"+pl.ID+"/approve", nil).WantRedirect(t, "/plans/"+pl.ID)
			bob := d.SignIn("bob@example.com", accounts.RoleApprover)
			bob.Post("/plans/"+pl.ID+"/reject", url.Values{"note": {"no"}}).WantStatus(t, http.StatusConflict)
			if strings.Contains(ann.Get("/").Body, "/plans/"+pl.ID) {
				t.Fatal("a decided plan is still in the queue")
			}

			other := propose("c-2")
			bob.Post("/plans/"+other.ID+"/request_changes", url.Values{"note": {"say which line"}}).WantRedirect(t, "/plans/"+other.ID)
			page = bob.Get("/plans/" + other.ID)
			page.WantContains(t, "changes_requested", "say which line")
			if strings.Contains(page.Body, `data-testid="plan-approve"`) {
				t.Fatal("a decided plan still offers its forms")
			}
			evs, err := d.Store.EventList(t.Context(), queue.EventListParams{Kind: queue.EventPlanChanges, Limit: 5})
			if err != nil || len(evs) != 1 || evs[0].Actor != "user:bob@example.com" || evs[0].Subject != "plan:"+other.ID {
				t.Fatalf("the decision's event: %+v %v", evs, err)
			}
			ann.Get("/plans/"+queue.NewID(d.Now())).WantStatus(t, http.StatusNotFound)
		})
	}
}

// TestPlanPageMarksInvisibleCharacters: the plan page, where a person
// approves every step, marks where a step's payload holds invisible
// characters, as the action page does: what an approver reads must be
// what is sent.
func TestPlanPageMarksInvisibleCharacters(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{SQLite: true, Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
	res, err := d.Service.Plans().Propose(t.Context(), queue.PlanRequest{Title: "hidden", Agent: "bot", Channel: "api",
		Steps: []queue.PlanStepRequest{{Tool: "send_customer_email",
			Payload: []byte(`{"customer_id":"c-1","topic":"refund","to":"c@customer.org","subject":"Refunded","body":"pay \u202eevil\u202c to acct"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	page := d.SignIn("ann@example.com", accounts.RoleApprover).Get("/plans/" + res.Plan.ID)
	page.WantStatus(t, http.StatusOK)
	page.WantContains(t, `data-testid="invisible"`, "[U+202E]", "[U+202C]")
	if strings.Contains(page.Body, "\u202e") {
		t.Fatal("the plan page shows a step's bidirectional control as is")
	}
}
