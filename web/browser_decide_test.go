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

// actionLayout is where an action page puts what is decided and the
// first decision button.
type actionLayout struct {
	// Before: the content (preview, or payload without one) precedes the
	// first decision button in the document.
	Before bool `json:"before"`
	// ContentBottom and ButtonTop are in px from the top of the page.
	ContentBottom float64 `json:"contentBottom"`
	ButtonTop     float64 `json:"buttonTop"`
	Content       string  `json:"content"`
	Title         string  `json:"title"`
}

const measureAction = `(() => {
  const c = document.querySelector("[data-testid=content]");
  const btn = document.querySelector("#action form button[type=submit]");
  const title = document.querySelector("h1").innerText;
  if (!c || !btn) return {before: false, contentBottom: c ? c.getBoundingClientRect().bottom + window.scrollY : -1, buttonTop: -1, content: c ? c.innerText : "", title: title};
  return {before: !!(c.compareDocumentPosition(btn) & Node.DOCUMENT_POSITION_FOLLOWING),
    contentBottom: c.getBoundingClientRect().bottom + window.scrollY, buttonTop: btn.getBoundingClientRect().top + window.scrollY,
    content: c.innerText, title: title};
})()`

// measureIndent lists the wrapped lines of indented JSON that start left
// of their own indentation (MarkedJSON and app.css's .jl).
const measureIndent = `(() => {
  const out = {lines: 0, wrapped: 0, lost: []};
  for (const el of document.querySelectorAll("pre.json .jl")) {
    const pad = parseFloat(getComputedStyle(el).paddingLeft);
    const left = el.getBoundingClientRect().left + pad;
    const r = document.createRange();
    r.selectNodeContents(el);
    const rects = Array.from(r.getClientRects());
    out.lines++;
    if (rects.length > 1 && el.className.match(/d[1-9]/)) out.wrapped++;
    for (const x of rects.slice(1)) {
      if (x.left < left - 1) out.lost.push(el.className + " wraps at " + Math.round(x.left) + " < " + Math.round(left));
    }
  }
  return out;
})()`

// TestDecidingSafelyOnAPhone (issue 44) drives Chromium at a phone's
// 390x844 (mobile, touch) and at 1280x900: on every action page the whole
// preview or payload precedes the first decision button, and for a short
// payload is on the phone's first screen; text sent as \u escapes reads as
// characters; an edited approval's title is the edit's; a deeply nested
// payload keeps its indentation when lines wrap; the phone queue shows an
// action on its first screen and its bulk form only once a box is ticked;
// keyboard hints are hidden on touch screens; open tickets come first and
// show their payload; the overview's hour labels are readable. Screenshots
// go to ARTIFACTS_DIR as decide-<page>-<width>.png.
func TestDecidingSafelyOnAPhone(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	d := apptest.StartDashboard(t, apptest.Options{})
	ctx := context.Background()
	d.AddUser("ann@example.com", accounts.RoleApprover)
	d.AddUser("oscar@example.com", accounts.RoleOps)

	german := d.Submit("send_customer_email", `{"customer_id":"de1","topic":"t","to":"c@example.com","subject":"Gr\u00fc\u00dfe aus K\u00f6ln","body":"Viele Gr\u00fc\u00dfe \u2014 Jens"}`, "")
	deploy := d.Submit("deploy_service", `{"service":"billing","version":"2.4.1","note":"\u65e5\u672c\u8a9e"}`, "deploy:billing:2.4.1")
	nested := `"leaf":"` + strings.Repeat("a long value that wraps on a phone ", 3) + `"`
	for i := range 9 {
		nested = `"level` + string(rune('0'+i)) + `":{` + nested + `}`
	}
	crm := d.Submit("update_crm", `{`+nested+`}`, "crm:deep:1")
	long := d.SubmitEmail("long1", "A long email", strings.Repeat("Dear customer, this paragraph goes on. ", 120))
	for i := range 6 {
		d.SubmitEmail("q-"+string(rune('a'+i)), "Your order has shipped", "Hi,\nyour order is on its way.")
	}
	edited := d.SubmitEmail("ed1", "Your refund", "Hi Dana")
	if _, err := d.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: edited.ID, By: "user:ann@example.com",
		Payload: []byte(`{"customer_id":"ed1","topic":"t","to":"c@example.com","subject":"Your refund of 12 EUR is on its way","body":"Hi Dana"}`)}); err != nil {
		t.Fatal(err)
	}
	_, ticket := d.StaleTicket("o-settled")
	if _, _, err := d.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: ticket.ID, Outcome: queue.StateFailed, Note: "Not in the ledger", By: "user:oscar@example.com"}); err != nil {
		t.Fatal(err)
	}
	d.StaleTicket("o-open")

	phone := chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch)
	desktop := chromedp.EmulateViewport(1280, 900)
	b.Step("sign in", 30*time.Second, signIn(d.URL, "ann@example.com", chromedp.WaitVisible(chromedp.CSS("#queue")))...)

	for _, size := range []struct {
		name   string
		vp     chromedp.Action[chromedp.Void]
		height float64
	}{{"390", phone, 844}, {"1280", desktop, 900}} {
		b.Step("viewport "+size.name, 10*time.Second, size.vp)
		for _, p := range []struct {
			name, id string
			short    bool
			want     string
		}{
			{"email", german.ID, true, "Viele Grüße — Jens"},
			{"unregistered", deploy.ID, true, "日本語"},
			{"nested", crm.ID, false, "level0"},
			{"long-email", long.ID, false, "Dear customer"},
			{"edited", edited.ID, true, "Your refund of 12 EUR is on its way"},
		} {
			b.Step(p.name+" page", 20*time.Second, chromedp.Navigate(d.URL+"/actions/"+p.id), chromedp.WaitVisible(chromedp.CSS("#action")))
			l := evaluate[actionLayout](b, measureAction)
			if p.id != edited.ID && !l.Before {
				t.Errorf("%s at %s: the content does not precede the first decision button (%+v)", p.name, size.name, l)
			}
			if p.id == edited.ID && l.ContentBottom < 0 {
				t.Errorf("edited at %s: the page shows no preview of the edit (%+v)", size.name, l)
			}
			if p.short && p.id != edited.ID && l.ContentBottom > size.height {
				t.Errorf("%s at %s: the content ends at %v px, below the first screen (%v px)", p.name, size.name, l.ContentBottom, size.height)
			}
			if !strings.Contains(l.Content, p.want) {
				t.Errorf("%s at %s: the content does not show %q: %q", p.name, size.name, p.want, l.Content)
			}
			if strings.Contains(l.Content, `\u`) {
				t.Errorf("%s at %s: the content shows \\u escapes: %q", p.name, size.name, l.Content)
			}
			if p.id == edited.ID && !strings.Contains(l.Title, "Your refund of 12 EUR is on its way") {
				t.Errorf("edited at %s: the title is %q, not the edit's", size.name, l.Title)
			}
			if p.id == crm.ID && size.name == "390" {
				ind := evaluate[struct {
					Lines, Wrapped int
					Lost           []string
				}](b, measureIndent)
				if ind.Lines < 10 || ind.Wrapped == 0 || len(ind.Lost) > 0 {
					t.Errorf("nested at 390: %d lines, %d wrapped, lost indentation: %v", ind.Lines, ind.Wrapped, ind.Lost)
				}
			}
			if size.name == "390" && p.id != edited.ID {
				if n := evaluate[float64](b, `document.querySelectorAll(".keys").length`); n == 0 {
					t.Errorf("%s: no keyboard hint on the page to hide", p.name)
				}
				if shown := evaluate[bool](b, `Array.from(document.querySelectorAll(".keys")).some(e => e.getBoundingClientRect().height > 0)`); shown {
					t.Errorf("%s at 390: keyboard hints shown on a touch screen", p.name)
				}
			}
			b.Screenshot("decide-" + p.name + "-" + size.name + ".png")
		}

		// The queue: an action on the first screen.
		b.Step("queue", 20*time.Second, chromedp.Navigate(d.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#queue [data-row-link]")))
		top := evaluate[float64](b, `document.querySelector("#queue [data-row-link]").getBoundingClientRect().bottom + window.scrollY`)
		if top > size.height*0.6 {
			t.Errorf("queue at %s: the first action ends at %v px", size.name, top)
		}
		bulk := `(() => { const r = document.querySelector("#bulk-form").getBoundingClientRect(); return r.height > 0; })()`
		if size.name == "390" {
			if evaluate[bool](b, bulk) {
				t.Errorf("queue at 390: the bulk form shows with nothing selected")
			}
			b.Step("tick a box", 5*time.Second, chromedp.Click(chromedp.CSS("#queue [data-select-row]")))
			if !evaluate[bool](b, bulk) {
				t.Errorf("queue at 390: the bulk form does not show once a box is ticked")
			}
			b.Screenshot("decide-queue-ticked-390.png")
			b.Step("untick", 5*time.Second, chromedp.Click(chromedp.CSS("#queue [data-select-row]")))
		} else if !evaluate[bool](b, bulk) {
			t.Errorf("queue at 1280: no bulk form")
		}
		b.Screenshot("decide-queue-" + size.name + ".png")

		// Tickets: open first, with the payload shown.
		b.Step("tickets", 20*time.Second, chromedp.Navigate(d.URL+"/tickets?state=all"), chromedp.WaitVisible(chromedp.CSS("main section.card")))
		first := evaluate[struct {
			ID      string
			Payload bool
			Top     float64
		}](b, `(() => { const s = document.querySelector("main section.card[id^=ticket-]"); const p = s.querySelector("[data-testid=ticket-payload]");
		  return {ID: s.innerText, Payload: !!p && p.getBoundingClientRect().height > 0, Top: s.getBoundingClientRect().top + window.scrollY}; })()`)
		if !strings.Contains(first.ID, "o-open") || !strings.Contains(first.ID, "open") || !first.Payload {
			t.Errorf("tickets at %s: the first card is not the open ticket with its payload shown: %q", size.name, first.ID)
		}
		b.Screenshot("decide-tickets-" + size.name + ".png")

		// The overview's hour labels: at least 9 px tall as drawn.
		b.Step("overview", 20*time.Second, chromedp.Navigate(d.URL+"/overview"), chromedp.WaitVisible(chromedp.CSS("[data-testid=hourly-chart]")))
		small := evaluate[float64](b, `Math.min(...Array.from(document.querySelectorAll(".chart text")).filter(e => e.getBoundingClientRect().height > 0).map(e => e.getBoundingClientRect().height))`)
		if small < 9 {
			t.Errorf("overview at %s: chart labels %v px tall", size.name, small)
		}
		b.Screenshot("decide-overview-" + size.name + ".png")
	}
}
