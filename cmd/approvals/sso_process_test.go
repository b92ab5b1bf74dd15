package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/oidctest"
)

// `approvals serve` with the single sign-on settings, as an operator runs
// it: it starts while the provider cannot be reached (and says so at a
// sign-in), signs staff in through a real provider with the client secret
// from a file, refuses passwords with APPROVALS_PASSWORD_LOGIN=off, and
// `approvals user add` still makes the break-glass admin.
func TestServeWithSingleSignOn(t *testing.T) {
	t.Parallel()
	bin := apptest.BuildBinary(t)
	idp := oidctest.Start(t, oidctest.Options{})
	idp.AddUser(oidctest.User{ID: "sub-ann", Username: "ann", Password: "pw", Email: "ann@example.com", EmailVerified: true,
		Groups: []string{"support"}})
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte(oidctest.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"APPROVALS_OIDC_CLIENT_ID=" + oidctest.ClientID, "APPROVALS_OIDC_CLIENT_SECRET_FILE=" + secret,
		"APPROVALS_OIDC_ROLES=approvals-admins=admin,support=approver", "APPROVALS_PASSWORD_LOGIN=off"}

	// A provider that is down: the server starts all the same.
	gone := oidctest.Start(t, oidctest.Options{})
	gone.Close()
	const tools = "tools:\n  post_update:\n    class: at-most-once\n"
	d := apptest.NewDeployment(t, bin, apptest.DeploymentOptions{Tools: tools, Env: append([]string{"APPROVALS_OIDC_ISSUER=" + gone.URL}, env...)})
	p := d.Start()
	res, err := http.Get(p.URL + "/auth/oidc/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict || !strings.Contains(string(body), "cannot be reached") {
		t.Fatalf("a sign-in while the provider is down: %d %s", res.StatusCode, body)
	}
	stop(t, p)

	d = apptest.NewDeployment(t, bin, apptest.DeploymentOptions{Tools: tools, Env: append([]string{"APPROVALS_OIDC_ISSUER=" + idp.URL}, env...)})
	p = d.Start()
	// The log reaches the test through a pipe, a moment after the server wrote it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		log := p.Log()
		if strings.Contains(log, "redirect_uri="+p.URL+"/auth/oidc/callback") && strings.Contains(log, "post_logout_redirect_uri="+p.URL+"/login") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start-up log does not name the redirect URIs:\n%s", log)
		}
	}
	idp.AllowRedirect(p.URL+"/auth/oidc/callback", p.URL+"/login")
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, _ = get(p.URL + "/auth/oidc/login")
	if res.StatusCode != http.StatusFound {
		t.Fatalf("Sign in with SSO: %d", res.StatusCode)
	}
	back := idp.SignInAt(t, c, res.Header.Get("Location"), "ann", "pw")
	if res, _ = get(back); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("callback: %d to %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, page := get(p.URL + "/"); res.StatusCode != http.StatusOK || !strings.Contains(page, `ann@example.com <span class="badge">approver</span>`) {
		t.Fatalf("the queue after single sign-on: %d", res.StatusCode)
	}

	// Passwords are off; the break-glass admin is made with user add.
	d.Command("a long passphrase\n", "user", "add", "--email", "admin@example.com", "--role", "admin")
	jar, _ = cookiejar.New(nil)
	c.Jar = jar
	_, login := get(p.URL + "/login")
	m := apptest.CSRFMeta.FindStringSubmatch(login)
	if m == nil || strings.Contains(login, `name="password"`) {
		t.Fatalf("the login page with APPROVALS_PASSWORD_LOGIN=off:\n%s", login)
	}
	res, err = c.PostForm(p.URL+"/login", url.Values{"_csrf": {m[1]}, "email": {"admin@example.com"}, "password": {"a long passphrase"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "Password sign-in is turned off") {
		t.Fatalf("a password sign-in with APPROVALS_PASSWORD_LOGIN=off: %d %s", res.StatusCode, body)
	}
	stop(t, p)
}

// stop ends p as an operator does (SIGTERM) and waits for it, so that its
// database connections are closed before the test drops its schema.
func stop(t *testing.T, p *apptest.Process) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
}
