// Package oidctest starts a real OpenID provider for tests: zitadel's
// pkg/op (discovery, JWKS, authorize with PKCE, token, userinfo, refresh,
// end_session) over an in-memory storage adapted from the storage of
// zitadel's example server, with a plain login page. Tests change what it
// does between sign-ins (a person's groups, its signing key) and make it
// misbehave the ways a hostile or broken provider would (a token for
// another audience or issuer, a wrong nonce, an unpublished key, an
// expired token), so that approvals is tested against the protocol, not
// against a mock of its own code.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// ClientID and ClientSecret are the client approvals is registered as.
const (
	ClientID     = "approvals"
	ClientSecret = "approvals-client-secret"
)

// User is a person the provider knows.
type User struct {
	ID            string // the subject
	Username      string // typed on the login page
	Password      string
	Email         string
	EmailVerified bool
	Groups        []string
}

// Options change the provider.
type Options struct {
	// NoRefreshTokens keeps refresh tokens from the client (its grant
	// types lack refresh_token), as some providers do.
	NoRefreshTokens bool
	// NoEndSession leaves end_session_endpoint out of discovery.
	NoEndSession bool
	// ClaimsInUserinfoOnly keeps email, email_verified and the groups out
	// of the ID token (the spec's default when an access token is issued):
	// the client must read them from userinfo.
	ClaimsInUserinfoOnly bool
}

// Provider is a running OpenID provider.
type Provider struct {
	// URL is the issuer, such as http://127.0.0.1:41234.
	URL string

	srv     *httptest.Server
	st      *storage
	other   http.Handler // an op with another issuer over the same storage
	handler http.Handler

	mu sync.Mutex
	// AuthorizeQueries are the query strings of the authorization requests.
	authorize   []string
	endSessions []string
	keyFetches  atomic.Int64
	tokenCalls  atomic.Int64
	// tokenIssuerOther: the token endpoint answers as OtherIssuer.
	tokenIssuerOther bool
	noEndSession     bool
}

// OtherIssuer is the issuer that a token signed by the provider's keys
// names when IssueTokensAsOtherIssuer is on: a mix-up, as if another
// provider had answered.
const OtherIssuer = "https://other-issuer.example"

// Start starts a provider on 127.0.0.1:0; it stops when t ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{URL: "http://" + ln.Addr().String(), noEndSession: opts.NoEndSession}
	p.st = newStorage(opts)
	provider, err := newOP(p.URL, p.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newOP(OtherIssuer, p.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	p.other = other
	login := &loginPage{st: p.st, callback: op.AuthCallbackURL(provider)}
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", login.show)
	mux.Handle("POST /login", interceptor.HandlerFunc(login.check))
	mux.HandleFunc("GET /logged-out", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("signed out")) })
	mux.Handle("/", provider)
	p.handler = mux
	p.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 5 * time.Second}}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

func newOP(issuer string, st *storage, opts Options) (*op.Provider, error) {
	scopes := []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail, oidc.ScopeOfflineAccess, "groups"}
	config := &op.Config{
		CryptoKey:                sha256.Sum256([]byte("oidctest")),
		DefaultLogoutRedirectURI: "/logged-out",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       []language.Tag{language.English},
		SupportedScopes:          scopes,
	}
	return op.NewProvider(config, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
}

// serve records what tests look at and routes the token endpoint to the
// other issuer when asked to.
func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/authorize":
		p.mu.Lock()
		p.authorize = append(p.authorize, r.URL.RawQuery)
		p.mu.Unlock()
	case "/keys":
		p.keyFetches.Add(1)
	case "/end_session":
		p.mu.Lock()
		p.endSessions = append(p.endSessions, r.URL.RawQuery)
		p.mu.Unlock()
	case "/.well-known/openid-configuration":
		if p.noEndSession {
			rec := httptest.NewRecorder()
			p.handler.ServeHTTP(rec, r)
			var doc map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			delete(doc, "end_session_endpoint")
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
			return
		}
	case "/oauth/token":
		p.tokenCalls.Add(1)
		p.mu.Lock()
		other := p.tokenIssuerOther
		p.mu.Unlock()
		if other {
			p.other.ServeHTTP(w, r)
			return
		}
		p.st.mu.Lock()
		aud := p.st.audience
		p.st.mu.Unlock()
		if aud != "" {
			p.serveOtherAudience(w, r, aud)
			return
		}
	}
	p.handler.ServeHTTP(w, r)
}

// serveOtherAudience answers the token request with an ID token for
// another audience (and authorized party), signed with the provider's key:
// zitadel's op always names the requesting client, so the answer is
// re-signed after the fact, as a provider that mixed up its clients would
// sign it.
func (p *Provider) serveOtherAudience(w http.ResponseWriter, r *http.Request, aud string) {
	rec := httptest.NewRecorder()
	p.handler.ServeHTTP(rec, r)
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	idToken, _ := body["id_token"].(string)
	if rec.Code != http.StatusOK || idToken == "" {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	jws, err := jose.ParseSignedCompact(idToken, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var claims map[string]any
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &claims); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	claims["aud"], claims["azp"] = []string{aud}, aud
	payload, _ := json.Marshal(claims)
	p.st.mu.Lock()
	key := p.st.key
	p.st.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key.key, KeyID: key.id}}, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	signed, err := signer.Sign(payload)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body["id_token"], _ = signed.CompactSerialize()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(body)
}

// Close stops the provider: it cannot be reached any more.
func (p *Provider) Close() { p.srv.Close() }

// AddUser registers a person.
func (p *Provider) AddUser(u User) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	c := u
	c.Groups = slices.Clone(u.Groups)
	p.st.users[u.ID] = &c
}

// SetGroups changes a person's groups: the next token says so.
func (p *Provider) SetGroups(id string, groups ...string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.users[id].Groups = slices.Clone(groups)
}

// AllowRedirect registers a redirect URI and a post-logout redirect URI of
// the client.
func (p *Provider) AllowRedirect(redirect, postLogout string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.redirects = append(p.st.redirects, redirect)
	p.st.postLogout = append(p.st.postLogout, postLogout)
}

// RotateKey replaces the signing key with a new one under a new key id;
// the JWKS publishes only the new key from now on.
func (p *Provider) RotateKey() (oldID, newID string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	oldID = p.st.key.id
	p.st.key = newKey()
	p.st.published = p.st.key
	return oldID, p.st.key.id
}

// SignWithUnpublishedKey makes the provider sign with a key its JWKS does
// not publish (on: a forged token), or again with the published one.
func (p *Provider) SignWithUnpublishedKey(on bool) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if on {
		p.st.key = newKey()
	} else {
		p.st.key = p.st.published
	}
}

// SetAudience makes the token endpoint's ID tokens name this audience (and
// authorized party) instead of the client ("" for the client again).
func (p *Provider) SetAudience(aud string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.audience = aud
}

// SetNonce makes the next ID tokens carry this nonce instead of the one
// the client sent ("" for the right one again).
func (p *Provider) SetNonce(nonce string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.nonce = nonce
}

// SetIDTokenLifetime sets how long ID tokens live (negative: issued
// expired); zero restores the default hour.
func (p *Provider) SetIDTokenLifetime(d time.Duration) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.lifetime = d
}

// IssueTokensAsOtherIssuer makes the token endpoint answer as OtherIssuer,
// signing with the same keys.
func (p *Provider) IssueTokensAsOtherIssuer(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenIssuerOther = on
}

// AuthorizeQueries returns the query strings of the authorization
// requests so far.
func (p *Provider) AuthorizeQueries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.authorize)
}

// EndSessionQueries returns the query strings of the end_session requests.
func (p *Provider) EndSessionQueries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.endSessions)
}

// KeyFetches counts the requests for the JWKS.
func (p *Provider) KeyFetches() int64 { return p.keyFetches.Load() }

// TokenCalls counts the requests to the token endpoint.
func (p *Provider) TokenCalls() int64 { return p.tokenCalls.Load() }

// RevokeRefreshTokens forgets every refresh token: the next refresh is
// refused (invalid_grant), as after the person was disabled.
func (p *Provider) RevokeRefreshTokens() {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	clear(p.st.refreshTokens)
}

// loginPage is the provider's sign-in form.
type loginPage struct {
	st       *storage
	callback func(context.Context, string) string
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Test provider: sign in</title></head><body>
<h1>Test provider</h1>
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<label>Username <input id="username" name="username" autocomplete="off"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Sign in</button>
</form></body></html>`))

func (l *loginPage) show(w http.ResponseWriter, r *http.Request) {
	_ = loginTemplate.Execute(w, map[string]string{"ID": r.URL.Query().Get("authRequestID")})
}

func (l *loginPage) check(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue("id")
	if err := l.st.checkPassword(r.FormValue("username"), r.FormValue("password"), id); err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		_ = loginTemplate.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
		return
	}
	http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
}

// signingKey is an RSA key with its id.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func newKey() *signingKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &signingKey{id: fmt.Sprintf("key-%x", b), key: k}
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func trimScopes(scopes []string) []string {
	return slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return strings.TrimSpace(s) == "" })
}

// SignInAt plays the person at the provider: it follows authURL (the
// authorization URL the client sent the browser to) to the login page,
// signs in as username with password, and returns the URL the provider
// sends the browser back to (the client's redirect URI with code and
// state), without following it. client keeps no cookies of the provider's
// that matter; any is fine.
func (p *Provider) SignInAt(t testing.TB, client *http.Client, authURL, username, password string) string {
	t.Helper()
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next := authURL
	var requestID string
	for range 10 {
		res, err := c.Get(next)
		if err != nil {
			t.Fatalf("provider: GET %s: %v", next, err)
		}
		_ = res.Body.Close()
		loc, err := res.Location()
		if err != nil {
			t.Fatalf("provider: GET %s answered %d without a redirect", next, res.StatusCode)
		}
		if loc.Path == "/login" {
			requestID = loc.Query().Get("authRequestID")
			break
		}
		if !strings.HasPrefix(loc.String(), p.URL) {
			t.Fatalf("provider: %s redirected to %s before its login page", next, loc)
		}
		next = loc.String()
	}
	if requestID == "" {
		t.Fatalf("provider: %s led to no login page", authURL)
	}
	res, err := c.PostForm(p.URL+"/login", url.Values{"id": {requestID}, "username": {username}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	for range 10 {
		loc, err := res.Location()
		if err != nil {
			t.Fatalf("provider: the login answered %d without a redirect", res.StatusCode)
		}
		if !strings.HasPrefix(loc.String(), p.URL) {
			return loc.String()
		}
		if res, err = c.Get(loc.String()); err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
	}
	t.Fatal("provider: too many redirects after the login")
	return ""
}
