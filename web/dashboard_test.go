package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// dashRoute is one dashboard route with what it takes to call it.
type dashRoute struct {
	name string
	// route is the route as the router registers it ("POST
	// /actions/:id/approve"): the tests walk the router's routes and look
	// each up here, so a route added without an entry fails them.
	route  string
	method string
	// prepare creates what the request needs (a pending action, an open
	// ticket, a user to remove) and returns the path and form.
	prepare func(d *dashEnv, n int) (string, url.Values)
	// ok is the status for a role with the right; every other role gets 403.
	ok    int
	roles []accounts.Role
}

var (
	allStaff  = []accounts.Role{accounts.RoleAdmin, accounts.RoleApprover, accounts.RoleOps, accounts.RoleViewer}
	deciders  = []accounts.Role{accounts.RoleAdmin, accounts.RoleApprover}
	resolvers = []accounts.Role{accounts.RoleAdmin, accounts.RoleOps}
	admins    = []accounts.Role{accounts.RoleAdmin}
)

func fixed(path string) func(*dashEnv, int) (string, url.Values) {
	return func(*dashEnv, int) (string, url.Values) { return path, nil }
}

func dashRoutes() []dashRoute {
	pending := func(d *dashEnv, n int) string {
		return d.submitEmail(fmt.Sprintf("route%d", n), "Hello", "Body").ID
	}
	return []dashRoute{
		{"queue", "GET /", http.MethodGet, fixed("/"), http.StatusOK, allStaff},
		{"search", "GET /actions", http.MethodGet, fixed("/actions?state=pending"), http.StatusOK, allStaff},
		{"action", "GET /actions/:id", http.MethodGet, func(d *dashEnv, n int) (string, url.Values) {
			return "/actions/" + pending(d, n), nil
		}, http.StatusOK, allStaff},
		{"audit", "GET /audit", http.MethodGet, fixed("/audit"), http.StatusOK, allStaff},
		{"tools", "GET /tools", http.MethodGet, fixed("/tools"), http.StatusOK, allStaff},
		{"tickets", "GET /tickets", http.MethodGet, fixed("/tickets"), http.StatusOK, allStaff},
		{"overview", "GET /overview", http.MethodGet, fixed("/overview"), http.StatusOK, allStaff},
		{"request changes", "POST /actions/:id/request-changes", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			return "/actions/" + pending(d, n) + "/request-changes", url.Values{"note": {"shorter, please"}}
		}, http.StatusSeeOther, deciders},
		{"user slack id", "POST /admin/users/:id/slack", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			u := d.addUser(fmt.Sprintf("slack%d@example.com", n), accounts.RoleApprover)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/slack", url.Values{"slack_id": {fmt.Sprintf("U%07d", n)}}
		}, http.StatusSeeOther, admins},
		{"bulk", "POST /actions/bulk", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			return "/actions/bulk", url.Values{"ids": {pending(d, n)}, "decision": {"approve"}, "note": {"fine"}}
		}, http.StatusOK, deciders},
		{"approve", "POST /actions/:id/approve", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			return "/actions/" + pending(d, n) + "/approve", url.Values{"note": {"fine"}}
		}, http.StatusSeeOther, deciders},
		{"reject", "POST /actions/:id/reject", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			return "/actions/" + pending(d, n) + "/reject", url.Values{"note": {"no"}}
		}, http.StatusSeeOther, deciders},
		{"resolve", "POST /tickets/:id/resolve", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			_, tk := d.staleTicket(fmt.Sprintf("route%d", n))
			return "/tickets/" + tk.ID + "/resolve", url.Values{"outcome": {"done"}, "note": {"refund is listed"}}
		}, http.StatusSeeOther, resolvers},
		{"users", "GET /admin/users", http.MethodGet, fixed("/admin/users"), http.StatusOK, admins},
		{"user create", "POST /admin/users", http.MethodPost, func(_ *dashEnv, n int) (string, url.Values) {
			return "/admin/users", url.Values{"email": {fmt.Sprintf("new%d@example.com", n)}, "role": {"viewer"}, "password": {"long enough password"}}
		}, http.StatusSeeOther, admins},
		{"user role", "POST /admin/users/:id/role", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			u := d.addUser(fmt.Sprintf("role%d@example.com", n), accounts.RoleViewer)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/role", url.Values{"role": {"ops"}}
		}, http.StatusSeeOther, admins},
		{"user password", "POST /admin/users/:id/password", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			u := d.addUser(fmt.Sprintf("pw%d@example.com", n), accounts.RoleViewer)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/password", url.Values{"password": {"another long password"}}
		}, http.StatusSeeOther, admins},
		{"user remove", "POST /admin/users/:id/remove", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			u := d.addUser(fmt.Sprintf("gone%d@example.com", n), accounts.RoleViewer)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/remove", nil
		}, http.StatusSeeOther, admins},
		{"tokens", "GET /admin/tokens", http.MethodGet, fixed("/admin/tokens"), http.StatusOK, admins},
		{"token create", "POST /admin/tokens", http.MethodPost, func(_ *dashEnv, n int) (string, url.Values) {
			return "/admin/tokens", url.Values{"name": {fmt.Sprintf("agent%d", n)}}
		}, http.StatusOK, admins},
		{"token revoke", "POST /admin/tokens/revoke", http.MethodPost, func(d *dashEnv, n int) (string, url.Values) {
			name := fmt.Sprintf("old%d", n)
			_, hash := accounts.NewToken()
			if _, err := d.store.TokenCreate(context.Background(), accounts.TokenCreateParams{Name: name, Hash: hash, Now: d.Now()}); err != nil {
				d.t.Fatal(err)
			}
			return "/admin/tokens/revoke", url.Values{"name": {name}}
		}, http.StatusSeeOther, admins},
	}
}

// TestDashboardRoles gives each role exactly the rights of the contract:
// approver and admin decide, ops and admin resolve, admin manages users
// and tokens, everyone reads; anything else is 403.
func TestDashboardRoles(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	browsers := map[accounts.Role]*browser{}
	for _, r := range allStaff {
		d.addUser(string(r)+"@example.com", r)
		browsers[r] = d.login(string(r) + "@example.com")
	}
	var n atomic.Int64
	table := map[string]dashRoute{}
	for _, rt := range dashRoutes() {
		table[rt.route] = rt
	}
	for _, key := range routerRoutes(t, d) {
		if _, public := publicRoutes[key]; public || signedRoutes[key] != "" || strings.HasPrefix(key[strings.IndexByte(key, ' ')+1:], "/api/") {
			continue
		}
		if key == "GET /events" {
			continue // a stream: TestDashboardEventsRoles
		}
		rt, ok := table[key]
		if !ok {
			t.Errorf("route %s has no entry in the role table (dashRoutes): say which roles may use it", key)
			continue
		}
		for _, role := range allStaff {
			t.Run(rt.name+"/"+string(role), func(t *testing.T) {
				t.Parallel()
				path, form := rt.prepare(d, int(n.Add(1)))
				var p page
				if rt.method == http.MethodGet {
					p = browsers[role].get(path)
				} else {
					p = browsers[role].post(path, form)
				}
				want := http.StatusForbidden
				for _, r := range rt.roles {
					if r == role {
						want = rt.ok
					}
				}
				p.wantStatus(t, want)
				if want == http.StatusForbidden {
					p.wantContains(t, "Forbidden", "your role ("+string(role)+") may not")
				}
			})
		}
	}
}

// TestDashboardAnonymousRedirected sends every dashboard route to /login
// without a session, and with only an agent bearer token.
func TestDashboardAnonymousRedirected(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	token, hash := accounts.NewToken()
	if _, err := d.store.TokenCreate(context.Background(), accounts.TokenCreateParams{Name: "bot", Hash: hash, Now: d.Now()}); err != nil {
		t.Fatal(err)
	}
	for i, rt := range dashRoutes() {
		path, form := rt.prepare(d, i)
		for _, auth := range []string{"", "Bearer " + token} {
			b := d.anonymous()
			b.get("/login") // a pre-session with a valid CSRF token: only the sign-in is missing
			var p page
			if rt.method == http.MethodGet {
				p = b.get(path, "Authorization", auth)
			} else {
				p = b.post(path, form, "Authorization", auth)
			}
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/login") {
				t.Errorf("%s %s (bearer %t): %d to %q, want 303 to /login", rt.method, path, auth != "", p.status, p.header.Get("Location"))
			}
		}
	}
	// The event stream, and htmx requests (told to navigate, not to swap
	// the login page into a fragment).
	d.anonymous().get("/events").wantRedirect(t, "/login")
	hx := d.anonymous().get("/", "HX-Request", "true")
	if hx.status != http.StatusNoContent || hx.header.Get("HX-Redirect") != "/login" {
		t.Fatalf("htmx without a session: %d HX-Redirect %q", hx.status, hx.header.Get("HX-Redirect"))
	}
	// The original page is where a sign-in returns to.
	b := d.anonymous()
	b.get("/tools").wantRedirect(t, "/login?next=%2Ftools")
	b.get("/login?next=%2Ftools").wantContains(t, `name="next" value="/tools"`)
	d.addUser("ann@example.com", accounts.RoleViewer)
	b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {dashPassword}, "next": {"/tools"}}).wantRedirect(t, "/tools")
	// Not somewhere else.
	c := d.anonymous()
	c.get("/login")
	c.post("/login", url.Values{"email": {"ann@example.com"}, "password": {dashPassword}, "next": {"//evil.example/"}}).wantRedirect(t, "/")
}

// TestDashboardCSRF refuses state-changing requests without the session's
// token, from a form field or a header, with 403 and no change.
func TestDashboardCSRF(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleApprover)
	ann := d.login("ann@example.com")
	other := d.anonymous()
	other.get("/login") // another session's valid token
	a := d.submitEmail("c1", "Hi", "Body")
	approve := "/actions/" + a.ID + "/approve"

	for name, form := range map[string]url.Values{
		"missing":       {"note": {"x"}, "_csrf": nil},
		"empty":         {"note": {"x"}, "_csrf": {""}},
		"wrong":         {"note": {"x"}, "_csrf": {"not-the-token"}},
		"other session": {"note": {"x"}, "_csrf": {other.csrf}},
	} {
		if form["_csrf"] == nil {
			form.Del("_csrf")
			ann.do(http.MethodPost, approve, strings.NewReader(form.Encode())).wantStatus(t, http.StatusForbidden)
			continue
		}
		if p := ann.post(approve, form); p.status != http.StatusForbidden {
			t.Errorf("%s token: %d, want 403", name, p.status)
		}
	}
	if got := d.action(a.ID); got.State != queue.StatePending {
		t.Fatalf("state %s after refused requests, want pending", got.State)
	}
	// The header works as well as the field (htmx sends it).
	ann.do(http.MethodPost, approve, strings.NewReader("note=ok"), "X-CSRF-Token", "nope").wantStatus(t, http.StatusForbidden)
	ann.do(http.MethodPost, approve, strings.NewReader("note=ok"), "X-CSRF-Token", ann.csrf).wantRedirect(t, "/actions/"+a.ID)

	// POST /login and /logout need the pre-session token too.
	b := d.anonymous()
	b.get("/login")
	b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {dashPassword}, "_csrf": {"forged"}}).wantStatus(t, http.StatusForbidden)
	fresh := d.anonymous()
	fresh.post("/login", url.Values{"email": {"ann@example.com"}, "password": {dashPassword}, "_csrf": {""}}).wantStatus(t, http.StatusForbidden)
	ann.post("/logout", url.Values{"_csrf": {"forged"}}).wantStatus(t, http.StatusForbidden)
	ann.get("/").wantStatus(t, http.StatusOK) // still signed in
}

// TestDashboardDecisions covers deciding: success, the same approver
// repeating it, another approver too late (409 naming who and when),
// missing and invalid fields (nothing changes), edits and htmx.
func TestDashboardDecisions(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleApprover)
	d.addUser("bob@example.com", accounts.RoleAdmin)
	ann, bob := d.login("ann@example.com"), d.login("bob@example.com")

	t.Run("second decision", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("c1", "Hi", "Body")
		ann.post("/actions/"+a.ID+"/approve", url.Values{"note": {"looks right"}}).wantRedirect(t, "/actions/"+a.ID)
		ann.post("/actions/"+a.ID+"/approve", url.Values{"note": {"looks right"}}).wantRedirect(t, "/actions/"+a.ID)
		p := bob.post("/actions/"+a.ID+"/approve", nil)
		p.wantStatus(t, http.StatusConflict)
		p.wantContains(t, "already", "approved", "user:ann@example.com", " UTC")
		bob.post("/actions/"+a.ID+"/reject", url.Values{"note": {"no"}}).wantStatus(t, http.StatusConflict)
		ann.post("/actions/"+a.ID+"/reject", url.Values{"note": {"changed my mind"}}).wantStatus(t, http.StatusConflict)
		// A late decision with a broken form still learns who decided.
		late := bob.post("/actions/"+a.ID+"/approve", url.Values{"payload": {"{not json"}})
		late.wantStatus(t, http.StatusConflict)
		late.wantContains(t, "user:ann@example.com")
		bob.post("/actions/"+a.ID+"/reject", url.Values{"note": {""}}).wantStatus(t, http.StatusConflict)
		if n := d.eventCount(a.ID, queue.EventApproved); n != 1 {
			t.Fatalf("%d approved events, want 1", n)
		}
		got := d.action(a.ID)
		if got.State != queue.StateApproved || *got.DecidedBy != "user:ann@example.com" || *got.DecisionNote != "looks right" {
			t.Fatalf("action %s by %v note %v", got.State, *got.DecidedBy, got.DecisionNote)
		}
		page := ann.get("/actions/" + a.ID)
		page.wantContains(t, `data-testid="state">approved<`, "looks right")
		if strings.Contains(page.body, `id="approve-form"`) {
			t.Fatal("a decided action still shows the approve form")
		}
	})

	t.Run("reject needs a reason", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("c2", "Hi", "Body")
		p := ann.post("/actions/"+a.ID+"/reject", url.Values{"note": {"   "}})
		p.wantStatus(t, http.StatusBadRequest)
		p.wantContains(t, `id="reject-form"`, `id="reject-error"`, "a reason is required")
		if got := d.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("state %s, want pending", got.State)
		}
		ann.post("/actions/"+a.ID+"/reject", url.Values{"note": {"wrong customer"}}).wantRedirect(t, "/actions/"+a.ID)
		ann.post("/actions/"+a.ID+"/reject", url.Values{"note": {"wrong customer"}}).wantRedirect(t, "/actions/"+a.ID)
		if got := d.action(a.ID); got.State != queue.StateRejected || *got.DecisionNote != "wrong customer" {
			t.Fatalf("state %s, want rejected with the reason", got.State)
		}
	})

	t.Run("edited payload", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("c3", "Helo", "Body")
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
			p := ann.post(path, url.Values{"payload": {tc.payload}, "note": {"kept"}})
			p.wantStatus(t, tc.status)
			p.wantContains(t, tc.say, `id="approve-error"`, `value="kept"`)
			if got := d.action(a.ID); got.State != queue.StatePending {
				t.Fatalf("payload %s: state %s, want pending", tc.payload, got.State)
			}
		}
		edit := `{"customer_id": "c3", "topic": "t", "to": "c@example.com", "subject": "Hello", "body": "Body"}`
		ann.post(path, url.Values{"payload": {edit}}).wantRedirect(t, "/actions/"+a.ID)
		got := d.action(a.ID)
		if !queue.JSONEqual(got.ApprovedPayload, []byte(edit)) || queue.JSONEqual(got.Payload, []byte(edit)) {
			t.Fatalf("approved_payload %s, payload %s", got.ApprovedPayload, got.Payload)
		}
		ann.get("/actions/"+a.ID).wantContains(t, "Edited before approval: subject", `data-testid="approved-payload"`)
	})

	t.Run("htmx gets the fragment", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("c4", "Hi", "Body")
		p := ann.post("/actions/"+a.ID+"/approve", nil, "HX-Request", "true")
		p.wantStatus(t, http.StatusOK)
		p.wantContains(t, `<div id="action"`, "Approved.", `data-testid="state">approved<`)
		if strings.Contains(p.body, "<html") {
			t.Fatal("htmx answer is a whole page")
		}
		late := bob.post("/actions/"+a.ID+"/approve", nil, "HX-Request", "true")
		late.wantStatus(t, http.StatusConflict)
		late.wantContains(t, `<div id="action"`, "user:ann@example.com")
	})

	t.Run("unknown action", func(t *testing.T) {
		t.Parallel()
		ann.get("/actions/nope").wantStatus(t, http.StatusNotFound)
		ann.post("/actions/01000000-0000-7000-8000-000000000000/approve", nil).wantStatus(t, http.StatusNotFound)
	})
}

// TestDashboardEscapesPayloads shows markup in payloads and previews as
// text, on every page that shows them.
func TestDashboardEscapesPayloads(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleApprover)
	ann := d.login("ann@example.com")
	const xss = `<script>alert(1)</script>`
	a := d.submitEmail("<img src=x onerror=alert(2)>", xss, `"><svg onload=alert(3)>`+xss)
	u := d.submit("totally_unknown_tool", `{"html":"<b onmouseover=alert(4)>x</b>","x":"`+`</pre><script>alert(5)</script>"}`, `k:<script>alert(6)</script>`)
	for _, path := range []string{"/", "/actions/" + a.ID, "/actions/" + u.ID, "/actions?tool=totally_unknown_tool", "/audit"} {
		p := ann.get(path)
		p.wantStatus(t, http.StatusOK)
		for _, bad := range []string{"<script>alert", "<img src=x", "<svg", "<b onmouseover", "</pre><script>"} {
			if strings.Contains(p.body, bad) {
				t.Errorf("%s renders %q as markup", path, bad)
			}
		}
		if path == "/actions/"+a.ID {
			p.wantContains(t, "&lt;script&gt;alert(1)&lt;/script&gt;")
		}
	}
	ann.get("/actions/"+u.ID).wantContains(t, "tool not registered")
}

// TestDashboardSessionsEnd ends a session at once on logout, on a
// password change and on the user's removal; the old cookie opens nothing.
func TestDashboardSessionsEnd(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	admin := d.addUser("root@example.com", accounts.RoleAdmin)
	_ = admin
	root := d.login("root@example.com")

	for _, how := range []string{"logout", "password", "remove"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			u := d.addUser(how+"@example.com", accounts.RoleApprover)
			b := d.login(how + "@example.com")
			// The same cookies, copied into another browser: whatever b's
			// own jar does at logout, this one keeps replaying them.
			stolen := d.anonymous()
			base, _ := url.Parse(d.url)
			stolen.client.Jar.SetCookies(base, b.client.Jar.Cookies(base))
			stolen.get("/").wantStatus(t, http.StatusOK)
			id := strconv.FormatInt(u.ID, 10)
			switch how {
			case "logout":
				b.post("/logout", nil).wantRedirect(t, "/login")
			case "password":
				root.post("/admin/users/"+id+"/password", url.Values{"password": {"a brand new password"}}).wantRedirect(t, "/admin/users?done=password")
			case "remove":
				root.post("/admin/users/"+id+"/remove", nil).wantRedirect(t, "/admin/users?done=removed")
			}
			stolen.get("/").wantRedirect(t, "/login")
			stolen.post("/actions/x/approve", nil).wantRedirect(t, "/login")
		})
	}
}

// TestDashboardLogoutCookieReplay replays the cookie a browser sent before
// logging out: the session row is gone, so it opens nothing.
func TestDashboardLogoutCookieReplay(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleViewer)
	b := d.login("ann@example.com")
	u, _ := url.Parse(d.url)
	var cookie *http.Cookie
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "approvals_session" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	b.post("/logout", nil).wantRedirect(t, "/login")
	req, _ := http.NewRequest(http.MethodGet, d.url+"/", nil)
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
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleViewer)
	b := d.anonymous()
	b.get("/login")
	for i := range 5 {
		p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"wrong password " + strconv.Itoa(i)}})
		p.wantStatus(t, http.StatusUnauthorized)
		p.wantContains(t, "The email or password is wrong.")
	}
	// The 6th guess, wrong or right, is refused unchecked.
	p := b.post("/login", url.Values{"email": {"ann@example.com"}, "password": {"wrong password 5"}})
	p.wantStatus(t, http.StatusTooManyRequests)
	p = b.post("/login", url.Values{"email": {"ANN@example.com"}, "password": {dashPassword}})
	p.wantStatus(t, http.StatusTooManyRequests)
	p.wantContains(t, "Too many failed sign-ins")
	if p.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Per address: failures spread over accounts (15 unknown ones here)
	// reach the address limit of 20.
	for i := range 15 {
		b.post("/login", url.Values{"email": {fmt.Sprintf("nobody%d@example.com", i)}, "password": {"guess"}}).wantStatus(t, http.StatusUnauthorized)
	}
	d.addUser("bob@example.com", accounts.RoleViewer)
	b.post("/login", url.Values{"email": {"bob@example.com"}, "password": {dashPassword}}).wantStatus(t, http.StatusTooManyRequests)
}

// TestDashboardTickets resolves a stale ticket (ops), refuses a second
// resolution (409) and a missing note (400), and shows what operators need.
func TestDashboardTickets(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	d.addUser("ops@example.com", accounts.RoleOps)
	ops := d.login("ops@example.com")
	a, tk := d.staleTicket("o1")

	list := ops.get("/tickets")
	list.wantStatus(t, http.StatusOK)
	list.wantContains(t, "refund:o1:1", "agent:bot", "List refunds on the order line in the payment provider.", "agent", a.ID,
		`id="ticket-count"`, `open: </span>1`)

	path := "/tickets/" + tk.ID + "/resolve"
	p := ops.post(path, url.Values{"outcome": {"done"}, "note": {""}})
	p.wantStatus(t, http.StatusBadRequest)
	p.wantContains(t, "say what you checked")
	ops.post(path, url.Values{"outcome": {"maybe"}, "note": {"x"}}).wantStatus(t, http.StatusBadRequest)
	ops.post(path, url.Values{"outcome": {"done"}, "note": {"x"}, "result": {"{not json"}}).wantStatus(t, http.StatusBadRequest)
	if got := d.action(a.ID); got.State != queue.StateInProgress {
		t.Fatalf("state %s after refused resolutions", got.State)
	}
	ops.post(path, url.Values{"outcome": {"done"}, "note": {"refund re_1 is listed"}, "result": {`{"refund":"re_1"}`}}).wantRedirect(t, "/tickets")
	got := d.action(a.ID)
	if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(`{"refund":"re_1"}`)) {
		t.Fatalf("action %s result %s", got.State, got.Result)
	}
	again := ops.post(path, url.Values{"outcome": {"failed"}, "note": {"no"}})
	again.wantStatus(t, http.StatusConflict)
	again.wantContains(t, "already resolved by user:ops@example.com")
	// A late resolution with a bad form still learns who resolved it first.
	late := ops.post(path, url.Values{"outcome": {"done"}, "note": {""}})
	late.wantStatus(t, http.StatusConflict)
	late.wantContains(t, "already resolved by user:ops@example.com")
	ops.get("/tickets?state=resolved").wantContains(t, "refund re_1 is listed")
	ops.get("/actions/"+a.ID).wantContains(t, "Ticket resolved", "refund re_1 is listed")
	ops.post("/tickets/01000000-0000-7000-8000-000000000000/resolve", url.Values{"outcome": {"done"}, "note": {"x"}}).wantStatus(t, http.StatusNotFound)
}

// TestDashboardAdmin creates users and tokens; a token is shown once,
// works on the API, and is refused after revocation.
func TestDashboardAdmin(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	root := d.addUser("root@example.com", accounts.RoleAdmin)
	b := d.login("root@example.com")

	b.post("/admin/users", url.Values{"email": {" New@Example.com "}, "role": {"approver"}, "password": {"long enough password"}}).wantRedirect(t, "/admin/users?done=created")
	b.get("/admin/users?done=created").wantContains(t, "new@example.com", "User added.")
	for _, bad := range []url.Values{
		{"email": {"new@example.com"}, "role": {"approver"}, "password": {"long enough password"}},
		{"email": {"not an email"}, "role": {"approver"}, "password": {"long enough password"}},
		{"email": {"x@example.com"}, "role": {"king"}, "password": {"long enough password"}},
		{"email": {"x@example.com"}, "role": {"viewer"}, "password": {"short"}},
	} {
		p := b.post("/admin/users", bad)
		p.wantStatus(t, http.StatusBadRequest)
		p.wantContains(t, `class="alert alert-error"`)
	}
	self := "/admin/users/" + strconv.FormatInt(root.ID, 10)
	b.post(self+"/role", url.Values{"role": {"viewer"}}).wantStatus(t, http.StatusBadRequest)
	b.post(self+"/remove", nil).wantStatus(t, http.StatusBadRequest)
	b.post("/admin/users/999999/remove", nil).wantStatus(t, http.StatusNotFound)
	nu := d.loginWith("new@example.com", "long enough password")
	nu.get("/admin/users").wantStatus(t, http.StatusForbidden)

	p := b.post("/admin/tokens", url.Values{"name": {"billing"}})
	p.wantStatus(t, http.StatusOK)
	m := regexp.MustCompile(`data-testid="new-token">(apv_[A-Za-z0-9_-]+)<`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no token shown:\n%s", truncateBody(p.body))
	}
	if p.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token page Cache-Control %q", p.header.Get("Cache-Control"))
	}
	list := b.get("/admin/tokens")
	if strings.Contains(list.body, m[1]) {
		t.Fatal("the token is shown a second time")
	}
	list.wantContains(t, "billing", "active")
	b.post("/admin/tokens", url.Values{"name": {"billing"}}).wantStatus(t, http.StatusBadRequest)
	b.post("/admin/tokens", url.Values{"name": {"bad name!"}}).wantStatus(t, http.StatusBadRequest)

	api := func() int {
		req, _ := http.NewRequest(http.MethodGet, d.url+"/api/v1/tools", nil)
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
	b.post("/admin/tokens/revoke", url.Values{"name": {"billing"}}).wantRedirect(t, "/admin/tokens?done=revoked")
	if s := api(); s != http.StatusUnauthorized {
		t.Fatalf("API with a revoked token: %d", s)
	}
	b.post("/admin/tokens/revoke", url.Values{"name": {"billing"}}).wantStatus(t, http.StatusNotFound)
}

// TestDashboardSetup creates the first admin through the one-time link,
// which then stops working.
func TestDashboardSetup(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	ctx := context.Background()
	link, err := d.srv.SetupURL(ctx, d.url+"/")
	if err != nil || !strings.HasPrefix(link, d.url+"/setup?token=") {
		t.Fatalf("setup link %q, %v", link, err)
	}
	again, _ := d.srv.SetupURL(ctx, d.url)
	if again != link {
		t.Fatalf("second setup link %q differs from %q", again, link)
	}
	path := strings.TrimPrefix(link, d.url)
	b := d.anonymous()
	b.get("/setup?token=wrong").wantStatus(t, http.StatusNotFound)
	b.get(path).wantContains(t, "Create admin and sign in")
	token, _ := url.Parse(link)
	tok := token.Query().Get("token")
	b.post("/setup", url.Values{"token": {tok}, "email": {"boss@example.com"}, "password": {"short"}}).wantStatus(t, http.StatusUnprocessableEntity)
	b.post("/setup", url.Values{"token": {tok}, "email": {"boss@example.com"}, "password": {"a long password"}}).wantRedirect(t, "/")
	b.get("/admin/users").wantContains(t, "boss@example.com")
	if l, err := d.srv.SetupURL(ctx, d.url); l != "" || err != nil {
		t.Fatalf("setup link after setup: %q, %v", l, err)
	}
	d.anonymous().get(path).wantStatus(t, http.StatusNotFound)
	c := d.anonymous()
	c.get("/login")
	c.post("/setup", url.Values{"token": {tok}, "email": {"eve@example.com"}, "password": {"a long password"}}).wantStatus(t, http.StatusNotFound)
}

// TestDashboardSetupUntilAnAdminExists follows the README in order: a
// user who is not an admin (added from the command line) leaves the setup
// link working, because only an admin can add the others; once an admin
// exists the link's page says so.
func TestDashboardSetupUntilAnAdminExists(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	ctx := context.Background()
	d.addUser("ann@example.com", accounts.RoleApprover)
	link, err := d.srv.SetupURL(ctx, d.url)
	if err != nil || link == "" {
		t.Fatalf("setup link with only an approver: %q, %v", link, err)
	}
	path := strings.TrimPrefix(link, d.url)
	b := d.anonymous()
	b.get(path).wantContains(t, "Create admin and sign in")
	u, _ := url.Parse(link)
	b.post("/setup", url.Values{"token": {u.Query().Get("token")}, "email": {"boss@example.com"}, "password": {"a long password"}}).wantRedirect(t, "/")
	if l, err := d.srv.SetupURL(ctx, d.url); l != "" || err != nil {
		t.Fatalf("setup link once an admin exists: %q, %v", l, err)
	}
	after := d.anonymous().get(path)
	after.wantStatus(t, http.StatusNotFound)
	after.wantContains(t, "an admin exists already")
}

// TestDashboardSetupRace: people using the setup link at the same moment
// create exactly one admin.
func TestDashboardSetupRace(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	link, err := d.srv.SetupURL(context.Background(), d.url)
	if err != nil || link == "" {
		t.Fatalf("setup link %q, %v", link, err)
	}
	u, _ := url.Parse(link)
	tok := u.Query().Get("token")
	const n = 10
	browsers := make([]*browser, n)
	for i := range browsers {
		browsers[i] = d.anonymous()
		browsers[i].get(strings.TrimPrefix(link, d.url)).wantStatus(t, http.StatusOK)
	}
	statuses := runConcurrently(n, func(i int) int {
		return browsers[i].post("/setup", url.Values{"token": {tok}, "email": {fmt.Sprintf("admin%d@example.com", i)},
			"password": {"a long password"}}).status
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
	users, err := d.store.UserCount(context.Background())
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
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleViewer)
	const n = 20
	browsers := make([]*browser, n)
	for i := range browsers {
		browsers[i] = d.anonymous()
		browsers[i].get("/login").wantStatus(t, http.StatusOK)
	}
	statuses := runConcurrently(n, func(i int) int {
		return browsers[i].post("/login", url.Values{"email": {"ann@example.com"}, "password": {"guess " + strconv.Itoa(i)}}).status
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
	d := startDashboard(t)
	d.addUser("root@example.com", accounts.RoleAdmin)
	b := d.login("root@example.com")
	d.Advance(48 * time.Hour)
	ahead := time.Now().Add(47 * time.Hour)

	b.post("/admin/tokens", url.Values{"name": {"clocked"}}).wantStatus(t, http.StatusOK)
	b.post("/admin/tokens/revoke", url.Values{"name": {"clocked"}}).wantRedirect(t, "/admin/tokens?done=revoked")
	b.post("/admin/users", url.Values{"email": {"clocked@example.com"}, "role": {"viewer"}, "password": {"long enough password"}}).
		wantRedirect(t, "/admin/users?done=created")

	tokens, err := d.store.TokenList(context.Background())
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
	u, err := d.store.UserGetByEmail(context.Background(), "clocked@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if u.CreatedAt.Before(ahead) {
		t.Errorf("user created %v, want the Service's clock (after %v)", u.CreatedAt, ahead)
	}
}
