// Package tracing is approvals' OpenTelemetry tracing: the provider built
// from the standard OTEL_* variables, the W3C trace context taken from
// requests and passed on, and the spans of what a person asks about (a
// submission, the wait for a person, a decision, an execution).
//
// Tracing is off unless the environment asks for it (Setup). Off, Start
// returns its context unchanged and a no-op span, without allocating, so
// the submission path costs what it cost before tracing existed.
package tracing

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span approvals makes.
const ScopeName = "github.com/approvals/approvals"

// state is what Use installed; nil while tracing is off.
type state struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var current atomic.Pointer[state]

// propagator is the W3C trace context and baggage, as OTEL_PROPAGATORS
// defaults to.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Use turns tracing on with tp (nil: off again) and installs it and the
// W3C propagator as OpenTelemetry's globals. Setup calls it; a test calls
// it with a provider of its own and turns tracing off when it ends.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		current.Store(nil)
		otel.SetTracerProvider(noop.NewTracerProvider())
		return
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	current.Store(&state{tracer: tp.Tracer(ScopeName), prop: propagator})
}

// Enabled reports whether spans are being made.
func Enabled() bool { return current.Load() != nil }

var noopSpan trace.Span = noop.Span{}

// Start starts a span named name, a child of ctx's span. With tracing off
// it returns ctx itself and a span that records nothing.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	st := current.Load()
	if st == nil {
		return ctx, noopSpan
	}
	return st.tracer.Start(ctx, name, opts...)
}

// Extract returns ctx with the remote span context of the W3C headers
// traceparent and tracestate (and baggage) of h, when they carry one.
func Extract(ctx context.Context, h http.Header) context.Context {
	st := current.Load()
	if st == nil {
		return ctx
	}
	return st.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject writes ctx's span context into h as traceparent and tracestate.
func Inject(ctx context.Context, h http.Header) {
	if st := current.Load(); st != nil {
		st.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// InjectMap writes ctx's span context into m (an MCP request's _meta).
func InjectMap(ctx context.Context, m map[string]any) {
	st := current.Load()
	if st == nil {
		return
	}
	c := propagation.MapCarrier{}
	st.prop.Inject(ctx, c)
	for k, v := range c {
		m[k] = v
	}
}

// ExtractMap returns ctx with the remote span context of m's traceparent
// and tracestate (an MCP request's _meta), when m carries a valid one;
// otherwise ctx unchanged.
func ExtractMap(ctx context.Context, m map[string]any) context.Context {
	st := current.Load()
	if st == nil || m == nil {
		return ctx
	}
	c := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := m[k].(string); ok {
			c[k] = v
		}
	}
	if c["traceparent"] == "" {
		return ctx
	}
	return st.prop.Extract(ctx, c)
}

// Traceparent is the W3C traceparent of ctx's span, or "" when ctx has no
// valid span or tracing is off: what an action keeps of its submission,
// so that a decision, an execution or a ticket in any process finds it.
func Traceparent(ctx context.Context) string {
	if current.Load() == nil {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Remote is the span context a traceparent names, marked remote; invalid
// when tp is not a valid traceparent.
func Remote(tp string) trace.SpanContext {
	if tp == "" || !strings.HasPrefix(tp, "00-") {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// LinkTo is the start option linking a span to sc, when sc is valid.
func LinkTo(sc trace.SpanContext, attrs ...attribute.KeyValue) trace.SpanStartOption {
	if !sc.IsValid() {
		return trace.WithLinks()
	}
	return trace.WithLinks(trace.Link{SpanContext: sc, Attributes: attrs})
}

// WaitSpan records the wait of an action for a person, in the trace of
// its submission (sc, the span that submitted it): from its submission at
// from to its decision at to, ending as decision. Nothing when sc is not
// valid or tracing is off.
func WaitSpan(sc trace.SpanContext, from, to time.Time, attrs ...attribute.KeyValue) {
	st := current.Load()
	if st == nil || !sc.IsValid() {
		return
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	_, span := st.tracer.Start(ctx, "approvals.wait", trace.WithTimestamp(from), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(to))
}

// ToolCallIDHeader is the HTTP header an agent names its tool call with
// (an LLM's tool call id), REST or MCP over HTTP; an MCP request's _meta
// key of the same meaning is ToolCallIDMeta.
const (
	ToolCallIDHeader = "X-Tool-Call-Id"
	ToolCallIDMeta   = "gen_ai.tool.call.id"
	// maxToolCallID bounds what a span keeps of it.
	maxToolCallID = 256
)

type toolCallIDKey struct{}

// WithToolCallID returns ctx carrying the agent's tool call id, the
// submission span's gen_ai.tool.call.id. Nothing with tracing off, or
// when id is empty or longer than 256 bytes (then it is not an id).
func WithToolCallID(ctx context.Context, id string) context.Context {
	if current.Load() == nil || id == "" || len(id) > maxToolCallID {
		return ctx
	}
	return context.WithValue(ctx, toolCallIDKey{}, id)
}

// ToolCallID is the tool call id ctx carries, or "".
func ToolCallID(ctx context.Context) string {
	id, _ := ctx.Value(toolCallIDKey{}).(string)
	return id
}

// Transport is base (http.DefaultTransport when nil) writing the W3C trace
// context of each request's context into its headers: a channel's API
// calls and a notification's webhook continue the span that sent them.
// With tracing off, or a context with no span, it adds nothing.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return injecting{base}
}

type injecting struct{ base http.RoundTripper }

func (t injecting) RoundTrip(r *http.Request) (*http.Response, error) {
	if current.Load() == nil || !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	Inject(r.Context(), r.Header)
	return t.base.RoundTrip(r)
}
