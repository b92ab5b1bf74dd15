package web

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/static"
	"github.com/approvals/approvals/templates"
)

// sessionSecretSetting keeps the generated session secret in the database,
// so restarts and every server process sign cookies alike.
const sessionSecretSetting = "session_secret"

// registerDashboard registers every route of the staff dashboard (staff
// sign in with a password or with single sign-on; roles decide who
// approves, resolves tickets and administers) and its static files. Middleware order on a route: load the
// session, require a signed-in user, check the CSRF token of a
// state-changing request, then the role.
func (s *Server) registerDashboard(e *echo.Echo) error {
	if s.cfg.Accounts == nil {
		return fmt.Errorf("web: Config.Accounts is required: the dashboard keeps users and sessions there")
	}
	secret, err := s.sessionSecret()
	if err != nil {
		return err
	}
	store, err := accounts.NewSessionStore(s.cfg.Accounts, secret,
		accounts.SessionOptions{MaxAge: s.cfg.SessionMaxAge, Secure: s.cfg.SecureCookies || s.cfg.httpsOnly()})
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	d := &handlers.Dashboard{
		Service:  s.cfg.Service,
		Polls:    s.cfg.Polls,
		Store:    s.cfg.Store,
		Accounts: s.cfg.Accounts,
		Audit:    s.cfg.Audit,
		Sessions: store,
		Assets:   templates.Assets{CSS: static.URL("app.css"), HTMX: static.URL("htmx.min.js"), App: static.URL("app.js")},
		MaxBody:  s.cfg.MaxBody,
		Done:     s.cfg.Done,
		Limits:   s.cfg.LoginLimits,
		// __Host- cookies must be Secure, which a browser keeps only from
		// https: the prefix follows the public URL, not SecureCookies.
		HostCookies: s.cfg.httpsOnly(),
		Gate:        s.cfg.PasswordGate,
		SSO:         s.cfg.SSO, SSORecheck: s.cfg.SSORecheck, PasswordLoginOff: s.cfg.PasswordLoginOff,
		PublicURL: s.cfg.PublicURL, Logger: s.log,
	}
	if s.cfg.SSO != nil {
		// The flow cookie and the sealed tokens use the session secret,
		// so every process opens what another sealed.
		if d.SSOSealer, err = sso.NewSealer(secret); err != nil {
			return fmt.Errorf("web: %w", err)
		}
	}
	s.dashboard = d

	e.GET("/static/:name", serveStatic)

	anyone := []echo.MiddlewareFunc{d.Deadline, d.LoadSession, d.CheckCSRF}
	e.GET("/login", d.LoginPage, anyone...)
	e.POST("/login", d.Login, anyone...)
	e.POST("/logout", d.Logout, anyone...)
	e.GET("/setup", d.SetupPage, anyone...)
	e.POST("/setup", d.Setup, anyone...)
	// Single sign-on: the link on the login page, and where the provider
	// sends the browser back (GET requests: no CSRF token, the state is
	// what ties the callback to the browser).
	e.GET("/auth/oidc/login", d.SSOLogin, anyone...)
	e.GET("/auth/oidc/callback", d.SSOCallback, anyone...)

	staff := []echo.MiddlewareFunc{d.Deadline, d.LoadSession, d.RequireUser, d.CheckCSRF}
	// The event stream lasts as long as the page is open: no deadline.
	stream := []echo.MiddlewareFunc{d.LoadSession, d.RequireUser, d.CheckCSRF}
	with := func(m ...echo.MiddlewareFunc) []echo.MiddlewareFunc {
		return append(append([]echo.MiddlewareFunc{}, staff...), m...)
	}
	decide := d.Allow(accounts.Role.CanDecide, "approve, reject or request changes: approvers and admins do")
	resolve := d.Allow(accounts.Role.CanResolve, "resolve tickets: ops and admins do")
	admin := d.Allow(accounts.Role.CanAdminister, "manage users and tokens: admins do")
	revoke := d.Allow(func(r accounts.Role) bool { return r.CanDecide() || r.CanResolve() },
		"revoke grants: the approver who granted one, ops and admins do")

	e.GET("/", d.Queue, staff...)
	e.GET("/events", d.Events, stream...)
	e.GET("/actions", d.SearchActions, staff...)
	e.GET("/actions/:id", d.ShowAction, staff...)
	e.POST("/actions/bulk", d.BulkDecide, with(decide)...)
	e.POST("/actions/:id/approve", d.ApproveAction, with(decide)...)
	e.POST("/actions/:id/reject", d.RejectAction, with(decide)...)
	e.POST("/actions/:id/request-changes", d.RequestChangesAction, with(decide)...)
	e.GET("/plans/:id", d.ShowPlan, staff...)
	e.POST("/plans/:id/approve", d.ApprovePlan, with(decide)...)
	e.POST("/plans/:id/reject", d.RejectPlan, with(decide)...)
	e.POST("/plans/:id/request_changes", d.RequestPlanChanges, with(decide)...)
	e.GET("/tickets", d.TicketList, staff...)
	e.GET("/tickets/:id", d.ShowTicket, staff...)
	e.POST("/tickets/:id/resolve", d.ResolveTicket, with(resolve)...)
	e.POST("/tickets/:id/check", d.CheckTicket, with(resolve)...)
	e.GET("/audit", d.AuditList, staff...)
	e.GET("/overview", d.ShowOverview, staff...)
	e.GET("/tools", d.ToolsList, staff...)
	e.GET("/grants", d.GrantList, staff...)
	// Ops and admins revoke any grant, an approver only their own (the
	// handler checks which).
	e.POST("/grants/:id/revoke", d.RevokeGrant, with(revoke)...)
	e.GET("/admin/users", d.Users, with(admin)...)
	e.POST("/admin/users", d.CreateUser, with(admin)...)
	e.POST("/admin/users/:id/role", d.ChangeUserRole, with(admin)...)
	e.POST("/admin/users/:id/password", d.SetUserPassword, with(admin)...)
	e.POST("/admin/users/:id/remove", d.RemoveUser, with(admin)...)
	e.POST("/admin/users/:id/slack", d.SetUserSlackID, with(admin)...)
	e.POST("/admin/users/:id/telegram", d.SetUserTelegramID, with(admin)...)
	e.GET("/admin/tokens", d.Tokens, with(admin)...)

	// Deciding in Slack: no session and, deliberately, no CSRF check. The
	// request comes from Slack's servers, never from a browser holding our
	// cookie, and Slack's signature (checked by the handler before anything
	// else) is what authenticates it.
	e.POST("/integrations/slack/interactions", s.slackInteractions)
	// Deciding in Telegram: the same, authenticated by the secret header
	// Telegram sends (checked by the handler before anything else).
	e.POST("/integrations/telegram/webhook", s.telegramWebhook)
	e.POST("/admin/tokens", d.CreateToken, with(admin)...)
	e.POST("/admin/tokens/revoke", d.RevokeToken, with(admin)...)
	return nil
}

// slackInteractions hands Slack's requests to the configured handler.
func (s *Server) slackInteractions(c echo.Context) error {
	if s.cfg.SlackInteractions == nil {
		return &queue.Error{Code: queue.CodeNotFound, Detail: "Slack is not configured on this server (APPROVALS_SLACK_BOT_TOKEN, APPROVALS_SLACK_SIGNING_SECRET)"}
	}
	s.cfg.SlackInteractions.ServeHTTP(c.Response(), c.Request())
	return nil
}

// telegramWebhook hands Telegram's updates to the configured handler.
func (s *Server) telegramWebhook(c echo.Context) error {
	if s.cfg.TelegramWebhook == nil {
		return &queue.Error{Code: queue.CodeNotFound, Detail: "Telegram is not configured on this server (APPROVALS_TELEGRAM_BOT_TOKEN, APPROVALS_TELEGRAM_SECRET)"}
	}
	s.cfg.TelegramWebhook.ServeHTTP(c.Response(), c.Request())
	return nil
}

// sessionSecret is Config.SessionSecret, or the secret generated once and
// kept in the database.
func (s *Server) sessionSecret() ([]byte, error) {
	if s.cfg.SessionSecret != "" {
		if len(s.cfg.SessionSecret) < 32 {
			return nil, fmt.Errorf("web: the session secret must be at least 32 characters, it has %d", len(s.cfg.SessionSecret))
		}
		return []byte(s.cfg.SessionSecret), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	secret, err := s.cfg.Accounts.SettingInit(ctx, accounts.SettingParams{Key: sessionSecretSetting, Value: accounts.RandomString(48)})
	if err != nil {
		return nil, fmt.Errorf("web: session secret: %w", err)
	}
	return []byte(secret), nil
}

// serveStatic serves an embedded asset. Pages link each asset with ?v= and
// a hash of its content, so a matching request may be cached for a year;
// anything else is revalidated after five minutes.
func serveStatic(c echo.Context) error {
	f, ok := static.Lookup(c.Param("name"))
	if !ok {
		return echo.ErrNotFound
	}
	h := c.Response().Header()
	if c.QueryParam("v") == f.Version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "public, max-age=300")
	}
	h.Set("ETag", `"`+f.Version+`"`)
	http.ServeContent(c.Response(), c.Request(), f.Name, time.Time{}, bytes.NewReader(f.Content))
	return nil
}

// dashboardError renders an error as HTML: the handler's form again with
// the error when it prepared one, else an error page in the layout.
func (s *Server) dashboardError(c echo.Context, status int, e *queue.Error) {
	if e.Detail == "" {
		e = &queue.Error{Code: e.Code, Detail: http.StatusText(status), Action: e.Action}
	}
	if s.dashboard != nil {
		err := s.dashboard.RenderError(c, status, e)
		if err == nil || c.Response().Committed {
			return
		}
		s.log.Error("render dashboard error page", "path", c.Request().URL.Path, "err", err)
	}
	_ = c.HTML(status, "<!doctype html><title>Error</title><p>"+html.EscapeString(e.Detail)+"</p>")
}
