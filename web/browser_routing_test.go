package web_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
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
	chromiumPath := findChromium()
	if chromiumPath == "" {
		if os.Getenv("CI") == "" {
			t.Skip("chromium is not installed: neither chromium nor chromium-browser is on PATH (CI installs it and runs this test)")
		}
		t.Fatal("CI must run the browser test, but neither chromium nor chromium-browser is on PATH")
	}
	d, _ := startRoutingDashboard(t)
	d.addUser("dan@example.com", accounts.RoleApprover) // not a lead
	lead := d.submitTool("send_update", "lead", "For the leads")
	open := d.submitTool("note", "open", "For anyone")
	d.submitTool("note", "dan", "Also for anyone")
	approved := d.submitTool("note", "approved", "Dan sends this one back")
	if _, err := d.svc.Approve(context.Background(), queue.DecideRequest{ID: lead.ID, By: "user:ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	// A quorum of two: the lead action stays pending after ann's approval,
	// and it never waits for dan, who is not a lead.

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browserCtx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	rows := func() int {
		t.Helper()
		ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
		defer cancel()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#queue [data-row-link]").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	row := func(a *queue.Action) chromedp.CSS { return chromedp.CSS(`[data-row-link="` + a.ID + `"]`) }

	step("sign in as dan",
		chromedp.Navigate(d.url+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), "dan@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), dashPassword),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		chromedp.WaitVisible(row(lead)),
	)
	if n := rows(); n != 4 {
		t.Fatalf("the whole queue shows %d rows, want 4", n)
	}
	// Ticking the box submits the filter form: the page navigates.
	step("tick waiting for me", chromedp.Click(chromedp.CSS(`[data-testid="filter-mine"]`)))
	step("the filtered queue", chromedp.WaitVisible(chromedp.CSS(`[data-testid="filter-mine"]:checked`)), chromedp.WaitVisible(row(open)))
	if n := rows(); n != 3 {
		t.Fatalf("waiting for dan: %d rows, want the 3 open to anyone (not the leads' action)", n)
	}
	step("request changes with the keyboard",
		chromedp.Click(row(approved)),
		chromedp.WaitVisible(chromedp.CSS("#changes-form")),
		chromedp.KeyEvent("c", func(p *input.DispatchKeyEventParams) {
			if p.Type == input.DispatchKeyEventTypeChar {
				p.Text, p.UnmodifiedText = "", ""
			}
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.activeElement && document.activeElement.id === "changes-note"`)(ctx, tg)
			return err
		}),
		chromedp.KeyEvent("Say which one"),
		chromedp.Click(chromedp.CSS(`#changes-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#action[data-state="changes_requested"]`)),
	)
	if got := d.action(approved.ID); got.State != queue.StateChangesRequested || *got.DecisionNote != "Say which one" {
		t.Fatalf("stored: %s %v", got.State, got.DecisionNote)
	}
	step("back to waiting for me",
		chromedp.Navigate(d.url+"/?mine=1"),
		chromedp.WaitVisible(row(open)),
	)
	if n := rows(); n != 2 {
		t.Fatalf("after the change request: %d rows waiting, want 2", n)
	}
}
