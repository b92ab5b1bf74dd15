package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// planPage is what the plan page shows: its state, each step's progress,
// payload and ticket, and where its decision buttons are.
type planPage struct {
	State       string   `json:"state"`
	Progress    []string `json:"progress"`
	Payloads    []string `json:"payloads"`
	Tickets     []string `json:"tickets"`
	ScrollWidth float64  `json:"scrollWidth"`
	ClientWidth float64  `json:"clientWidth"`
	// Unreachable are decide buttons that, scrolled into view, are not
	// wholly inside the viewport, are too small to tap (under 44 px tall
	// on the phone), or are covered by another element at their centre.
	Unreachable []string `json:"unreachable"`
	Buttons     int      `json:"buttons"`
}

const measurePlan = `(() => {
  const text = el => el ? el.innerText.trim() : "";
  const steps = Array.from(document.querySelectorAll("[data-testid=plan-step]"));
  const out = {state: text(document.querySelector("[data-testid=plan-state]")),
    progress: steps.map(s => text(s.querySelector("[data-testid=step-progress]"))),
    payloads: steps.map(s => text(s.querySelector("[data-testid=step-payload]"))),
    tickets: steps.map(s => text(s.querySelector("[data-testid=step-ticket]"))),
    scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    unreachable: [], buttons: 0};
  for (const id of ["plan-approve", "plan-reject", "plan-request-changes"]) {
    const b = document.querySelector("[data-testid=" + id + "]");
    if (!b) continue;
    out.buttons++;
    b.scrollIntoView({block: "center", inline: "nearest"});
    const r = b.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (r.left < 0 || r.right > window.innerWidth || r.height < MIN_HEIGHT || !(hit === b || b.contains(hit))) {
      out.unreachable.push(id + " at " + Math.round(r.left) + ".." + Math.round(r.right) + " x " + Math.round(r.height) + "px");
    }
  }
  window.scrollTo(0, 0);
  return out;
})()`

// TestPlanPageInBrowser drives the plan page in headless Chromium at 1280
// px and at a phone's 390 px: a pending plan of three steps shows every
// step's payload whole and the decide buttons, reachable on the phone
// with nothing wider than the screen; one approval by a staff user
// decides it; the page then shows each step's progress as its action
// moves (not submitted, approved, in progress, a stale claim's ticket,
// done, failed). Screenshots go to ARTIFACTS_DIR as plan-<stage>-<width>.png.
func TestPlanPageInBrowser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	d := apptest.StartDashboard(t, apptest.Options{})
	ctx := context.Background()
	d.AddUser("ann@example.com", accounts.RoleApprover)

	refund := `{"order_id":"o-1042","line_id":1,"amount":25,"currency":"EUR"}`
	email := `{"customer_id":"c-7","topic":"refund-1042","to":"ann@customer.org","subject":"Your refund for order 1042",` +
		`"body":"We refunded line 1 of order 1042: ` + strings.Repeat("twenty-five euros, ", 6) + `https://shop.example.com/orders/1042/refunds/line-1?utm_source=approvals-plan-page-test"}`
	note := `{"channel":"status","slug":"order-1042-refunded-and-customer-told-about-it-by-email","text":"Refunded line 1 of order 1042."}`
	res, err := d.Service.Plans().Propose(ctx, queue.PlanRequest{Title: "Refund order 1042 line 1 and tell the customer", Agent: "bot", Channel: "api",
		Steps: []queue.PlanStepRequest{{Tool: "issue_refund", Payload: json.RawMessage(refund)},
			{Tool: "send_customer_email", Payload: json.RawMessage(email)}, {Tool: "post_public_update", Payload: json.RawMessage(note)}}})
	if err != nil || res.Plan.State != queue.PlanPending {
		t.Fatalf("propose: %v (%+v)", err, res.Plan)
	}
	pl := res.Plan
	url := d.URL + "/plans/" + pl.ID

	phone := chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch)
	desktop := chromedp.EmulateViewport(1280, 900)
	// at measures the page at both widths and checks that nothing is
	// wider than the window; it answers the page as the phone sees it.
	at := func(stage string) planPage {
		t.Helper()
		var pages [2]planPage
		for i, w := range []struct {
			px, minHeight string
			size          chromedp.Action[chromedp.Void]
		}{{"1280", "24", desktop}, {"390", "44", phone}} {
			b.Step(stage+" at "+w.px, 30*time.Second, w.size, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("[data-testid=plan-state]")))
			p := evaluate[planPage](b, strings.Replace(measurePlan, "MIN_HEIGHT", w.minHeight, 1))
			if p.ScrollWidth > p.ClientWidth {
				t.Errorf("%s at %s px: the page is %v px wide in %v px", stage, w.px, p.ScrollWidth, p.ClientWidth)
			}
			if len(p.Unreachable) > 0 {
				t.Errorf("%s at %s px: decide buttons out of reach: %s", stage, w.px, strings.Join(p.Unreachable, "; "))
			}
			b.Screenshot("plan-" + stage + "-" + w.px + ".png")
			pages[i] = p
		}
		if strings.Join(pages[0].Progress, "|") != strings.Join(pages[1].Progress, "|") || pages[0].State != pages[1].State {
			t.Errorf("%s: the widths disagree: %+v / %+v", stage, pages[0], pages[1])
		}
		return pages[1]
	}
	progress := func(stage string, p planPage, state string, want ...string) {
		t.Helper()
		if p.State != state || strings.Join(p.Progress, "|") != strings.Join(want, "|") {
			t.Fatalf("%s: plan %q, steps %q; want %q, %q", stage, p.State, p.Progress, state, want)
		}
	}

	b.Step("sign in", 30*time.Second, signIn(d.URL, "ann@example.com", chromedp.WaitVisible(chromedp.CSS("#queue")))...)
	p := at("pending")
	progress("pending", p, "pending", "not submitted", "not submitted", "not submitted")
	if p.Buttons != 3 {
		t.Fatalf("pending: %d decide buttons, want approve, reject and request changes", p.Buttons)
	}
	for i, want := range []string{`"order_id": "o-1042"`, "utm_source=approvals-plan-page-test", "order-1042-refunded-and-customer-told-about-it-by-email"} {
		if !strings.Contains(p.Payloads[i], want) {
			t.Fatalf("step %d shows %q, which lacks %q", i+1, p.Payloads[i], want)
		}
	}

	// One approval, on the phone.
	b.Step("approve", 30*time.Second, phone, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("[data-testid=plan-approve]")),
		chromedp.ScrollIntoView(chromedp.CSS("[data-testid=plan-approve]")), chromedp.Click(chromedp.CSS("[data-testid=plan-approve]")),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=plan-decided-by]")))
	p = at("approved")
	progress("approved", p, "approved", "not submitted", "not submitted", "not submitted")
	if p.Buttons != 0 {
		t.Fatalf("approved: %d decide buttons still shown", p.Buttons)
	}

	submit := func(tool, payload string) *queue.Action {
		t.Helper()
		r, err := d.Service.Submit(ctx, queue.SubmitRequest{Tool: tool, Payload: json.RawMessage(payload), Agent: "bot", Plan: pl.ID})
		if err != nil {
			t.Fatalf("submit %s under the plan: %v", tool, err)
		}
		return r.Action
	}
	claim := submit("issue_refund", refund)
	submit("send_customer_email", email)
	progress("submitted", at("submitted"), "approved", "in progress", "approved", "not submitted")

	// The refund's claim outlives its claim_timeout (2m): the sweep opens
	// a stale ticket, which the step shows.
	d.Advance(3 * time.Minute)
	for i := 0; ; i++ {
		sw, err := d.Sweeper.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(sw.Tickets) == 1 {
			break
		}
		if i == 100 {
			t.Fatal("no stale ticket was opened for the refund")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p = at("stale")
	progress("stale", p, "approved", "in progress", "approved", "not submitted")
	if p.Tickets[0] != "stale claim, open" || p.Tickets[1] != "" {
		t.Fatalf("stale: tickets %q", p.Tickets)
	}

	// The late report finishes the refund (and its ticket); the note
	// is executed and fails.
	if _, err := d.Service.Complete(ctx, claim.ID, "bot", json.RawMessage(`{"refund_id":"re_1"}`), "api"); err != nil {
		t.Fatal(err)
	}
	posted := submit("post_public_update", note)
	if _, err := d.Service.Execute(ctx, posted.ID, "bot", "api"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Service.Fail(ctx, posted.ID, "bot", "the channel refused the post", "api"); err != nil {
		t.Fatal(err)
	}
	p = at("finished")
	progress("finished", p, "approved", "done", "approved", "failed")
	if p.Tickets[0] != "stale claim, resolved" {
		t.Fatalf("finished: the refund's ticket reads %q", p.Tickets[0])
	}
}
