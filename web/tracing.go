package web

import (
	"strconv"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/tracing"
)

// traceRequests makes a server span of each request, a child of the
// caller's span when the request carries W3C trace context (traceparent,
// tracestate), with the HTTP semantic conventions' attributes: never the
// query, a header's value or the body. New registers it only when tracing
// is on (tracing.Setup comes first).
func traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !tracing.Enabled() {
			return next(c)
		}
		r := c.Request()
		route := c.Path()
		name := r.Method
		if route != "" {
			name += " " + route
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		ctx, span := tracing.Start(tracing.Extract(r.Context(), r.Header), name,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("http.route", route),
				attribute.String("url.path", r.URL.Path),
				attribute.String("url.scheme", scheme),
				attribute.String("server.address", r.Host),
				attribute.String("client.address", c.RealIP()),
				attribute.String("user_agent.original", r.UserAgent()),
				attribute.String("network.protocol.version", protocolVersion(r.ProtoMajor, r.ProtoMinor)),
			))
		defer span.End()
		// The agent's name for its tool call, for the submission's span.
		ctx = tracing.WithToolCallID(ctx, r.Header.Get(tracing.ToolCallIDHeader))
		c.SetRequest(r.WithContext(ctx))
		if err := next(c); err != nil {
			// Answered here, so that the span sees the status the
			// error handler chose.
			c.Error(err)
		}
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
		}
		return nil
	}
}

func protocolVersion(major, minor int) string {
	if minor == 0 && major >= 2 {
		return strconv.Itoa(major)
	}
	return strconv.Itoa(major) + "." + strconv.Itoa(minor)
}
