package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestGrantInBrowser drives headless Chromium: an approver opens a pending
// action, chooses "Approve and allow similar" for one hour holding the
// customer fixed (20 uses by default; the tool allows up to 100), the next submission for that customer is approved by the
// grant (its page and /grants say so, with her name), and she revokes it
// from /grants, after which the next one waits for a person again.
func TestGrantInBrowser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	d := apptest.StartDashboard(t, apptest.Options{Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
	d.AddUser("ann@example.com", accounts.RoleApprover)
	payload := func(topic string) string {
		return `{"customer_id":"c-7","topic":"` + topic + `","to":"x@customer.org","subject":"Your order","body":"It ships today."}`
	}
	first := d.Submit("send_customer_email", payload("first"), "")

	b.Step("sign in", 20*time.Second, signIn(d.URL, "ann@example.com", chromedp.WaitVisible(chromedp.CSS("#queue")))...)
	b.Step("open the action", 20*time.Second,
		chromedp.Navigate(d.URL+"/actions/"+first.ID),
		chromedp.WaitVisible(chromedp.CSS("#grant-form")),
	)
	b.Screenshot("grant-form.png")
	b.Step("approve and allow similar", 20*time.Second,
		chromedp.SetValue(chromedp.CSS("#grant-for"), "1h"),
		chromedp.Click(chromedp.CSS(`#grant-form input[name="grant_fields"][value="customer_id"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="approve-and-allow"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#action[data-state="approved"]`)),
	)
	grants, err := d.Store.GrantList(t.Context(), queue.GrantListParams{Active: new(true), Now: d.Clock.Now()})
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants after the click: %+v %v", grants, err)
	}
	g := grants[0]
	if g.ExpiresAt.Sub(g.CreatedAt) != time.Hour || len(g.Fields) != 1 || g.Fields[0].Path != "customer_id" || g.GrantedBy != "user:ann@example.com" {
		t.Fatalf("the grant: %+v", g)
	}

	next := d.Submit("send_customer_email", payload("second"), "")
	if next.State != queue.StateApproved || next.GrantID != g.ID {
		t.Fatalf("the next submission: %s %q", next.State, next.GrantID)
	}
	b.Step("its page names the grant", 20*time.Second,
		chromedp.Navigate(d.URL+"/actions/"+next.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="decided-by-grant"]`)),
	)
	if by := b.Eval(`document.querySelector('[data-testid="granted-by"]').textContent`); by != "user:ann@example.com" {
		t.Fatalf("granted by %q", by)
	}
	if txt := b.Eval(`document.querySelector('[data-testid="decided-by-grant"]').textContent`); !strings.Contains(txt, g.ID) {
		t.Fatalf("decided by %q, want the grant's id", txt)
	}
	card := `[data-grant-id="` + g.ID + `"]`
	b.Step("grants lists it with what it approved", 20*time.Second,
		chromedp.Navigate(d.URL+"/grants"),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-active] a[href="/actions/`+next.ID+`"]`)),
	)
	if uses := b.Eval(`document.querySelector('` + card + ` [data-testid="grant-uses"]').textContent`); uses != "1 of 20 (19 left)" {
		t.Fatalf("uses %q", uses)
	}
	b.Screenshot("grants.png")
	b.Step("revoke it", 20*time.Second,
		chromedp.Click(chromedp.CSS(card+` [data-testid="revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-active-grants"]`)),
		chromedp.WaitVisible(chromedp.CSS(card+`:not([data-active])`)),
	)
	if after := d.Submit("send_customer_email", payload("third"), ""); after.State != queue.StatePending {
		t.Fatalf("after revoking: %s", after.State)
	}
}
