package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/oidctest"
	"github.com/approvals/approvals/sso"
)

// TestSSOInBrowser drives headless Chromium through single sign-on against
// a real OpenID provider (oidctest): "Sign in with SSO" on the login page,
// the provider's own login page, and back on the queue as the role the
// groups map to; then logout, which the browser follows to the provider's
// end_session_endpoint (the page's form-action allows it) and back to the
// sign-in page.
func TestSSOInBrowser(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)

	idp := oidctest.Start(t, oidctest.Options{})
	roles, err := sso.ParseRoles("approvals-admins=admin,support=approver,*=viewer")
	if err != nil {
		t.Fatal(err)
	}
	d := apptest.StartDashboard(t, apptest.Options{SSO: &sso.Config{Issuer: idp.URL, ClientID: oidctest.ClientID,
		ClientSecret: oidctest.ClientSecret, Roles: roles}})
	idp.AllowRedirect(d.URL+"/auth/oidc/callback", d.URL+"/login")
	idp.AddUser(oidctest.User{ID: "sub-ann", Username: "ann", Password: "provider-password", Email: "ann@example.com",
		EmailVerified: true, Groups: []string{"staff", "support"}})
	d.SubmitEmail("c-100", "Your order has shipped", "Hi Sam,\nyour order 100 is on its way.")

	b.Step("open the login page", 20*time.Second,
		chromedp.Navigate(d.URL+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sso-login"]`)),
	)
	if got := b.Eval(`document.querySelector("[data-testid=sso-login]").textContent`); got != "Sign in with SSO" {
		t.Fatalf("the login page's SSO link says %q", got)
	}
	b.Screenshot("sso-login.png")
	b.Step("sign in with SSO at the provider", 30*time.Second,
		chromedp.Click(chromedp.CSS(`[data-testid="sso-login"]`)),
		chromedp.WaitVisible(chromedp.CSS("#username")),
	)
	if got := b.Eval(`location.origin`); got != idp.URL {
		t.Fatalf("Sign in with SSO led to %s, not the provider %s", got, idp.URL)
	}
	b.Step("pass the provider's login page", 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#username"), "ann"),
		chromedp.SendKeys(chromedp.CSS("#password"), "provider-password"),
		chromedp.Click(chromedp.CSS("#submit")),
		chromedp.WaitVisible(chromedp.CSS("#queue")),
	)
	if got := b.Eval(`location.href`); got != d.URL+"/" {
		t.Fatalf("after the provider, the browser is at %s, not the queue", got)
	}
	account := b.Eval(`document.querySelector(".account").textContent`)
	if !strings.Contains(account, "ann@example.com") || !strings.Contains(account, "approver") {
		t.Fatalf("signed in as %q, want ann@example.com as approver", account)
	}
	b.Screenshot("sso-queue.png")

	b.Step("log out through the provider", 30*time.Second,
		chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sso-login"]`)),
	)
	if got := b.Eval(`location.href`); got != d.URL+"/login" {
		t.Fatalf("after logout the browser is at %s, want the sign-in page", got)
	}
	if q := idp.EndSessionQueries(); len(q) != 1 || !strings.Contains(q[0], "id_token_hint=") {
		t.Fatalf("end_session requests: %v", q)
	}
	b.Step("the queue needs a sign-in again", 20*time.Second,
		chromedp.Navigate(d.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sso-login"]`)),
	)
}
