package accounts_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
)

// TestPreSessionToken: the pre-session CSRF token lives in a signed
// cookie: it round-trips, and a forged cookie, one under another name or
// one signed with another secret yields no token.
func TestPreSessionToken(t *testing.T) {
	t.Parallel()
	// No store: a pre-session token must not touch one.
	s, err := accounts.NewSessionStore(nil, secret, accounts.SessionOptions{AnonymousMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const name = "approvals_csrf"
	w := httptest.NewRecorder()
	tok, err := s.PreSessionToken(w, httptest.NewRequest(http.MethodGet, "/login", nil), name)
	if err != nil || len(tok) < 32 {
		t.Fatalf("token %q, err %v", tok, err)
	}
	cookie := w.Result().Cookies()[0]
	if !cookie.HttpOnly || cookie.Path != "/" || cookie.Name != name {
		t.Fatalf("cookie %+v", cookie)
	}
	with := func(c *http.Cookie) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/login", nil)
		r.AddCookie(c)
		return r
	}
	if got := s.PreSessionTokenOf(with(cookie), name); got != tok {
		t.Fatalf("read back %q, want %q", got, tok)
	}
	w = httptest.NewRecorder()
	if again, _ := s.PreSessionToken(w, with(cookie), name); again != tok || len(w.Result().Cookies()) != 0 {
		t.Fatalf("a valid cookie was replaced: %q", again)
	}
	forged := *cookie
	forged.Value = tok
	renamed := *cookie
	renamed.Name = "approvals_session"
	for what, c := range map[string]*http.Cookie{"forged": &forged, "another name": &renamed} {
		if got := s.PreSessionTokenOf(with(c), c.Name); got != "" {
			t.Errorf("%s cookie gave token %q", what, got)
		}
	}
	other, _ := accounts.NewSessionStore(nil, []byte("another secret of thirty-two bytes!!"), accounts.SessionOptions{})
	if got := other.PreSessionTokenOf(with(cookie), name); got != "" {
		t.Errorf("a cookie signed with another secret gave token %q", got)
	}
}
