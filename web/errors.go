package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/queue"
)

const codeMethodNotAllowed queue.Code = "method_not_allowed"

// statusOf maps every domain code to its HTTP status: the one place where
// this mapping lives.
func statusOf(code queue.Code) int {
	switch code {
	case queue.CodeInvalidRequest, queue.CodeIntentKeyRequired:
		return http.StatusBadRequest
	case queue.CodeUnauthorized:
		return http.StatusUnauthorized
	case queue.CodeForbidden:
		return http.StatusForbidden
	case queue.CodeNotFound:
		return http.StatusNotFound
	case queue.CodeInProgress, queue.CodeInvalidTransition, queue.CodeOutcomeConflict,
		queue.CodeAlreadyDecided, queue.CodeTicketResolved:
		return http.StatusConflict
	case queue.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case queue.CodeInvalidPayload, queue.CodeIntentKeyMismatch, queue.CodeIntentKeyReused:
		return http.StatusUnprocessableEntity
	case queue.CodeUnavailable:
		return http.StatusServiceUnavailable
	case queue.CodeTooManyWaiters:
		return http.StatusTooManyRequests
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

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
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		qe = &queue.Error{Code: queue.CodeUnavailable, Detail: "storage is unavailable; try again"}
		if s.store.Ping(c.Request().Context()) == nil {
			qe = &queue.Error{Code: "internal", Detail: "internal error; it has been logged"}
		}
	}
	status := statusOf(qe.Code)
	if qe.Code == queue.CodeTooManyWaiters {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(queue.WaiterRetryAfter.Seconds())))
	}
	if handlers.IsDashboard(c) {
		s.dashboardError(c, status, qe)
		return
	}
	if qe.Code == queue.CodeUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="approvals"`)
	}
	if qe.Code == queue.CodeInProgress {
		c.Response().Header().Set("Retry-After", strconv.Itoa(5))
	}
	_ = handlers.WriteProblem(c, status, qe)
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
		return &queue.Error{Code: codeMethodNotAllowed, Detail: "method not allowed on this resource"}
	}
	if he.Code >= 400 && he.Code < 500 {
		return &queue.Error{Code: queue.CodeInvalidRequest, Detail: msg}
	}
	return &queue.Error{Code: "internal", Detail: "internal error; it has been logged"}
}
