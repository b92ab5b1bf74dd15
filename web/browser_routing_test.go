package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// TestWaitingForMeInBrowser drives headless Chromium: an approver outside
// the leads ticks "Waiting for me" and the queue keeps only what he may
// decide; then he requests changes from the keyboard (c focuses the note)
// and the action leaves his list.
func TestWaitingForMeInBrowser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	d, _ := startRoutingDashboard(t)
	d.AddUser("dan@example.com", accounts.RoleApprover) // not a lead
	lead := submitTool(d, "send_update", "lead", "For the leads")
	open := submitTool(d, "note", "open", "For anyone")
	submitTool(d, "note", "dan", "Also for anyone")
	approved := submitTool(d, "note", "approved", "Dan sends this one back")
	if _, err := d.Service.Decide(context.Background(), queue.DecideRequest{To: queue.StateApproved, ID: lead.ID, By: "user:ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	// A quorum of two: the lead action stays pending after ann's approval,
	// and it never waits for dan, who is not a lead.

	rows := func() int {
		t.Helper()
		return evaluate[int](b, `document.querySelectorAll("#queue [data-row-link]").length`)
	}
	row := func(a *queue.Action) chromedp.CSS { return chromedp.CSS(`[data-row-link="` + a.ID + `"]`) }

	b.Step("sign in as dan", 20*time.Second, signIn(d.URL, "dan@example.com", chromedp.WaitVisible(row(lead)))...)
	if n := rows(); n != 4 {
		t.Fatalf("the whole queue shows %d rows, want 4", n)
	}
	// Ticking the box submits the filter form: the page navigates. The box
	// shows ticked on the old page at once, so the filtered page is known
	// by what it leaves out (else the old page's four rows may be counted).
	b.Step("tick waiting for me", 20*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="filter-mine"]`)))
	b.Step("the filtered queue", 20*time.Second, chromedp.WaitNotPresent(row(lead)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="filter-mine"]:checked`)), chromedp.WaitVisible(row(open)))
	if n := rows(); n != 3 {
		t.Fatalf("waiting for dan: %d rows, want the 3 open to anyone (not the leads' action)", n)
	}
	b.Step("request changes with the keyboard", 20*time.Second,
		chromedp.Click(row(approved)),
		chromedp.WaitVisible(chromedp.CSS("#changes-form")),
		b.Key("c"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.activeElement && document.activeElement.id === "changes-note"`)(ctx, tg)
			return err
		}),
		chromedp.KeyEvent("Say which one"),
		chromedp.Click(chromedp.CSS(`#changes-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#action[data-state="changes_requested"]`)),
	)
	if got := d.Action(approved.ID); got.State != queue.StateChangesRequested || *got.DecisionNote != "Say which one" {
		t.Fatalf("stored: %s %v", got.State, got.DecisionNote)
	}
	b.Step("back to waiting for me", 20*time.Second,
		chromedp.Navigate(d.URL+"/?mine=1"),
		chromedp.WaitVisible(row(open)),
	)
	if n := rows(); n != 2 {
		t.Fatalf("after the change request: %d rows waiting, want 2", n)
	}
}
