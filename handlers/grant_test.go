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

func policyDashboard(t *testing.T) *apptest.Dashboard {
	t.Helper()
	return apptest.StartDashboard(t, apptest.Options{Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
}

func mailPayload(customer, topic, to string) string {
	return `{"customer_id":"` + customer + `","topic":"` + topic + `","to":"` + to + `","subject":"s","body":"b"}`
}

// TestApproveAndAllowSimilar: an approver approves a pending action with a
// grant from its page; the next matching submission is approved by it and
// shows the grant and its granting user; /grants lists it with what it
// approved; another approver may not revoke it, the granting user may, and
// then it approves nothing more.
func TestApproveAndAllowSimilar(t *testing.T) {
	t.Parallel()
	d := policyDashboard(t)
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	first := d.Submit("send_customer_email", mailPayload("c-7", "welcome", "x@customer.org"), "")

	page := ann.Get("/actions/" + first.ID)
	page.WantContains(t, "Approve and allow similar", `name="grant_for"`, `<option value="8h" selected`, `value="customer_id"`, `value="to"`)
	if strings.Contains(page.Body, `<option value="24h"`) {
		t.Fatal("the form offers a grant longer than the tool's grants.max (8h)")
	}
	// Beyond the tool's limit: refused with the form, nothing decided.
	res := ann.Post("/actions/"+first.ID+"/approve", url.Values{"grant_for": {"9h"}, "grant_fields": {"customer_id"}})
	res.WantStatus(t, http.StatusBadRequest)
	res.WantContains(t, "grants.max 8h")
	if a := d.Action(first.ID); a.State != queue.StatePending {
		t.Fatalf("after a refused grant: %s", a.State)
	}
	res = ann.Post("/actions/"+first.ID+"/approve", url.Values{"grant_for": {"2h"}, "grant_uses": {"5"}, "grant_agent": {"this"},
		"grant_fields": {"customer_id"}, "note": {"fine for c-7"}})
	res.WantRedirect(t, "/actions/"+first.ID)
	if a := d.Action(first.ID); a.State != queue.StateApproved {
		t.Fatalf("the granting action: %s", a.State)
	}
	grants, err := d.Store.GrantList(t.Context(), queue.GrantListParams{Now: d.Clock.Now()})
	if err != nil || len(grants) != 1 || grants[0].MaxUses != 5 || grants[0].GrantedBy != "user:ann@example.com" {
		t.Fatalf("grants: %+v %v", grants, err)
	}
	g := grants[0]

	next := d.Submit("send_customer_email", mailPayload("c-7", "follow-up", "x@customer.org"), "")
	if next.State != queue.StateApproved || next.GrantID != g.ID {
		t.Fatalf("the next submission: %+v", next)
	}
	ann.Get("/actions/"+next.ID).WantContains(t, `data-testid="decided-by-grant"`, "grant "+g.ID, `data-testid="granted-by">user:ann@example.com<`)

	list := ann.Get("/grants")
	list.WantContains(t, `data-grant-id="`+g.ID+`" data-active`, "customer_id = &#34;c-7&#34;", "1 of 5 (4 left)", "/actions/"+next.ID, "from agent:bot")

	bob := d.SignIn("bob@example.com", accounts.RoleApprover)
	if strings.Contains(bob.Get("/grants").Body, `data-testid="revoke"`) {
		t.Fatal("another approver is offered Revoke")
	}
	bob.Post("/grants/"+g.ID+"/revoke", nil).WantStatus(t, http.StatusForbidden)
	viewer := d.SignIn("val@example.com", accounts.RoleViewer)
	viewer.Get("/grants").WantStatus(t, http.StatusOK)
	viewer.Post("/grants/"+g.ID+"/revoke", nil).WantStatus(t, http.StatusForbidden)

	ann.Post("/grants/"+g.ID+"/revoke", nil).WantRedirect(t, "/grants#grant-"+g.ID)
	ann.Get("/grants").WantContains(t, "revoked by user:ann@example.com", `data-testid="no-active-grants"`)
	ann.Post("/grants/"+g.ID+"/revoke", nil).WantStatus(t, http.StatusConflict)
	if after := d.Submit("send_customer_email", mailPayload("c-7", "after", "x@customer.org"), ""); after.State != queue.StatePending {
		t.Fatalf("after revocation: %s", after.State)
	}
	// Operators revoke any grant.
	second := d.Submit("send_customer_email", mailPayload("c-8", "welcome", "x@customer.org"), "")
	ann.Post("/actions/"+second.ID+"/approve", url.Values{"grant_for": {"1h"}, "grant_agent": {"any"}}).WantRedirect(t, "/actions/"+second.ID)
	grants, _ = d.Store.GrantList(t.Context(), queue.GrantListParams{Active: new(true), Now: d.Clock.Now()})
	if len(grants) != 1 || grants[0].Agent != "" || len(grants[0].Fields) != 0 {
		t.Fatalf("a grant of any agent and payload: %+v", grants)
	}
	ops := d.SignIn("oz@example.com", accounts.RoleOps)
	ops.Post("/grants/"+grants[0].ID+"/revoke", nil).WantRedirect(t, "/grants#grant-"+grants[0].ID)
}

// TestGrantsNotOffered: no "Approve and allow similar" where the tool takes
// no grants, or needs two approvals; a crafted request is refused and
// changes nothing.
func TestGrantsNotOffered(t *testing.T) {
	t.Parallel()
	d := policyDashboard(t)
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	for _, a := range []*queue.Action{
		d.Submit("post_update", `{"topic":"t"}`, ""),
		d.Submit("quorum_mail", `{"id":"q"}`, ""),
		d.Submit("send_customer_email", mailPayload("vip-1", "t", "v@customer.org"), ""),
		// What no person saw, no grant approves: an action with a warning,
		// a tool the tools file does not name.
		d.Submit("send_customer_email", `{"customer_id":"c-w","topic":"t","to":"x@customer.org","subject":"s","body":"pay \u202eto\u202c"}`, ""),
		d.Submit("not_in_the_file", `{"x":1}`, "unregistered:1"),
	} {
		if strings.Contains(ann.Get("/actions/"+a.ID).Body, "Approve and allow similar") {
			t.Errorf("%s offers a grant", a.Tool)
		}
		res := ann.Post("/actions/"+a.ID+"/approve", url.Values{"grant_for": {"1h"}})
		if res.Status != http.StatusBadRequest {
			t.Errorf("%s: a crafted grant: %d", a.Tool, res.Status)
		}
		if got := d.Action(a.ID); got.State != queue.StatePending || len(got.Approvals) != 0 {
			t.Errorf("%s: after a refused grant: %s, %d approvals", a.Tool, got.State, len(got.Approvals))
		}
	}
	a := d.Submit("send_customer_email", mailPayload("c-1", "t", "x@customer.org"), "")
	// Offered, its default carries a use limit.
	ann.Get("/actions/"+a.ID).WantContains(t, "Approve and allow similar", `name="grant_uses" min="1" max="100" value="20"`, "(up to 100; empty: 20)")
	for _, bad := range []url.Values{{"grant_for": {"soon"}}, {"grant_for": {"1h"}, "grant_uses": {"0"}}, {"grant_for": {"1h"}, "grant_agent": {"all"}}} {
		if res := ann.Post("/actions/"+a.ID+"/approve", bad); res.Status != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", bad, res.Status)
		}
	}
	if got := d.Action(a.ID); got.State != queue.StatePending {
		t.Fatalf("after bad grant forms: %s", got.State)
	}
}

// TestPolicyOnTheActionAndToolsPages: an action a rule approved says so
// with the expression, one a human rule sent to a person says why, and the
// tools page shows each rule with its hits.
func TestPolicyOnTheActionAndToolsPages(t *testing.T) {
	t.Parallel()
	d := policyDashboard(t)
	viewer := d.SignIn("val@example.com", accounts.RoleViewer)
	approved := d.Submit("send_customer_email", mailPayload("c-1", "t", "a@example.com"), "")
	viewer.Get("/actions/"+approved.ID).WantContains(t, "Approved by policy", `data-testid="policy-rule">internal-recipient<`,
		`data-testid="policy-expression">payload.to.endsWith(&#34;@example.com&#34;)<`)
	rejected := d.Submit("send_customer_email", mailPayload("c-1", "legal", "a@customer.org"), "")
	viewer.Get("/actions/"+rejected.ID).WantContains(t, "Rejected by policy", "legal-topics", "Legal topics go through the legal team.")
	vip := d.Submit("send_customer_email", mailPayload("vip-1", "t", "v@customer.org"), "")
	viewer.Get("/actions/"+vip.ID).WantContains(t, `data-testid="policy-human"`, "vip-two-people", "0 of 2 approvals")
	failed := d.Submit("send_customer_email", `{"customer_id":"c-2","topic":"t"}`, "")
	viewer.Get("/actions/"+failed.ID).WantContains(t, "policy rule internal-recipient failed")

	tools := viewer.Get("/tools")
	tools.WantContains(t, `data-testid="policy-send_customer_email"`, `data-rule="internal-recipient"`, "Legal topics go through the legal team.",
		"allowed, for up to 8h and 100 actions each (20 unless the approver chooses")
	for rule, want := range map[string]string{"internal-recipient": "1", "legal-topics": "1", "vip-two-people": "1"} {
		i := strings.Index(tools.Body, `data-rule="`+rule+`"`)
		row := tools.Body[i : i+strings.Index(tools.Body[i:], "</tr>")]
		if !strings.Contains(row, `data-testid="hits-day">`+want+`<`) || !strings.Contains(row, `data-testid="hits-week">`+want+`<`) {
			t.Errorf("rule %s: hits row %s, want %s in 24 h and 7 days", rule, row, want)
		}
	}
}
