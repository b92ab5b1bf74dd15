package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// publicRoutes are the routes anyone may call without a session or a
// token, and why. Every other route is in the role table (dashRoutes) or
// under /api/v1; TestEveryRouteIsProtected fails for a route that is none.
var publicRoutes = map[string]string{
	"GET /healthz":             "liveness probe",
	"GET /readyz":              "readiness probe",
	"GET /metrics":             "Prometheus scrape",
	"GET /api/v1/openapi.json": "the API's own description",
	"GET /static/:name":        "stylesheet and scripts of the login page",
	"GET /login":               "sign-in form",
	"POST /login":              "sign-in (CSRF-checked, rate-limited)",
	"POST /logout":             "sign-out (CSRF-checked)",
	"GET /setup":               "one-time first-admin link",
	"POST /setup":              "one-time first-admin link (CSRF-checked)",
	"GET /auth/oidc/login":     "Sign in with SSO: the way to the provider (404 while single sign-on is not configured)",
	"GET /auth/oidc/callback":  "where the provider sends the browser back (state-checked, rate-limited)",
}

// signedRoutes are authenticated by a request signature instead of a
// session and CSRF token: they must refuse an unsigned request (401, or 404
// while the integration is not configured) and change nothing. What a
// signed request may do is tested with the integration
// (slack/decide_test.go).
var signedRoutes = map[string]string{
	"POST /integrations/slack/interactions": "Slack's interactions, signed with the Slack signing secret",
	"POST /integrations/telegram/webhook":   "Telegram's updates, carrying the webhook's secret header",
}

// routerRoutes returns every route the server registered, as "METHOD
// /path", from the router itself: not a hand-kept list.
func routerRoutes(t testing.TB, d *apptest.Dashboard) []string {
	t.Helper()
	e, ok := d.Server.Handler().(*echo.Echo)
	if !ok {
		t.Fatalf("the server's handler is %T, not the echo router", d.Server.Handler())
	}
	var keys []string
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound || strings.HasPrefix(r.Path, "/mcp") {
			continue // the 404 fallback; /mcp authenticates every call itself (mcpserver tests)
		}
		keys = append(keys, r.Method+" "+r.Path)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) < 20 {
		t.Fatalf("the router lists only %d routes: %q", len(keys), keys)
	}
	return keys
}

// fill turns a route's path template into a concrete path.
func fill(path string) string {
	path = strings.ReplaceAll(path, ":id", "0190a0a0-0000-7000-8000-000000000000")
	return strings.ReplaceAll(path, ":name", "app.css")
}

// TestEveryRouteIsProtected walks the router: every route is public on
// purpose, in the role table, or an API route that refuses a request
// without a token with 401.
func TestEveryRouteIsProtected(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	table := map[string]bool{"GET /events": true}
	for _, rt := range dashRoutes() {
		table[rt.route] = true
	}
	api := 0
	for _, key := range routerRoutes(t, d) {
		method, path, _ := strings.Cut(key, " ")
		switch {
		case publicRoutes[key] != "", table[key]:
		case signedRoutes[key] != "":
			before := snapshot(t, d)
			res, err := http.Post(d.URL+path, "application/x-www-form-urlencoded", strings.NewReader(`payload=%7B%7D`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusNotFound {
				t.Errorf("%s unsigned: %d, want 401 (or 404 unconfigured)", key, res.StatusCode)
			}
			if after := snapshot(t, d); after != before {
				t.Errorf("%s unsigned changed state:\nbefore %s\nafter  %s", key, before, after)
			}
		case strings.HasPrefix(path, "/api/v1/"):
			api++
			req, err := http.NewRequest(method, d.URL+fill(path), strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var p struct{ Code string }
			_ = json.NewDecoder(res.Body).Decode(&p)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || p.Code != string(queue.CodeUnauthorized) {
				t.Errorf("%s without a token: %d %q, want 401 unauthorized", key, res.StatusCode, p.Code)
			}
		default:
			t.Errorf("route %s is neither public on purpose (publicRoutes), in the role table (dashRoutes), nor under /api/v1", key)
		}
	}
	if api < 7 {
		t.Fatalf("only %d API routes checked", api)
	}
}

// snapshot is what a dashboard request could change: actions by state,
// open tickets, events, users and their roles and passwords, tokens.
func snapshot(t testing.TB, d *apptest.Dashboard) string {
	t.Helper()
	ctx := context.Background()
	counts, err1 := d.Store.ActionCountByState(ctx)
	tickets, err2 := d.Store.TicketCountOpen(ctx)
	events, err3 := d.Store.EventList(ctx, queue.EventListParams{Limit: 10000})
	users, err4 := d.Store.UserList(ctx)
	tokens, err5 := d.Store.TokenList(ctx)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal([]any{counts, tickets, len(events), users, tokens})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEveryStateChangingRouteChecksCSRF walks the router: every dashboard
// route that is not GET refuses a missing or a wrong CSRF token with 403,
// for a signed-in admin (whose role allows everything), and changes
// nothing. Not parallel inside: the snapshot must see only its request.
func TestEveryStateChangingRouteChecksCSRF(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	admin := d.SignIn("root@example.com", accounts.RoleAdmin)
	table := map[string]dashRoute{}
	for _, rt := range dashRoutes() {
		table[rt.route] = rt
	}
	checked := 0
	for i, key := range routerRoutes(t, d) {
		method, path, _ := strings.Cut(key, " ")
		if method == http.MethodGet || strings.HasPrefix(path, "/api/") || signedRoutes[key] != "" {
			continue
		}
		form := url.Values{"email": {"root@example.com"}, "password": {apptest.Password}}
		if rt, ok := table[key]; ok {
			path, form = rt.prepare(d, i)
			if form == nil {
				form = url.Values{}
			}
		} else if _, public := publicRoutes[key]; !public {
			t.Errorf("route %s has no entry in the role table", key)
			continue
		}
		checked++
		for _, token := range []string{"", "wrong-token"} {
			before := snapshot(t, d)
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			f.Set("_csrf", token)
			p := admin.Post(path, f)
			if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "CSRF token is missing or wrong") {
				t.Errorf("%s with CSRF token %q: %d, want 403", key, token, p.Status)
			}
			if after := snapshot(t, d); after != before {
				t.Errorf("%s with CSRF token %q changed state:\nbefore %s\nafter  %s", key, token, before, after)
			}
		}
	}
	// Still signed in: the refused logout did not end the session.
	admin.Get("/admin/users").WantStatus(t, http.StatusOK)
	if checked < 12 {
		t.Fatalf("only %d state-changing routes checked", checked)
	}
}

// TestDashboardEventsRoles: every signed-in role may open the event
// stream (the role table's entry for GET /events, a stream the page
// helpers cannot read to its end).
func TestDashboardEventsRoles(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	for _, role := range allStaff {
		d.AddUser(string(role)+"-events@example.com", role)
		b := d.Login(string(role) + "-events@example.com")
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/events", nil)
		res, err := b.Client.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		res.Body.Close()
		cancel()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s opening /events: %d, want 200", role, res.StatusCode)
		}
	}
}

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
	prepare func(d *apptest.Dashboard, n int) (string, url.Values)
	// ok is the status for a role with the right; every other role gets 403.
	ok    int
	roles []accounts.Role
}

func fixed(path string) func(*apptest.Dashboard, int) (string, url.Values) {
	return func(*apptest.Dashboard, int) (string, url.Values) { return path, nil }
}

func dashRoutes() []dashRoute {
	pending := func(d *apptest.Dashboard, n int) string {
		return d.SubmitEmail(fmt.Sprintf("route%d", n), "Hello", "Body").ID
	}
	// A pending plan of one step nobody's rules decide (an unregistered
	// tool: every approver and admin may decide it).
	plan := func(d *apptest.Dashboard, n int) string {
		res, err := d.Service.Plans().Propose(context.Background(), queue.PlanRequest{Title: "route plan", Agent: "bot",
			Steps: []queue.PlanStepRequest{{Tool: "route_note", Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)), IntentKey: fmt.Sprintf("route-plan:%d", n)}}})
		if err != nil {
			d.T.Fatal(err)
		}
		return res.Plan.ID
	}
	return []dashRoute{
		{"queue", "GET /", http.MethodGet, fixed("/"), http.StatusOK, allStaff},
		{"plan", "GET /plans/:id", http.MethodGet, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/plans/" + plan(d, n), nil
		}, http.StatusOK, allStaff},
		{"plan approve", "POST /plans/:id/approve", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/plans/" + plan(d, n) + "/approve", url.Values{"note": {"fine"}}
		}, http.StatusSeeOther, deciders},
		{"plan reject", "POST /plans/:id/reject", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/plans/" + plan(d, n) + "/reject", url.Values{"note": {"no"}}
		}, http.StatusSeeOther, deciders},
		{"plan request changes", "POST /plans/:id/request_changes", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/plans/" + plan(d, n) + "/request_changes", url.Values{"note": {"smaller"}}
		}, http.StatusSeeOther, deciders},
		{"search", "GET /actions", http.MethodGet, fixed("/actions?state=pending"), http.StatusOK, allStaff},
		{"action", "GET /actions/:id", http.MethodGet, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/actions/" + pending(d, n), nil
		}, http.StatusOK, allStaff},
		{"audit", "GET /audit", http.MethodGet, fixed("/audit"), http.StatusOK, allStaff},
		{"tools", "GET /tools", http.MethodGet, fixed("/tools"), http.StatusOK, allStaff},
		{"grants", "GET /grants", http.MethodGet, fixed("/grants"), http.StatusOK, allStaff},
		// Another approver's grant: only ops and admins revoke it (its
		// granting user may too: TestApproveAndAllowSimilar). It holds
		// its customer fixed, so it approves none of the other routes'
		// actions.
		{"grant revoke", "POST /grants/:id/revoke", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			id := pending(d, n)
			if _, err := d.Service.Decide(context.Background(), queue.DecideRequest{ID: id, To: queue.StateApproved,
				By: "user:granter@example.com", Grant: &queue.GrantRequest{For: time.Hour, Fields: []string{"customer_id"}}}); err != nil {
				d.T.Fatal(err)
			}
			grants, err := d.Store.GrantList(context.Background(), queue.GrantListParams{Limit: 1000})
			if err != nil {
				d.T.Fatal(err)
			}
			for _, g := range grants {
				if g.ActionID == id {
					return "/grants/" + g.ID + "/revoke", nil
				}
			}
			d.T.Fatalf("no grant of %s among %d", id, len(grants))
			return "", nil
		}, http.StatusSeeOther, resolvers},
		{"tickets", "GET /tickets", http.MethodGet, fixed("/tickets"), http.StatusOK, allStaff},
		{"ticket", "GET /tickets/:id", http.MethodGet, func(d *apptest.Dashboard, n int) (string, url.Values) {
			_, tk := d.StaleTicket(fmt.Sprintf("show%d", n))
			return "/tickets/" + tk.ID, nil
		}, http.StatusOK, allStaff},
		{"overview", "GET /overview", http.MethodGet, fixed("/overview"), http.StatusOK, allStaff},
		{"request changes", "POST /actions/:id/request-changes", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/actions/" + pending(d, n) + "/request-changes", url.Values{"note": {"shorter, please"}}
		}, http.StatusSeeOther, deciders},
		{"user slack id", "POST /admin/users/:id/slack", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			u := d.AddUser(fmt.Sprintf("slack%d@example.com", n), accounts.RoleApprover)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/slack", url.Values{"slack_id": {fmt.Sprintf("U%07d", n)}}
		}, http.StatusSeeOther, admins},
		{"user telegram id", "POST /admin/users/:id/telegram", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			u := d.AddUser(fmt.Sprintf("telegram%d@example.com", n), accounts.RoleApprover)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/telegram", url.Values{"telegram_id": {strconv.Itoa(7000 + n)}}
		}, http.StatusSeeOther, admins},
		{"bulk", "POST /actions/bulk", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/actions/bulk", url.Values{"ids": {pending(d, n)}, "decision": {"approve"}, "note": {"fine"}}
		}, http.StatusOK, deciders},
		{"approve", "POST /actions/:id/approve", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/actions/" + pending(d, n) + "/approve", url.Values{"note": {"fine"}}
		}, http.StatusSeeOther, deciders},
		{"reject", "POST /actions/:id/reject", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			return "/actions/" + pending(d, n) + "/reject", url.Values{"note": {"no"}}
		}, http.StatusSeeOther, deciders},
		{"resolve", "POST /tickets/:id/resolve", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			_, tk := d.StaleTicket(fmt.Sprintf("route%d", n))
			return "/tickets/" + tk.ID + "/resolve", url.Values{"outcome": {"done"}, "note": {"refund is listed"}}
		}, http.StatusSeeOther, resolvers},
		// The example tools have no verifier: "Check now" answers no_verifier
		// (404) to those allowed to ask; verifier/ tests a tool that has one.
		{"check", "POST /tickets/:id/check", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			_, tk := d.StaleTicket(fmt.Sprintf("check%d", n))
			return "/tickets/" + tk.ID + "/check", nil
		}, http.StatusNotFound, resolvers},
		{"users", "GET /admin/users", http.MethodGet, fixed("/admin/users"), http.StatusOK, admins},
		{"user create", "POST /admin/users", http.MethodPost, func(_ *apptest.Dashboard, n int) (string, url.Values) {
			return "/admin/users", url.Values{"email": {fmt.Sprintf("new%d@example.com", n)}, "role": {"viewer"}, "password": {"long enough password"}}
		}, http.StatusSeeOther, admins},
		{"user role", "POST /admin/users/:id/role", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			u := d.AddUser(fmt.Sprintf("role%d@example.com", n), accounts.RoleViewer)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/role", url.Values{"role": {"ops"}}
		}, http.StatusSeeOther, admins},
		{"user password", "POST /admin/users/:id/password", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			u := d.AddUser(fmt.Sprintf("pw%d@example.com", n), accounts.RoleViewer)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/password", url.Values{"password": {"another long password"}}
		}, http.StatusSeeOther, admins},
		{"user remove", "POST /admin/users/:id/remove", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			u := d.AddUser(fmt.Sprintf("gone%d@example.com", n), accounts.RoleViewer)
			return "/admin/users/" + strconv.FormatInt(u.ID, 10) + "/remove", nil
		}, http.StatusSeeOther, admins},
		{"tokens", "GET /admin/tokens", http.MethodGet, fixed("/admin/tokens"), http.StatusOK, admins},
		{"token create", "POST /admin/tokens", http.MethodPost, func(_ *apptest.Dashboard, n int) (string, url.Values) {
			return "/admin/tokens", url.Values{"name": {fmt.Sprintf("agent%d", n)}}
		}, http.StatusOK, admins},
		{"token revoke", "POST /admin/tokens/revoke", http.MethodPost, func(d *apptest.Dashboard, n int) (string, url.Values) {
			name := fmt.Sprintf("old%d", n)
			_, hash := accounts.NewToken()
			if _, err := d.Store.TokenCreate(context.Background(), accounts.TokenCreateParams{Name: name, Hash: hash, Now: d.Now()}); err != nil {
				d.T.Fatal(err)
			}
			return "/admin/tokens/revoke", url.Values{"name": {name}}
		}, http.StatusSeeOther, admins},
	}
}

// TestDashboardRoles gives each role exactly the rights docs/dashboard.md lists:
// approver and admin decide, ops and admin resolve, admin manages users
// and tokens, everyone reads; anything else is 403.
func TestDashboardRoles(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	browsers := map[accounts.Role]*apptest.Browser{}
	for _, r := range allStaff {
		d.AddUser(string(r)+"@example.com", r)
		browsers[r] = d.Login(string(r) + "@example.com")
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
					p = browsers[role].Get(path)
				} else {
					p = browsers[role].Post(path, form)
				}
				want := http.StatusForbidden
				for _, r := range rt.roles {
					if r == role {
						want = rt.ok
					}
				}
				p.WantStatus(t, want)
				if want == http.StatusForbidden {
					p.WantContains(t, "Forbidden", "your role ("+string(role)+") may not")
				}
			})
		}
	}
}

// TestDashboardAnonymousRedirected sends every dashboard route to /login
// without a session, and with only an agent bearer token.
func TestDashboardAnonymousRedirected(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	token, hash := accounts.NewToken()
	if _, err := d.Store.TokenCreate(context.Background(), accounts.TokenCreateParams{Name: "bot", Hash: hash, Now: d.Now()}); err != nil {
		t.Fatal(err)
	}
	for i, rt := range dashRoutes() {
		path, form := rt.prepare(d, i)
		for _, auth := range []string{"", "Bearer " + token} {
			b := d.Anonymous()
			b.Get("/login") // a pre-session with a valid CSRF token: only the sign-in is missing
			var p page
			if rt.method == http.MethodGet {
				p = b.Get(path, "Authorization", auth)
			} else {
				p = b.Post(path, form, "Authorization", auth)
			}
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/login") {
				t.Errorf("%s %s (bearer %t): %d to %q, want 303 to /login", rt.method, path, auth != "", p.Status, p.Header.Get("Location"))
			}
		}
	}
	// The event stream, and htmx requests (told to navigate, not to swap
	// the login page into a fragment).
	d.Anonymous().Get("/events").WantRedirect(t, "/login")
	hx := d.Anonymous().Get("/", "HX-Request", "true")
	if hx.Status != http.StatusNoContent || hx.Header.Get("HX-Redirect") != "/login" {
		t.Fatalf("htmx without a session: %d HX-Redirect %q", hx.Status, hx.Header.Get("HX-Redirect"))
	}
	// The original page is where a sign-in returns to.
	b := d.Anonymous()
	b.Get("/tools").WantRedirect(t, "/login?next=%2Ftools")
	b.Get("/login?next=%2Ftools").WantContains(t, `name="next" value="/tools"`)
	d.AddUser("ann@example.com", accounts.RoleViewer)
	b.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}, "next": {"/tools"}}).WantRedirect(t, "/tools")
	// Not somewhere else.
	c := d.Anonymous()
	c.Get("/login")
	c.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}, "next": {"//evil.example/"}}).WantRedirect(t, "/")
}

var (
	allStaff  = []accounts.Role{accounts.RoleAdmin, accounts.RoleApprover, accounts.RoleOps, accounts.RoleViewer}
	deciders  = []accounts.Role{accounts.RoleAdmin, accounts.RoleApprover}
	resolvers = []accounts.Role{accounts.RoleAdmin, accounts.RoleOps}
	admins    = []accounts.Role{accounts.RoleAdmin}
)
