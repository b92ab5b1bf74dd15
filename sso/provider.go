// Package sso signs staff in with an OpenID Connect provider
// (docs/sso.md): discovery (lazily, retried, so the server starts while the
// provider is down), the authorization code flow with PKCE (S256), state
// and nonce, the verification of the ID token (signature from the
// provider's JWKS, re-fetched on an unknown key id; issuer; audience;
// expiry; nonce; a verified email), the groups claim and the map from
// groups to roles, refresh for the periodic recheck, and the provider's
// end_session_endpoint for logout. It holds no HTTP routes: the dashboard
// (handlers) drives it, and keeps users and sessions in accounts.
package sso

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config is the provider and this server's client at it.
type Config struct {
	// Issuer is APPROVALS_OIDC_ISSUER: discovery reads
	// {Issuer}/.well-known/openid-configuration, and ID tokens must name
	// it exactly.
	Issuer       string
	ClientID     string
	ClientSecret string // "" for a public client (PKCE only)
	// RedirectURL is {APPROVALS_PUBLIC_URL}/auth/oidc/callback.
	RedirectURL string
	// GroupsClaim names the claim holding the person's groups; default
	// "groups".
	GroupsClaim string
	// Roles map groups to roles; the first rule that matches wins.
	Roles RoleMap
	// Scopes asked for; nil: openid, email and profile, with groups and
	// offline_access (a refresh token, for the recheck) when the provider
	// lists them in scopes_supported.
	Scopes []string
	// Client makes the requests to the provider; default one with a 10s
	// timeout.
	Client *http.Client
}

// DefaultRecheck is how often a single sign-on session is checked again
// with the provider (APPROVALS_OIDC_RECHECK).
const DefaultRecheck = time.Hour

// retryDiscoveryAfter paces discovery while the provider cannot be
// reached: a burst of sign-in attempts asks it once.
const retryDiscoveryAfter = 2 * time.Second

// Provider is one configured OpenID provider.
type Provider struct {
	cfg Config

	// d is what discovery found, once it succeeded; read on every request
	// (FormActionOrigins), so never behind the lock a discovery holds.
	d atomic.Pointer[discovered]
	// mu serialises discovery; lastErr and failedAt pace its retries.
	mu       sync.Mutex
	lastErr  error
	failedAt time.Time
}

// discovered is what discovery found.
type discovered struct {
	provider   *oidc.Provider
	verifier   *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

// New checks cfg; it makes no request (discovery waits for the first
// sign-in).
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("APPROVALS_OIDC_ISSUER %q is not an absolute https URL such as https://login.example.com", cfg.Issuer)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("APPROVALS_OIDC_ISSUER %q: the issuer must be https (plain http only on a loopback address, for testing)", cfg.Issuer)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("APPROVALS_OIDC_CLIENT_ID is required with APPROVALS_OIDC_ISSUER")
	}
	if len(cfg.Roles) == 0 {
		return nil, errors.New("APPROVALS_OIDC_ROLES is required with APPROVALS_OIDC_ISSUER (such as approvals-admins=admin,support=approver): without it the provider's groups give nobody a role")
	}
	if cfg.RedirectURL == "" {
		return nil, errors.New("sso: Config.RedirectURL is required")
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Provider{cfg: cfg}, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Issuer is the configured issuer.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Roles is the map from groups to roles.
func (p *Provider) Roles() RoleMap { return p.cfg.Roles }

// ctx carries the provider's HTTP client to go-oidc and oauth2.
func (p *Provider) ctx(ctx context.Context) context.Context {
	ctx = oidc.ClientContext(ctx, p.cfg.Client)
	return context.WithValue(ctx, oauth2.HTTPClient, p.cfg.Client)
}

// discover returns what discovery found, asking the provider the first
// time and again after a failure (at most every retryDiscoveryAfter).
func (p *Provider) discover(ctx context.Context) (*discovered, error) {
	if d := p.d.Load(); d != nil {
		return d, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.d.Load(); d != nil {
		return d, nil
	}
	if p.lastErr != nil && time.Since(p.failedAt) < retryDiscoveryAfter {
		return nil, p.lastErr
	}
	d, err := p.fetchDiscovery(ctx)
	if err != nil {
		p.lastErr, p.failedAt = err, time.Now()
		return nil, err
	}
	p.d.Store(d)
	p.lastErr = nil
	return d, nil
}

func (p *Provider) fetchDiscovery(ctx context.Context) (*discovered, error) {
	op, err := oidc.NewProvider(p.ctx(ctx), p.cfg.Issuer)
	var mismatch *oidc.IssuerMismatchError
	switch {
	case errors.As(err, &mismatch):
		return nil, refuse(ReasonIssuer, "the discovery document at %s names the issuer %q, not %q", p.cfg.Issuer, mismatch.Discovered, mismatch.Provided)
	case err != nil:
		return nil, refuse(ReasonUnreachable, "discovery at %s: %v", p.cfg.Issuer, err)
	}
	var meta struct {
		EndSession string   `json:"end_session_endpoint"`
		Scopes     []string `json:"scopes_supported"`
	}
	if err := op.Claims(&meta); err != nil {
		return nil, refuse(ReasonUnreachable, "discovery at %s: %v", p.cfg.Issuer, err)
	}
	scopes := p.cfg.Scopes
	if scopes == nil {
		scopes = []string{oidc.ScopeOpenID, "email", "profile"}
		for _, s := range []string{"groups", oidc.ScopeOfflineAccess} {
			if slices.Contains(meta.Scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	return &discovered{
		provider: op,
		// Expiry is judged by the wall clock: the provider stamps its
		// tokens with it, whatever clock the service runs on.
		verifier:   op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID}),
		endSession: meta.EndSession,
		oauth: oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: op.Endpoint(),
			RedirectURL: p.cfg.RedirectURL, Scopes: scopes},
	}, nil
}

// Begin starts a sign-in: the provider's authorization URL to send the
// browser to, and the flow for the browser's cookie. A provider that
// cannot be reached is a *Refusal.
func (p *Provider) Begin(ctx context.Context) (string, Flow, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return "", Flow{}, err
	}
	f := Flow{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), At: time.Now().UTC()}
	u := d.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce))
	return u, f, nil
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Identity is who the provider signed in.
type Identity struct {
	Subject string
	Email   string
	// Groups are the values of the groups claim; nil when it is absent.
	Groups []string
	// IDToken is the raw ID token (logout's id_token_hint); RefreshToken
	// is "" when the provider gave none.
	IDToken, RefreshToken string
}

// Finish exchanges the callback's code (with the flow's PKCE verifier) and
// verifies the ID token. Every refusal is a *Refusal.
func (p *Provider) Finish(ctx context.Context, f Flow, code string) (*Identity, error) {
	if code == "" {
		return nil, refuse(ReasonCode, "the callback carries no code")
	}
	d, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	ctx = p.ctx(ctx)
	tok, err := d.oauth.Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return nil, tokenError(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, refuse(ReasonProvider, "the token response holds no ID token")
	}
	idt, err := p.verify(ctx, d, raw)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return nil, refuse(ReasonNonce, "the ID token's nonce is not the one the sign-in sent")
	}
	id, err := p.identity(ctx, d, idt, tok)
	if err != nil {
		return nil, err
	}
	id.IDToken, id.RefreshToken = raw, tok.RefreshToken
	if id.Email == "" {
		return nil, refuse(ReasonNoEmail, "neither the ID token nor userinfo has an email claim")
	}
	return id, nil
}

// Refresh rechecks a signed-in person with their refresh token: the
// identity now (its groups above all), for subject; the refresh token to
// keep is RefreshToken (the provider may rotate it), and IDToken is the
// new ID token or "". A refusal is a *Refusal.
func (p *Provider) Refresh(ctx context.Context, refreshToken, subject string) (*Identity, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	ctx = p.ctx(ctx)
	tok, err := d.oauth.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, tokenError(err)
	}
	var idt *oidc.IDToken
	raw, _ := tok.Extra("id_token").(string)
	if raw != "" {
		if idt, err = p.verify(ctx, d, raw); err != nil {
			return nil, err
		}
		if idt.Subject != subject {
			return nil, refuse(ReasonProvider, "the refreshed ID token is for subject %q, not %q", idt.Subject, subject)
		}
	}
	id, err := p.identity(ctx, d, idt, tok)
	if err != nil {
		return nil, err
	}
	if id.Subject != subject {
		return nil, refuse(ReasonProvider, "the refreshed identity is subject %q, not %q", id.Subject, subject)
	}
	id.IDToken, id.RefreshToken = raw, tok.RefreshToken
	if id.RefreshToken == "" {
		id.RefreshToken = refreshToken
	}
	return id, nil
}

// claims are the ID token's (or userinfo's) claims approvals reads.
type claims struct {
	Subject       string `json:"sub"`
	Email         string `json:"email"`
	EmailVerified any    `json:"email_verified"` // true, or "true" from some providers
	groups        []string
	hasGroups     bool
}

func (p *Provider) readClaims(raw func(any) error) (claims, error) {
	var c claims
	if err := raw(&c); err != nil {
		return c, err
	}
	var all map[string]json.RawMessage
	if err := raw(&all); err != nil {
		return c, err
	}
	if g, ok := all[p.cfg.GroupsClaim]; ok {
		c.hasGroups = true
		c.groups = groupList(g)
	}
	return c, nil
}

// groupList reads a groups claim: a list of strings, or one string.
func groupList(raw json.RawMessage) []string {
	var list []any
	if json.Unmarshal(raw, &list) == nil {
		var out []string
		for _, v := range list {
			if s, ok := v.(string); ok && s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	return nil
}

func verified(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	}
	return false
}

// identity reads who signed in from the ID token (idt, nil after a refresh
// without one) and, for what it lacks (the email, the groups claim), from
// the provider's userinfo endpoint, whose subject must be the token's.
func (p *Provider) identity(ctx context.Context, d *discovered, idt *oidc.IDToken, tok *oauth2.Token) (*Identity, error) {
	var c claims
	if idt != nil {
		var err error
		if c, err = p.readClaims(idt.Claims); err != nil {
			return nil, refuse(ReasonProvider, "the ID token's claims: %v", err)
		}
		c.Subject = idt.Subject
	}
	if (idt == nil || c.Email == "" || !c.hasGroups) && d.provider.UserInfoEndpoint() != "" {
		info, err := d.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			if idt == nil {
				return nil, unreachableOr(err, ReasonProvider, "userinfo: %v", err)
			}
		} else {
			u, err := p.readClaims(info.Claims)
			switch {
			case err != nil:
				return nil, refuse(ReasonProvider, "userinfo's claims: %v", err)
			case idt != nil && u.Subject != idt.Subject:
				return nil, refuse(ReasonProvider, "userinfo is for subject %q, the ID token for %q", u.Subject, idt.Subject)
			}
			if idt == nil {
				c = u
			} else {
				if c.Email == "" {
					c.Email, c.EmailVerified = u.Email, u.EmailVerified
				}
				if !c.hasGroups {
					c.groups, c.hasGroups = u.groups, u.hasGroups
				}
			}
		}
	}
	if c.Email != "" && !verified(c.EmailVerified) {
		return nil, &Refusal{Reason: ReasonEmailUnverified, Detail: fmt.Sprintf("email_verified is not true for %s", c.Email)}
	}
	return &Identity{Subject: c.Subject, Email: c.Email, Groups: c.groups}, nil
}

// verify checks the ID token and, when it is refused, says for which
// reason: the claims that go-oidc checks are read again, unverified, only
// to name what was wrong.
func (p *Provider) verify(ctx context.Context, d *discovered, raw string) (*oidc.IDToken, error) {
	idt, err := d.verifier.Verify(ctx, raw)
	if err == nil {
		return idt, nil
	}
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		return nil, refuse(ReasonExpired, "the ID token expired at %s", expired.Expiry.UTC().Format(time.RFC3339))
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return nil, refuse(ReasonUnreachable, "fetching the provider's keys: %v", err)
	}
	var c struct {
		Issuer   string   `json:"iss"`
		Audience audience `json:"aud"`
	}
	if unverifiedClaims(raw, &c) == nil {
		switch {
		case c.Issuer != p.cfg.Issuer:
			return nil, refuse(ReasonIssuer, "the ID token's issuer is %q, not %q", c.Issuer, p.cfg.Issuer)
		case !slices.Contains(c.Audience, p.cfg.ClientID):
			return nil, refuse(ReasonAudience, "the ID token's audience is %q, not this client %q", []string(c.Audience), p.cfg.ClientID)
		}
	}
	return nil, refuse(ReasonSignature, "%v", err)
}

// audience is the aud claim: one string or a list.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*a = list
	return nil
}

// unverifiedClaims decodes a JWT's payload without checking anything.
func unverifiedClaims(raw string, v any) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// tokenError names what the token endpoint's refusal means.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode == "invalid_grant" {
			return refuse(ReasonCode, "the token endpoint refused the grant: %s %s", re.ErrorCode, re.ErrorDescription)
		}
		if re.Response != nil && re.Response.StatusCode >= 500 {
			return refuse(ReasonUnreachable, "the token endpoint answered %s", re.Response.Status)
		}
		return refuse(ReasonProvider, "the token endpoint refused: %s %s", re.ErrorCode, re.ErrorDescription)
	}
	return unreachableOr(err, ReasonProvider, "the token endpoint: %v", err)
}

// unreachableOr is ReasonUnreachable for a failure to talk to the
// provider at all, else reason.
func unreachableOr(err error, reason Reason, format string, args ...any) error {
	var uerr *url.Error
	var nerr net.Error
	if errors.As(err, &uerr) || errors.As(err, &nerr) {
		reason = ReasonUnreachable
	}
	return refuse(reason, format, args...)
}

// EndSessionURL is where logout sends the browser when the provider offers
// an end_session_endpoint (RP-Initiated Logout: id_token_hint, client_id
// and post_logout_redirect_uri), or "" when it offers none or cannot be
// reached.
func (p *Provider) EndSessionURL(ctx context.Context, idToken, postLogout string) string {
	d, err := p.discover(ctx)
	if err != nil || d.endSession == "" {
		return ""
	}
	u, err := url.Parse(d.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	q.Set("client_id", p.cfg.ClientID)
	q.Set("post_logout_redirect_uri", postLogout)
	u.RawQuery = q.Encode()
	return u.String()
}

// FormActionOrigins are the origins a form of the dashboard may lead to
// besides its own: logout is a form, and browsers hold its redirect to the
// provider's end_session_endpoint to the page's form-action. Before
// discovery, the issuer's origin.
func (p *Provider) FormActionOrigins() []string {
	out := []string{origin(p.cfg.Issuer)}
	if d := p.d.Load(); d != nil && d.endSession != "" {
		if o := origin(d.endSession); o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
