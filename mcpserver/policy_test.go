package mcpserver_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestPolicyThroughMCP: list_tools shows each tool's rules; the text of an
// action a rule or a grant approved says it may be executed now, and of one
// a rule rejected, why; a large refund waits for a person.
func TestPolicyThroughMCP(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
	e := &env{app: a, svc: a.Service, store: a.Store, url: a.URL + "/mcp"}
	cs := e.connect(t, e.token(t, "bot"))

	listed := decode[struct{ Tools []agentapi.ToolView }](t, call(t, cs, "list_tools", nil))
	rules := map[string][]agentapi.RuleView{}
	for _, tool := range listed.Tools {
		rules[tool.Name] = tool.Policy
	}
	if r := rules["issue_refund"]; len(r) != 2 || r[0].Name != "large-refund" || r[0].Expression != "double(payload.amount) > 500.0" ||
		r[0].Decision != classify.DecideHuman || r[1].Decision != classify.DecideReject || r[1].Note != "No refunds in BTC." {
		t.Fatalf("issue_refund's rules in list_tools: %+v", r)
	}

	res := call(t, cs, "send_customer_email", map[string]any{"customer_id": "c-1", "topic": "t", "to": "a@example.com", "subject": "s", "body": "b"})
	approved := wantAction(t, res, queue.StateApproved)
	if txt := text(res); !strings.Contains(txt, `Approved at once by policy rule internal-recipient (payload.to.endsWith("@example.com"))`) ||
		!strings.Contains(txt, "may be executed now") || !strings.Contains(txt, "execute_action with id "+approved.ID) {
		t.Errorf("the text of a policy's approval: %s", txt)
	}
	res = call(t, cs, "send_customer_email", map[string]any{"customer_id": "c-1", "topic": "legal", "to": "a@customer.org", "subject": "s", "body": "b"})
	wantAction(t, res, queue.StateRejected)
	if txt := text(res); !strings.Contains(txt, "Rejected at once by policy rule legal-topics") || !strings.Contains(txt, "Legal topics go through the legal team.") {
		t.Errorf("the text of a policy's rejection: %s", txt)
	}
	res = call(t, cs, "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 900})
	large := wantAction(t, res, queue.StatePending)
	if txt := text(res); !strings.Contains(txt, "Submitted for approval") || !strings.Contains(txt, "waits for a person") {
		t.Errorf("the text of a large refund: %s", txt)
	}
	// Once a person approves, execute_action takes the claim.
	if _, err := e.svc.Decide(t.Context(), queue.DecideRequest{ID: large.ID, To: queue.StateApproved, By: "user:fin@example.com"}); err != nil {
		t.Fatal(err)
	}
	wantAction(t, call(t, cs, "execute_action", map[string]any{"id": large.ID}), queue.StateInProgress)

	// A grant's approval names the grant and the person who gave it.
	// A grant approves while its granting user may decide: they exist.
	apptest.AddStaff(t, e.store, strings.TrimPrefix(apptest.Approver, "user:"), accounts.RoleApprover)
	first := wantAction(t, call(t, cs, "send_customer_email", map[string]any{"customer_id": "c-7", "topic": "a", "to": "x@customer.org", "subject": "s", "body": "b"}), queue.StatePending)
	if _, err := e.svc.Decide(t.Context(), queue.DecideRequest{ID: first.ID, To: queue.StateApproved, By: apptest.Approver,
		Grant: &queue.GrantRequest{For: time.Hour, Fields: []string{"customer_id"}}}); err != nil {
		t.Fatal(err)
	}
	res = call(t, cs, "send_customer_email", map[string]any{"customer_id": "c-7", "topic": "b", "to": "x@customer.org", "subject": "s", "body": "b"})
	wantAction(t, res, queue.StateApproved)
	if txt := text(res); !strings.Contains(txt, "Approved at once by grant ") || !strings.Contains(txt, "given by "+apptest.Approver) || !strings.Contains(txt, "may be executed now") {
		t.Errorf("the text of a grant's approval: %s", txt)
	}
}

// Through MCP on both stores, with the shipped tools file: a refund
// without the amount its large-refund rule reads, or without the currency
// its no-crypto rule reads, is not claimed but waits for a person, and the text says so.
func TestPolicyFailsClosedThroughMCP(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "sqlite"}[sqlite], func(t *testing.T) {
			t.Parallel()
			a := apptest.Start(t, apptest.Options{SQLite: sqlite})
			e := &env{app: a, svc: a.Service, store: a.Store, url: a.URL + "/mcp"}
			cs := e.connect(t, e.token(t, "bot"))
			for rule, payload := range map[string]map[string]any{
				"large-refund": {"order_id": "o-1", "line_id": 1, "currency": "EUR"},
				"no-crypto":    {"order_id": "o-2", "line_id": 1, "amount": 20},
			} {
				res := call(t, cs, "issue_refund", payload)
				got := wantAction(t, res, queue.StatePending)
				if got.ClaimedAt != nil || !slices.Contains(got.Warnings, "policy_error:"+rule) || !strings.Contains(text(res), "waits for a person") {
					t.Fatalf("%v: claimed %v warnings %v text %s", payload, got.ClaimedAt, got.Warnings, text(res))
				}
			}
			wantAction(t, call(t, cs, "issue_refund", map[string]any{"order_id": "o-3", "line_id": 1, "amount": 20, "currency": "EUR"}), queue.StateInProgress)
		})
	}
}
