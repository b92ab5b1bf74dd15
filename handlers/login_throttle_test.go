package handlers_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestLoginThrottlePerAccountAndAddress: failed sign-ins from one address
// lock the account from that address only. Six wrong passwords for ann
// sent from address A (anyone's, ann's email is no secret) leave ann
// free to sign in from address B, while A stays throttled, even with the
// right password; every failure from A is recorded as a refused sign-in
// naming A.
func TestLoginThrottlePerAccountAndAddress(t *testing.T) {
	t.Parallel()
	const addrA, addrB = "203.0.113.7", "198.51.100.9"
	d := apptest.StartDashboard(t, apptest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	d.AddUser("ann@example.com", accounts.RoleApprover)
	attacker := d.Anonymous()
	attacker.Get("/login", "X-Forwarded-For", addrA)
	for i := range 5 {
		attacker.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {"guess " + strconv.Itoa(i)}},
			"X-Forwarded-For", addrA).WantStatus(t, http.StatusUnauthorized)
	}
	attacker.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {"guess 5"}}, "X-Forwarded-For", addrA).
		WantStatus(t, http.StatusTooManyRequests)

	ann := d.Anonymous()
	ann.Get("/login", "X-Forwarded-For", addrB)
	p := ann.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}}, "X-Forwarded-For", addrB)
	p.WantStatus(t, http.StatusSeeOther)
	if loc := p.Header.Get("Location"); loc != "/" {
		t.Fatalf("ann's sign-in from B went to %q, want /", loc)
	}

	// A is still throttled for ann, whatever the password.
	p = attacker.Post("/login", url.Values{"email": {"ann@example.com"}, "password": {apptest.Password}}, "X-Forwarded-For", addrA)
	p.WantStatus(t, http.StatusTooManyRequests)
	p.WantContains(t, "Too many failed sign-ins")

	for subject, want := range map[string]int{handlers.AccountAddressSubject("ann@example.com", addrA): 5,
		handlers.AccountAddressSubject("ann@example.com", addrB): 0, "addr:" + addrA: 5} {
		n, err := d.Store.LoginFailureCount(context.Background(), accounts.LoginFailureCountParams{Subject: subject})
		if err != nil || n != want {
			t.Fatalf("failures of %s: %d (%v), want %d", subject, n, err, want)
		}
	}

	evs, err := d.Store.EventList(context.Background(), queue.EventListParams{Kind: queue.EventSignInRefused, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 {
		t.Fatalf("%d refused sign-ins recorded, want the 5 checked failures", len(evs))
	}
	for _, ev := range evs {
		data := eventData(t, ev)
		if ev.Subject != queue.UserSubject("ann@example.com") || data["address"] != addrA || data["reason"] != "bad_credentials" {
			t.Fatalf("refused sign-in recorded as %s %s", ev.Subject, ev.Data)
		}
	}
}
