package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/static"
)

// TestDashboardPagesAreSafe checks every page for the security headers,
// the CSRF meta tag and the absence of inline script.
func TestDashboardPagesAreSafe(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("root@example.com", accounts.RoleAdmin)
	a := d.SubmitEmail("c1", "Hi", "Body")
	_, tk := d.StaleTicket("o1")
	_ = tk
	anon := d.Anonymous()
	root := d.Login("root@example.com")
	scriptTag := regexp.MustCompile(`<script[^>]*>`)
	inlineHandler := regexp.MustCompile(`\son[a-z]+=`)
	pages := map[string]page{"/login": anon.Get("/login"), "/nowhere (404)": root.Get("/nowhere")}
	for _, path := range []string{"/", "/actions/" + a.ID, "/actions", "/audit", "/tools", "/tickets", "/admin/users", "/admin/tokens"} {
		pages[path] = root.Get(path)
	}
	for path, p := range pages {
		csp := p.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if p.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
		if !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: Content-Type %q", path, p.Header.Get("Content-Type"))
		}
		if m := apptest.CSRFMeta.FindStringSubmatch(p.Body); m == nil || len(m[1]) < 32 {
			t.Errorf("%s: no csrf-token meta tag", path)
		}
		for _, tag := range scriptTag.FindAllString(p.Body, -1) {
			if !strings.Contains(tag, ` src="/static/`) {
				t.Errorf("%s: inline or foreign script %s", path, tag)
			}
		}
		if m := inlineHandler.FindString(p.Body); m != "" {
			t.Errorf("%s: inline event handler %q", path, m)
		}
		if strings.Contains(p.Body, ` style="`) {
			t.Errorf("%s: inline style attribute (the CSP refuses it)", path)
		}
	}
	if p := pages["/nowhere (404)"]; p.Status != http.StatusNotFound || !strings.Contains(p.Body, "root@example.com") {
		t.Errorf("404 page: %d, want 404 with the navigation", p.Status)
	}
}

// TestDashboardStaticFiles serves the assets with long caching when the
// URL carries the content hash.
func TestDashboardStaticFiles(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	for _, name := range static.Names() {
		res, err := http.Get(d.URL + static.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		f, _ := static.Lookup(name)
		if res.StatusCode != http.StatusOK || string(body) != string(f.Content) {
			t.Fatalf("%s: %d", name, res.StatusCode)
		}
		if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", name, cc)
		}
		if ct := res.Header.Get("Content-Type"); !strings.Contains(ct, "javascript") && !strings.Contains(ct, "css") {
			t.Errorf("%s: Content-Type %q", name, ct)
		}
		req, _ := http.NewRequest(http.MethodGet, d.URL+"/static/"+name, nil)
		req.Header.Set("If-None-Match", res.Header.Get("ETag"))
		res2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res2.Body.Close()
		if res2.StatusCode != http.StatusNotModified || res2.Header.Get("Cache-Control") != "public, max-age=300" {
			t.Errorf("%s revalidation: %d %q", name, res2.StatusCode, res2.Header.Get("Cache-Control"))
		}
	}
	res, err := http.Get(d.URL + "/static/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown asset: %d", res.StatusCode)
	}
}

// TestDashboardListings covers the queue (oldest first, tool filter,
// keyset pages, the htmx fragment), the search, the audit log and tools.
func TestDashboardListings(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("vic@example.com", accounts.RoleViewer)
	var ids []string
	for i := range 3 {
		ids = append(ids, d.SubmitEmail(fmt.Sprintf("c%d", i), fmt.Sprintf("Subject %d", i), "Body").ID)
	}
	post := d.Submit("post_public_update", `{"channel":"blog","slug":"launch","text":"We launched"}`, "")
	d.Submit("invalidate_cache", `{"path":"/x"}`, "") // recorded, never in the queue

	q := b.Get("/")
	q.WantStatus(t, http.StatusOK)
	order := []int{strings.Index(q.Body, ids[0]), strings.Index(q.Body, ids[1]), strings.Index(q.Body, ids[2]), strings.Index(q.Body, post.ID)}
	for i := 1; i < len(order); i++ {
		if order[i-1] < 0 || order[i] < order[i-1] {
			t.Fatalf("queue not oldest first: positions %v", order)
		}
	}
	q.WantContains(t, "Subject 0", "email:c0:t", "bot", "channel: blog", "in 2d 23h", `data-live="/events"`)
	if strings.Contains(q.Body, "invalidate_cache") && strings.Contains(q.Body, "/x") {
		t.Fatal("a recorded action is in the queue")
	}

	f := b.Get("/?tool=post_public_update")
	if !strings.Contains(f.Body, post.ID) || strings.Contains(f.Body, ids[0]) {
		t.Fatal("tool filter")
	}

	first := b.Get("/?limit=2")
	next := regexp.MustCompile(`href="(/\?[^"]*cursor=[^"]*)" rel="next"`).FindStringSubmatch(first.Body)
	if next == nil || !strings.Contains(first.Body, ids[1]) || strings.Contains(first.Body, ids[2]) {
		t.Fatalf("first page of 2:\n%s", apptest.TruncateBody(first.Body))
	}
	second := b.Get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if !strings.Contains(second.Body, ids[2]) || !strings.Contains(second.Body, post.ID) || strings.Contains(second.Body, ids[1]) {
		t.Fatalf("second page:\n%s", apptest.TruncateBody(second.Body))
	}
	b.Get("/?cursor=garbage").WantStatus(t, http.StatusBadRequest)

	frag := b.Get("/?tool=send_customer_email", "HX-Request", "true")
	frag.WantStatus(t, http.StatusOK)
	frag.WantContains(t, `<section id="queue"`, `hx-swap-oob="true"`, ids[0])
	if strings.Contains(frag.Body, "<html") {
		t.Fatal("fragment is a whole page")
	}

	// Neighbours in the queue for j and k.
	mid := b.Get("/actions/" + ids[1])
	mid.WantContains(t, `href="/actions/`+ids[0]+`" rel="prev"`, `href="/actions/`+ids[2]+`" rel="next"`)

	s := b.Get("/actions?intent_key=email:c1")
	if !strings.Contains(s.Body, ids[1]) || strings.Contains(s.Body, ids[0]) {
		t.Fatal("search by intent key prefix")
	}
	s = b.Get("/actions?state=recorded")
	s.WantContains(t, "invalidate_cache")
	if strings.Contains(s.Body, ids[0]) {
		t.Fatal("search by state")
	}
	b.Get("/actions?state=bogus").WantStatus(t, http.StatusBadRequest)

	audit := b.Get("/audit?kind=submitted&actor=agent:bot")
	audit.WantContains(t, "Submitted", "agent:bot", ids[0])
	if !strings.Contains(b.Get("/audit?actor=user:nobody").Body, "No events match.") {
		t.Fatal("audit actor filter")
	}

	// Badges and the other attempts of an intent.
	odd := d.Submit("legacy_mailer", `{"to":"x@example.com"}`, "mail:550e8400-e29b-41d4-a716-446655440000")
	b.Get("/actions/"+odd.ID).WantContains(t, "tool not registered", "intent key looks random", "at-most-once")
	if _, err := d.Service.Cancel(context.Background(), ids[0], "bot", "api"); err != nil {
		t.Fatal(err)
	}
	retry := d.SubmitEmail("c0", "Subject 0", "Body")
	if retry.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", retry.Attempt)
	}
	b.Get("/actions/"+retry.ID).WantContains(t, `href="/actions/`+ids[0]+`">Attempt 1</a>`, "state-cancelled")

	tools := b.Get("/tools")
	tools.WantContains(t, "send_customer_email", "at-most-once", "class set in the tools file", "invalidate_cache", "at-least-once",
		"idempotentHint is true", "post_public_update", "openWorldHint is absent")
}
