package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/longpoll"
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

// TestDashboardRefusesNumbersOutOfRange: an edited payload or a ticket
// result holding a number past the limits, or nested deeper than 64, is 400
// naming where, and decides nothing.
func TestDashboardRefusesNumbersOutOfRange(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("admin@example.com", accounts.RoleAdmin)
	admin := d.Login("admin@example.com")

	a := d.SubmitEmail("c-num", "Hello", "Body")
	for _, tc := range []struct{ edit, mention string }{
		{`{"customer_id":"c-num","topic":"t","to":"c@example.com","subject":"Hello","body":"Body","n":1e999999}`, "at /n"},
		{`{"customer_id":"c-num","topic":"t","to":"c@example.com","subject":"Hello","body":"Body","n":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, "deeper than 64"},
	} {
		p := admin.Post("/actions/"+a.ID+"/approve", url.Values{"payload": {tc.edit}})
		p.WantStatus(t, http.StatusBadRequest)
		p.WantContains(t, tc.mention)
	}
	if got := d.Action(a.ID); got.State != queue.StatePending {
		t.Fatalf("state %s after a refused edit, want pending", got.State)
	}

	ra, tk := d.StaleTicket("o-num")
	p := admin.Post("/tickets/"+tk.ID+"/resolve", url.Values{"outcome": {"done"}, "note": {"checked"},
		"result": {`{"amount":0.` + strings.Repeat("0", 500) + `1}`}})
	p.WantStatus(t, http.StatusBadRequest)
	p.WantContains(t, "/amount")
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

// TestEventsStreamCapped: a staff user holding the most streams allowed
// per holder gets 429 with Retry-After for another event stream.
func TestEventsStreamCapped(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("viewer@example.com", accounts.RoleViewer)
	perHolder := longpoll.StreamLimits(0).PerHolder
	for range perHolder {
		release, err := d.Polls.AcquireStream("user:viewer@example.com")
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

// TestStreamsApartFromAgentsLongPolls: agents holding every waiter slot
// (APPROVALS_MAX_WAITERS) do not take the staff's live view, whose streams
// have their own pool (APPROVALS_MAX_STREAMS); and a full stream pool does
// not stop agents' long-polls.
func TestStreamsApartFromAgentsLongPolls(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{Waiters: longpoll.WaiterLimits{Total: 10, PerHolder: 1}, MaxStreams: 2})
	d.AddUser("viewer@example.com", accounts.RoleViewer)
	b := d.Login("viewer@example.com")
	for i := range 10 {
		release, err := d.Polls.AcquireWaiter(fmt.Sprintf("agent:bot-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/events", nil)
	res, err := b.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("the live view with every agent waiter slot taken: %d %s, want the stream", res.StatusCode, res.Header.Get("Content-Type"))
	}
	release, err := d.Polls.AcquireStream("user:other@example.com")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := d.Polls.AcquireStream("user:third@example.com"); queue.ErrorCode(err) != queue.CodeTooManyWaiters || !strings.Contains(err.Error(), "APPROVALS_MAX_STREAMS") {
		t.Fatalf("a third stream past MaxStreams 2: %v, want too_many_waiters naming APPROVALS_MAX_STREAMS", err)
	}
	if _, err := d.Polls.AcquireWaiter("agent:bot-0"); err == nil {
		t.Fatal("the agents' pool took an eleventh waiter")
	}
}

// TestActionPageBoundsPrettyPrinting: a payload that would indent to more
// than 256 KiB (stored before depth was limited: 6 KB nested 3000 deep
// indented to 18 MB, twice per page) is shown compact with a note, so the
// page stays about the size of the payload.
func TestActionPageBoundsPrettyPrinting(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("viewer@example.com", accounts.RoleViewer)
	deep := strings.Repeat("[", 3000) + "1" + strings.Repeat("]", 3000)
	a := d.Submit("post_partner_message", `{"text":"hi","deep":`+deep+`}`, "p:deep")
	p := d.Login("viewer@example.com").Get("/actions/" + a.ID)
	p.WantStatus(t, http.StatusOK)
	p.WantContains(t, `data-testid="payload-compact"`, "more than 256 KiB")
	if len(p.Body) > 256<<10 {
		t.Fatalf("the page is %d bytes for a %d-byte payload", len(p.Body), len(a.Payload))
	}
}
