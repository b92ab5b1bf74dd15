package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestDashboardRefusesDuplicateKeys: an edited payload or a ticket result
// naming a key twice is 400 naming the key, and decides nothing.
func TestDashboardRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	admin := d.SignIn("admin@example.com", accounts.RoleAdmin)

	a := d.SubmitEmail("c-dup", "Hello", "Body")
	edit := `{"customer_id":"c-dup","topic":"t","to":"c@example.com","to":"evil@example.com","subject":"Hello","body":"Body"}`
	p := admin.Post("/actions/"+a.ID+"/approve", url.Values{"payload": {edit}})
	p.WantStatus(t, http.StatusBadRequest)
	p.WantContains(t, "duplicate key &#34;to&#34; at /to")
	if got := d.Action(a.ID); got.State != queue.StatePending {
		t.Fatalf("state %s after a refused edit, want pending", got.State)
	}

	ra, tk := d.StaleTicket("o-dup")
	p = admin.Post("/tickets/"+tk.ID+"/resolve", url.Values{"outcome": {"done"}, "note": {"checked"},
		"result": {`{"refund":"re_1","refund":"re_2"}`}})
	p.WantStatus(t, http.StatusBadRequest)
	p.WantContains(t, "/refund")
	if got := d.Action(ra.ID); got.State != queue.StateInProgress {
		t.Fatalf("state %s after a refused resolution, want in_progress", got.State)
	}
}

// TestActionPageMarksInvisibleCharacters: each invisible character of a
// payload is shown as a visible [U+…] mark, and the text around it stays
// text.
func TestActionPageMarksInvisibleCharacters(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("viewer@example.com", accounts.RoleViewer)
	a := d.SubmitEmail("c-inv", "<b>Invoice</b>\u202e", "Pay to ad\u200bmin")
	if !strings.Contains(strings.Join(a.Warnings, ","), queue.WarningInvisibleCharacters) {
		t.Fatalf("warnings %v, want invisible_characters", a.Warnings)
	}
	p := d.Login("viewer@example.com").Get("/actions/" + a.ID)
	p.WantStatus(t, http.StatusOK)
	p.WantContains(t, "invisible characters",
		`&lt;b&gt;Invoice&lt;/b&gt;<mark class="invisible" data-testid="invisible" title="invisible character">[U+202E]</mark>`,
		`Pay to ad<mark class="invisible" data-testid="invisible" title="invisible character">[U+200B]</mark>min`)
	if strings.Contains(p.Body, "\u202e") || strings.Contains(p.Body, "\u200b") {
		for _, line := range strings.Split(p.Body, "\n") {
			if strings.ContainsAny(line, "\u202e\u200b") {
				t.Log(line)
			}
		}
		t.Fatal("the page still holds an invisible character")
	}
}

// TestEventsStreamCapped: a staff user holding the most waiters allowed
// per holder gets 429 with Retry-After for another event stream.
func TestEventsStreamCapped(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("viewer@example.com", accounts.RoleViewer)
	perHolder := queue.WaiterLimits{}.WithDefaults().PerHolder
	for range perHolder {
		release, err := d.Service.AcquireWaiter("user:viewer@example.com")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	p := b.Get("/events")
	p.WantStatus(t, http.StatusTooManyRequests)
	if p.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
}
