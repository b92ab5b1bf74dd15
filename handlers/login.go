package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// LoginPage handles GET /login.
func (d *Dashboard) LoginPage(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if currentUser(c) != nil {
		if next == "" {
			next = "/"
		}
		return c.Redirect(http.StatusSeeOther, next)
	}
	return d.renderLogin(c, http.StatusOK, templates.LoginView{Next: next})
}

func (d *Dashboard) renderLogin(c echo.Context, status int, v templates.LoginView) error {
	v.SSO, v.Password = d.SSO != nil, !d.PasswordLoginOff
	p, err := d.page(c, "Sign in", "")
	if err != nil {
		return err
	}
	return render(c, status, templates.LoginPage(p, v))
}

// Login handles POST /login (email, password). Failures are counted per
// account from each client address, and per client address across
// accounts; past either limit the answer is 429 for the rest of the window,
// whatever the password, so guessing gains nothing. An account's count is
// never global: failures sent from anywhere else do not lock its owner out
// here (an email is no secret), and each one is still recorded
// (sign_in_refused, with its address).
func (d *Dashboard) Login(c echo.Context) error {
	ctx := c.Request().Context()
	email := strings.TrimSpace(c.FormValue("email"))
	password := c.FormValue("password")
	v := templates.LoginView{Email: email, Next: safeNext(c.FormValue("next"))}
	if d.PasswordLoginOff {
		// Refused before anything is read or written: the form is not offered.
		v.Email = ""
		v.Error = "Password sign-in is turned off on this server: use Sign in with SSO."
		return d.renderLogin(c, http.StatusForbidden, v)
	}
	if len(email) > maxEmailLen {
		v.Email = ""
		v.Error = "The email is longer than 254 characters, which no address may be."
		return d.renderLogin(c, http.StatusBadRequest, v)
	}
	limits := d.Limits.WithDefaults()
	now := d.Service.Now()

	normalized, emailErr := accounts.NormalizeEmail(email)
	if emailErr != nil {
		normalized = strings.ToLower(email)
	}
	addr := ClientSubject(c.RealIP())
	subjects := []string{AccountAddressSubject(normalized, addr), "addr:" + addr}
	// Record the attempt before checking anything, then count it with the
	// others: parallel guesses see each other, so a burst cannot slip more
	// than the limit past a count taken before any of them was recorded.
	// A right password takes its attempt back.
	now = now.UTC().Truncate(time.Microsecond)
	for _, s := range subjects {
		if err := d.Accounts.LoginFailureAdd(ctx, accounts.LoginFailureParams{Subject: s, At: now}); err != nil {
			return err
		}
	}
	for i, limit := range []int{limits.PerAccount, limits.PerAddress} {
		n, err := d.Accounts.LoginFailureCount(ctx, accounts.LoginFailureCountParams{Subject: subjects[i], Since: now.Add(-limits.Window)})
		if err != nil {
			return err
		}
		if n > limit {
			// A refused attempt checks no password, so it is no failure:
			// take it back (the lockout does not grow while it lasts).
			if err := d.forgetAttempt(ctx, subjects, now); err != nil {
				return err
			}
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(limits.Window/time.Second)))
			v.Error = "Too many failed sign-ins from this address. Try again in " +
				templates.Span(limits.Window) + "."
			return d.renderLogin(c, http.StatusTooManyRequests, v)
		}
	}

	// Past the gate's few concurrent bcrypt checks the attempt is refused
	// unchecked (and taken back): a flood of sign-ins must not take every
	// core from the agents' API.
	release, ok := d.passwordGate().Acquire(ctx)
	if !ok {
		if err := d.forgetAttempt(ctx, subjects, now); err != nil {
			return err
		}
		c.Response().Header().Set("Retry-After", "2")
		v.Error = "Too many sign-ins at once. Try again in a few seconds."
		return d.renderLogin(c, http.StatusTooManyRequests, v)
	}
	defer release()

	var u *accounts.User
	if emailErr == nil {
		var err error
		u, err = d.Accounts.UserGetByEmail(ctx, normalized)
		if err != nil && !errors.Is(err, accounts.ErrNotFound) {
			return err
		}
	}
	if u == nil || u.PasswordHash == "" {
		// Spend the same time as a real check, so timing does not reveal
		// which emails have accounts (or sign in with SSO only).
		accounts.CheckPassword(dummyHash(), password)
	}
	if u == nil || u.PasswordHash == "" || !accounts.CheckPassword(u.PasswordHash, password) {
		// Which of the two it was stays unsaid, as on the page.
		if err := d.Service.Staff().Record(ctx, queue.StaffEvent{Kind: queue.EventSignInRefused, Actor: queue.ActorAnonymous,
			Subject: queue.UserSubject(normalized), Channel: "password",
			Data: map[string]any{"reason": "bad_credentials", "address": addr}}); err != nil {
			return err
		}
		v.Error = "The email or password is wrong."
		return d.renderLogin(c, http.StatusUnauthorized, v)
	}
	if u.SSODeniedAt != nil {
		// The right password, for someone the identity provider refused:
		// an admin lifts that (approvals user add --update), not a password.
		v.Error = "Your identity provider's groups give you no role in approvals, so you cannot sign in. Ask an admin."
		return d.renderLogin(c, http.StatusForbidden, v)
	}
	// The account's failures from this address end with a right password
	// (those from elsewhere are someone else's guesses and stay); the
	// address keeps its other attempts (another account may be under
	// attack from it).
	if err := d.Accounts.LoginFailureClear(ctx, subjects[0]); err != nil {
		return err
	}
	if err := d.Accounts.LoginFailureRemove(ctx, accounts.LoginFailureParams{Subject: subjects[1], At: now}); err != nil {
		return err
	}
	// Recorded before the session opens: a sign-in that cannot be
	// recorded does not happen.
	if err := d.Service.Staff().Record(ctx, queue.StaffEvent{Kind: queue.EventSignedIn, Actor: actor(u),
		Subject: queue.UserSubject(u.Email), Channel: "password", Data: map[string]any{"address": addr}}); err != nil {
		return err
	}
	if err := d.signIn(c, u, nil); err != nil {
		return err
	}
	if v.Next == "" {
		v.Next = "/"
	}
	return c.Redirect(http.StatusSeeOther, v.Next)
}

// maxEmailLen is the longest address SMTP allows (RFC 5321 and its errata).
const maxEmailLen = 254

// ClientSubject is the login limiter's key for a client address: the
// address itself for IPv4, its /64 for IPv6, since one IPv6 client is
// usually given a whole /64 and could otherwise guess from 2^64 addresses.
func ClientSubject(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	return netip.PrefixFrom(addr, 64).Masked().String()
}

// AccountAddressSubject is the login limiter's key for the failures of one
// account (its normalised email) from one client address (ClientSubject).
// The address comes first: it holds no space, so no email can make two
// pairs one key.
func AccountAddressSubject(email, addr string) string {
	return "addr:" + addr + " email:" + email
}

// passwordGate is Gate, or a default one made on first use.
func (d *Dashboard) passwordGate() *accounts.PasswordGate {
	d.gateOnce.Do(func() {
		if d.Gate == nil {
			d.Gate = accounts.NewPasswordGate(0, 0)
		}
	})
	return d.Gate
}

// forgetAttempt takes back the attempt recorded at now for each subject.
func (d *Dashboard) forgetAttempt(ctx context.Context, subjects []string, now time.Time) error {
	for _, s := range subjects {
		if err := d.Accounts.LoginFailureRemove(ctx, accounts.LoginFailureParams{Subject: s, At: now}); err != nil {
			return err
		}
	}
	return nil
}

// signIn turns the request's session into a signed-in one under a new id
// (so an id planted before login is worthless) with a new CSRF token and
// the values of extra (a single sign-on's).
func (d *Dashboard) signIn(c echo.Context, u *accounts.User, extra map[string]string) error {
	sess := session(c)
	if err := d.Sessions.Renew(c.Request().Context(), sess); err != nil {
		return err
	}
	for k := range sess.Values {
		delete(sess.Values, k)
	}
	sess.Values[accounts.SessionUserID] = u.ID
	sess.Values[authAtValue] = d.Service.Now().Format(time.RFC3339Nano)
	sess.Values[csrfValue] = accounts.RandomString(32)
	for k, v := range extra {
		sess.Values[k] = v
	}
	return sess.Save(c.Request(), c.Response())
}

var dummyHash = sync.OnceValue(func() string {
	h, _ := accounts.HashPassword(accounts.RandomString(16))
	return h
})

// Logout handles POST /logout: the session row is deleted, so the cookie
// opens nothing any more, in any process. A single sign-on session then
// goes on to the provider's end_session_endpoint, when it has one, which
// sends the browser back to the sign-in page.
func (d *Dashboard) Logout(c echo.Context) error {
	sess := session(c)
	next := d.ssoLogoutURL(c.Request().Context(), sess)
	sess.Options.MaxAge = -1
	if err := sess.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	if u := currentUser(c); u != nil {
		if err := d.recordStaff(c, queue.StaffEvent{Kind: queue.EventSignedOut, Subject: queue.UserSubject(u.Email)}); err != nil {
			return err
		}
	}
	if next != "" {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}
