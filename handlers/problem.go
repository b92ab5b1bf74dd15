// Package handlers parses requests, calls the queue service and answers
// with JSON (the agent API) or HTML (the dashboard). It never touches a
// store directly.
package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
)

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type   string        `json:"type"`
	Title  string        `json:"title"`
	Status int           `json:"status"`
	Detail string        `json:"detail"`
	Code   queue.Code    `json:"code"`
	Action *queue.Action `json:"action,omitempty"`
}

// WriteProblem answers with application/problem+json.
func WriteProblem(c echo.Context, status int, e *queue.Error) error {
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: e.Detail, Code: e.Code, Action: e.Action}
	if p.Title == "" {
		p.Title = "Error"
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(status)
	return jsonEncode(c, p)
}

// IsDashboard reports whether the request is for the HTML dashboard rather
// than an API or probe endpoint.
func IsDashboard(c echo.Context) bool {
	p := c.Request().URL.Path
	for _, prefix := range []string{"/api/", "/mcp", "/healthz", "/readyz", "/metrics", "/static/"} {
		if strings.HasPrefix(p, prefix) {
			return false
		}
	}
	return true
}
