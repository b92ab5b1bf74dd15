package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// errorHandler turns every error into a response. Domain errors keep their
// code and detail; echo's own errors (unknown route, wrong method) keep their
// status; anything else is logged and answered without internals.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var qe *queue.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &qe):
	case errors.As(err, &he):
		qe = fromHTTPError(he)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		c.Response().WriteHeader(499)
		return
	default:
		qe = queue.ErrorOf(c.Request().Context(), err, s.cfg.Store, s.log, "method", c.Request().Method, "path", c.Request().URL.Path)
	}
	if d := queue.ErrorRetryAfter(qe); d > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(d.Seconds())))
	}
	if isDashboard(c) {
		s.dashboardError(c, problem.Status(qe.Code), qe)
		return
	}
	_ = problem.Write(c.Response(), qe)
}

// isDashboard reports whether the request is for the HTML dashboard rather
// than an API or probe endpoint.
func isDashboard(c echo.Context) bool {
	p := c.Request().URL.Path
	for _, prefix := range []string{"/api/", "/mcp", "/healthz", "/readyz", "/metrics", "/static/"} {
		if strings.HasPrefix(p, prefix) {
			return false
		}
	}
	return true
}

func fromHTTPError(he *echo.HTTPError) *queue.Error {
	msg := http.StatusText(he.Code)
	if m, ok := he.Message.(string); ok && m != "" {
		msg = m
	}
	switch he.Code {
	case http.StatusNotFound:
		return &queue.Error{Code: queue.CodeNotFound, Detail: "no such resource"}
	case http.StatusRequestEntityTooLarge:
		return &queue.Error{Code: queue.CodePayloadTooLarge, Detail: "request body is too large"}
	case http.StatusUnauthorized:
		return &queue.Error{Code: queue.CodeUnauthorized, Detail: msg}
	case http.StatusForbidden:
		return &queue.Error{Code: queue.CodeForbidden, Detail: msg}
	case http.StatusMethodNotAllowed:
		return &queue.Error{Code: queue.CodeMethodNotAllowed, Detail: "method not allowed on this resource"}
	}
	if he.Code >= 400 && he.Code < 500 {
		return &queue.Error{Code: queue.CodeInvalidRequest, Detail: msg}
	}
	return &queue.Error{Code: queue.CodeInternal, Detail: "internal error; it has been logged"}
}
