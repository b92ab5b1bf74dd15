package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/oidctest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/storage"
)

// The roles of the SSO tests: the first group of the list that a person is
// in gives the role; in none of them, no access.
const ssoRoles = "approvals-admins=admin,support=approver,staff=viewer"

// ssoEnv is a dashboard whose staff sign in with a real OpenID provider
// (oidctest: zitadel's pkg/op) started beside it.
type ssoEnv struct {
	*apptest.Dashboard
	IdP *oidctest.Provider
}

// The provider's people. Their password is idpPassword.
var (
	ann       = oidctest.User{ID: "sub-ann", Username: "ann", Email: "ann@example.com", EmailVerified: true, Groups: []string{"staff", "support"}}
	root      = oidctest.User{ID: "sub-root", Username: "root", Email: "root@example.com", EmailVerified: true, Groups: []string{"approvals-admins"}}
	zed       = oidctest.User{ID: "sub-zed", Username: "zed", Email: "zed@example.com", EmailVerified: true, Groups: []string{"contractors"}}
	unchecked = oidctest.User{ID: "sub-unchecked", Username: "unchecked", Email: "unchecked@example.com", EmailVerified: false, Groups: []string{"support"}}
)

const idpPassword = "provider-password"

func startSSO(t *testing.T, opts apptest.Options, idpOpts oidctest.Options) *ssoEnv {
	t.Helper()
	idp := oidctest.Start(t, idpOpts)
	roles, err := sso.ParseRoles(ssoRoles)
	if err != nil {
		t.Fatal(err)
	}
	if opts.SSO == nil {
		opts.SSO = &sso.Config{Issuer: idp.URL, ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret, Roles: roles}
	}
	d := apptest.StartDashboard(t, opts)
	idp.AllowRedirect(d.URL+"/auth/oidc/callback", d.URL+"/login")
	for _, u := range []oidctest.User{ann, root, zed, unchecked} {
		u.Password = idpPassword
		idp.AddUser(u)
	}
	return &ssoEnv{Dashboard: d, IdP: idp}
}

// begin follows "Sign in with SSO" and returns the provider's
// authorization URL it leads to.
func (e *ssoEnv) begin(t *testing.T, b *apptest.Browser) string {
	t.Helper()
	p := b.Get("/auth/oidc/login")
	p.WantStatus(t, http.StatusFound)
	loc := p.Header.Get("Location")
	if !strings.HasPrefix(loc, e.IdP.URL+"/authorize?") {
		t.Fatalf("Sign in with SSO leads to %s, not the provider's authorization endpoint", loc)
	}
	return loc
}

// atProvider signs in at the provider as user and returns the callback
// the provider sends the browser back to, as a path of the dashboard.
func (e *ssoEnv) atProvider(t *testing.T, b *apptest.Browser, authURL string, user oidctest.User) string {
	t.Helper()
	back := e.IdP.SignInAt(t, b.Client, authURL, user.Username, idpPassword)
	path, ok := strings.CutPrefix(back, e.URL)
	if !ok || !strings.HasPrefix(path, "/auth/oidc/callback?") {
		t.Fatalf("the provider sends the browser back to %s, not the callback", back)
	}
	return path
}

// signIn is the whole single sign-on of user in b: the callback's answer.
func (e *ssoEnv) signIn(t *testing.T, b *apptest.Browser, user oidctest.User) apptest.Page {
	t.Helper()
	return b.Get(e.atProvider(t, b, e.begin(t, b), user))
}

// signedIn signs user in with a new browser and checks it lands on the queue.
func (e *ssoEnv) signedIn(t *testing.T, user oidctest.User, role accounts.Role) *apptest.Browser {
	t.Helper()
	b := e.Anonymous()
	e.signIn(t, b, user).WantRedirect(t, "/")
	e.wantSignedIn(t, b, user.Email, role)
	return b
}

// wantSignedIn checks that b is on the queue as email with role.
func (e *ssoEnv) wantSignedIn(t *testing.T, b *apptest.Browser, email string, role accounts.Role) {
	t.Helper()
	p := b.Get("/")
	p.WantStatus(t, http.StatusOK)
	p.WantContains(t, "Signed in as </span>"+email+` <span class="badge">`+string(role)+"</span>")
}

// wantSignedOut checks that b has no session.
func wantSignedOut(t *testing.T, b *apptest.Browser) {
	t.Helper()
	b.Get("/").WantRedirect(t, "/login")
}

// staffEvents lists the audit log's events of kind, newest first.
func (e *ssoEnv) staffEvents(t *testing.T, kind string) []queue.Event {
	t.Helper()
	evs, err := e.Store.EventList(context.Background(), queue.EventListParams{Kind: kind, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func eventData(t *testing.T, ev queue.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.Fatalf("event data %s: %v", ev.Data, err)
	}
	return m
}

func (e *ssoEnv) user(t *testing.T, email string) *accounts.User {
	t.Helper()
	u, err := e.Store.UserGetByEmail(context.Background(), email)
	if err != nil {
		t.Fatalf("user %s: %v", email, err)
	}
	return u
}

// A first single sign-on creates the user with the role its groups map
// to, through the authorization code flow with PKCE (S256), state and
// nonce; the sign-in is in the audit log; every later sign-in refreshes
// the role and the groups; the admin users page says who signs in how.
// On both stores.
func TestSSOSignIn(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startSSO(t, apptest.Options{SQLite: onSQLite}, oidctest.Options{})
			b := e.Anonymous()
			login := b.Get("/login")
			login.WantStatus(t, http.StatusOK)
			login.WantContains(t, `href="/auth/oidc/login"`, "Sign in with SSO", `name="password"`)

			// The flow as the provider sees it.
			authURL := e.begin(t, b)
			q, _ := url.ParseQuery(strings.SplitN(authURL, "?", 2)[1])
			for k, want := range map[string]string{"response_type": "code", "client_id": oidctest.ClientID,
				"redirect_uri": e.URL + "/auth/oidc/callback", "code_challenge_method": "S256"} {
				if q.Get(k) != want {
					t.Errorf("authorization request %s = %q, want %q", k, q.Get(k), want)
				}
			}
			for _, k := range []string{"state", "nonce", "code_challenge"} {
				if len(q.Get(k)) < 43 {
					t.Errorf("authorization request %s = %q: want 256 random bits", k, q.Get(k))
				}
			}
			if scopes := strings.Fields(q.Get("scope")); !slices.Contains(scopes, "openid") || !slices.Contains(scopes, "groups") || !slices.Contains(scopes, "offline_access") {
				t.Errorf("scopes %v: want openid, and groups and offline_access, which the provider offers", scopes)
			}
			b.Get(e.atProvider(t, b, authURL, ann)).WantRedirect(t, "/")
			e.wantSignedIn(t, b, "ann@example.com", accounts.RoleApprover)

			u := e.user(t, "ann@example.com")
			if u.Role != accounts.RoleApprover || u.SSOSubject != "sub-ann" || !slices.Equal(u.IdPGroups, []string{"staff", "support"}) || u.PasswordHash != "" {
				t.Fatalf("created user: %+v", u)
			}
			evs := e.staffEvents(t, queue.EventSignedIn)
			if len(evs) != 1 || evs[0].Actor != "user:ann@example.com" || evs[0].Channel != "sso" || evs[0].ActionID != "" {
				t.Fatalf("sign-in events: %+v", evs)
			}
			if d := eventData(t, evs[0]); d["role"] != "approver" || d["created"] != true {
				t.Fatalf("sign-in event data: %v", d)
			}

			// The provider makes ann an admin: her next sign-in says so.
			e.IdP.SetGroups(ann.ID, "approvals-admins", "support")
			e.signedIn(t, ann, accounts.RoleAdmin)
			if u := e.user(t, "ann@example.com"); !slices.Equal(u.IdPGroups, []string{"approvals-admins", "support"}) {
				t.Fatalf("groups after the second sign-in: %v", u.IdPGroups)
			}
			// And back to viewer: the first rule that matches wins.
			e.IdP.SetGroups(ann.ID, "staff")
			e.signedIn(t, ann, accounts.RoleViewer)

			// A password user beside her, for the users page.
			e.AddUser("pat@example.com", accounts.RoleOps)
			e.IdP.SetGroups(ann.ID, "approvals-admins")
			admin := e.signedIn(t, ann, accounts.RoleAdmin)
			users := admin.Get("/admin/users")
			users.WantStatus(t, http.StatusOK)
			users.WantContains(t, `data-testid="signin-ann@example.com">SSO<`, `data-testid="signin-pat@example.com">password<`,
				`data-testid="idp-groups-ann@example.com"`, "approvals-admins")
			// The audit log lists the sign-ins, as staff events of no action.
			audit := admin.Get("/audit?kind=signed_in")
			audit.WantStatus(t, http.StatusOK)
			audit.WantContains(t, "user:ann@example.com", `<code>user:ann@example.com</code>`, "via sso")
			if strings.Contains(audit.Body, `href="/actions/"`) {
				t.Fatal("a staff event links to an action")
			}
		})
	}
}

// Every refusal answers a page that says which, in plain words, with a
// 4xx, creates no session (and no user), and is in the audit log.
func TestSSORefusals(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{}, oidctest.Options{})
	// An attempt returns the answer to the refused request and the browser
	// that made it.
	type attempt func(t *testing.T) (apptest.Page, *apptest.Browser)
	// normal is a whole sign-in as user.
	normal := func(user oidctest.User) attempt {
		return func(t *testing.T) (apptest.Page, *apptest.Browser) {
			b := e.Anonymous()
			return e.signIn(t, b, user), b
		}
	}
	query := func(t *testing.T, raw string) url.Values {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u.Query()
	}
	tests := []struct {
		name   string
		before func()
		after  func()
		try    attempt
		reason sso.Reason
		status int
		words  string
		email  string // the user that must not exist afterwards, if any
	}{
		{name: "bad state", reason: sso.ReasonState, status: 400, words: "its state is missing, wrong",
			try: func(t *testing.T) (apptest.Page, *apptest.Browser) {
				b := e.Anonymous()
				q := query(t, e.atProvider(t, b, e.begin(t, b), root))
				q.Set("state", "forged-"+q.Get("state"))
				return b.Get("/auth/oidc/callback?" + q.Encode()), b
			}, email: "root@example.com"},
		{name: "no flow cookie", reason: sso.ReasonState, status: 400, words: "its state is missing",
			try: func(t *testing.T) (apptest.Page, *apptest.Browser) {
				b := e.Anonymous()
				cb := e.atProvider(t, b, e.begin(t, b), root)
				other := e.Anonymous() // the code and state, without the browser's cookie
				return other.Get(cb), other
			}, email: "root@example.com"},
		{name: "reused state", reason: sso.ReasonState, status: 400, words: "was used already",
			try: func(t *testing.T) (apptest.Page, *apptest.Browser) {
				b := e.Anonymous()
				authURL := e.begin(t, b)
				flow := cookieValue(t, b, e.URL, handlers.FlowCookie)
				cb := e.atProvider(t, b, authURL, ann)
				b.Get(cb).WantRedirect(t, "/")
				// A replay of the whole callback, cookie and all, by someone
				// who copied both.
				thief := e.Anonymous()
				setCookie(t, thief, e.URL, handlers.FlowCookie, flow)
				return thief.Get(cb), thief
			}},
		{name: "replayed code", reason: sso.ReasonCode, status: 400, words: "refused the sign-in code",
			try: func(t *testing.T) (apptest.Page, *apptest.Browser) {
				b := e.Anonymous()
				first := e.atProvider(t, b, e.begin(t, b), ann)
				b.Get(first).WantRedirect(t, "/")
				// The spent code, with a valid new state of another browser.
				other := e.Anonymous()
				state := query(t, e.begin(t, other)).Get("state")
				q := url.Values{"code": {query(t, first).Get("code")}, "state": {state}}
				return other.Get("/auth/oidc/callback?" + q.Encode()), other
			}},
		{name: "wrong audience", reason: sso.ReasonAudience, status: 401, words: "issued for another application",
			before: func() { e.IdP.SetAudience("another-client") }, after: func() { e.IdP.SetAudience("") },
			try: normal(root), email: "root@example.com"},
		{name: "wrong issuer", reason: sso.ReasonIssuer, status: 401, words: "issued by another identity provider",
			before: func() { e.IdP.IssueTokensAsOtherIssuer(true) }, after: func() { e.IdP.IssueTokensAsOtherIssuer(false) },
			try: normal(root), email: "root@example.com"},
		{name: "unpublished signing key", reason: sso.ReasonSignature, status: 401, words: "published keys",
			before: func() { e.IdP.SignWithUnpublishedKey(true) }, after: func() { e.IdP.SignWithUnpublishedKey(false) },
			try: normal(root), email: "root@example.com"},
		{name: "expired token", reason: sso.ReasonExpired, status: 401, words: "has expired",
			before: func() { e.IdP.SetIDTokenLifetime(-time.Minute) }, after: func() { e.IdP.SetIDTokenLifetime(0) },
			try: normal(root), email: "root@example.com"},
		{name: "wrong nonce", reason: sso.ReasonNonce, status: 401, words: "its nonce does not match",
			before: func() { e.IdP.SetNonce("someone-elses-nonce") }, after: func() { e.IdP.SetNonce("") },
			try: normal(root), email: "root@example.com"},
		{name: "unverified email", reason: sso.ReasonEmailUnverified, status: 403, words: "has not verified your email address",
			try: normal(unchecked), email: "unchecked@example.com"},
		{name: "no mapped role", reason: sso.ReasonNoRole, status: 403, words: "groups give you no role",
			try: normal(zed), email: "zed@example.com"},
		{name: "provider refuses", reason: sso.ReasonProvider, status: 403, words: "did not sign you in",
			try: func(t *testing.T) (apptest.Page, *apptest.Browser) {
				b := e.Anonymous()
				q := url.Values{"error": {"access_denied"}, "error_description": {"the person said no"},
					"state": {query(t, e.begin(t, b)).Get("state")}}
				return b.Get("/auth/oidc/callback?" + q.Encode()), b
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the provider's knobs are shared.
			if tc.before != nil {
				tc.before()
			}
			p, b := tc.try(t)
			if tc.after != nil {
				tc.after()
			}
			p.WantStatus(t, tc.status)
			p.WantContains(t, `data-reason="`+string(tc.reason)+`"`, tc.words)
			wantSignedOut(t, b)
			if tc.email != "" {
				if _, err := e.Store.UserGetByEmail(context.Background(), tc.email); !errors.Is(err, accounts.ErrNotFound) {
					t.Fatalf("a refused sign-in created user %s: %v", tc.email, err)
				}
			}
			evs := e.staffEvents(t, queue.EventSignInRefused)
			if len(evs) == 0 || eventData(t, evs[0])["reason"] != string(tc.reason) {
				t.Fatalf("the newest refusal in the audit log: %+v, want reason %s", evs, tc.reason)
			}
		})
	}
}

// The server starts while the provider is down; a sign-in then is refused
// with a page saying the provider cannot be reached (a 4xx), and works once
// the provider is back: discovery is lazy and retried.
func TestSSOProviderUnreachable(t *testing.T) {
	t.Parallel()
	down := oidctest.Start(t, oidctest.Options{})
	issuer := down.URL
	down.Close()
	roles, _ := sso.ParseRoles(ssoRoles)
	d := apptest.StartDashboard(t, apptest.Options{SSO: &sso.Config{Issuer: issuer, ClientID: oidctest.ClientID,
		ClientSecret: oidctest.ClientSecret, Roles: roles}})
	b := d.Anonymous()
	b.Get("/login").WantContains(t, "Sign in with SSO")
	p := b.Get("/auth/oidc/login")
	p.WantStatus(t, http.StatusConflict)
	p.WantContains(t, `data-reason="unreachable"`, "cannot be reached")
	wantSignedOut(t, b)

	// Reachable at the start, gone at the callback.
	e := startSSO(t, apptest.Options{}, oidctest.Options{})
	b = e.Anonymous()
	cb := e.atProvider(t, b, e.begin(t, b), ann)
	e.IdP.Close()
	p = b.Get(cb)
	p.WantStatus(t, http.StatusConflict)
	p.WantContains(t, `data-reason="unreachable"`)
	wantSignedOut(t, b)
	if evs := e.staffEvents(t, queue.EventSignInRefused); len(evs) != 1 || eventData(t, evs[0])["reason"] != "unreachable" {
		t.Fatalf("refusals in the audit log: %+v", evs)
	}
}

// A refused sign-in counts against the client's address like a wrong
// password: past the limit the answer is 429 and nothing more is written
// to the audit log.
func TestSSORefusalsAreLimited(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{LoginLimits: handlers.LoginLimits{PerAccount: 100, PerAddress: 3, Window: time.Hour}}, oidctest.Options{})
	b := e.Anonymous()
	for range 3 {
		b.Get("/auth/oidc/callback?state=forged&code=x").WantStatus(t, http.StatusBadRequest)
	}
	p := b.Get("/auth/oidc/callback?state=forged&code=x")
	p.WantStatus(t, http.StatusTooManyRequests)
	if p.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if n := len(e.staffEvents(t, queue.EventSignInRefused)); n != 3 {
		t.Fatalf("%d refusals in the audit log, want 3: the one past the limit writes nothing", n)
	}
}

// The provider rotates its signing key: the next sign-in's token names a
// key id the server has not seen, so it fetches the JWKS again and the
// sign-in works.
func TestSSOKeyRotation(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{}, oidctest.Options{})
	e.signedIn(t, ann, accounts.RoleApprover)
	fetched := e.IdP.KeyFetches()
	if fetched == 0 {
		t.Fatal("the ID token was accepted without the provider's keys being fetched")
	}
	e.signedIn(t, root, accounts.RoleAdmin)
	if got := e.IdP.KeyFetches(); got != fetched {
		t.Fatalf("keys fetched %d times for a known key id, want the cached %d", got, fetched)
	}
	oldKey, newKey := e.IdP.RotateKey()
	if oldKey == newKey {
		t.Fatal("the key did not change")
	}
	e.signedIn(t, ann, accounts.RoleApprover)
	if got := e.IdP.KeyFetches(); got != fetched+1 {
		t.Fatalf("keys fetched %d times after the rotation, want %d: once more, for the new key id", got, fetched+1)
	}
}

// A person whose groups no longer map to a role cannot sign in, and the
// sessions they have end at their next request; their IdP groups no
// longer decide anything either.
func TestSSONoRoleEndsSessions(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{}, oidctest.Options{})
	first := e.signedIn(t, ann, accounts.RoleApprover)
	second := e.signedIn(t, ann, accounts.RoleApprover)
	e.IdP.SetGroups(ann.ID, "contractors")
	third := e.Anonymous()
	p := e.signIn(t, third, ann)
	p.WantStatus(t, http.StatusForbidden)
	p.WantContains(t, `data-reason="no_role"`)
	for _, b := range []*apptest.Browser{first, second, third} {
		wantSignedOut(t, b)
	}
	u := e.user(t, "ann@example.com")
	if u.SSODeniedAt == nil || !slices.Equal(u.IdPGroups, []string{"contractors"}) {
		t.Fatalf("after the refused sign-in: %+v", u)
	}
	if evs := e.staffEvents(t, queue.EventSignInRefused); len(evs) != 1 || evs[0].Actor != "user:ann@example.com" {
		t.Fatalf("refusals: %+v", evs)
	}
	// Back in a group that gives a role: she signs in again.
	e.IdP.SetGroups(ann.ID, "support")
	e.signedIn(t, ann, accounts.RoleApprover)
}

// Within APPROVALS_OIDC_RECHECK the server asks the provider again, with
// the refresh token: new groups give the new role at once; groups that map
// to no role end every session of the person. Without a refresh token, or
// once the provider refuses it, the session ends and the person signs in
// again.
func TestSSORecheck(t *testing.T) {
	t.Parallel()
	t.Run("refresh", func(t *testing.T) {
		t.Parallel()
		e := startSSO(t, apptest.Options{SSORecheck: time.Hour}, oidctest.Options{})
		b := e.signedIn(t, ann, accounts.RoleApprover)
		calls := e.IdP.TokenCalls()
		e.IdP.SetGroups(ann.ID, "approvals-admins")
		e.Advance(59 * time.Minute)
		e.wantSignedIn(t, b, "ann@example.com", accounts.RoleApprover) // not due yet
		if e.IdP.TokenCalls() != calls {
			t.Fatal("the provider was asked before the recheck was due")
		}
		e.Advance(2 * time.Minute)
		e.wantSignedIn(t, b, "ann@example.com", accounts.RoleAdmin)
		if e.IdP.TokenCalls() != calls+1 {
			t.Fatalf("token calls %d, want one refresh", e.IdP.TokenCalls()-calls)
		}
		if u := e.user(t, "ann@example.com"); u.Role != accounts.RoleAdmin || !slices.Equal(u.IdPGroups, []string{"approvals-admins"}) {
			t.Fatalf("after the recheck: %+v", u)
		}
		// The next check uses the rotated refresh token; groups that map
		// to no role end the session.
		other := e.signedIn(t, ann, accounts.RoleAdmin)
		e.IdP.SetGroups(ann.ID, "contractors")
		e.Advance(61 * time.Minute)
		wantSignedOut(t, b)
		wantSignedOut(t, other) // every session of hers, not only the one rechecked
		if u := e.user(t, "ann@example.com"); u.SSODeniedAt == nil {
			t.Fatal("the recheck that found no role did not deny the user")
		}
		evs := e.staffEvents(t, queue.EventSignInRefused)
		if len(evs) != 1 || eventData(t, evs[0])["recheck"] != true {
			t.Fatalf("refusals: %+v", evs)
		}
	})
	t.Run("refresh refused", func(t *testing.T) {
		t.Parallel()
		e := startSSO(t, apptest.Options{}, oidctest.Options{})
		b := e.signedIn(t, ann, accounts.RoleApprover)
		e.IdP.RevokeRefreshTokens()
		e.Advance(time.Hour + time.Second) // the default recheck
		wantSignedOut(t, b)
		e.signedIn(t, ann, accounts.RoleApprover)
	})
	t.Run("no refresh token", func(t *testing.T) {
		t.Parallel()
		e := startSSO(t, apptest.Options{SSORecheck: 10 * time.Minute}, oidctest.Options{NoRefreshTokens: true})
		b := e.signedIn(t, ann, accounts.RoleApprover)
		e.Advance(9 * time.Minute)
		e.wantSignedIn(t, b, "ann@example.com", accounts.RoleApprover)
		e.Advance(2 * time.Minute)
		wantSignedOut(t, b)
		// Signing in again needs nothing but the provider's session.
		e.signedIn(t, ann, accounts.RoleApprover)
	})
}

const idpGroupTools = `
groups:
  leads: [lee@example.com, "idp:support-leads"]
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [leads]
`

// A tools-file group naming an IdP group lets its members decide, as of
// their last sign-in, on the dashboard and in "waiting for me"; someone
// outside it (with the same role) may not.
func TestSSOIdPGroupDecides(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{Tools: apptest.ParseTools(t, idpGroupTools, classify.Options{})}, oidctest.Options{})
	e.IdP.SetGroups(ann.ID, "support", "support-leads")
	lead := e.signedIn(t, ann, accounts.RoleApprover)
	outsider := oidctest.User{ID: "sub-otto", Username: "otto", Password: idpPassword, Email: "otto@example.com", EmailVerified: true, Groups: []string{"support"}}
	e.IdP.AddUser(outsider)
	other := e.signedIn(t, outsider, accounts.RoleApprover)

	a := e.Submit("send_customer_email", `{"customer_id":"c-1","topic":"t"}`, "")
	b := e.Submit("send_customer_email", `{"customer_id":"c-2","topic":"t"}`, "")
	if !strings.Contains(lead.Get("/?mine=1").Body, a.ID) || strings.Contains(other.Get("/?mine=1").Body, a.ID) {
		t.Fatal("waiting for me: the IdP group's member should see the action, the outsider not")
	}
	page := lead.Get("/actions/" + a.ID)
	page.WantContains(t, "support-leads")
	other.Post("/actions/"+a.ID+"/approve", url.Values{"note": {"me too"}}).WantStatus(t, http.StatusForbidden)
	if got := e.Action(a.ID); got.State != queue.StatePending {
		t.Fatalf("after the outsider's approval: %s", got.State)
	}
	lead.Post("/actions/"+a.ID+"/approve", url.Values{"note": {"ok"}}).WantRedirect(t, "/actions/"+a.ID)
	if got := e.Action(a.ID); got.State != queue.StateApproved || *got.DecidedBy != "user:ann@example.com" {
		t.Fatalf("after the lead's approval: %s by %v", got.State, got.DecidedBy)
	}
	// Out of the group at the next sign-in: no longer eligible.
	e.IdP.SetGroups(ann.ID, "support")
	lead = e.signedIn(t, ann, accounts.RoleApprover)
	lead.Post("/actions/"+b.ID+"/approve", url.Values{"note": {"ok"}}).WantStatus(t, http.StatusForbidden)
}

// With APPROVALS_PASSWORD_LOGIN=off the login page offers single sign-on
// only, a password sign-in is refused (403, writing nothing), and the
// setup link still creates the first admin: the way in for a break-glass
// admin.
func TestPasswordLoginOff(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{PasswordLoginOff: true}, oidctest.Options{})
	link, err := e.Server.SetupURL(context.Background(), e.URL)
	if err != nil || link == "" {
		t.Fatalf("setup link: %q %v", link, err)
	}
	b := e.Anonymous()
	login := b.Get("/login")
	login.WantStatus(t, http.StatusOK)
	login.WantContains(t, "Sign in with SSO")
	if strings.Contains(login.Body, `name="password"`) {
		t.Fatal("the password form is offered with APPROVALS_PASSWORD_LOGIN=off")
	}
	e.AddUser("pat@example.com", accounts.RoleAdmin)
	p := b.Post("/login", url.Values{"email": {"pat@example.com"}, "password": {apptest.Password}})
	p.WantStatus(t, http.StatusForbidden)
	p.WantContains(t, "Password sign-in is turned off")
	wantSignedOut(t, b)
	for _, subject := range []string{handlers.AccountAddressSubject("pat@example.com", "127.0.0.1"), "addr:127.0.0.1"} {
		n, err := e.Store.LoginFailureCount(context.Background(), accounts.LoginFailureCountParams{Subject: subject, Since: time.Time{}})
		if err != nil || n != 0 {
			t.Fatalf("a refused password sign-in recorded %d failures of %s (%v)", n, subject, err)
		}
	}
	// Single sign-on works, of course.
	e.signedIn(t, ann, accounts.RoleApprover)

	// The setup link, on a server with no admin yet.
	f := startSSO(t, apptest.Options{PasswordLoginOff: true}, oidctest.Options{})
	link, err = f.Server.SetupURL(context.Background(), f.URL)
	if err != nil || link == "" {
		t.Fatalf("setup link: %q %v", link, err)
	}
	setup := f.Anonymous()
	path := strings.TrimPrefix(link, f.URL)
	setup.Get(path).WantStatus(t, http.StatusOK)
	token := strings.TrimPrefix(path, "/setup?token=")
	tok, _ := url.QueryUnescape(token)
	setup.Post("/setup", url.Values{"token": {tok}, "email": {"breakglass@example.com"}, "password": {"a long enough password"}}).WantRedirect(t, "/")
	f.wantSignedIn(t, setup, "breakglass@example.com", accounts.RoleAdmin)
}

// Logout ends the local session and sends the browser to the provider's
// end_session_endpoint with id_token_hint, client_id and the
// post_logout_redirect_uri, which brings it back to the sign-in page;
// without an end_session_endpoint it goes to the sign-in page at once.
func TestSSOLogout(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{}, oidctest.Options{})
	b := e.signedIn(t, ann, accounts.RoleApprover)
	queuePage := b.Get("/")
	if csp := queuePage.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+e.IdP.URL) {
		t.Fatalf("CSP %q: the logout form may not lead to the provider", csp)
	}
	p := b.Post("/logout", nil)
	p.WantStatus(t, http.StatusSeeOther)
	loc, err := url.Parse(p.Header.Get("Location"))
	if err != nil || loc.Scheme+"://"+loc.Host+loc.Path != e.IdP.URL+"/end_session" {
		t.Fatalf("logout leads to %s, not the provider's end_session_endpoint", p.Header.Get("Location"))
	}
	q := loc.Query()
	if q.Get("id_token_hint") == "" || q.Get("client_id") != oidctest.ClientID || q.Get("post_logout_redirect_uri") != e.URL+"/login" {
		t.Fatalf("end_session parameters: %v", q)
	}
	wantSignedOut(t, b)
	// The provider accepts the hint and sends the browser back.
	c := *b.Client
	res, err := c.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if back := res.Header.Get("Location"); res.StatusCode != http.StatusFound || back != e.URL+"/login" {
		t.Fatalf("the provider's end_session answered %d to %q", res.StatusCode, back)
	}
	if len(e.IdP.EndSessionQueries()) != 1 {
		t.Fatalf("end_session requests: %v", e.IdP.EndSessionQueries())
	}

	f := startSSO(t, apptest.Options{}, oidctest.Options{NoEndSession: true})
	b = f.signedIn(t, ann, accounts.RoleApprover)
	b.Post("/logout", nil).WantRedirect(t, "/login")
	wantSignedOut(t, b)
	// A password session logs out locally too.
	f.AddUser("pat@example.com", accounts.RoleAdmin)
	pat := f.Login("pat@example.com")
	pat.Post("/logout", nil).WantRedirect(t, "/login")
}

// A provider that puts the email and the groups in userinfo only (the
// spec's default once an access token is issued): the server reads them
// from there.
func TestSSOClaimsFromUserinfo(t *testing.T) {
	t.Parallel()
	e := startSSO(t, apptest.Options{}, oidctest.Options{ClaimsInUserinfoOnly: true})
	e.signedIn(t, root, accounts.RoleAdmin)
	if u := e.user(t, "root@example.com"); !slices.Equal(u.IdPGroups, []string{"approvals-admins"}) {
		t.Fatalf("groups from userinfo: %v", u.IdPGroups)
	}
	p := e.signIn(t, e.Anonymous(), unchecked)
	p.WantStatus(t, http.StatusForbidden)
	p.WantContains(t, `data-reason="email_unverified"`)
}

// Without single sign-on configured, its routes are not there.
func TestSSONotConfigured(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.Anonymous()
	b.Get("/auth/oidc/login").WantStatus(t, http.StatusNotFound)
	b.Get("/auth/oidc/callback?code=x&state=y").WantStatus(t, http.StatusNotFound)
	if strings.Contains(b.Get("/login").Body, "Sign in with SSO") {
		t.Fatal("the login page offers single sign-on that is not configured")
	}
}

// cookieValue reads a cookie the browser holds for base.
func cookieValue(t *testing.T, b *apptest.Browser, base, name string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, c := range b.Client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("the browser holds no cookie %s", name)
	return ""
}

func setCookie(t *testing.T, b *apptest.Browser, base, name, value string) {
	t.Helper()
	u, _ := url.Parse(base)
	b.Client.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}

// Starting a single sign-on is anonymous traffic: the login page, "Sign in
// with SSO" and the whole visit at the provider write nothing to the
// database (the state, nonce and PKCE verifier live in the browser's
// signed cookie), on both stores. The callback is the first write.
func TestSSOStartWritesNothing(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spy := &writeSpy{}
			e := startSSO(t, apptest.Options{SQLite: onSQLite, WrapAll: func(s storage.Store) storage.Store { spy.Store = s; return spy }},
				oidctest.Options{})
			rows := processRows(t, e.App)
			e.AddUser("pat@example.com", accounts.RoleAdmin)
			before, writesBefore := rows(t), spy.writes.Load()
			b := e.Anonymous()
			b.Get("/login").WantStatus(t, http.StatusOK)
			cb := e.atProvider(t, b, e.begin(t, b), ann)
			after := rows(t)
			for table, n := range after {
				if n != before[table] {
					t.Errorf("table %s: %d rows before the sign-in started, %d after", table, before[table], n)
				}
			}
			if w := spy.writes.Load(); w != writesBefore {
				t.Errorf("starting a sign-in called %d store writes (the last %v)", w-writesBefore, spy.last.Load())
			}
			b.Get(cb).WantRedirect(t, "/")
			final := rows(t)
			for _, table := range []string{"sessions", "sso_states", "events", "users"} {
				if final[table] <= before[table] {
					t.Errorf("table %s: %d rows after the callback, want more than %d", table, final[table], before[table])
				}
			}
		})
	}
}
