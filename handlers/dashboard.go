package handlers

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/singleflight"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/templates"
)

// Dashboard serves the staff web UI: the approval queue, actions,
// tickets, audit and administration. Roles are
// enforced here, on the server, by the Allow middleware of each route.
type Dashboard struct {
	Service *queue.Service
	// Polls cap the live event streams.
	Polls *longpoll.Polls
	// Store is what the pages read directly (queue.Reader).
	Store    queue.Reader
	Accounts accounts.Store
	// Audit is the audit chain's state, shown on the audit page.
	Audit    AuditReader
	Sessions *accounts.SessionStore
	Assets   templates.Assets
	// MaxBody caps form bodies.
	MaxBody int64
	// Done, when closed, ends the live event streams, so a graceful
	// shutdown does not wait for browsers to hang up.
	Done <-chan struct{}
	// Limits throttle failed logins.
	Limits LoginLimits
	// HostCookies names the cookies with the __Host- prefix; set when the
	// public URL is https (the session store then marks them Secure).
	HostCookies bool
	// Gate bounds concurrent password checks; default 4 at once, a
	// sign-in waiting at most 2s for one.
	Gate     *accounts.PasswordGate
	gateOnce sync.Once
	// SSO signs staff in with the company's OpenID provider; nil: single
	// sign-on is not configured (/auth/oidc/* answer 404). SSOSealer seals
	// its flow cookie and the tokens a session keeps.
	SSO       *sso.Provider
	SSOSealer *sso.Sealer
	// SSORecheck is how often a single sign-on session is checked again
	// with the provider (APPROVALS_OIDC_RECHECK); default sso.DefaultRecheck.
	SSORecheck time.Duration
	// PasswordLoginOff refuses the password form (APPROVALS_PASSWORD_LOGIN
	// =off); the setup link still creates the first admin.
	PasswordLoginOff bool
	// PublicURL is where browsers reach the dashboard: where the provider
	// sends them after its logout.
	PublicURL string
	// Logger, default slog.Default().
	Logger *slog.Logger
	// recheck lets one request of a session ask the provider at a time.
	recheck singleflight.Group
	// overview is the overview page's cache.
	overview OverviewCache
}

// LoginLimits say how many failed logins answer 429 for a while.
type LoginLimits struct {
	// PerAccount counts the failures for one email from one client address
	// within Window (default 5): failures from elsewhere do not lock the
	// account here, so nobody can lock another person out.
	PerAccount int
	PerAddress int           // failures from one client address, for any email, within Window; default 20
	Window     time.Duration // default 15m
}

// WithDefaults fills unset limits.
func (l LoginLimits) WithDefaults() LoginLimits {
	if l.PerAccount <= 0 {
		l.PerAccount = 5
	}
	if l.PerAddress <= 0 {
		l.PerAddress = 20
	}
	if l.Window <= 0 {
		l.Window = 15 * time.Minute
	}
	return l
}

// SessionCookie is the name of the dashboard's session cookie, and
// CSRFCookie of the signed pre-session CSRF cookie; behind https both get
// the __Host- prefix (Dashboard.HostCookies).
const (
	SessionCookie = "approvals_session"
	CSRFCookie    = "approvals_csrf"
)

// hostPrefix makes a browser keep a cookie only when it is Secure, has
// Path=/ and no Domain: no subdomain or plain-HTTP page can plant it.
const hostPrefix = "__Host-"

func (d *Dashboard) sessionCookie() string {
	if d.HostCookies {
		return hostPrefix + SessionCookie
	}
	return SessionCookie
}

func (d *Dashboard) csrfCookie() string {
	if d.HostCookies {
		return hostPrefix + CSRFCookie
	}
	return CSRFCookie
}

// Session values.
const (
	csrfValue   = "csrf"
	authAtValue = "auth_at" // when the user signed in, RFC 3339
)

// Context keys.
const (
	sessionKey   = "dashboard.session"
	userKey      = "dashboard.user"
	errorViewKey = "dashboard.error_view"
)

func session(c echo.Context) *sessions.Session {
	s, _ := c.Get(sessionKey).(*sessions.Session)
	return s
}

func currentUser(c echo.Context) *accounts.User {
	u, _ := c.Get(userKey).(*accounts.User)
	return u
}

func actor(u *accounts.User) string { return "user:" + u.Email }

func isHX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// RequestDeadline bounds how long a dashboard request (every one but the
// event stream) may wait on storage, as the API's statements are bounded:
// a database that stops answering on a connection already open (a hung
// host, a partition) would otherwise hold the page until TCP gives up, where
// it should be answered 503 unavailable.
const RequestDeadline = 30 * time.Second

// Deadline gives the handler RequestDeadline. The error it returns is
// rendered after it, under the request's own context again (RenderError
// reads no storage for a 503).
func (d *Dashboard) Deadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		parent := c.Request().Context()
		ctx, cancel := context.WithTimeout(parent, RequestDeadline)
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		err := next(c)
		c.SetRequest(c.Request().WithContext(parent))
		return err
	}
}

// LoadSession reads the session and, when it is signed in, its user. The
// user is read on every request, so a role change takes effect at once and
// a removed user (whose sessions the database deletes) is anonymous at once.
func (d *Dashboard) LoadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := d.loadSession(c); err != nil {
			return err
		}
		return next(c)
	}
}

func (d *Dashboard) loadSession(c echo.Context) error {
	sess, err := d.Sessions.Get(c.Request(), d.sessionCookie())
	if err != nil {
		return err
	}
	c.Set(sessionKey, sess)
	u, err := d.sessionUser(c.Request().Context(), sess)
	if err != nil || u == nil {
		return err
	}
	c.Set(userKey, u)
	return nil
}

// sessionUser returns the signed-in user of sess, or nil.
func (d *Dashboard) sessionUser(ctx context.Context, sess *sessions.Session) (*accounts.User, error) {
	uid, ok := sess.Values[accounts.SessionUserID].(int64)
	if !ok {
		return nil, nil
	}
	u, err := d.Accounts.UserGetByID(ctx, uid)
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// A password change ends every session that signed in before it, even
	// in a store that did not delete them; so does the provider's refusal.
	authAt, err := time.Parse(time.RFC3339Nano, stringValue(sess, authAtValue))
	if err != nil || u.PasswordChangedAt.After(authAt) || u.SSODeniedAt != nil {
		return nil, nil
	}
	return d.ssoSessionUser(ctx, sess, u)
}

func (d *Dashboard) log() *slog.Logger {
	if d.Logger == nil {
		return slog.Default()
	}
	return d.Logger
}

// stillSignedIn re-reads the request's session from the database, past
// the per-request cache: long-lived streams use it to notice a logout.
func (d *Dashboard) stillSignedIn(c echo.Context) bool {
	sess, err := d.Sessions.New(c.Request(), d.sessionCookie())
	if err != nil || sess.IsNew {
		return false
	}
	u, err := d.sessionUser(c.Request().Context(), sess)
	return err == nil && u != nil
}

func stringValue(s *sessions.Session, key string) string {
	v, _ := s.Values[key].(string)
	return v
}

// RequireUser sends anonymous requests (an agent bearer token included: it
// is no session) to the login page.
func (d *Dashboard) RequireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) != nil {
			return next(c)
		}
		target := "/login"
		r := c.Request()
		if r.Method == http.MethodGet && r.URL.Path != "/" && r.URL.Path != "/events" {
			target += "?next=" + url.QueryEscape(r.URL.RequestURI())
		}
		if isHX(c) {
			// htmx follows a 303 inside the page; ask it to navigate instead.
			c.Response().Header().Set("HX-Redirect", target)
			return c.NoContent(http.StatusNoContent)
		}
		return c.Redirect(http.StatusSeeOther, target)
	}
}

// CheckCSRF refuses a state-changing request that does not carry the
// session's token as the form field _csrf or the header X-CSRF-Token.
func (d *Dashboard) CheckCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if err := checkText(r.URL.Query(), "query parameter"); err != nil {
			return err
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, d.MaxBody)
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return queue.Errorf(queue.CodePayloadTooLarge, "the form is larger than %d bytes", d.MaxBody)
			}
			return queue.Errorf(queue.CodeInvalidRequest, "the form could not be read")
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostForm.Get("_csrf")
		}
		want := ""
		if s := session(c); s != nil {
			want = stringValue(s, csrfValue)
		}
		if want == "" {
			want = d.Sessions.PreSessionTokenOf(r, d.csrfCookie())
		}
		if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return queue.Errorf(queue.CodeForbidden, "this form is out of date or did not come from this site (its CSRF token is missing or wrong): reload the page and try again")
		}
		if err := checkFieldLengths(r.PostForm); err != nil {
			return err
		}
		if err := checkText(r.PostForm, "form field"); err != nil {
			return err
		}
		return next(c)
	}
}

// MaxFieldLen caps every dashboard form field but the JSON ones (an edited
// payload, a ticket's result), which only the body cap bounds: a note or
// a name longer than this is a mistake or an attack, and refused as such
// before it reaches storage.
const MaxFieldLen = 10000

// jsonFields are the form fields holding JSON documents.
var jsonFields = map[string]bool{"payload": true, "result": true}

func checkFieldLengths(form url.Values) error {
	for name, vals := range form {
		if jsonFields[name] {
			continue
		}
		for _, v := range vals {
			if n := utf8.RuneCountInString(v); n > MaxFieldLen {
				return queue.Errorf(queue.CodeInvalidRequest, "the form field %s has %d characters; at most %d are allowed", name, n, MaxFieldLen)
			}
		}
	}
	return nil
}

// checkText refuses a query parameter or form field (what says which)
// whose value is not valid UTF-8 or holds a NUL character, naming it:
// storage holds neither (PostgreSQL refuses both), so such a value would
// fail as an internal error where it is searched for or written. The JSON
// fields are left to their own check (queue.StorableJSON), which names the
// path inside the document.
func checkText(vals url.Values, what string) error {
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		if jsonFields[name] && what == "form field" {
			continue
		}
		for _, v := range vals[name] {
			switch {
			case !utf8.ValidString(v):
				return queue.Errorf(queue.CodeInvalidRequest, "the %s %s is not valid UTF-8", what, name)
			case strings.IndexByte(v, 0) >= 0:
				return queue.Errorf(queue.CodeInvalidRequest, "the %s %s contains a NUL character", what, name)
			}
		}
	}
	return nil
}

// Allow lets only roles for which can is true through; what names the
// right for the 403 message ("decide actions").
func (d *Dashboard) Allow(can func(accounts.Role) bool, what string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			u := currentUser(c)
			if u == nil || !can(u.Role) {
				role := "anonymous"
				if u != nil {
					role = string(u.Role)
				}
				return queue.Errorf(queue.CodeForbidden, "your role (%s) may not %s", role, what)
			}
			return next(c)
		}
	}
}

// csrfToken returns the session's CSRF token or, before login, the
// pre-session token of a signed cookie: an anonymous page view writes
// nothing to the database.
func (d *Dashboard) csrfToken(c echo.Context) (string, error) {
	sess := session(c)
	if sess == nil {
		return "", errors.New("dashboard: no session loaded")
	}
	if tok := stringValue(sess, csrfValue); tok != "" {
		return tok, nil
	}
	return d.Sessions.PreSessionToken(c.Response(), c.Request(), d.csrfCookie())
}

// page builds the layout data of a page.
func (d *Dashboard) page(c echo.Context, title, nav string) (templates.Page, error) {
	csrf, err := d.csrfToken(c)
	if err != nil {
		return templates.Page{}, err
	}
	p := templates.Page{Title: title, Nav: nav, CSRF: csrf, Assets: d.Assets}
	if u := currentUser(c); u != nil {
		p.Viewer = viewer(u)
		n, err := d.Store.TicketCountOpen(c.Request().Context())
		if err != nil {
			return p, err
		}
		p.OpenTickets = n
	}
	return p, nil
}

func viewer(u *accounts.User) *templates.Viewer {
	return &templates.Viewer{Email: u.Email, Role: string(u.Role), CanDecide: u.Role.CanDecide(),
		CanResolve: u.Role.CanResolve(), CanAdminister: u.Role.CanAdminister()}
}

// render writes a component. It renders into a buffer first, so a failure
// half-way becomes a clean error page rather than a torn one.
func render(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	// Pages carry the CSRF token and private data.
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "HX-Request")
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(buf.Bytes())
	return err
}

// fail returns err to the one error handler, which picks the status from
// the error's code, and asks it to render view: the form again, with the
// error and what was typed.
func fail(c echo.Context, err error, view templ.Component) error {
	c.Set(errorViewKey, view)
	return err
}

// RenderError answers a dashboard request that failed with status and e:
// with the view the handler prepared (see fail), else with an error page,
// or for htmx with an alert swapped into the page's #flash.
func (d *Dashboard) RenderError(c echo.Context, status int, e *queue.Error) error {
	if view, ok := c.Get(errorViewKey).(templ.Component); ok {
		return render(c, status, view)
	}
	v := templates.ErrorView{Status: status, Title: http.StatusText(status), Detail: e.Detail}
	if v.Title == "" {
		v.Title = "Error"
	}
	if isHX(c) {
		c.Response().Header().Set("HX-Retarget", "#flash")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		return render(c, status, templates.ErrorFragment(v))
	}
	if session(c) == nil && status != http.StatusServiceUnavailable {
		// Routes outside the dashboard's middleware (an unknown path) still
		// get the navigation of the signed-in user.
		_ = d.loadSession(c)
	}
	p := templates.Page{Title: v.Title, Assets: d.Assets}
	if session(c) != nil && status != http.StatusServiceUnavailable {
		if full, err := d.page(c, v.Title, ""); err == nil {
			p = full
		}
	}
	return render(c, status, templates.ErrorPage(p, v))
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return ""
	}
	return next
}

// notFound reports an unknown id in the words of the domain.
func notFound(what, id string) error {
	return queue.Errorf(queue.CodeNotFound, "no %s with id %s", what, id)
}
