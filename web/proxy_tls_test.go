package web_test

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/web"
)

// rawClient sends requests with the cookies the test gives it: Go's
// cookie jar would not send a Secure cookie to the test's http:// URL.
type rawClient struct {
	t    *testing.T
	base string
}

// rawResp is a response with its body read.
type rawResp struct {
	*http.Response
	body string
}

func (c rawClient) send(method, path string, form url.Values, cookies []*http.Cookie, hdr ...string) rawResp {
	c.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return rawResp{res, string(b)}
}

// loginForm fetches /login and returns its pre-session cookie and token.
func (c rawClient) loginForm(hdr ...string) (*http.Cookie, string) {
	c.t.Helper()
	res := c.send("GET", "/login", nil, nil, hdr...)
	m := apptest.CSRFMeta.FindStringSubmatch(res.body)
	if m == nil || len(res.Cookies()) != 1 {
		c.t.Fatalf("login page: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	return res.Cookies()[0], m[1]
}

// startWith starts a server with opts and one admin, ann@example.com.
func startWith(t *testing.T, opts apptest.Options) rawClient {
	t.Helper()
	a := apptest.Start(t, opts)
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := a.Store.UserCreate(context.Background(), &accounts.User{Email: "ann@example.com", PasswordHash: apptest.PasswordHash(),
		Role: accounts.RoleAdmin, CreatedAt: now, PasswordChangedAt: now}); err != nil {
		t.Fatal(err)
	}
	return rawClient{t: t, base: a.URL}
}

// TestPublicURLCookies: with an https public URL both dashboard cookies
// are Secure, Path=/, without Domain and named __Host-…, and responses
// carry Strict-Transport-Security; with an http one, none of that.
func TestPublicURLCookies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		publicURL string
		https     bool
	}{{"https://approvals.example.com", true}, {"http://localhost:8080", false}, {"", false}} {
		t.Run(tc.publicURL, func(t *testing.T) {
			t.Parallel()
			c := startWith(t, apptest.Options{PublicURL: tc.publicURL})
			csrf, token := c.loginForm()
			res := c.send("POST", "/login", url.Values{"_csrf": {token}, "email": {"ann@example.com"}, "password": {apptest.Password}},
				[]*http.Cookie{csrf})
			if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
				t.Fatalf("login: %d, cookies %v", res.StatusCode, res.Cookies())
			}
			session := res.Cookies()[0]
			prefix := ""
			if tc.https {
				prefix = "__Host-"
			}
			for _, ck := range []*http.Cookie{csrf, session} {
				if ck.Secure != tc.https || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly ||
					!strings.HasPrefix(ck.Name, prefix+"approvals_") {
					t.Errorf("cookie %s: Secure %v Path %q Domain %q HttpOnly %v; want Secure %v, Path /, no Domain, prefix %q",
						ck.Name, ck.Secure, ck.Path, ck.Domain, ck.HttpOnly, tc.https, prefix)
				}
			}
			if got := res.Header.Get("Strict-Transport-Security"); (got != "") != tc.https {
				t.Errorf("Strict-Transport-Security %q with public URL %q", got, tc.publicURL)
			}
			if res := c.send("GET", "/", nil, []*http.Cookie{session}); res.StatusCode != http.StatusOK {
				t.Fatalf("the session cookie does not open the queue: %d", res.StatusCode)
			}
		})
	}
}

// TestLoginLimitClientAddress: X-Forwarded-For is believed from a trusted
// proxy only, and IPv6 clients are counted per /64.
func TestLoginLimitClientAddress(t *testing.T) {
	t.Parallel()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		// Two failures come from first and second; the third try from
		// third is limited or not.
		first, second, third string
		limited              bool
	}{
		{"untrusted peer: forged addresses are one client", nil, "203.0.113.1", "203.0.113.2", "203.0.113.3", true},
		{"trusted proxy: three IPv4 clients", loopback, "203.0.113.1", "203.0.113.2", "203.0.113.3", false},
		{"trusted proxy: one IPv6 /64", loopback, "2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2:abcd::1", true},
		{"trusted proxy: another IPv6 /64", loopback, "2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:3::1", false},
		{"trusted proxy: proxy chain, client on the right", loopback, "198.51.100.7, 203.0.113.1", "198.51.100.8, 203.0.113.1", "203.0.113.1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startWith(t, apptest.Options{TrustedProxies: tc.trusted,
				LoginLimits: handlers.LoginLimits{PerAccount: 100, PerAddress: 2, Window: time.Hour}})
			try := func(xff, email string) int {
				csrf, token := c.loginForm()
				return c.send("POST", "/login", url.Values{"_csrf": {token}, "email": {email}, "password": {"wrong"}},
					[]*http.Cookie{csrf}, "X-Forwarded-For", xff).StatusCode
			}
			for i, xff := range []string{tc.first, tc.second} {
				if got := try(xff, "ann@example.com"); got != http.StatusUnauthorized {
					t.Fatalf("failure %d: %d, want 401", i+1, got)
				}
			}
			got := try(tc.third, "bob@example.com")
			if want := map[bool]int{true: http.StatusTooManyRequests, false: http.StatusUnauthorized}[tc.limited]; got != want {
				t.Fatalf("third attempt from %s: %d, want %d", tc.third, got, want)
			}
		})
	}
}

// TestLoginPasswordGate: with every password check slot taken, a sign-in
// is 429 with Retry-After instead of queueing a bcrypt check; once a slot
// is free it goes through.
func TestLoginPasswordGate(t *testing.T) {
	t.Parallel()
	gate := accounts.NewPasswordGate(1, time.Millisecond)
	c := startWith(t, apptest.Options{PasswordGate: gate})
	release, ok := gate.Acquire(context.Background())
	if !ok {
		t.Fatal("no slot")
	}
	csrf, token := c.loginForm()
	form := url.Values{"_csrf": {token}, "email": {"ann@example.com"}, "password": {apptest.Password}}
	res := c.send("POST", "/login", form, []*http.Cookie{csrf})
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("sign-in with every slot busy: %d Retry-After %q, want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	release()
	if res := c.send("POST", "/login", form, []*http.Cookie{csrf}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with a free slot: %d, want 303", res.StatusCode)
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := web.ParseTrustedProxies(" 10.0.0.0/8, 192.168.1.7 ,2001:db8::/32,")
	if err != nil || len(got) != 3 || got[1].String() != "192.168.1.7/32" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example.com", "10.0.0.0/8,nope"} {
		if _, err := web.ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "is neither") {
			t.Errorf("ParseTrustedProxies(%q) = %v, want an error naming the entry", bad, err)
		}
	}
}
