// Package web assembles the HTTP surface: every route in one function, the
// middleware, and the one error handler that maps domain errors to HTTP.
package web

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/tracing"
)

// Config is what a server needs.
type Config struct {
	Service *queue.Service
	// Polls are the process's long-polls and the caps on its waits;
	// default: long-polls over Store with the default caps, released when
	// Done closes.
	Polls *longpoll.Polls
	// Store is what the faces read directly: the service's own storage.
	Store    queue.Reader
	Accounts accounts.Store
	// Audit is the audit chain's state (the audit page).
	Audit   handlers.AuditReader
	Metrics *Metrics
	Logger  *slog.Logger
	// MaxBody caps request bodies, default 256 KiB.
	MaxBody int64
	// SessionSecret signs dashboard cookies; empty: generated once and kept
	// in the database so every process shares it.
	SessionSecret string
	// MCP serves /mcp when set.
	MCP http.Handler
	// SlackInteractions serves POST /integrations/slack/interactions
	// (slack.Interactions); nil: Slack is not configured and the
	// route answers 404 saying so.
	SlackInteractions http.Handler
	// TelegramWebhook serves POST /integrations/telegram/webhook
	// (telegram.Webhook); nil: Telegram is not configured, and the route
	// answers 404 saying so.
	TelegramWebhook http.Handler
	// SessionMaxAge is how long a dashboard sign-in lasts; default 12h.
	SessionMaxAge time.Duration
	// SecureCookies marks the session cookie Secure even on plain HTTP (TLS
	// ends at a proxy); on a TLS connection it is Secure anyway.
	SecureCookies bool
	// PublicURL is where browsers reach the server (APPROVALS_PUBLIC_URL).
	// Starting with https:// (TLS ends here or at a proxy), the dashboard's
	// cookies are Secure and named with the __Host- prefix, and every
	// response carries Strict-Transport-Security.
	PublicURL string
	// TrustedProxies are the addresses whose X-Forwarded-For is believed
	// (APPROVALS_TRUSTED_PROXIES). Empty: the client address is the TCP
	// peer, whatever the headers say.
	TrustedProxies []netip.Prefix
	// BodyReadTimeout bounds how long a client may take to send a request
	// body; default DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// PasswordGate bounds concurrent password checks; default 4 at once.
	PasswordGate *accounts.PasswordGate
	// LoginLimits throttle failed dashboard logins; default 5 per account
	// from one client address and 20 per client address within 15 minutes.
	LoginLimits handlers.LoginLimits
	// MetricsElsewhere leaves /metrics off this server's routes (it then
	// answers 404 there): APPROVALS_METRICS_ADDR serves MetricsHandler on
	// a listener of its own, out of reach of the public one.
	MetricsElsewhere bool
	// Done, when closed, ends the dashboard's live event streams. Close it
	// when shutdown starts (http.Server.RegisterOnShutdown), so that
	// Shutdown does not wait for open browser tabs.
	Done <-chan struct{}
	// SSO is the OpenID provider staff sign in with; nil: no single
	// sign-on (/auth/oidc/* answer 404). SSORecheck is how often a single
	// sign-on session is checked again with it (default 1h).
	SSO        *sso.Provider
	SSORecheck time.Duration
	// PasswordLoginOff refuses password sign-in (APPROVALS_PASSWORD_LOGIN=off).
	PasswordLoginOff bool
}

// Server is one HTTP server of approvals.
type Server struct {
	cfg       Config
	echo      *echo.Echo
	log       *slog.Logger
	api       *handlers.API
	dashboard *handlers.Dashboard // set by registerDashboard; renders dashboard errors
}

// New builds the server and registers every route.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 256 << 10
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.Store)
	}
	if ar, ok := cfg.Accounts.(handlers.AuditReader); ok && cfg.Audit == nil {
		cfg.Audit = ar // one database keeps both
	}
	if cfg.Polls == nil {
		cfg.Polls = longpoll.New(cfg.Store, longpoll.Options{Done: cfg.Done})
	}
	polls := cfg.Polls
	cfg.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "approvals_waiters",
		Help: "Long-polls of this process waiting for a change.",
	}, func() float64 { return float64(polls.Waiters()) }))
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// The client address (for the per-address login limit) is the TCP
	// peer: headers such as X-Forwarded-For are anyone's to forge, unless
	// the peer is a proxy the operator named.
	e.IPExtractor = clientIP(cfg.TrustedProxies)
	s := &Server{cfg: cfg, echo: e, log: cfg.Logger,
		api: &handlers.API{Service: cfg.Service, Polls: cfg.Polls, Store: cfg.Store, Accounts: cfg.Accounts, MaxBody: cfg.MaxBody,
			Logger: cfg.Logger}}
	e.HTTPErrorHandler = s.errorHandler
	e.Use(middleware.Recover())
	if tracing.Enabled() {
		// Only when on: echo wraps every middleware anew for each request,
		// and with tracing off the request should not pay for that.
		e.Use(traceRequests)
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	e.Use(bodyReadTimeout(cfg.BodyReadTimeout))
	e.Use(s.securityHeaders)
	if cfg.httpsOnly() {
		e.Use(strictTransport)
	}
	if err := s.routes(e); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// MetricsHandler serves the Prometheus metrics (GET /metrics).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.cfg.Metrics.Registry, promhttp.HandlerOpts{})
}

// routes registers the whole URL surface.
func (s *Server) routes(e *echo.Echo) error {
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.ready)
	if !s.cfg.MetricsElsewhere {
		e.GET("/metrics", echo.WrapHandler(s.MetricsHandler()))
	}

	e.GET("/api/v1/openapi.json", handlers.OpenAPI)
	api := e.Group("/api/v1")
	auth := s.api.AgentAuth
	// The hot path: its token check rides in the statement (HotAuth).
	hot := s.api.HotAuth
	// Each route names the query parameters it reads; any other is refused
	// after the token is checked (handlers.OnlyQuery).
	none := handlers.OnlyQuery()
	api.POST("/actions", s.api.Submit, hot, handlers.OnlyQuery("dry_run"))
	api.GET("/actions", s.api.ListActions, auth, handlers.OnlyQuery("intent_key", "state", "tool", "limit", "cursor"))
	api.GET("/actions/:id", s.api.GetAction, auth, handlers.OnlyQuery("wait", "state"))
	api.POST("/actions/:id/execute", s.api.Execute, hot, none)
	api.POST("/actions/:id/complete", s.api.Complete, hot, none)
	api.POST("/actions/:id/fail", s.api.Fail, hot, none)
	api.POST("/actions/:id/cancel", s.api.Cancel, hot, none)
	api.POST("/actions/:id/verify", s.api.Verify, auth, none)
	api.GET("/tools", s.api.Tools, auth, none)
	api.POST("/plans", s.api.ProposePlan, auth, handlers.OnlyQuery("dry_run"))
	api.GET("/plans", s.api.ListPlans, auth, handlers.OnlyQuery("state", "limit"))
	api.GET("/plans/:id", s.api.GetPlan, auth, handlers.OnlyQuery("wait", "state"))
	api.POST("/plans/:id/cancel", s.api.CancelPlan, auth, none)
	// Unknown API paths authenticate first too, so a caller without a token
	// learns nothing about which routes exist.
	api.RouteNotFound("/*", echo.NotFoundHandler, auth)

	if s.cfg.MCP != nil {
		e.Any("/mcp", echo.WrapHandler(s.cfg.MCP))
		e.Any("/mcp/*", echo.WrapHandler(s.cfg.MCP))
	}
	return s.registerDashboard(e)
}

func (s *Server) ready(c echo.Context) error {
	if err := s.cfg.Store.Ping(c.Request().Context()); err != nil {
		return c.String(http.StatusServiceUnavailable, "storage unreachable\n")
	}
	return c.String(http.StatusOK, "ready\n")
}

// securityHeaders applies to every response: no inline script, no framing,
// no sniffing. Forms lead to this site only, and with single sign-on to
// the provider too: logout is a form, and the browser holds the redirect
// to the provider's end_session_endpoint to form-action.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		if s.cfg.SSO != nil {
			// The provider's end-session origin may change with its discovery.
			h.Set("Content-Security-Policy", contentSecurityPolicy+" "+strings.Join(s.cfg.SSO.FormActionOrigins(), " "))
		} else {
			h["Content-Security-Policy"] = cspSelfOnly
		}
		h["X-Frame-Options"], h["X-Content-Type-Options"], h["Referrer-Policy"] = frameDeny, noSniff, sameOrigin
		return next(c)
	}
}

// contentSecurityPolicy is the dashboard's policy; form-action ends it, so
// that the SSO provider's origins can follow.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// The values of securityHeaders, made once and shared by every response
// (Header.Set would allocate each for every request): net/http only reads
// them, and each has len == cap, so an Add copies it first.
var (
	cspSelfOnly = []string{contentSecurityPolicy}
	frameDeny   = []string{"DENY"}
	noSniff     = []string{"nosniff"}
	sameOrigin  = []string{"same-origin"}
)

// httpsOnly reports whether browsers reach the server over https only.
func (cfg Config) httpsOnly() bool {
	return strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://")
}

// strictTransport tells browsers to use https only for a year.
func strictTransport(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Strict-Transport-Security", "max-age=31536000")
		return next(c)
	}
}

// clientIP believes X-Forwarded-For only from a peer in trusted; its
// rightmost address not in trusted is the client. Echo trusts loopback,
// link-local and private addresses by default: all three are turned off,
// so only the operator's list counts.
func clientIP(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		p = p.Masked()
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ParseTrustedProxies reads a comma-separated list of CIDRs (a bare
// address is its /32 or /128); the error names the entry that is wrong.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is neither a CIDR such as 10.0.0.0/8 nor an IP address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ShutdownTimeout bounds how long in-flight requests may finish.
const ShutdownTimeout = 30 * time.Second
