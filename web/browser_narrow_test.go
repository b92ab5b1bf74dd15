package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// narrowLayout is what one page looks like at the current viewport.
type narrowLayout struct {
	InnerWidth  float64 `json:"innerWidth"`
	ScrollWidth float64 `json:"scrollWidth"`
	// SticksOut are visible elements reaching past the right edge of the
	// viewport outside any clipping box: what makes the page scroll.
	SticksOut []string `json:"sticksOut"`
	// ScrollsSideways are boxes other than pre and textarea whose content
	// is wider than they are: a table that scrolls inside its card does
	// not read at this width either.
	ScrollsSideways []string `json:"scrollsSideways"`
	// Small are tap targets (buttons, submit inputs, links styled as
	// buttons, form fields, summaries) less than 44 px tall, and
	// checkboxes and radio buttons whose hit area (the box with its
	// labels) is less than 44 px tall or wide.
	Small []string `json:"small"`
	// Targets counts the tap targets measured.
	Targets int `json:"targets"`
}

// measureLayout is the JavaScript that fills a narrowLayout.
const measureLayout = `(() => {
  const vw = window.innerWidth;
  const shown = el => {
    if (el.closest(".visually-hidden")) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden";
  };
  const describe = el => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += "#" + el.id;
    if (typeof el.className === "string" && el.className.trim()) s += "." + el.className.trim().split(/\s+/).join(".");
    const text = (el.getAttribute("aria-label") || el.textContent || el.value || "").trim().replace(/\s+/g, " ");
    return s + (text ? ' "' + text.slice(0, 50) + '"' : "");
  };
  const clipped = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") return true;
    }
    return false;
  };
  const out = {innerWidth: vw, scrollWidth: document.documentElement.scrollWidth, sticksOut: [], scrollsSideways: [], small: [], targets: 0};
  for (const el of document.body.querySelectorAll("*")) {
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.right > vw + 0.5 && !clipped(el)) out.sticksOut.push(describe(el) + " reaches " + Math.round(r.right) + "px");
    const ox = getComputedStyle(el).overflowX;
    if ((ox === "auto" || ox === "scroll") && el.scrollWidth > el.clientWidth + 1 && !/^(PRE|TEXTAREA)$/.test(el.tagName)) {
      out.scrollsSideways.push(describe(el) + " holds " + el.scrollWidth + "px in " + el.clientWidth + "px");
    }
  }
  const targets = "button, input:not([type=hidden]), select, textarea, summary, a.btn, .nav a, .linkish";
  for (const el of document.querySelectorAll(targets)) {
    if (!shown(el)) continue;
    out.targets++;
    const own = el.getBoundingClientRect();
    if (el.type === "checkbox" || el.type === "radio") {
      let h = own.height, w = own.width;
      for (const l of el.labels || []) {
        const r = l.getBoundingClientRect();
        h = Math.max(h, r.height);
        w = Math.max(w, r.width);
      }
      if (h < 44 || w < 44) out.small.push(describe(el) + " hit area " + Math.round(w) + "x" + Math.round(h) + "px");
    } else if (own.height < 44) {
      out.small.push(describe(el) + " " + Math.round(own.height) + "px tall");
    }
  }
  return out;
})()`

// queueCards is how the queue's rows are laid out.
type queueCards struct {
	Rows int `json:"rows"`
	// HeadShown: the column headers are visible (the table's look).
	HeadShown bool `json:"headShown"`
	// SelectAll: the box that ticks every row is visible.
	SelectAll  bool     `json:"selectAll"`
	TableRows  int      `json:"tableRows"`
	Problems   []string `json:"problems"`
	CardHeight float64  `json:"cardHeight"`
}

// measureQueue checks every row of the queue for a card: a box of its own
// below the one before it, holding the preview title, tool, intent key,
// age and checkbox, each visible and inside the card.
const measureQueue = `(() => {
  const rows = Array.from(document.querySelectorAll("#queue tbody tr"));
  const shown = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const all = document.getElementById("select-all");
  const out = {rows: rows.length, headShown: Array.from(document.querySelectorAll("#queue thead th:not(.select-col)")).some(shown),
    selectAll: !!all && shown(all), tableRows: 0, problems: [], cardHeight: 0};
  let prevBottom = -Infinity;
  for (const tr of rows) {
    const link = tr.querySelector("[data-row-link]");
    const id = link ? link.getAttribute("data-row-link") : "a row";
    const r = tr.getBoundingClientRect();
    out.cardHeight = Math.max(out.cardHeight, r.height);
    if (getComputedStyle(tr).display === "table-row") out.tableRows++;
    if (r.top < prevBottom - 0.5) out.problems.push(id + ": beside the row before it, not below");
    prevBottom = r.bottom;
    for (const [what, sel] of [["title", "[data-row-link]"], ["tool", "[data-testid=tool]"], ["intent key", "[data-testid=intent-key]"],
        ["age", "[data-testid=age]"], ["checkbox", "[data-select-row]"]]) {
      const el = tr.querySelector(sel);
      if (!el) { out.problems.push(id + ": no " + what); continue; }
      const e = el.getBoundingClientRect();
      if (e.width === 0 || e.height === 0) out.problems.push(id + ": " + what + " not shown");
      else if (e.left < r.left - 0.5 || e.right > r.right + 0.5) out.problems.push(id + ": " + what + " outside its card");
    }
  }
  return out;
})()`

// narrowPage is one page the test visits: how to reach it and what shows
// it has loaded.
type narrowPage struct {
	name string
	// open reaches the page (navigate, or submit a form).
	open []chromedp.Action[chromedp.Void]
	// ready is visible once the page is there.
	ready string
}

// TestNarrowScreensInBrowser visits every dashboard page in headless
// Chromium at a phone's 390x844 (mobile, touch) with long unbroken intent
// keys, URLs and JSON in the data: no page scrolls sideways and no box in
// it does (pre and textarea aside), every tap target is at least 44 px
// tall (a checkbox's hit area also 44 px wide), the queue is one card per
// action and keeps its live updates and keyboard shortcuts. At 1280 px
// the queue is still a table. Screenshots of each page at both widths go
// to ARTIFACTS_DIR as narrow-<page>-390.png and narrow-<page>-1280.png.
func TestNarrowScreensInBrowser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	d := apptest.StartDashboard(t, apptest.Options{})
	ctx := context.Background()

	phone := chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch)
	desktop := chromedp.EmulateViewport(1280, 900)
	// Every details element open: the payload edit form, the timeline's
	// data, set-password forms, the chart as a table, the schemas.
	openDetails := chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("details").forEach(d => { d.open = true; })`)

	measure := func(name string) {
		t.Helper()
		b.Step(name+": open every details", 5*time.Second, openDetails)
		l := evaluate[narrowLayout](b, measureLayout)
		if l.InnerWidth != 390 {
			t.Errorf("%s: the window is %v px wide, want 390 (a wider page zooms the phone out)", name, l.InnerWidth)
		}
		if l.ScrollWidth > l.InnerWidth {
			t.Errorf("%s: the page is %v px wide in a %v px window; sticking out: %s", name, l.ScrollWidth, l.InnerWidth, strings.Join(l.SticksOut, "; "))
		}
		if len(l.ScrollsSideways) > 0 {
			t.Errorf("%s: boxes scroll sideways: %s", name, strings.Join(l.ScrollsSideways, "; "))
		}
		if len(l.Small) > 0 {
			t.Errorf("%s: tap targets under 44 px: %s", name, strings.Join(l.Small, "; "))
		}
		if l.Targets == 0 {
			t.Errorf("%s: no tap target measured", name)
		}
		t.Logf("%s at 390 px: page %v px wide, %d tap targets measured", name, l.ScrollWidth, l.Targets)
		b.Screenshot("narrow-" + name + "-390.png")
		// The same page at a desktop's width, then back to the phone.
		b.Step(name+": at 1280 px", 10*time.Second, desktop)
		if w := evaluate[float64](b, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
			t.Errorf("%s: at 1280 px the page is %v px wider than the window", name, w)
		}
		b.Screenshot("narrow-" + name + "-1280.png")
		b.Step(name+": back at 390 px", 10*time.Second, phone)
	}
	visit := func(p narrowPage) {
		t.Helper()
		b.Step(p.name, 30*time.Second, append(p.open, chromedp.WaitVisible(chromedp.CSS(p.ready)))...)
		measure(p.name)
	}
	b.Step("a phone", 5*time.Second, phone)

	// The setup page exists only while there is no staff user.
	setup, err := d.Server.SetupURL(ctx, d.URL)
	if err != nil || setup == "" {
		t.Fatalf("setup link %q, %v", setup, err)
	}
	visit(narrowPage{name: "setup", open: nav(setup), ready: `form[action="/setup"]`})

	admin := "ada.lovelace-countess-of-lovelace@analytical-engine-society.example.com"
	d.AddUser(admin, accounts.RoleAdmin)
	d.AddUser("ann@example.com", accounts.RoleApprover)
	ops := d.AddUser("oscar.the-operator-on-call@example.com", accounts.RoleOps)
	if err := d.Store.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: ops.ID, SlackID: "U0123ABCDEFGHIJ"}); err != nil {
		t.Fatal(err)
	}
	d.AddUser("vic@example.com", accounts.RoleViewer)
	for _, name := range []string{"billing-agent-with-a-very-long-name-for-the-nightly-batch-run.v2", "support-bot"} {
		_, hash := accounts.NewToken()
		if _, err := d.Store.TokenCreate(ctx, accounts.TokenCreateParams{Name: name, Hash: hash, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Store.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: "support-bot", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// Long unbroken strings: a customer id in the intent key, a tracking
	// URL in the subject, JSON in the body, a slug of one word.
	longID := "cus_" + strings.Repeat("7f3a9c", 16)
	url := "https://tracking.example.com/parcels/" + strings.Repeat("ZX9QK2", 14) + "?utm_source=approvals"
	pending := d.SubmitEmail(longID, "Your parcel is on its way: "+url,
		"Hi,\ntrack it at "+url+"\n"+`{"parcel":{"id":"`+strings.Repeat("p", 90)+`","legs":[1,2,3]}}`)
	d.Submit("post_public_update", `{"channel":"status-page-and-the-public-announcements-channel","slug":"`+
		strings.Repeat("maintenance-", 12)+`tonight","text":"Maintenance tonight 22:00 UTC, see `+url+`"}`, "")
	for i := range 3 {
		d.SubmitEmail("c-"+string(rune('a'+i)), "Your order has shipped", "Hi,\nyour order is on its way.")
	}
	// An approval with an edited payload: the action page shows a diff.
	edited := d.SubmitEmail("edit-"+longID, "Your refund is on its way", "Hi Dana,\nwe refunded order 7.")
	if _, err := d.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: edited.ID, By: "user:ann@example.com", Note: "Said when",
		Payload: []byte(`{"customer_id":"edit-` + longID + `","topic":"t","to":"c@example.com","subject":"Your refund of ` +
			strings.Repeat("EUR", 30) + ` is on its way","body":"Hi Dana,\nwe refunded order 7 at ` + url + `. It reaches your card in 3 days."}`)}); err != nil {
		t.Fatal(err)
	}
	// A change request and the agent's revision: a diff against the
	// earlier attempt.
	asked := d.SubmitEmail("rev-"+longID, "Your invoice", "See the attachment.")
	if _, err := d.Service.Decide(ctx, queue.DecideRequest{To: queue.StateChangesRequested, ID: asked.ID, By: "user:ann@example.com", Note: "Attach it: " + url}); err != nil {
		t.Fatal(err)
	}
	revision := d.SubmitEmail("rev-"+longID, "Your invoice", "See the attachment at "+url)
	if _, err := d.Service.Decide(ctx, queue.DecideRequest{To: queue.StateRejected, ID: d.SubmitEmail("old", "Old", "B").ID, By: "user:ann@example.com", Note: "duplicate"}); err != nil {
		t.Fatal(err)
	}
	d.StaleTicket("order-" + strings.Repeat("4711", 20))
	// A grant: its card lists the actions it approved.
	granting := d.SubmitEmail("grant-"+longID, "Your parcel is late", "Sorry: "+url)
	if _, err := d.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: granting.ID, By: "user:ann@example.com",
		Grant: &queue.GrantRequest{For: time.Hour, Fields: []string{"customer_id", "subject"}}}); err != nil {
		t.Fatal(err)
	}

	visit(narrowPage{name: "login", open: nav(d.URL + "/login"), ready: "#email"})
	b.Step("sign in", 30*time.Second, chromedp.SendKeys(chromedp.CSS("#email"), admin), chromedp.SendKeys(chromedp.CSS("#password"), apptest.Password),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#queue")), liveConnected)

	measure("queue")
	cards := evaluate[queueCards](b, measureQueue)
	if cards.Rows != 6 || cards.HeadShown || !cards.SelectAll || cards.TableRows > 0 || len(cards.Problems) > 0 {
		t.Errorf("queue at 390 px: %d rows (want 6), column headers shown %v, select-all shown %v, %d still table rows; %s",
			cards.Rows, cards.HeadShown, cards.SelectAll, cards.TableRows, strings.Join(cards.Problems, "; "))
	}
	t.Logf("queue at 390 px: %d cards, the tallest %.0f px", cards.Rows, cards.CardHeight)
	// Live updates reach the cards; j and x still walk and tick them.
	late := d.SubmitEmail("late", "Arrived on the phone", "B")
	b.Step("a new action appears live", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-row-link="`+late.ID+`"]`)))
	b.Step("j and x tick the first card", 10*time.Second, b.Key("j"), b.Key("x"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.querySelectorAll("#queue [data-select-row]:checked").length === 1`)(ctx, tg)
			return err
		}))
	b.Step("desktop", 10*time.Second, desktop)
	if wide := evaluate[queueCards](b, measureQueue); !wide.HeadShown || wide.TableRows != wide.Rows {
		t.Errorf("queue at 1280 px: header shown %v, %d of %d rows are table rows; want the table", wide.HeadShown, wide.TableRows, wide.Rows)
	}
	b.Step("phone", 10*time.Second, phone)

	visit(narrowPage{name: "action-pending", open: nav(d.URL + "/actions/" + pending.ID), ready: "#approve-payload"})
	visit(narrowPage{name: "action-edited", open: nav(d.URL + "/actions/" + edited.ID), ready: `[data-testid="payload-diff"]`})
	visit(narrowPage{name: "action-revision", open: nav(d.URL + "/actions/" + revision.ID), ready: `[data-testid="revision"]`})
	visit(narrowPage{name: "search", open: nav(d.URL + "/actions?intent_key=email:"), ready: "#state"})
	visit(narrowPage{name: "tickets", open: nav(d.URL + "/tickets"), ready: "form.resolve"})
	visit(narrowPage{name: "audit", open: nav(d.URL + "/audit"), ready: "#kind"})
	visit(narrowPage{name: "tools", open: nav(d.URL + "/tools"), ready: "#tool-send_customer_email"})
	visit(narrowPage{name: "grants", open: nav(d.URL + "/grants"), ready: `[data-testid="grant"]`})
	visit(narrowPage{name: "overview", open: nav(d.URL + "/overview"), ready: `[data-testid="hourly-chart"]`})
	visit(narrowPage{name: "users", open: nav(d.URL + "/admin/users"), ready: "#new-email"})
	b.Step("tokens", 20*time.Second, append(nav(d.URL+"/admin/tokens"), chromedp.WaitVisible(chromedp.CSS("#token-name")))...)
	visit(narrowPage{name: "tokens", open: []chromedp.Action[chromedp.Void]{
		chromedp.SendKeys(chromedp.CSS("#token-name"), "deploy-agent-for-the-eu-west-production-cluster-and-staging.v3"),
		chromedp.Click(chromedp.CSS(`form[action="/admin/tokens"] button[type=submit]`)),
	}, ready: `[data-testid="new-token"]`})
	// Back in the queue, a tap on the checkbox's hit area beside the box
	// ticks a card; the bulk decision answers with the result page.
	b.Step("tap beside a checkbox", 20*time.Second, chromedp.Navigate(d.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#queue [data-select-row]")),
		chromedp.Evaluate[chromedp.Void](`(() => { const box = document.querySelectorAll("#queue [data-select-row]")[1];
			box.scrollIntoView({block: "center"});
			const r = box.getBoundingClientRect(), area = (box.labels[0] || box).getBoundingClientRect();
			window.__tap = [area.left + 2, area.top + 2, r.left <= area.left + 2 && area.left + 2 <= r.right && r.top <= area.top + 2 && area.top + 2 <= r.bottom]; })()`))
	if onBox := evaluate[bool](b, `window.__tap[2]`); onBox {
		t.Error("the checkbox's hit area is no larger than the box")
	}
	tap := evaluate[[]float64](b, `window.__tap.slice(0, 2)`)
	b.Step("tap", 10*time.Second, chromedp.TapXY(tap[0], tap[1]),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.querySelectorAll("#queue [data-select-row]:checked").length === 1`)(ctx, tg)
			return err
		}))
	visit(narrowPage{name: "bulk-result", open: []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.CSS(`[data-testid="bulk-approve"]`))},
		ready: `[data-testid="bulk-result"]`})

	visit(narrowPage{name: "not-found", open: nav(d.URL + "/nowhere"), ready: "main .card h1"})
}

// nav is the actions that open url.
func nav(url string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{chromedp.Navigate(url)}
}
