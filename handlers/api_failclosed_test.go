package handlers_test

import (
	"slices"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// The agent controls the payload, so it must not be able to skip a rule by
// making it fail: through the REST API on both stores, with the shipped
// tools file, a refund without the amount its large-refund rule reads is
// not claimed but waits for a person; a refund whose amount does not fit a
// double too; and with the policy tools, a rule that fails on an
// at-most-once email keeps its later approve rule and an active grant from
// approving it.
// failClosedMail has a human rule an agent can make fail before a rule
// that approves internal mail, and takes grants.
const failClosedMail = `
groups:
  support-leads: [ann@example.com, bob@example.com]
tools:
  mail:
    intent: "mail:{customer_id}:{topic}"
    approval:
      approvers: [support-leads]
      policy:
        - { name: big, when: 'payload.amount > 500', decide: human }
        - { name: internal, when: 'payload.to.endsWith("@example.com")', decide: approve }
`

func TestPolicyFailsClosedOverREST(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		name := map[bool]string{false: "postgres", true: "sqlite"}[sqlite]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{SQLite: sqlite})
			wantPerson := func(t *testing.T, body any, rule string) queue.Action {
				t.Helper()
				r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", body)
				if r.Status != 201 {
					t.Fatalf("submit: %d %s", r.Status, r.Body)
				}
				a := r.Action(t)
				if a.State != queue.StatePending || a.ClaimedAt != nil || !slices.Contains(a.Warnings, "policy_error:"+rule) {
					t.Fatalf("state %s claimed %v warnings %v, want pending for a person with policy_error:%s", a.State, a.ClaimedAt, a.Warnings, rule)
				}
				return a
			}
			wantPerson(t, map[string]any{"tool": "issue_refund", "payload": map[string]any{"order_id": "o-1", "line_id": 1, "currency": "EUR"}}, "large-refund")
			wantPerson(t, map[string]any{"tool": "issue_refund", "payload": map[string]any{"order_id": "o-2", "line_id": 1, "amount": 20}}, "no-crypto")
			wantPerson(t, `{"tool":"issue_refund","payload":{"order_id":"o-3","line_id":1,"amount":1e309,"currency":"EUR"}}`, "large-refund")
			// Text for the number is the schema's to refuse, naming the field.
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", `{"tool":"issue_refund","payload":{"order_id":"o-4","line_id":1,"amount":"5000","currency":"EUR"}}`)
			if p := r.Problem(t); r.Status != 422 || p.Code != "invalid_payload" {
				t.Fatalf("amount as text: %d %+v", r.Status, p)
			}
			// An evaluable refund is claimed at once, as before.
			if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-5", 20)); r.Status != 201 || r.Action(t).State != queue.StateInProgress {
				t.Fatalf("an evaluable small refund: %d %s", r.Status, r.Body)
			}
		})
		t.Run(name+"/grant and later approve rule", func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{SQLite: sqlite, Tools: apptest.ParseTools(t, failClosedMail, classify.Options{})})
			// A grant for customer c-7's mail from any topic, by an approver.
			apptest.AddStaff(t, e.Store, "ann@example.com", accounts.RoleApprover)
			first := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", map[string]any{"tool": "mail",
				"payload": map[string]any{"customer_id": "c-7", "topic": "a", "to": "x@customer.org", "amount": 1}})
			if first.Status != 201 || first.Action(t).State != queue.StatePending {
				t.Fatalf("first mail: %d %s", first.Status, first.Body)
			}
			if _, err := e.Service.Decide(t.Context(), queue.DecideRequest{ID: first.Action(t).ID, To: queue.StateApproved, By: apptest.Approver,
				Grant: &queue.GrantRequest{For: time.Hour, Fields: []string{"customer_id"}}}); err != nil {
				t.Fatal(err)
			}
			// The grant approves an evaluable one ...
			if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", map[string]any{"tool": "mail",
				"payload": map[string]any{"customer_id": "c-7", "topic": "b", "to": "x@customer.org", "amount": 2}}); r.Status != 201 || r.Action(t).State != queue.StateApproved {
				t.Fatalf("the grant's match: %d %s", r.Status, r.Body)
			}
			// ... but not one whose amount (read by the big rule) is text,
			// although the internal rule would approve it as well.
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", map[string]any{"tool": "mail",
				"payload": map[string]any{"customer_id": "c-7", "topic": "c", "to": "x@example.com", "amount": "lots"}})
			a := r.Action(t)
			if r.Status != 201 || a.State != queue.StatePending || a.GrantID != "" || a.DecidedBy != nil || !slices.Contains(a.Warnings, "policy_error:big") {
				t.Fatalf("a failed rule with a later approve rule and a grant: %d %s", r.Status, r.Body)
			}
		})
	}
}
