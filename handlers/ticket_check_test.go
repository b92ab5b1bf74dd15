package handlers_test

import (
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// A suggest verifier's proof shows on the ticket with its answer; "Resolve
// as verified" settles it in one click with the note and the provider's
// record prefilled; "Check now" asks again at once.
func TestTicketResolveAsVerified(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"refunds":[{"id":"re_77","line_id":1,"amount":5}]}`)
	}))
	t.Cleanup(provider.Close)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	reg, err := classify.Parse([]byte(`
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: `+provider.URL+`
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
`), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg, WebhookSecret: secret})
	ops := d.SignIn("ops@example.com", accounts.RoleOps)
	a, tk := d.StaleTicket("o9")
	if n := asked.Load(); n != 1 {
		t.Fatalf("the sweep asked %d times, want once at once", n)
	}
	if got := d.Action(a.ID); got.State != queue.StateInProgress {
		t.Fatalf("suggest moved the action to %s", got.State)
	}
	page := ops.Get("/tickets")
	page.WantStatus(t, http.StatusOK)
	page.WantContains(t, `data-testid="verifier"`, "Resolve as verified (done)", "re_77", "Check now",
		`data-testid="ticket-waiting">waiting for a person<`)

	// Check now asks at once and records a second check.
	ops.Post("/tickets/"+tk.ID+"/check", nil).WantRedirect(t, "/tickets")
	if n := asked.Load(); n != 2 {
		t.Fatalf("check now: asked %d times", n)
	}
	if n := apptest.EventCount(t, d.Store, a.ID, queue.EventVerified); n != 2 {
		t.Fatalf("%d verified events", n)
	}

	// One click: the form's hidden fields, as the browser would send them.
	form := regexp.MustCompile(`(?s)data-testid="resolve-verified".*?</form>`).FindString(ops.Get("/tickets").Body)
	values := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)"`).FindAllStringSubmatch(form, -1) {
		values.Set(m[1], html.UnescapeString(m[2]))
	}
	if values.Get("outcome") != "done" || !strings.Contains(values.Get("note"), "verified done") {
		t.Fatalf("form %v", values)
	}
	ops.Post("/tickets/"+tk.ID+"/resolve", values).WantRedirect(t, "/tickets")
	got := d.Action(a.ID)
	if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(`{"id":"re_77","line_id":1,"amount":5}`)) {
		t.Fatalf("action %s result %s", got.State, got.Result)
	}
	if got.Ticket.ResolvedBy == nil || *got.Ticket.ResolvedBy != "user:ops@example.com" {
		t.Fatalf("resolved by %v", got.Ticket.ResolvedBy)
	}
}

// While its answers prove nothing, the ticket shows when the verifier is
// asked next: a minute after the sweep's first round, then two minutes
// after the second; the ticket page shows every check.
func TestTicketShowsNextVerifierCheck(t *testing.T) {
	t.Parallel()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(provider.Close)
	reg, err := classify.Parse([]byte(`
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: `+provider.URL+`
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
`), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg, WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	ops := d.SignIn("ops@example.com", accounts.RoleOps)
	// The clock runs: a sweep asks at some instant between from and to,
	// and the page shows that instant plus the delay, to the second.
	from := d.Now().Add(3 * time.Minute) // StaleTicket advances 3 minutes, then sweeps
	d.StaleTicket("o-down")              // the sweep asks at once: unknown
	to := d.Now()
	ops.Get("/tickets").WantContains(t, `data-testid="ticket-waiting">a verifier is still asking<`)
	next := regexp.MustCompile(`data-testid="verifier-next-check">([^<]*)<`)
	wantNext := func(from, to time.Time, delay time.Duration) {
		t.Helper()
		m := next.FindStringSubmatch(ops.Get("/tickets").Body)
		lo, hi := templates.FormatTime(from.Add(delay)), templates.FormatTime(to.Add(delay))
		if m == nil || (m[1] != lo && m[1] != hi) {
			t.Fatalf("next check shown %q, want %s (or %s)", m, lo, hi)
		}
	}
	wantNext(from, to, time.Minute)
	d.Advance(time.Minute)
	from = d.Now()
	if _, err := d.Sweeper.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantNext(from, d.Now(), 2*time.Minute)

	// A ticket open for long has many checks: the list shows the newest
	// 20, the ticket page every one.
	tk := ticketOf(t, d)
	for range 28 {
		if _, err := d.Service.Tickets().Verify(t.Context(), queue.VerifyRequest{ActionID: tk.ActionID, By: "user:ops@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(ops.Get("/tickets").Body, `data-testid="verifier-check"`); n != 20 {
		t.Fatalf("the list shows %d checks, want the newest 20", n)
	}
	if n := strings.Count(ops.Get("/tickets/"+tk.ID).Body, `data-testid="verifier-check"`); n != 30 {
		t.Fatalf("the ticket page shows %d checks, want all 30", n)
	}
}

// ticketOf is the dashboard's one ticket.
func ticketOf(t *testing.T, d *apptest.Dashboard) *queue.Ticket {
	t.Helper()
	list, err := d.Store.TicketList(t.Context(), queue.TicketListParams{Limit: 2})
	if err != nil || len(list) != 1 {
		t.Fatalf("tickets: %v, %d", err, len(list))
	}
	return list[0]
}

// The ticket page is /tickets/{id}: the one ticket, its verifier's checks
// with the answer pretty-printed, "Check now" and "Resolve as verified";
// an unknown ticket is 404.
func TestTicketPage(t *testing.T) {
	t.Parallel()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"refunds":[{"id":"re_88","line_id":1}]}`)
	}))
	t.Cleanup(provider.Close)
	reg, err := classify.Parse([]byte(`
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: `+provider.URL+`
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
`), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg, WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	ops := d.SignIn("ops@example.com", accounts.RoleOps)
	_, tk := d.StaleTicket("o-page")
	page := ops.Get("/tickets/" + tk.ID)
	page.WantStatus(t, http.StatusOK)
	page.WantContains(t, `id="ticket-`+tk.ID+`"`, `data-testid="verifier-check"`, `&#34;re_88&#34;`, "Resolve as verified (done)", "Check now")
	ops.Get("/tickets/"+queue.NewID(d.Now())).WantStatus(t, http.StatusNotFound)
	ops.Get("/tickets/not-an-id").WantStatus(t, http.StatusNotFound)
}
