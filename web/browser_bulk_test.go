package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestBulkApproveInBrowser drives headless Chromium: an approver walks the
// queue with j, ticks three of four actions with x, approves them with one
// note, reads the outcome list, and opens the overview. Screenshots of the
// selection, the outcome and the overview go to ARTIFACTS_DIR.
func TestBulkApproveInBrowser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)

	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("ann@example.com", accounts.RoleApprover)
	var list []*queue.Action
	for i, subject := range []string{"Your order has shipped", "Your refund is on its way", "We moved your delivery", "Your invoice"} {
		list = append(list, d.SubmitEmail("bulk-browser-"+string(rune('a'+i)), subject, "Hi,\nsee above."))
	}
	// Something decided earlier, so the overview's numbers are not all zero.
	if _, err := d.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateRejected, ID: d.SubmitEmail("bulk-browser-z", "Old", "B").ID,
		By: "user:bob@example.com", Note: "duplicate"}); err != nil {
		t.Fatal(err)
	}

	b.Step("sign in", 30*time.Second, signIn(d.URL, "ann@example.com", chromedp.WaitVisible(chromedp.CSS(`#queue [data-select-row]`)), liveConnected)...)
	// j moves to the next row, x ticks it: rows 1, 2 and 4 (oldest first).
	b.Step("select three with the keyboard", 15*time.Second,
		b.Key("j"), b.Key("x"), b.Key("j"), b.Key("x"), b.Key("j"), b.Key("j"), b.Key("x"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.querySelectorAll("#queue [data-select-row]:checked").length === 3`)(ctx, tg)
			return err
		}),
	)
	// A new submission reloads the rows live; the ticks survive the swap.
	late := d.SubmitEmail("bulk-browser-late", "Arrived while selecting", "B")
	b.Step("the live reload keeps the selection", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`[data-row-link="`+late.ID+`"]`)),
	)
	if got := b.Eval(`Array.from(document.querySelectorAll("#queue [data-select-row]:checked")).map(b => b.value).join(" ")`); got !=
		list[0].ID+" "+list[1].ID+" "+list[3].ID {
		t.Fatalf("ticked after the reload: %q", got)
	}
	if got := b.Eval(`document.querySelector("[data-bulk-count]").textContent`); got != "3 selected" {
		t.Fatalf("count says %q, want 3 selected", got)
	}
	b.Screenshot("bulk-selected.png")

	b.Step("approve the selection", 15*time.Second,
		chromedp.SendKeys(chromedp.CSS("#bulk-note"), "Checked all three"),
		chromedp.Click(chromedp.CSS(`[data-testid="bulk-approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="bulk-result"]`)),
	)
	if got := b.Eval(`Array.from(document.querySelectorAll("[data-testid=bulk-row]")).map(r => r.dataset.id + "=" + r.querySelector("[data-testid=outcome]").textContent).join(" ")`); got !=
		list[0].ID+"=decided "+list[1].ID+"=decided "+list[3].ID+"=decided" {
		t.Fatalf("outcomes %q", got)
	}
	b.Screenshot("bulk-result.png")
	for i, a := range list {
		got := d.Action(a.ID)
		want := queue.StateApproved
		if i == 2 {
			want = queue.StatePending
		}
		if got.State != want || want == queue.StateApproved && (*got.DecidedBy != "user:ann@example.com" || *got.DecisionNote != "Checked all three") {
			t.Fatalf("action %d: %s, want %s", i, got.State, want)
		}
	}

	b.Step("open the overview", 15*time.Second,
		chromedp.Click(chromedp.CSS(`nav a[href="/overview"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="hourly-chart"]`)),
	)
	if got := b.Eval(`document.querySelector("[data-testid=decisions-24h]").textContent + "/" + document.querySelector("[data-testid=pending-total]").textContent`); got != "4/2" {
		t.Fatalf("overview decisions/pending = %s, want 4/2", got)
	}
	b.Screenshot("overview.png")
}
