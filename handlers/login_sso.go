package handlers

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/templates"
)

// FlowCookie is the name of the cookie that carries a single sign-on
// begun by the browser (state, nonce, PKCE verifier) to the callback;
// behind https it gets the __Host- prefix.
const FlowCookie = "approvals_oidc"

// Session values of a single sign-on session.
const (
	ssoSubjectValue = "sso_sub"      // the provider's subject
	ssoCheckedValue = "sso_checked"  // when the provider last vouched for the person, RFC 3339
	ssoRefreshValue = "sso_refresh"  // the refresh token, sealed; "" when the provider gave none
	ssoIDTokenValue = "sso_id_token" // the ID token, sealed: logout's id_token_hint
)

func (d *Dashboard) flowCookie() string {
	if d.HostCookies {
		return hostPrefix + FlowCookie
	}
	return FlowCookie
}

func (d *Dashboard) ssoRecheck() time.Duration {
	if d.SSORecheck <= 0 {
		return sso.DefaultRecheck
	}
	return d.SSORecheck
}

func (d *Dashboard) ssoConfigured() error {
	if d.SSO == nil {
		return queue.Errorf(queue.CodeNotFound, "single sign-on is not configured on this server (APPROVALS_OIDC_ISSUER)")
	}
	return nil
}

// SSOLogin handles GET /auth/oidc/login?next=PATH: it sends the browser to
// the provider with a new state, nonce and PKCE challenge, which it keeps
// in the browser's flow cookie only, so a visitor writes nothing to the
// database before the provider sends them back.
func (d *Dashboard) SSOLogin(c echo.Context) error {
	if err := d.ssoConfigured(); err != nil {
		return err
	}
	authURL, flow, err := d.SSO.Begin(c.Request().Context())
	if err != nil {
		return d.ssoRefused(c, err, "")
	}
	flow.Next = safeNext(c.QueryParam("next"))
	value, err := d.SSOSealer.EncodeFlow(d.flowCookie(), flow)
	if err != nil {
		return err
	}
	d.setFlowCookie(c, value, int(sso.FlowMaxAge/time.Second))
	return c.Redirect(http.StatusFound, authURL)
}

// setFlowCookie sets (or with maxAge < 0 expires) the flow cookie. It is
// SameSite=Lax: the provider sends the browser back with a top-level GET,
// which carries it.
func (d *Dashboard) setFlowCookie(c echo.Context, value string, maxAge int) {
	http.SetCookie(c.Response(), &http.Cookie{Name: d.flowCookie(), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.HostCookies || c.Request().TLS != nil})
}

// SSOCallback handles GET /auth/oidc/callback?code=…&state=…, where the
// provider sends the browser back. The state must be the flow cookie's and
// unused; the code is exchanged with the PKCE verifier; the ID token is
// verified (signature, issuer, audience, expiry, nonce, a verified email);
// the groups must map to a role. Then the user is created or refreshed and
// signed in. Any refusal answers a page that says which, with a 4xx, and
// creates no session.
func (d *Dashboard) SSOCallback(c echo.Context) error {
	if err := d.ssoConfigured(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var flow sso.Flow
	cookie, err := c.Cookie(d.flowCookie())
	ok := err == nil
	if ok {
		flow, ok = d.SSOSealer.DecodeFlow(d.flowCookie(), cookie.Value)
	}
	// The cookie serves one callback, whatever its outcome.
	d.setFlowCookie(c, "", -1)
	state := c.QueryParam("state")
	if !ok {
		return d.ssoRefused(c, &sso.Refusal{Reason: sso.ReasonState, Detail: "no flow cookie, or one that is forged or older than " + sso.FlowMaxAge.String()}, "")
	}
	if state == "" || !constantTimeEqual(state, flow.State) {
		return d.ssoRefused(c, &sso.Refusal{Reason: sso.ReasonState, Detail: "the state is not the one the browser's sign-in sent"}, "")
	}
	// Recorded before the code is exchanged, so that of two uses of one
	// state (a replayed callback) exactly one reaches the provider.
	err = d.Accounts.SSOStateUse(ctx, accounts.SSOStateUseParams{Hash: accounts.HashToken(flow.State), ExpiresAt: flow.At.Add(sso.FlowMaxAge)})
	if errors.Is(err, accounts.ErrStateUsed) {
		return d.ssoRefused(c, &sso.Refusal{Reason: sso.ReasonState, Detail: "the state finished a sign-in already (a replayed callback)"}, "")
	}
	if err != nil {
		return err
	}
	if e := c.QueryParam("error"); e != "" {
		return d.ssoRefused(c, &sso.Refusal{Reason: sso.ReasonProvider, Detail: "the provider answered " + truncate(e, 100) + ": " + truncate(c.QueryParam("error_description"), 300)}, "")
	}
	id, err := d.SSO.Finish(ctx, flow, c.QueryParam("code"))
	if err != nil {
		return d.ssoRefused(c, err, "")
	}
	email, err := accounts.NormalizeEmail(id.Email)
	if err != nil {
		return d.ssoRefused(c, &sso.Refusal{Reason: sso.ReasonNoEmail, Detail: err.Error()}, "")
	}
	u, err := d.ssoAdmit(ctx, email, id)
	if err != nil {
		return d.ssoRefused(c, err, email)
	}
	if err := d.signIn(c, u, map[string]string{
		ssoSubjectValue: id.Subject,
		ssoCheckedValue: d.Service.Now().Format(time.RFC3339Nano),
		ssoRefreshValue: d.SSOSealer.SealToken(id.RefreshToken),
		ssoIDTokenValue: d.SSOSealer.SealToken(id.IDToken),
	}); err != nil {
		return err
	}
	next := flow.Next
	if next == "" {
		next = "/"
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// ssoAdmit maps the identity's groups to a role and records the sign-in:
// the user is created or refreshed (role, groups) and the success is in
// the audit log. Groups that map to no role are a *sso.Refusal, and the
// user of that email, if any, is denied: their sessions end.
func (d *Dashboard) ssoAdmit(ctx context.Context, email string, id *sso.Identity) (*accounts.User, error) {
	now := d.Service.Now()
	role, ok := d.SSO.Roles().RoleFor(id.Groups)
	if !ok {
		if err := d.ssoDeny(ctx, email, id, now); err != nil {
			return nil, err
		}
		return nil, &sso.Refusal{Reason: sso.ReasonNoRole, Detail: "the groups " + groupList(id.Groups) + " match no rule of " + d.SSO.Roles().String()}
	}
	res, err := d.Accounts.UserSSOSignIn(ctx, accounts.UserSSOSignInParams{Email: email, Subject: id.Subject, Role: role,
		IdPGroups: id.Groups, Now: now})
	if err != nil {
		return nil, err
	}
	if err := d.Service.Staff().Record(ctx, queue.StaffEvent{Kind: queue.EventSignedIn, Actor: "user:" + res.User.Email,
		Subject: queue.UserSubject(res.User.Email), Channel: "sso",
		Data: map[string]any{"role": string(role), "idp_groups": nonNil(id.Groups), "created": res.Created, "subject": id.Subject,
			"issuer": d.SSO.Issuer()}}); err != nil {
		return nil, err
	}
	return res.User, nil
}

// ssoDeny records that email's groups map to no role: their user (if any)
// keeps the groups and loses every session.
func (d *Dashboard) ssoDeny(ctx context.Context, email string, id *sso.Identity, now time.Time) error {
	_, err := d.Accounts.UserSSODeny(ctx, accounts.UserSSODenyParams{Email: email, Subject: id.Subject, IdPGroups: id.Groups, Now: now})
	if err != nil && !errors.Is(err, accounts.ErrNotFound) {
		return err
	}
	return nil
}

// ssoRefused answers a refused single sign-on: a page that says why, with
// the reason's 4xx, and the attempt in the audit log. A refusal counts as
// a failed sign-in of the client's address (the password form's limit):
// past the limit the answer is 429 and nothing more is written, so a flood
// of forged callbacks cannot fill the audit log. email is who the provider
// named, "" when nobody is known yet. An error that is no refusal (the
// database failed) is returned as it is.
func (d *Dashboard) ssoRefused(c echo.Context, err error, email string) error {
	var r *sso.Refusal
	if !errors.As(err, &r) {
		return err
	}
	ctx := c.Request().Context()
	limits := d.Limits.WithDefaults()
	now := d.Service.Now()
	subject := "addr:" + ClientSubject(c.RealIP())
	if err := d.Accounts.LoginFailureAdd(ctx, accounts.LoginFailureParams{Subject: subject, At: now}); err != nil {
		return err
	}
	n, err := d.Accounts.LoginFailureCount(ctx, accounts.LoginFailureCountParams{Subject: subject, Since: now.Add(-limits.Window)})
	if err != nil {
		return err
	}
	if n > limits.PerAddress {
		if err := d.Accounts.LoginFailureRemove(ctx, accounts.LoginFailureParams{Subject: subject, At: now}); err != nil {
			return err
		}
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(limits.Window/time.Second)))
		return d.renderSSORefused(c, http.StatusTooManyRequests, templates.SSORefusedView{Reason: "too_many",
			Words: "Too many failed sign-ins from this address. Try again in " + templates.Span(limits.Window) + "."})
	}
	actor, subject := queue.ActorAnonymous, ""
	if email != "" {
		actor, subject = "user:"+email, queue.UserSubject(email)
	}
	if err := d.Service.Staff().Record(ctx, queue.StaffEvent{Kind: queue.EventSignInRefused, Actor: actor, Subject: subject, Channel: "sso",
		Data: map[string]any{"reason": string(r.Reason), "detail": truncate(r.Detail, 1000), "address": ClientSubject(c.RealIP())}}); err != nil {
		return err
	}
	words := r.Reason.Words()
	if r.Reason == sso.ReasonUnreachable {
		// The operator reads the detail in the log and the audit log.
		c.Logger().Warnf("single sign-on: %s", r.Detail)
	}
	return d.renderSSORefused(c, r.Reason.Status(), templates.SSORefusedView{Reason: string(r.Reason), Words: words})
}

func (d *Dashboard) renderSSORefused(c echo.Context, status int, v templates.SSORefusedView) error {
	p, err := d.page(c, "Single sign-on refused", "")
	if err != nil {
		return err
	}
	return render(c, status, templates.SSORefusedPage(p, v))
}

// ssoSessionUser rechecks a single sign-on session whose last check is
// older than the recheck interval: with a refresh token, the provider says
// who the person is now and their groups give the role (or, mapping to
// none, end every session of theirs); without one, or when the provider
// refuses or cannot be reached, the session ends and the person signs in
// again. It returns the user to serve, or nil when the session ended.
func (d *Dashboard) ssoSessionUser(ctx context.Context, sess *sessions.Session, u *accounts.User) (*accounts.User, error) {
	checked, err := time.Parse(time.RFC3339Nano, stringValue(sess, ssoCheckedValue))
	if err != nil || d.SSO == nil {
		// Not a single sign-on session, or one of a server that no longer
		// has the provider to ask: it lives out its time.
		return u, nil
	}
	now := d.Service.Now()
	if now.Sub(checked) < d.ssoRecheck() {
		return u, nil
	}
	// Requests of one browser arrive together (a page, its event stream);
	// one of them asks the provider, the others wait for its answer.
	// The one asking must not fail for the others when its own request
	// ends: the provider's client bounds the wait.
	ask := context.WithoutCancel(ctx)
	v, err, _ := d.recheck.Do(sess.ID, func() (any, error) { return d.recheckSSO(ask, sess, u, now) })
	if err != nil {
		return nil, err
	}
	fresh, _ := v.(*accounts.User)
	return fresh, nil
}

// recheckSSO asks the provider about the person of sess, as
// ssoSessionUser says.
func (d *Dashboard) recheckSSO(ctx context.Context, sess *sessions.Session, u *accounts.User, now time.Time) (*accounts.User, error) {
	end := func(why string) (*accounts.User, error) {
		// Another request of the same session may have rechecked it a
		// moment ago (in another process, rotating the refresh token this
		// one used): then its answer stands.
		if t, ok := d.storedSSOCheck(ctx, sess); ok && now.Sub(t) < d.ssoRecheck() {
			return u, nil
		}
		if err := d.Accounts.SessionDelete(ctx, accounts.HashToken(sess.ID)); err != nil {
			return nil, err
		}
		d.log().Info("single sign-on session ended at its recheck", "user", u.Email, "why", why)
		return nil, nil
	}
	refresh, err := d.SSOSealer.OpenToken(stringValue(sess, ssoRefreshValue))
	if err != nil || refresh == "" {
		return end("the provider gave no refresh token; the person signs in again")
	}
	id, err := d.SSO.Refresh(ctx, refresh, stringValue(sess, ssoSubjectValue))
	if err != nil {
		return end(err.Error())
	}
	if id.Email != "" && !strings.EqualFold(id.Email, u.Email) {
		return end("the provider now names the email " + id.Email)
	}
	role, ok := d.SSO.Roles().RoleFor(id.Groups)
	if !ok {
		if err := d.ssoDeny(ctx, u.Email, id, now); err != nil {
			return nil, err
		}
		if err := d.Service.Staff().Record(ctx, queue.StaffEvent{Kind: queue.EventSignInRefused, Actor: "user:" + u.Email,
			Subject: queue.UserSubject(u.Email), Channel: "sso",
			Data: map[string]any{"reason": string(sso.ReasonNoRole), "recheck": true,
				"detail": "at the recheck the groups " + groupList(id.Groups) + " match no rule of " + d.SSO.Roles().String()}}); err != nil {
			return nil, err
		}
		return nil, nil
	}
	res, err := d.Accounts.UserSSOSignIn(ctx, accounts.UserSSOSignInParams{Email: u.Email, Subject: id.Subject, Role: role,
		IdPGroups: id.Groups, Now: now})
	if err != nil {
		return nil, err
	}
	sess.Values[ssoCheckedValue] = now.Format(time.RFC3339Nano)
	sess.Values[ssoRefreshValue] = d.SSOSealer.SealToken(id.RefreshToken)
	if id.IDToken != "" {
		sess.Values[ssoIDTokenValue] = d.SSOSealer.SealToken(id.IDToken)
	}
	if err := d.Sessions.Update(ctx, sess); errors.Is(err, accounts.ErrNotFound) {
		return nil, nil // logged out meanwhile
	} else if err != nil {
		return nil, err
	}
	return res.User, nil
}

// storedSSOCheck reads the session's last check as the database has it
// now, past the request's copy.
func (d *Dashboard) storedSSOCheck(ctx context.Context, sess *sessions.Session) (time.Time, bool) {
	row, err := d.Accounts.SessionGet(ctx, accounts.SessionGetParams{ID: accounts.HashToken(sess.ID), Now: d.Service.Now()})
	if err != nil {
		return time.Time{}, false
	}
	var values map[string]string
	if json.Unmarshal([]byte(row.Data), &values) != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, values[ssoCheckedValue])
	return t, err == nil
}

// ssoLogoutURL is where logout sends the browser after the local session
// ended: the provider's end_session_endpoint for a single sign-on session
// when the provider has one, else "".
func (d *Dashboard) ssoLogoutURL(ctx context.Context, sess *sessions.Session) string {
	if d.SSO == nil || stringValue(sess, ssoCheckedValue) == "" {
		return ""
	}
	idToken, _ := d.SSOSealer.OpenToken(stringValue(sess, ssoIDTokenValue))
	return d.SSO.EndSessionURL(ctx, idToken, strings.TrimRight(d.PublicURL, "/")+"/login")
}

func groupList(groups []string) string {
	if len(groups) == 0 {
		return "(none)"
	}
	return "[" + strings.Join(groups, ", ") + "]"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
