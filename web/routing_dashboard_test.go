package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/maintenance"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/notifier/webhook"
	"github.com/approvals/approvals/queue"
)

// routingDashTools: send_update needs two approvals from the leads and
// tells an ops webhook; note is open to every approver.
const routingDashTools = `
groups:
  leads: [ann@example.com, bob@example.com, cara@example.com]
channels:
  ops-hook: { webhook: %s, secret: events-secret }
tools:
  send_update:
    class: at-most-once
    intent: "update:{slug}"
    preview: { title: "{text}" }
    approval: { approvers: [leads], required: 2, notify: [ops-hook] }
  note:
    class: at-most-once
    intent: "note:{slug}"
    preview: { title: "{text}" }
`

// startRoutingDashboard is the dashboard over a registry with groups and a
// webhook channel whose receiver answers 500.
func startRoutingDashboard(t *testing.T) (*apptest.Dashboard, map[string]queue.Notifier) {
	t.Helper()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "receiver down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	reg, err := classify.Parse([]byte(strings.Replace(routingDashTools, "%s", failing.URL, 1)), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	// The test's outbox delivers; the process's own would fail the
	// notification first, having no webhook notifier.
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg, ManualOutbox: true})
	wh, err := webhook.New(webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return d, map[string]queue.Notifier{classify.KindWebhook: maintenance.ChannelNotifier[[]byte](classify.KindWebhook, wh, d.Store, nil)}
}

// submitTool submits a tool of routingDashTools with its slug and text.
func submitTool(d *apptest.Dashboard, tool, slug, text string) *queue.Action {
	d.T.Helper()
	return d.Submit(tool, `{"slug":"`+slug+`","text":`+apptest.JSONString(text)+`}`, "")
}

// Request changes is a third decision on the action page: note required
// (else the form again with the error, nothing changed), roles as reject,
// and the agent's next attempt shows the note and a diff of its payload.
func TestDashboardRequestChanges(t *testing.T) {
	t.Parallel()
	d, _ := startRoutingDashboard(t)
	d.AddUser("ann@example.com", accounts.RoleApprover)
	d.AddUser("viewer@example.com", accounts.RoleViewer)
	ann, viewer := d.Login("ann@example.com"), d.Login("viewer@example.com")
	a := submitTool(d, "note", "launch", "We launch on Friday")

	ann.Get("/actions/"+a.ID).WantContains(t, `id="changes-form"`, `/actions/`+a.ID+`/request-changes`, "<kbd>c</kbd>")
	res := ann.Post("/actions/"+a.ID+"/request-changes", url.Values{"note": {"  "}})
	res.WantStatus(t, http.StatusBadRequest)
	res.WantContains(t, `id="changes-error"`, "say what should change")
	viewer.Post("/actions/"+a.ID+"/request-changes", url.Values{"note": {"x"}}).WantStatus(t, http.StatusForbidden)
	if got := d.Action(a.ID); got.State != queue.StatePending {
		t.Fatalf("refused requests changed the state to %s", got.State)
	}
	ann.Post("/actions/"+a.ID+"/request-changes", url.Values{"note": {"Say Monday, not Friday"}}).WantRedirect(t, "/actions/"+a.ID)
	got := d.Action(a.ID)
	if got.State != queue.StateChangesRequested || got.DecisionNote == nil || *got.DecisionNote != "Say Monday, not Friday" {
		t.Fatalf("after request changes: %s, note %v", got.State, got.DecisionNote)
	}
	// The same user repeating it is a replay; a reject now is 409 naming who decided.
	ann.Post("/actions/"+a.ID+"/request-changes", url.Values{"note": {"Say Monday, not Friday"}}).WantRedirect(t, "/actions/"+a.ID)
	ann.Post("/actions/"+a.ID+"/reject", url.Values{"note": {"no"}}).WantStatus(t, http.StatusConflict)

	next := submitTool(d, "note", "launch", "We launch on Monday")
	if next.Attempt != 2 {
		t.Fatalf("revision is attempt %d, want 2", next.Attempt)
	}
	page := ann.Get("/actions/" + next.ID)
	page.WantContains(t, `data-testid="revision"`, "Say Monday, not Friday", "removed: </span>Friday</del>", "added: </span>Monday</ins>")
	if strings.Contains(ann.Get("/actions/"+a.ID).Body, `data-testid="revision"`) {
		t.Fatal("the first attempt shows a revision")
	}
}

// The action page shows the approvals so far, how many are still needed,
// who may still decide, and each notification with its attempts and last
// error.
func TestDashboardShowsQuorumAndNotifications(t *testing.T) {
	t.Parallel()
	d, notifiers := startRoutingDashboard(t)
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	a := submitTool(d, "send_update", "q", "Quarterly update")
	ann.Post("/actions/"+a.ID+"/approve", url.Values{"note": {"looks right"}}).WantRedirect(t, "/actions/"+a.ID)

	ctx := context.Background()
	outbox := maintenance.NewOutbox(d.Service, d.Store, maintenance.OutboxConfig{Notifiers: notifiers})
	if _, err := outbox.FanOut(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	page := ann.Get("/actions/" + a.ID)
	page.WantStatus(t, http.StatusOK)
	page.WantContains(t, "1 of 2 approvals", "1 still needed", "user:ann@example.com", "looks right",
		"May still decide: bob@example.com, cara@example.com",
		`data-testid="notifications"`, "ops-hook", "action.pending", "500")
	if strings.Contains(page.Body, "May still decide: ann@") {
		t.Fatal("ann approved and is still listed as able to decide")
	}
}

// "Waiting for me" lists the pending actions the viewer may decide and has
// not approved; a role that decides nothing has nothing waiting.
func TestDashboardWaitingForMe(t *testing.T) {
	t.Parallel()
	d, _ := startRoutingDashboard(t)
	d.AddUser("ann@example.com", accounts.RoleApprover)
	d.AddUser("dan@example.com", accounts.RoleApprover) // not a lead
	d.AddUser("viewer@example.com", accounts.RoleViewer)
	lead := submitTool(d, "send_update", "lead", "For the leads")
	open := submitTool(d, "note", "open", "For anyone")
	approved := submitTool(d, "send_update", "approved", "Ann approved this")
	if _, err := d.Service.Decide(context.Background(), queue.DecideRequest{To: queue.StateApproved, ID: approved.ID, By: "user:ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who       string
		want, not []*queue.Action
	}{
		{"ann@example.com", []*queue.Action{lead, open}, []*queue.Action{approved}},
		{"dan@example.com", []*queue.Action{open}, []*queue.Action{lead, approved}},
		{"viewer@example.com", nil, []*queue.Action{lead, open, approved}},
	} {
		b := d.Login(tc.who)
		page := b.Get("/?mine=1")
		page.WantStatus(t, http.StatusOK)
		for _, a := range tc.want {
			if !strings.Contains(page.Body, `data-row-link="`+a.ID+`"`) {
				t.Errorf("%s: %s is not listed as waiting", tc.who, a.Payload)
			}
		}
		for _, a := range tc.not {
			if strings.Contains(page.Body, `data-row-link="`+a.ID+`"`) {
				t.Errorf("%s: %s is listed as waiting", tc.who, a.Payload)
			}
		}
		// Without the filter everyone sees every pending action.
		if all := b.Get("/"); !strings.Contains(all.Body, `data-row-link="`+approved.ID+`"`) {
			t.Errorf("%s: the unfiltered queue lacks a pending action", tc.who)
		}
	}
}

// Admins set and clear a user's Slack id; a malformed or taken id is a 400
// naming it, and changes nothing.
func TestDashboardUserSlackID(t *testing.T) {
	t.Parallel()
	d, _ := startRoutingDashboard(t)
	d.AddUser("admin@example.com", accounts.RoleAdmin)
	ann := d.AddUser("ann@example.com", accounts.RoleApprover)
	bob := d.AddUser("bob@example.com", accounts.RoleApprover)
	admin := d.Login("admin@example.com")
	path := func(u *accounts.User) string { return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/slack" }
	admin.Post(path(ann), url.Values{"slack_id": {"U0ANN"}}).WantRedirect(t, "/admin/users?done=slack")
	admin.Get("/admin/users").WantContains(t, `value="U0ANN"`)
	for _, tc := range []struct{ id, want string }{
		{"not-an-id", "not a Slack member id"},
		{"U0ANN", "belongs to another user"},
	} {
		res := admin.Post(path(bob), url.Values{"slack_id": {tc.id}})
		res.WantStatus(t, http.StatusBadRequest)
		res.WantContains(t, tc.want)
	}
	if u, err := d.Store.UserGetBySlackID(context.Background(), "U0ANN"); err != nil || u.Email != "ann@example.com" {
		t.Fatalf("U0ANN is %v (%v), want ann", u, err)
	}
	admin.Post(path(ann), url.Values{"slack_id": {""}}).WantRedirect(t, "/admin/users?done=slack")
	if _, err := d.Store.UserGetBySlackID(context.Background(), "U0ANN"); err == nil {
		t.Fatal("the cleared Slack id still finds ann")
	}
	d.Login("ann@example.com").Post(path(bob), url.Values{"slack_id": {"U0BOB"}}).WantStatus(t, http.StatusForbidden)
}

// An admin sets a user's Telegram id on the users page; a malformed or taken id is a 400
// naming what is wrong; an empty one clears it; others may not.
func TestDashboardUserTelegramID(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("admin@example.com", accounts.RoleAdmin)
	ann := d.AddUser("ann@example.com", accounts.RoleApprover)
	bob := d.AddUser("bob@example.com", accounts.RoleApprover)
	admin := d.Login("admin@example.com")
	path := func(u *accounts.User) string { return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/telegram" }
	admin.Post(path(ann), url.Values{"telegram_id": {"123456789"}}).WantRedirect(t, "/admin/users?done=telegram")
	admin.Get("/admin/users").WantContains(t, `value="123456789"`)
	for _, tc := range []struct{ id, want string }{
		{"@ann", "not a Telegram user id"},
		{"-5", "not a Telegram user id"},
		{"99999999999999999999999", "not a Telegram user id"},
		{"123456789", "belongs to another user"},
	} {
		res := admin.Post(path(bob), url.Values{"telegram_id": {tc.id}})
		res.WantStatus(t, http.StatusBadRequest)
		res.WantContains(t, tc.want)
	}
	if u, err := d.Store.UserGetByTelegramID(context.Background(), 123456789); err != nil || u.Email != "ann@example.com" {
		t.Fatalf("123456789 is %v (%v), want ann", u, err)
	}
	admin.Post(path(ann), url.Values{"telegram_id": {""}}).WantRedirect(t, "/admin/users?done=telegram")
	if _, err := d.Store.UserGetByTelegramID(context.Background(), 123456789); err == nil {
		t.Fatal("the cleared Telegram id still finds ann")
	}
	d.Login("ann@example.com").Post(path(bob), url.Values{"telegram_id": {"5"}}).WantStatus(t, http.StatusForbidden)
}
