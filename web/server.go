// Package web assembles the HTTP surface: every route in one function, the
// middleware, and the one error handler that maps domain errors to HTTP.
package web

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/queue"
)

// Config is what a server needs.
type Config struct {
	Service  *queue.Service
	Accounts accounts.Store
	Metrics  *Metrics
	Logger   *slog.Logger
	// MaxBody caps request bodies, default 256 KiB.
	MaxBody int64
	// SessionSecret signs dashboard cookies; empty: generated once and kept
	// in the database so every process shares it.
	SessionSecret string
	// MCP serves /mcp when set.
	MCP http.Handler
	// SlackInteractions serves POST /integrations/slack/interactions
	// (notifier/slack.Interactions); nil: Slack is not configured and the
	// route answers 404 saying so.
	SlackInteractions http.Handler
	// SessionMaxAge is how long a dashboard sign-in lasts; default 12h.
	SessionMaxAge time.Duration
	// SecureCookies marks the session cookie Secure even on plain HTTP (TLS
	// ends at a proxy); on a TLS connection it is Secure anyway.
	SecureCookies bool
	// LoginLimits throttle failed dashboard logins; default 5 per account
	// and 20 per client address within 15 minutes.
	LoginLimits handlers.LoginLimits
	// Done, when closed, ends the dashboard's live event streams. Close it
	// when shutdown starts (http.Server.RegisterOnShutdown), so that
	// Shutdown does not wait for open browser tabs.
	Done <-chan struct{}
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
		cfg.Metrics = NewMetrics(cfg.Service)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// The client address (for the per-address login limit) is the TCP
	// peer: headers such as X-Forwarded-For are anyone's to forge.
	e.IPExtractor = echo.ExtractIPDirect()
	s := &Server{cfg: cfg, echo: e, log: cfg.Logger,
		api: &handlers.API{Service: cfg.Service, Accounts: cfg.Accounts, MaxBody: cfg.MaxBody}}
	e.HTTPErrorHandler = s.errorHandler
	e.Use(middleware.Recover())
	e.Use(securityHeaders)
	if err := s.routes(e); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// routes registers the whole URL surface.
func (s *Server) routes(e *echo.Echo) error {
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.ready)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.cfg.Metrics.Registry, promhttp.HandlerOpts{})))

	e.GET("/api/v1/openapi.json", handlers.OpenAPI)
	api := e.Group("/api/v1")
	auth := s.api.AgentAuth
	api.POST("/actions", s.api.Submit, s.api.SubmitAuth)
	api.GET("/actions", s.api.ListActions, auth)
	api.GET("/actions/:id", s.api.GetAction, auth)
	api.POST("/actions/:id/execute", s.api.Execute, auth)
	api.POST("/actions/:id/complete", s.api.Complete, auth)
	api.POST("/actions/:id/fail", s.api.Fail, auth)
	api.POST("/actions/:id/cancel", s.api.Cancel, auth)
	api.GET("/tools", s.api.Tools, auth)
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
	if err := s.cfg.Service.Ping(c.Request().Context()); err != nil {
		return c.String(http.StatusServiceUnavailable, "storage unreachable\n")
	}
	return c.String(http.StatusOK, "ready\n")
}

// securityHeaders applies to every response: no inline script, no framing,
// no sniffing.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		return next(c)
	}
}

// ShutdownTimeout bounds how long in-flight requests may finish.
const ShutdownTimeout = 30 * time.Second
