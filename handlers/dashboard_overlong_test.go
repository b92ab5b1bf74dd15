package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
)

// TestOverLongFormInput: an over-long email, form field or form body is a
// 4xx that says what is wrong, never a 5xx, on every dashboard form.
func TestOverLongFormInput(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	admin := d.SignIn("admin@example.com", accounts.RoleAdmin)
	a := d.SubmitEmail("c-long", "Hello", "Body")
	_, tk := d.StaleTicket("o-long")
	longEmail := strings.Repeat("a", 290) + "@example.com"
	huge := strings.Repeat("x", 300<<10) // past the default 256 KiB body cap
	long := strings.Repeat("n", 20000)   // a field past its limit, inside the body cap
	anonymous := func() *apptest.Browser {
		b := d.Anonymous()
		b.Get("/login").WantStatus(t, http.StatusOK)
		return b
	}
	cases := []struct {
		name, path string
		form       url.Values
		as         *apptest.Browser
		say        string
	}{
		{"login email", "/login", url.Values{"email": {longEmail}, "password": {"x"}}, anonymous(), "longer than 254"},
		{"login password", "/login", url.Values{"email": {"admin@example.com"}, "password": {long}}, anonymous(), "password"},
		{"login huge body", "/login", url.Values{"email": {"a@example.com"}, "password": {huge}}, anonymous(), "larger than"},
		{"user email", "/admin/users", url.Values{"email": {longEmail}, "role": {"viewer"}, "password": {"long enough password"}}, admin, "email"},
		{"user password", "/admin/users", url.Values{"email": {"new@example.com"}, "role": {"viewer"}, "password": {long}}, admin, "password"},
		{"approve note", "/actions/" + a.ID + "/approve", url.Values{"note": {long}}, admin, "note"},
		{"reject note", "/actions/" + a.ID + "/reject", url.Values{"note": {long}}, admin, "note"},
		{"resolve note", "/tickets/" + tk.ID + "/resolve", url.Values{"outcome": {"done"}, "note": {long}}, admin, "note"},
		{"token name", "/admin/tokens", url.Values{"name": {long}}, admin, "name"},
		{"huge decision", "/actions/" + a.ID + "/approve", url.Values{"note": {huge}}, admin, "larger than"},
	}
	for _, tc := range cases {
		p := tc.as.Post(tc.path, tc.form)
		if p.Status < 400 || p.Status >= 500 {
			t.Errorf("%s: %d, want a 4xx: %s", tc.name, p.Status, apptest.TruncateBody(p.Body))
			continue
		}
		if !strings.Contains(strings.ToLower(p.Body), tc.say) {
			t.Errorf("%s: %d without saying %q: %s", tc.name, p.Status, tc.say, apptest.TruncateBody(p.Body))
		}
	}
	if got := d.Action(a.ID); got.State != "pending" {
		t.Fatalf("action %s after refused decisions, want pending", got.State)
	}
	if p := admin.Get("/admin/users"); strings.Contains(p.Body, "new@example.com") {
		t.Fatal("a user was created with an over-long password")
	}
}

// TestNULAndInvalidUTF8Input: a form field or query parameter holding a NUL
// character or bytes that are not UTF-8 is a 400 naming it, never a 5xx
// (PostgreSQL refuses both), and changes nothing, on both stores.
func TestNULAndInvalidUTF8Input(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name string
		opts apptest.Options
	}{{"postgres", apptest.Options{}}, {"sqlite", apptest.Options{SQLite: true}}} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			d := apptest.StartDashboard(t, st.opts)
			admin := d.SignIn("admin@example.com", accounts.RoleAdmin)
			a := d.SubmitEmail("c-nul", "Hello", "Body")
			_, tk := d.StaleTicket("o-nul")
			anonymous := d.Anonymous()
			anonymous.Get("/login").WantStatus(t, http.StatusOK)
			cases := []struct {
				name, path string
				form       url.Values
				as         *apptest.Browser
				say        string
			}{
				{"login email", "/login", url.Values{"email": {"ad\x00min@example.com"}, "password": {"x"}}, anonymous, "email"},
				{"user email", "/admin/users", url.Values{"email": {"n\x00ew@example.com"}, "role": {"viewer"}, "password": {"long enough password"}}, admin, "email"},
				{"approve note", "/actions/" + a.ID + "/approve", url.Values{"note": {"ok\x00"}}, admin, "note"},
				{"reject note", "/actions/" + a.ID + "/reject", url.Values{"note": {"no \xff"}}, admin, "note"},
				{"request-changes note", "/actions/" + a.ID + "/request-changes", url.Values{"note": {"re\x00do"}}, admin, "note"},
				{"bulk note", "/actions/bulk", url.Values{"ids": {a.ID}, "decision": {"reject"}, "note": {"\xfe"}}, admin, "note"},
				{"resolve note", "/tickets/" + tk.ID + "/resolve", url.Values{"outcome": {"done"}, "note": {"x\x00"}}, admin, "note"},
				{"token name", "/admin/tokens", url.Values{"name": {"bot\x00"}}, admin, "name"},
			}
			for _, tc := range cases {
				p := tc.as.Post(tc.path, tc.form)
				if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "form field "+tc.say) {
					t.Errorf("%s: %d, want 400 naming the form field %s: %s", tc.name, p.Status, tc.say, apptest.TruncateBody(p.Body))
				}
			}
			for _, q := range []struct{ path, say string }{
				{"/actions?intent_key=email%00", "intent_key"},
				{"/actions?tool=%ff", "tool"},
				{"/?tool=send%00", "tool"},
			} {
				p := admin.Get(q.path)
				if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "query parameter "+q.say) {
					t.Errorf("GET %s: %d, want 400 naming the query parameter %s: %s", q.path, p.Status, q.say, apptest.TruncateBody(p.Body))
				}
			}
			if got := d.Action(a.ID); got.State != "pending" {
				t.Fatalf("action %s after refused decisions, want pending", got.State)
			}
			if p := admin.Get("/admin/users"); strings.Contains(p.Body, "ew@example.com") {
				t.Fatal("a user was created with a NUL in the email")
			}
		})
	}
}
