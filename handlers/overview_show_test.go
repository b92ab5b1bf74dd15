package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestDashboardOverview: every member of staff sees the numbers and an
// inline SVG chart with a title, reachable from the navigation, with no
// script; anonymous visitors are sent to log in.
func TestDashboardOverview(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	vic := d.SignIn("vic@example.com", accounts.RoleViewer)
	a := d.SubmitEmail("ov1", "Hello", "Body")
	d.SubmitEmail("ov2", "Hello", "Body")
	if _, err := d.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	d.StaleTicket("ov-order")
	// A second ticket, resolved by a person 90 minutes after it opened.
	_, tk := d.StaleTicket("ov-order-2")
	d.Advance(90 * time.Minute)
	if _, _, err := d.Service.Tickets().Resolve(t.Context(), queue.ResolveRequest{TicketID: tk.ID, By: "user:ops@example.com",
		Outcome: queue.StateFailed, Note: "no refund at the provider"}); err != nil {
		t.Fatal(err)
	}

	res := vic.Get("/overview")
	res.WantStatus(t, http.StatusOK)
	res.WantContains(t, `<a href="/overview" aria-current="page">Overview</a>`)
	doc, err := html.Parse(strings.NewReader(res.Body))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*html.Node{}
	rects, titles, hourRows := 0, 0, 0
	for n := range doc.Descendants() {
		if id := attr(n, "data-testid"); id != "" {
			byID[id] = n
		}
		if n.Type == html.ElementNode && n.Data == "script" && n.FirstChild != nil {
			t.Fatalf("inline script: %s", textOf(n))
		}
	}
	for _, id := range []string{"pending-total", "decisions-24h", "open-tickets"} {
		if n := byID[id]; n == nil || textOf(n) != "1" {
			t.Errorf("%s = %v, want 1", id, n)
		}
	}
	// The tickets' table: one resolved by a person in each window, none
	// by a verifier, the person's wait shown.
	for _, w := range []string{"24h", "7d"} {
		for id, want := range map[string]string{"by-verifier": "0", "by-person": "1", "wait-p50": "1h 30m", "wait-p90": "1h 30m"} {
			if n := byID[id+"-"+w]; n == nil || textOf(n) != want {
				t.Errorf("tickets resolved, %s-%s: %v, want %s", id, w, n, want)
			}
		}
	}
	chart := byID["hourly-chart"]
	if chart == nil || attr(chart, "role") != "img" {
		t.Fatalf("no accessible chart:\n%s", apptest.TruncateBody(res.Body))
	}
	for n := range chart.Descendants() {
		switch {
		case n.Type == html.ElementNode && n.Data == "rect":
			rects++
		case n.Type == html.ElementNode && n.Data == "title" && n.Parent == chart:
			titles++
		}
	}
	for n := range byID["hourly-table"].Descendants() {
		if n.Type == html.ElementNode && n.Data == "tr" && n.Parent.Data == "tbody" {
			hourRows++
		}
	}
	if rects != 2*queue.OverviewHours || titles != 1 || hourRows != queue.OverviewHours {
		t.Errorf("chart: %d bars, %d titles, %d table rows; want %d, 1, %d", rects, titles, hourRows, 2*queue.OverviewHours, queue.OverviewHours)
	}
	if got := d.Anonymous().Get("/overview"); got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Header.Get("Location"), "/login") {
		t.Errorf("anonymous: %d %s", got.Status, got.Header.Get("Location"))
	}
}
