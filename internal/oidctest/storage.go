package oidctest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is op.Storage in memory, adapted from the storage of zitadel's
// example server (example/server/storage): the authorization code flow,
// refresh tokens with rotation, userinfo, end_session, one client.
type storage struct {
	opts Options

	mu            sync.Mutex
	users         map[string]*User
	authRequests  map[string]*authRequest
	codes         map[string]string // code → auth request id
	tokens        map[string]*token
	refreshTokens map[string]*refreshToken
	redirects     []string
	postLogout    []string
	// key signs; published is what the JWKS shows (they differ while
	// SignWithUnpublishedKey is on).
	key, published *signingKey
	audience       string
	nonce          string
	lifetime       time.Duration
}

func newStorage(opts Options) *storage {
	k := newKey()
	return &storage{opts: opts, users: map[string]*User{}, authRequests: map[string]*authRequest{},
		codes: map[string]string{}, tokens: map[string]*token{}, refreshTokens: map[string]*refreshToken{},
		key: k, published: k}
}

var _ op.Storage = (*storage)(nil)

type token struct {
	id, clientID, subject, refreshID string
	audience, scopes                 []string
	expiry                           time.Time
}

type refreshToken struct {
	id, clientID, subject, accessID string
	audience, scopes, amr           []string
	authTime, expiry                time.Time
}

// authRequest is one authorization request, as the op sees it.
type authRequest struct {
	id, clientID, redirectURI, state, nonce, subject string
	scopes                                           []string
	responseType                                     oidc.ResponseType
	responseMode                                     oidc.ResponseMode
	challenge                                        *oidc.CodeChallenge
	done                                             bool
	authTime                                         time.Time
	// nonceOverride is the test's knob as it was when the request was made.
	nonceOverride string
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }
func (a *authRequest) GetNonce() string {
	if a.nonceOverride != "" {
		return a.nonceOverride
	}
	return a.nonce
}

func (s *storage) checkPassword(username, password, requestID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.authRequests[requestID]
	if !ok {
		return errors.New("no such sign-in request")
	}
	for _, u := range s.users {
		if u.Username == username && u.Password == password {
			req.subject, req.done, req.authTime = u.ID, true, time.Now()
			return nil
		}
	}
	return errors.New("wrong username or password")
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &authRequest{id: randomID(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State, nonce: r.Nonce,
		subject: userID, scopes: trimScopes(r.Scopes), responseType: r.ResponseType, responseMode: r.ResponseMode,
		nonceOverride: s.nonce}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.authRequests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.authRequests[id]
	if !ok {
		return nil, errors.New("no such sign-in request")
	}
	return req, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("the code is invalid or was used")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest runs once the code is exchanged: the code is used up.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authRequests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	t := s.newToken(r, "")
	return t.id, t.expiry, nil
}

func (s *storage) newToken(r op.TokenRequest, refreshID string) *token {
	s.mu.Lock()
	defer s.mu.Unlock()
	clientID := ClientID
	if a, ok := r.(*authRequest); ok {
		clientID = a.clientID
	}
	t := &token{id: randomID(), clientID: clientID, subject: r.GetSubject(), refreshID: refreshID,
		audience: r.GetAudience(), scopes: r.GetScopes(), expiry: time.Now().Add(5 * time.Minute)}
	s.tokens[t.id] = t
	return t
}

func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	newRefresh := randomID()
	access := s.newToken(r, newRefresh)
	s.mu.Lock()
	defer s.mu.Unlock()
	if current == "" {
		a, _ := r.(*authRequest)
		rt := &refreshToken{id: newRefresh, clientID: access.clientID, subject: access.subject, accessID: access.id,
			audience: access.audience, scopes: access.scopes, amr: []string{"pwd"}, expiry: time.Now().Add(5 * time.Hour)}
		if a != nil {
			rt.authTime = a.authTime
		}
		s.refreshTokens[newRefresh] = rt
		return access.id, newRefresh, access.expiry, nil
	}
	// Rotation: the refresh token used is gone, a new one replaces it.
	rt, ok := s.refreshTokens[current]
	if !ok {
		return "", "", time.Time{}, op.ErrInvalidRefreshToken
	}
	delete(s.refreshTokens, current)
	delete(s.tokens, rt.accessID)
	rt.id, rt.accessID, rt.expiry = newRefresh, access.id, time.Now().Add(5*time.Hour)
	s.refreshTokens[newRefresh] = rt
	return access.id, newRefresh, access.expiry, nil
}

// refreshRequest is a refresh token as the op reads it.
type refreshRequest struct{ *refreshToken }

func (r refreshRequest) GetAMR() []string             { return r.amr }
func (r refreshRequest) GetAudience() []string        { return r.audience }
func (r refreshRequest) GetAuthTime() time.Time       { return r.authTime }
func (r refreshRequest) GetClientID() string          { return r.clientID }
func (r refreshRequest) GetScopes() []string          { return r.scopes }
func (r refreshRequest) GetSubject() string           { return r.subject }
func (r refreshRequest) SetCurrentScopes(sc []string) { r.scopes = sc }

func (s *storage) TokenRequestByRefreshToken(_ context.Context, rt string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refreshTokens[rt]
	if !ok || t.expiry.Before(time.Now()) {
		return nil, op.ErrInvalidRefreshToken
	}
	return refreshRequest{t}, nil
}

func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.tokens {
		if t.clientID == clientID && t.subject == userID {
			delete(s.tokens, id)
			delete(s.refreshTokens, t.refreshID)
		}
	}
	return nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, _ string, rt string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refreshTokens[rt]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return t.subject, t.id, nil
}

func (s *storage) RevokeToken(_ context.Context, tokenOrID, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tokenOrID)
	delete(s.refreshTokens, tokenOrID)
	return nil
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []op.Key{publicKey{s.published}}, nil
}

// client is approvals' registration, read afresh on every request.
type client struct {
	s        *storage
	redirect []string
	logout   []string
}

func (c client) GetID() string                       { return ClientID }
func (c client) RedirectURIs() []string              { return c.redirect }
func (c client) PostLogoutRedirectURIs() []string    { return c.logout }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) GrantTypes() []oidc.GrantType {
	if c.s.opts.NoRefreshTokens {
		return []oidc.GrantType{oidc.GrantTypeCode}
	}
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c client) LoginURL(id string) string            { return "/login?authRequestID=" + id }
func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c client) DevMode() bool                        { return true } // http redirect URIs on loopback
func (c client) IsScopeAllowed(scope string) bool     { return scope == "groups" }
func (c client) ClockSkew() time.Duration             { return 0 }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return !c.s.opts.ClaimsInUserinfoOnly }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) IDTokenLifetime() time.Duration {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.lifetime != 0 {
		return c.s.lifetime
	}
	return time.Hour
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != ClientID {
		return nil, errors.New("no such client")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return client{s: s, redirect: slices.Clone(s.redirects), logout: slices.Clone(s.postLogout)}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != ClientID || secret != ClientSecret {
		return errors.New("wrong client id or secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's claims.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	return s.userinfo(info, r.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || t.expiry.Before(time.Now()) {
		return errors.New("the token is invalid or expired")
	}
	return s.userinfo(info, t.subject, append(slices.Clone(t.scopes), "groups"))
}

// userinfo sets the person's claims for scopes; the groups claim comes
// with the groups scope, as providers that have one do.
func (s *storage) userinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[subject]
	if !ok {
		return errors.New("no such user")
	}
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeOpenID:
			info.Subject = u.ID
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(u.EmailVerified)
		case oidc.ScopeProfile:
			info.PreferredUsername = u.Username
		case "groups":
			info.AppendClaims("groups", slices.Clone(u.Groups))
		}
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is not offered")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile grants are not offered")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grants are not offered")
}

func (s *storage) Health(context.Context) error { return nil }
