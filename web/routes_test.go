package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
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
}

// signedRoutes are authenticated by a request signature instead of a
// session and CSRF token: they must refuse an unsigned request (401, or 404
// while the integration is not configured) and change nothing. What a
// signed request may do is tested with the integration
// (slack_interactions_test.go).
var signedRoutes = map[string]string{
	"POST /integrations/slack/interactions": "Slack's interactions, signed with the Slack signing secret",
}

// routerRoutes returns every route the server registered, as "METHOD
// /path", from the router itself: not a hand-kept list.
func routerRoutes(t testing.TB, d *dashEnv) []string {
	t.Helper()
	e, ok := d.srv.Handler().(*echo.Echo)
	if !ok {
		t.Fatalf("the server's handler is %T, not the echo router", d.srv.Handler())
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
	d := startDashboard(t)
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
			res, err := http.Post(d.url+path, "application/x-www-form-urlencoded", strings.NewReader(`payload=%7B%7D`))
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
			req, err := http.NewRequest(method, d.url+fill(path), strings.NewReader(`{}`))
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
func snapshot(t testing.TB, d *dashEnv) string {
	t.Helper()
	ctx := context.Background()
	counts, err1 := d.store.ActionCountByState(ctx)
	tickets, err2 := d.store.TicketCountOpen(ctx)
	events, err3 := d.store.EventList(ctx, queue.EventListParams{Limit: 10000})
	users, err4 := d.store.UserList(ctx)
	tokens, err5 := d.store.TokenList(ctx)
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
	d := startDashboard(t)
	d.addUser("root@example.com", accounts.RoleAdmin)
	admin := d.login("root@example.com")
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
		form := url.Values{"email": {"root@example.com"}, "password": {dashPassword}}
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
			p := admin.post(path, f)
			if p.status != http.StatusForbidden || !strings.Contains(p.body, "CSRF token is missing or wrong") {
				t.Errorf("%s with CSRF token %q: %d, want 403", key, token, p.status)
			}
			if after := snapshot(t, d); after != before {
				t.Errorf("%s with CSRF token %q changed state:\nbefore %s\nafter  %s", key, token, before, after)
			}
		}
	}
	// Still signed in: the refused logout did not end the session.
	admin.get("/admin/users").wantStatus(t, http.StatusOK)
	if checked < 12 {
		t.Fatalf("only %d state-changing routes checked", checked)
	}
}

// TestDashboardEventsRoles: every signed-in role may open the event
// stream (the role table's entry for GET /events, a stream the page
// helpers cannot read to its end).
func TestDashboardEventsRoles(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	for _, role := range allStaff {
		d.addUser(string(role)+"-events@example.com", role)
		b := d.login(string(role) + "-events@example.com")
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/events", nil)
		res, err := b.client.Do(req)
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
