package handlers_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/oidctest"
	"github.com/approvals/approvals/queue"
)

// grantFrom approves a new send_customer_email action for customer in b
// with a grant of the ones like it (that customer, 1 hour) and returns the
// grant.
func grantFrom(t *testing.T, d *apptest.Dashboard, b *apptest.Browser, customer string) *queue.Grant {
	t.Helper()
	a := d.Submit("send_customer_email", mailPayload(customer, "welcome", "x@customer.org"), "")
	b.Post("/actions/"+a.ID+"/approve", url.Values{"grant_for": {"1h"}, "grant_fields": {"customer_id"}}).WantRedirect(t, "/actions/"+a.ID)
	grants, err := d.Store.GrantList(t.Context(), queue.GrantListParams{Now: d.Clock.Now(), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if g.ActionID == a.ID {
			return g
		}
	}
	t.Fatalf("no grant from action %s", a.ID)
	return nil
}

// nextLike submits the next action for customer and returns its state and
// the grant that approved it.
func nextLike(t *testing.T, d *apptest.Dashboard, customer, topic string) *queue.Action {
	t.Helper()
	return d.Submit("send_customer_email", mailPayload(customer, topic, "x@customer.org"), "")
}

// A grant ends with its granting user's right: an admin removes one
// granter and makes another a viewer on the users page; the next matching
// submissions wait for a person, and /grants says why each grant ended.
func TestGrantsEndWithTheirGranter(t *testing.T) {
	t.Parallel()
	d := policyDashboard(t)
	root := d.SignIn("root@example.com", accounts.RoleAdmin)
	annU, bobU := d.AddUser("ann@example.com", accounts.RoleApprover), d.AddUser("bob@example.com", accounts.RoleApprover)
	ann, bob := d.Login(annU.Email), d.Login(bobU.Email)
	annG, bobG := grantFrom(t, d, ann, "c-ann"), grantFrom(t, d, bob, "c-bob")
	if a := nextLike(t, d, "c-ann", "t1"); a.GrantID != annG.ID {
		t.Fatalf("before: ann's grant does not approve: %+v", a)
	}
	if a := nextLike(t, d, "c-bob", "t1"); a.GrantID != bobG.ID {
		t.Fatalf("before: bob's grant does not approve: %+v", a)
	}

	root.Post("/admin/users/"+strconv.FormatInt(bobU.ID, 10)+"/remove", nil).WantRedirect(t, "/admin/users?done=removed")
	root.Post("/admin/users/"+strconv.FormatInt(annU.ID, 10)+"/role", url.Values{"role": {"viewer"}}).WantRedirect(t, "/admin/users?done=role")
	for _, c := range []string{"c-ann", "c-bob"} {
		if a := nextLike(t, d, c, "t2"); a.State != queue.StatePending || a.GrantID != "" {
			t.Fatalf("%s after its granter lost the right: %s (grant %q)", c, a.State, a.GrantID)
		}
	}
	for _, g := range []*queue.Grant{annG, bobG} {
		got, err := d.Store.GrantGetByID(t.Context(), g.ID)
		if err != nil || got.RevokedAt == nil || *got.RevokedBy != queue.GrantSystemActor {
			t.Fatalf("grant of %s: %+v %v", g.GrantedBy, got, err)
		}
		if d.EventCount(g.ActionID, queue.EventGrantRevoked) != 1 {
			t.Fatalf("grant of %s: no grant_revoked event", g.GrantedBy)
		}
	}
	p := root.Get("/grants")
	p.WantContains(t, `data-testid="no-active-grants"`, "its granting user was removed", "its granting user is no longer an approver")
}

// An identity provider's refusal ends the grants of the person it refuses,
// in the transaction that records it; and while the provider's groups
// leave a granter out of the tool's approvers, their grant approves
// nothing (/grants says so) until they are back in.
func TestGrantsEndWithTheIdP(t *testing.T) {
	t.Parallel()
	tools := idpGroupTools + `      grants: { max: 8h }
`
	e := startSSO(t, apptest.Options{Tools: apptest.ParseTools(t, tools, classify.Options{})}, oidctest.Options{})
	e.IdP.SetGroups(ann.ID, "support", "support-leads")
	lead := e.signedIn(t, ann, accounts.RoleApprover)
	admin := e.signedIn(t, root, accounts.RoleAdmin)
	g := grantFrom(t, e.Dashboard, lead, "c-1")
	if a := nextLike(t, e.Dashboard, "c-1", "t1"); a.GrantID != g.ID {
		t.Fatalf("the lead's grant does not approve: %+v", a)
	}

	// Out of the tools file's group at the next sign-in: still an approver,
	// but not of this tool.
	e.IdP.SetGroups(ann.ID, "support")
	e.signedIn(t, ann, accounts.RoleApprover)
	if a := nextLike(t, e.Dashboard, "c-1", "t2"); a.State != queue.StatePending {
		t.Fatalf("out of the group: %s", a.State)
	}
	admin.Get("/grants").WantContains(t, `data-testid="grant-stopped"`, "approves nothing: its granting user is not among the tool&#39;s approvers")
	e.IdP.SetGroups(ann.ID, "support", "support-leads")
	e.signedIn(t, ann, accounts.RoleApprover)
	if a := nextLike(t, e.Dashboard, "c-1", "t3"); a.GrantID != g.ID {
		t.Fatalf("back in the group: %+v", a)
	}

	// Refused by the provider: the grant ends.
	e.IdP.SetGroups(ann.ID, "contractors")
	e.signIn(t, e.Anonymous(), ann).WantStatus(t, http.StatusForbidden)
	if a := nextLike(t, e.Dashboard, "c-1", "t4"); a.State != queue.StatePending {
		t.Fatalf("after the provider's refusal: %s", a.State)
	}
	got, err := e.Store.GrantGetByID(t.Context(), g.ID)
	if err != nil || got.EndReason != queue.GrantEndGranterRefused {
		t.Fatalf("after the provider's refusal: %+v %v", got, err)
	}
	p := admin.Get("/grants")
	p.WantContains(t, "the identity provider refused its granting user")
	if strings.Contains(p.Body, `data-testid="grant-stopped"`) {
		t.Fatal("an ended grant is still listed as active")
	}
	// Back in a group: the ended grant stays ended.
	e.IdP.SetGroups(ann.ID, "support", "support-leads")
	e.signedIn(t, ann, accounts.RoleApprover)
	if a := nextLike(t, e.Dashboard, "c-1", "t5"); a.State != queue.StatePending {
		t.Fatalf("an ended grant approved again: %+v", a)
	}
}
