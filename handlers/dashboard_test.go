package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestDashboardCSRF refuses state-changing requests without the session's
// token, from a form field or a header, with 403 and no change.
func TestDashboardCSRF(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	other := d.Anonymous()
	other.Get("/login") // another session's valid token
	a := d.SubmitEmail("c1", "Hi", "Body")
	approve := "/actions/" + a.ID + "/approve"

	for name, form := range map[string]url.Values{
		"missing":       {"note": {"x"}, "_csrf": nil},
		"empty":         {"note": {"x"}, "_csrf": {""}},
		"wrong":         {"note": {"x"}, "_csrf": {"not-the-token"}},
		"other session": {"note": {"x"}, "_csrf": {other.CSRF()}},
	} {
		if form["_csrf"] == nil {
			form.Del("_csrf")
			ann.Do(http.MethodPost, approve, strings.NewReader(form.Encode())).WantStatus(t, http.StatusForbidden)
			continue
		}
		if p := ann.Post(approve, form); p.Status != http.StatusForbidden {
			t.Errorf("%s token: %d, want 403", name, p.Status)
		}
	}
	if got := d.Action(a.ID); got.State != queue.StatePending {
		t.Fatalf("state %s after refused requests, want pending", got.State)
	}
	// The header works as well as the field (htmx sends it).
	ann.Do(http.MethodPost, approve, strings.NewReader("note=ok"), "X-CSRF-Token", "nope").WantStatus(t, http.StatusForbidden)
	ann.Do(http.MethodPost, approve, strings.NewReader("note=ok"), "X-CSRF-Token", ann.CSRF()).WantRedirect(t, "/actions/"+a.ID)

	// POST /login and /logout need the pre-session token too.
	b := d.Anonymous()
	b.Get("/login")
	b.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}, "_csrf": {"forged"}}).WantStatus(t, http.StatusForbidden)
	fresh := d.Anonymous()
	fresh.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}, "_csrf": {""}}).WantStatus(t, http.StatusForbidden)
	ann.Post("/logout", url.Values{"_csrf": {"forged"}}).WantStatus(t, http.StatusForbidden)
	ann.Get("/").WantStatus(t, http.StatusOK) // still signed in
}

// TestDashboardDecisions covers deciding: success, the same approver
// repeating it, another approver too late (409 naming who and when),
// missing and invalid fields (nothing changes), edits and htmx.
func TestDashboardDecisions(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("ann@example.com", accounts.RoleApprover)
	d.AddUser("bob@example.com", accounts.RoleAdmin)
	ann, bob := d.Login("ann@example.com"), d.Login("bob@example.com")

	t.Run("second decision", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("c1", "Hi", "Body")
		ann.Post("/actions/"+a.ID+"/approve", url.Values{"note": {"looks right"}}).WantRedirect(t, "/actions/"+a.ID)
		ann.Post("/actions/"+a.ID+"/approve", url.Values{"note": {"looks right"}}).WantRedirect(t, "/actions/"+a.ID)
		p := bob.Post("/actions/"+a.ID+"/approve", nil)
		p.WantStatus(t, http.StatusConflict)
		p.WantContains(t, "already", "approved", "user:ann@example.com", " UTC")
		bob.Post("/actions/"+a.ID+"/reject", url.Values{"note": {"no"}}).WantStatus(t, http.StatusConflict)
		ann.Post("/actions/"+a.ID+"/reject", url.Values{"note": {"changed my mind"}}).WantStatus(t, http.StatusConflict)
		// A late decision with a broken form still learns who decided.
		late := bob.Post("/actions/"+a.ID+"/approve", url.Values{"payload": {"{not json"}})
		late.WantStatus(t, http.StatusConflict)
		late.WantContains(t, "user:ann@example.com")
		bob.Post("/actions/"+a.ID+"/reject", url.Values{"note": {""}}).WantStatus(t, http.StatusConflict)
		if n := d.EventCount(a.ID, queue.EventApproved); n != 1 {
			t.Fatalf("%d approved events, want 1", n)
		}
		got := d.Action(a.ID)
		if got.State != queue.StateApproved || *got.DecidedBy != "user:ann@example.com" || *got.DecisionNote != "looks right" {
			t.Fatalf("action %s by %v note %v", got.State, *got.DecidedBy, got.DecisionNote)
		}
		page := ann.Get("/actions/" + a.ID)
		page.WantContains(t, `data-testid="state">approved<`, "looks right")
		if strings.Contains(page.Body, `id="approve-form"`) {
			t.Fatal("a decided action still shows the approve form")
		}
	})

	t.Run("reject needs a reason", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("c2", "Hi", "Body")
		p := ann.Post("/actions/"+a.ID+"/reject", url.Values{"note": {"   "}})
		p.WantStatus(t, http.StatusBadRequest)
		p.WantContains(t, `id="reject-form"`, `id="reject-error"`, "a reason is required")
		if got := d.Action(a.ID); got.State != queue.StatePending {
			t.Fatalf("state %s, want pending", got.State)
		}
		ann.Post("/actions/"+a.ID+"/reject", url.Values{"note": {"wrong customer"}}).WantRedirect(t, "/actions/"+a.ID)
		ann.Post("/actions/"+a.ID+"/reject", url.Values{"note": {"wrong customer"}}).WantRedirect(t, "/actions/"+a.ID)
		if got := d.Action(a.ID); got.State != queue.StateRejected || *got.DecisionNote != "wrong customer" {
			t.Fatalf("state %s, want rejected with the reason", got.State)
		}
	})

	t.Run("edited payload", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("c3", "Helo", "Body")
		path := "/actions/" + a.ID + "/approve"
		for _, tc := range []struct {
			payload string
			status  int
			say     string
		}{
			{`{"customer_id":"c3"`, http.StatusUnprocessableEntity, "not valid JSON"},
			{`[1,2]`, http.StatusUnprocessableEntity, "must be a JSON object"},
			{`{"customer_id":"c3","topic":"t","to":"c@example.com","subject":"Hello"}`, http.StatusUnprocessableEntity, "body"},
			{`{"customer_id":"other","topic":"t","to":"c@example.com","subject":"Hello","body":"B"}`, http.StatusUnprocessableEntity, "may not change the intent"},
			{`{"customer_id":"c3","topic":"t","to":"c@example.com","subject":"Hello\u0000","body":"B"}`, http.StatusBadRequest, "NUL"},
		} {
			p := ann.Post(path, url.Values{"payload": {tc.payload}, "note": {"kept"}})
			p.WantStatus(t, tc.status)
			p.WantContains(t, tc.say, `id="approve-error"`, `value="kept"`)
			if got := d.Action(a.ID); got.State != queue.StatePending {
				t.Fatalf("payload %s: state %s, want pending", tc.payload, got.State)
			}
		}
		edit := `{"customer_id": "c3", "topic": "t", "to": "c@example.com", "subject": "Hello", "body": "Body"}`
		ann.Post(path, url.Values{"payload": {edit}}).WantRedirect(t, "/actions/"+a.ID)
		got := d.Action(a.ID)
		if !queue.JSONEqual(got.ApprovedPayload, []byte(edit)) || queue.JSONEqual(got.Payload, []byte(edit)) {
			t.Fatalf("approved_payload %s, payload %s", got.ApprovedPayload, got.Payload)
		}
		ann.Get("/actions/"+a.ID).WantContains(t, "Edited before approval: subject", `data-testid="approved-payload"`)
	})

	t.Run("htmx gets the fragment", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("c4", "Hi", "Body")
		p := ann.Post("/actions/"+a.ID+"/approve", nil, "HX-Request", "true")
		p.WantStatus(t, http.StatusOK)
		p.WantContains(t, `<div id="action"`, "Approved.", `data-testid="state">approved<`)
		if strings.Contains(p.Body, "<html") {
			t.Fatal("htmx answer is a whole page")
		}
		late := bob.Post("/actions/"+a.ID+"/approve", nil, "HX-Request", "true")
		late.WantStatus(t, http.StatusConflict)
		late.WantContains(t, `<div id="action"`, "user:ann@example.com")
	})

	t.Run("unknown action", func(t *testing.T) {
		t.Parallel()
		ann.Get("/actions/nope").WantStatus(t, http.StatusNotFound)
		ann.Post("/actions/01000000-0000-7000-8000-000000000000/approve", nil).WantStatus(t, http.StatusNotFound)
	})
}

// TestDashboardEscapesPayloads shows markup in payloads and previews as
// text, on every page that shows them.
func TestDashboardEscapesPayloads(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	const xss = `<script>alert(1)</script>`
	a := d.SubmitEmail("<img src=x onerror=alert(2)>", xss, `"><svg onload=alert(3)>`+xss)
	u := d.Submit("totally_unknown_tool", `{"html":"<b onmouseover=alert(4)>x</b>","x":"`+`</pre><script>alert(5)</script>"}`, `k:<script>alert(6)</script>`)
	for _, path := range []string{"/", "/actions/" + a.ID, "/actions/" + u.ID, "/actions?tool=totally_unknown_tool", "/audit"} {
		p := ann.Get(path)
		p.WantStatus(t, http.StatusOK)
		for _, bad := range []string{"<script>alert", "<img src=x", "<svg", "<b onmouseover", "</pre><script>"} {
			if strings.Contains(p.Body, bad) {
				t.Errorf("%s renders %q as markup", path, bad)
			}
		}
		if path == "/actions/"+a.ID {
			p.WantContains(t, "&lt;script&gt;alert(1)&lt;/script&gt;")
		}
	}
	ann.Get("/actions/"+u.ID).WantContains(t, "tool not registered")
}

// TestDashboardSessionsEnd ends a session at once on logout, on a
// password change and on the user's removal; the old cookie opens nothing.
func TestDashboardSessionsEnd(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	admin := d.AddUser("root@example.com", accounts.RoleAdmin)
	_ = admin
	root := d.Login("root@example.com")

	for _, how := range []string{"logout", "password", "remove"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			u := d.AddUser(how+"@example.com", accounts.RoleApprover)
			b := d.Login(how + "@example.com")
			// The same cookies, copied into another browser: whatever b's
			// own jar does at logout, this one keeps replaying them.
			stolen := d.Anonymous()
			base, _ := url.Parse(d.URL)
			stolen.Client.Jar.SetCookies(base, b.Client.Jar.Cookies(base))
			stolen.Get("/").WantStatus(t, http.StatusOK)
			id := strconv.FormatInt(u.ID, 10)
			switch how {
			case "logout":
				b.Post("/logout", nil).WantRedirect(t, "/login")
			case "password":
				root.Post("/admin/users/"+id+"/password", url.Values{"password": {"a brand new password"}}).WantRedirect(t, "/admin/users?done=password")
			case "remove":
				root.Post("/admin/users/"+id+"/remove", nil).WantRedirect(t, "/admin/users?done=removed")
			}
			stolen.Get("/").WantRedirect(t, "/login")
			stolen.Post("/actions/x/approve", nil).WantRedirect(t, "/login")
		})
	}
}

// TestDashboardLogoutCookieReplay replays the cookie a browser sent before
// logging out: the session row is gone, so it opens nothing.
func TestDashboardLogoutCookieReplay(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("ann@example.com", accounts.RoleViewer)
	u, _ := url.Parse(d.URL)
	var cookie *http.Cookie
	for _, c := range b.Client.Jar.Cookies(u) {
		if c.Name == "approvals_session" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	b.Post("/logout", nil).WantRedirect(t, "/login")
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/", nil)
	req.AddCookie(cookie)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("old cookie after logout: %d, want 303 to /login", res.StatusCode)
	}
}

// TestDashboardLoginRateLimit answers 429 after repeated failures for one
// account, whatever the password, and for one address across accounts.
func TestDashboardLoginRateLimit(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("ann@example.com", accounts.RoleViewer)
	b := d.Anonymous()
	b.Get("/login")
	for i := range 5 {
		p := b.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {"wrong password " + strconv.Itoa(i)}})
		p.WantStatus(t, http.StatusUnauthorized)
		p.WantContains(t, "The email or password is wrong.")
	}
	// The 6th guess, wrong or right, is refused unchecked.
	p := b.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {"wrong password 5"}})
	p.WantStatus(t, http.StatusTooManyRequests)
	p = b.Post("/login", url.Values{"email": {"ANN@example.com"}, "password": {apptest.Password}})
	p.WantStatus(t, http.StatusTooManyRequests)
	p.WantContains(t, "Too many failed sign-ins")
	if p.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Per address: failures spread over accounts (15 unknown ones here)
	// reach the address limit of 20.
	for i := range 15 {
		b.Post("/login", url.Values{"email": {fmt.Sprintf("nobody%d@example.com", i)}, "password": {"guess"}}).WantStatus(t, http.StatusUnauthorized)
	}
	d.AddUser("bob@example.com", accounts.RoleViewer)
	b.Post("/login", url.Values{"email": {"bob@example.com"}, "password": {apptest.Password}}).WantStatus(t, http.StatusTooManyRequests)
}

// TestDashboardTickets resolves a stale ticket (ops), refuses a second
// resolution (409) and a missing note (400), and shows what operators need.
func TestDashboardTickets(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ops := d.SignIn("ops@example.com", accounts.RoleOps)
	a, tk := d.StaleTicket("o1")

	list := ops.Get("/tickets")
	list.WantStatus(t, http.StatusOK)
	list.WantContains(t, "refund:o1:1", "agent:bot", "List refunds on the order line in the payment provider.", "agent", a.ID,
		`id="ticket-count"`, `open: </span>1`)

	path := "/tickets/" + tk.ID + "/resolve"
	p := ops.Post(path, url.Values{"outcome": {"done"}, "note": {""}})
	p.WantStatus(t, http.StatusBadRequest)
	p.WantContains(t, "say what you checked")
	ops.Post(path, url.Values{"outcome": {"maybe"}, "note": {"x"}}).WantStatus(t, http.StatusBadRequest)
	ops.Post(path, url.Values{"outcome": {"done"}, "note": {"x"}, "result": {"{not json"}}).WantStatus(t, http.StatusBadRequest)
	if got := d.Action(a.ID); got.State != queue.StateInProgress {
		t.Fatalf("state %s after refused resolutions", got.State)
	}
	ops.Post(path, url.Values{"outcome": {"done"}, "note": {"refund re_1 is listed"}, "result": {`{"refund":"re_1"}`}}).WantRedirect(t, "/tickets")
	got := d.Action(a.ID)
	if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(`{"refund":"re_1"}`)) {
		t.Fatalf("action %s result %s", got.State, got.Result)
	}
	again := ops.Post(path, url.Values{"outcome": {"failed"}, "note": {"no"}})
	again.WantStatus(t, http.StatusConflict)
	again.WantContains(t, "already resolved by user:ops@example.com")
	// A late resolution with a bad form still learns who resolved it first.
	late := ops.Post(path, url.Values{"outcome": {"done"}, "note": {""}})
	late.WantStatus(t, http.StatusConflict)
	late.WantContains(t, "already resolved by user:ops@example.com")
	ops.Get("/tickets?state=resolved").WantContains(t, "refund re_1 is listed")
	ops.Get("/actions/"+a.ID).WantContains(t, "Ticket resolved", "refund re_1 is listed")
	ops.Post("/tickets/01000000-0000-7000-8000-000000000000/resolve", url.Values{"outcome": {"done"}, "note": {"x"}}).WantStatus(t, http.StatusNotFound)
}

// TestDashboardAdmin creates users and tokens; a token is shown once,
// works on the API, and is refused after revocation.
func TestDashboardAdmin(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	root := d.AddUser("root@example.com", accounts.RoleAdmin)
	b := d.Login("root@example.com")

	b.Post("/admin/users", url.Values{"email": {" New@Example.com "}, "role": {"approver"}, "password": {"long enough password"}}).WantRedirect(t, "/admin/users?done=created")
	b.Get("/admin/users?done=created").WantContains(t, "new@example.com", "User added.")
	for _, bad := range []url.Values{
		{"email": {"new@example.com"}, "role": {"approver"}, "password": {"long enough password"}},
		{"email": {"not an email"}, "role": {"approver"}, "password": {"long enough password"}},
		{"email": {"x@example.com"}, "role": {"king"}, "password": {"long enough password"}},
		{"email": {"x@example.com"}, "role": {"viewer"}, "password": {"short"}},
	} {
		p := b.Post("/admin/users", bad)
		p.WantStatus(t, http.StatusBadRequest)
		p.WantContains(t, `class="alert alert-error"`)
	}
	self := "/admin/users/" + strconv.FormatInt(root.ID, 10)
	b.Post(self+"/role", url.Values{"role": {"viewer"}}).WantStatus(t, http.StatusBadRequest)
	b.Post(self+"/remove", nil).WantStatus(t, http.StatusBadRequest)
	b.Post("/admin/users/999999/remove", nil).WantStatus(t, http.StatusNotFound)
	nu := d.LoginWith("new@example.com", "long enough password")
	nu.Get("/admin/users").WantStatus(t, http.StatusForbidden)

	p := b.Post("/admin/tokens", url.Values{"name": {"billing"}})
	p.WantStatus(t, http.StatusOK)
	m := regexp.MustCompile(`data-testid="new-token">(apv_[A-Za-z0-9_-]+)<`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no token shown:\n%s", apptest.TruncateBody(p.Body))
	}
	if p.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token page Cache-Control %q", p.Header.Get("Cache-Control"))
	}
	list := b.Get("/admin/tokens")
	if strings.Contains(list.Body, m[1]) {
		t.Fatal("the token is shown a second time")
	}
	list.WantContains(t, "billing", "active")
	b.Post("/admin/tokens", url.Values{"name": {"billing"}}).WantStatus(t, http.StatusBadRequest)
	b.Post("/admin/tokens", url.Values{"name": {"bad name!"}}).WantStatus(t, http.StatusBadRequest)

	api := func() int {
		req, _ := http.NewRequest(http.MethodGet, d.URL+"/api/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+m[1])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := api(); s != http.StatusOK {
		t.Fatalf("API with the new token: %d", s)
	}
	b.Post("/admin/tokens/revoke", url.Values{"name": {"billing"}}).WantRedirect(t, "/admin/tokens?done=revoked")
	if s := api(); s != http.StatusUnauthorized {
		t.Fatalf("API with a revoked token: %d", s)
	}
	b.Post("/admin/tokens/revoke", url.Values{"name": {"billing"}}).WantStatus(t, http.StatusNotFound)
}

// TestDashboardSetup creates the first admin through the one-time link,
// which then stops working.
func TestDashboardSetup(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ctx := context.Background()
	link, err := d.Server.SetupURL(ctx, d.URL+"/")
	if err != nil || !strings.HasPrefix(link, d.URL+"/setup?token=") {
		t.Fatalf("setup link %q, %v", link, err)
	}
	again, _ := d.Server.SetupURL(ctx, d.URL)
	if again != link {
		t.Fatalf("second setup link %q differs from %q", again, link)
	}
	path := strings.TrimPrefix(link, d.URL)
	b := d.Anonymous()
	b.Get("/setup?token=wrong").WantStatus(t, http.StatusNotFound)
	b.Get(path).WantContains(t, "Create admin and sign in")
	token, _ := url.Parse(link)
	tok := token.Query().Get("token")
	b.Post("/setup", url.Values{"token": {tok}, "email": {"boss@example.com"}, "password": {"short"}}).WantStatus(t, http.StatusUnprocessableEntity)
	b.Post("/setup", url.Values{"token": {tok}, "email": {"boss@example.com"}, "password": {"a long password"}}).WantRedirect(t, "/")
	b.Get("/admin/users").WantContains(t, "boss@example.com")
	if l, err := d.Server.SetupURL(ctx, d.URL); l != "" || err != nil {
		t.Fatalf("setup link after setup: %q, %v", l, err)
	}
	d.Anonymous().Get(path).WantStatus(t, http.StatusNotFound)
	c := d.Anonymous()
	c.Get("/login")
	c.Post("/setup", url.Values{"token": {tok}, "email": {"eve@example.com"}, "password": {"a long password"}}).WantStatus(t, http.StatusNotFound)
}

// TestDashboardSetupUntilAnAdminExists follows the README in order: a
// user who is not an admin (added from the command line) leaves the setup
// link working, because only an admin can add the others; once an admin
// exists the link's page says so.
func TestDashboardSetupUntilAnAdminExists(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ctx := context.Background()
	d.AddUser("ann@example.com", accounts.RoleApprover)
	link, err := d.Server.SetupURL(ctx, d.URL)
	if err != nil || link == "" {
		t.Fatalf("setup link with only an approver: %q, %v", link, err)
	}
	path := strings.TrimPrefix(link, d.URL)
	b := d.Anonymous()
	b.Get(path).WantContains(t, "Create admin and sign in")
	u, _ := url.Parse(link)
	b.Post("/setup", url.Values{"token": {u.Query().Get("token")}, "email": {"boss@example.com"}, "password": {"a long password"}}).WantRedirect(t, "/")
	if l, err := d.Server.SetupURL(ctx, d.URL); l != "" || err != nil {
		t.Fatalf("setup link once an admin exists: %q, %v", l, err)
	}
	after := d.Anonymous().Get(path)
	after.WantStatus(t, http.StatusNotFound)
	after.WantContains(t, "an admin exists already")
}

// TestDashboardSetupRace: people using the setup link at the same moment
// create exactly one admin.
func TestDashboardSetupRace(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	link, err := d.Server.SetupURL(context.Background(), d.URL)
	if err != nil || link == "" {
		t.Fatalf("setup link %q, %v", link, err)
	}
	u, _ := url.Parse(link)
	tok := u.Query().Get("token")
	const n = 10
	browsers := make([]*apptest.Browser, n)
	for i := range browsers {
		browsers[i] = d.Anonymous()
		browsers[i].Get(strings.TrimPrefix(link, d.URL)).WantStatus(t, http.StatusOK)
	}
	statuses := apptest.RunConcurrently(n, func(i int) int {
		return browsers[i].Post("/setup", url.Values{"token": {tok}, "email": {fmt.Sprintf("admin%d@example.com", i)},
			"password": {"a long password"}}).Status
	})
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			created++
		case http.StatusNotFound:
		default:
			t.Errorf("setup answered %d", s)
		}
	}
	users, err := d.Store.UserCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if created != 1 || users != 1 {
		t.Fatalf("%d setups succeeded and %d users exist; want exactly one admin", created, users)
	}
}

// TestDashboardLoginBurst: parallel guesses count against each other, so a
// burst gets no more password checks than the limit allows.
func TestDashboardLoginBurst(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("ann@example.com", accounts.RoleViewer)
	const n = 20
	browsers := make([]*apptest.Browser, n)
	for i := range browsers {
		browsers[i] = d.Anonymous()
		browsers[i].Get("/login").WantStatus(t, http.StatusOK)
	}
	statuses := apptest.RunConcurrently(n, func(i int) int {
		return browsers[i].Post("/login", url.Values{"email": {"ann@example.com"}, "password": {"guess " + strconv.Itoa(i)}}).Status
	})
	checked := 0
	for _, s := range statuses {
		switch s {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("login answered %d", s)
		}
	}
	// At most the limit. Not exactly: each guess records itself before it
	// counts, so guesses of one burst may see each other and refuse more
	// than needed. The lower bound (the 5th guess is still checked) is
	// TestDashboardLoginRateLimit's, one guess at a time.
	if checked > 5 {
		t.Fatalf("%d of %d parallel guesses had their password checked; the limit is 5", checked, n)
	}
}

// TestDashboardUsesServiceClock: the times the dashboard records (tokens
// created and revoked, users created) come from the Service's clock, like
// every other time the service records, not from the wall clock.
func TestDashboardUsesServiceClock(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("root@example.com", accounts.RoleAdmin)
	d.Advance(48 * time.Hour)
	ahead := time.Now().Add(47 * time.Hour)

	b.Post("/admin/tokens", url.Values{"name": {"clocked"}}).WantStatus(t, http.StatusOK)
	b.Post("/admin/tokens/revoke", url.Values{"name": {"clocked"}}).WantRedirect(t, "/admin/tokens?done=revoked")
	b.Post("/admin/users", url.Values{"email": {"clocked@example.com"}, "role": {"viewer"}, "password": {"long enough password"}}).
		WantRedirect(t, "/admin/users?done=created")

	tokens, err := d.Store.TokenList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tok := range tokens {
		if tok.Name != "clocked" {
			continue
		}
		found = true
		if tok.CreatedAt.Before(ahead) || tok.RevokedAt == nil || tok.RevokedAt.Before(ahead) {
			t.Errorf("token created %v, revoked %v; want both on the Service's clock (after %v)", tok.CreatedAt, tok.RevokedAt, ahead)
		}
	}
	if !found {
		t.Fatal("token not stored")
	}
	u, err := d.Store.UserGetByEmail(context.Background(), "clocked@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if u.CreatedAt.Before(ahead) {
		t.Errorf("user created %v, want the Service's clock (after %v)", u.CreatedAt, ahead)
	}
}

// TestDashboardSetupEmailTaken: the setup link used with the email of a
// user who exists already (an approver added from the command line, or a
// person who signed in with SSO first) re-shows the form with the error,
// not a 5xx, and leaves the link working for another try.
func TestDashboardSetupEmailTaken(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		d := apptest.StartDashboard(t, apptest.Options{SQLite: sqlite})
		d.AddUser("ann@example.com", accounts.RoleApprover)
		link, err := d.Server.SetupURL(context.Background(), d.URL)
		if err != nil || link == "" {
			t.Fatalf("setup link %q, %v", link, err)
		}
		u, _ := url.Parse(link)
		tok := u.Query().Get("token")
		b := d.Anonymous()
		b.Get(strings.TrimPrefix(link, d.URL)).WantStatus(t, http.StatusOK)
		r := b.Post("/setup", url.Values{"token": {tok}, "email": {"Ann@example.com"}, "password": {"a long password"}})
		r.WantStatus(t, http.StatusUnprocessableEntity)
		r.WantContains(t, "already has an account")
		b.Post("/setup", url.Values{"token": {tok}, "email": {"boss@example.com"}, "password": {"a long password"}}).WantRedirect(t, "/")
		b.Get("/admin/users").WantContains(t, "boss@example.com")
	}
}
