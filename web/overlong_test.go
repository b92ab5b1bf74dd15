package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
)

// TestOverLongFormInput: an over-long email, form field or form body is a
// 4xx that says what is wrong, never a 5xx, on every dashboard form.
func TestOverLongFormInput(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	d.addUser("admin@example.com", accounts.RoleAdmin)
	admin := d.login("admin@example.com")
	a := d.submitEmail("c-long", "Hello", "Body")
	_, tk := d.staleTicket("o-long")
	longEmail := strings.Repeat("a", 290) + "@example.com"
	huge := strings.Repeat("x", 300<<10) // past the default 256 KiB body cap
	long := strings.Repeat("n", 20000)   // a field past its limit, inside the body cap
	anonymous := func() *browser {
		b := d.anonymous()
		b.get("/login").wantStatus(t, http.StatusOK)
		return b
	}
	cases := []struct {
		name, path string
		form       url.Values
		as         *browser
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
		p := tc.as.post(tc.path, tc.form)
		if p.status < 400 || p.status >= 500 {
			t.Errorf("%s: %d, want a 4xx: %s", tc.name, p.status, truncateBody(p.body))
			continue
		}
		if !strings.Contains(strings.ToLower(p.body), tc.say) {
			t.Errorf("%s: %d without saying %q: %s", tc.name, p.status, tc.say, truncateBody(p.body))
		}
	}
	if got := d.action(a.ID); got.State != "pending" {
		t.Fatalf("action %s after refused decisions, want pending", got.State)
	}
	if p := admin.get("/admin/users"); strings.Contains(p.body, "new@example.com") {
		t.Fatal("a user was created with an over-long password")
	}
}
