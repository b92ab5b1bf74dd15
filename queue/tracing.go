package queue

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/tracing"
)

// What an action keeps of the trace of its submission: the traceparent of
// the submission's span, in its submitted event's data. A decision, an
// execution or a ticket's resolution, in whichever process, reads it back
// to link its span to the submission, and the wait for a person and the
// execution become spans of the agent's own trace. Nothing is kept with
// tracing off.
const traceparentField = "traceparent"

// submissionTrace is the span context of a's submission, or an invalid
// one (tracing off, or submitted untraced).
func (s *Service) submissionTrace(ctx context.Context, id string) trace.SpanContext {
	return submissionTraceIn(ctx, s.store, id)
}

// submissionTraceIn is submissionTrace read from r.
func submissionTraceIn(ctx context.Context, r Reader, id string) trace.SpanContext {
	if !tracing.Enabled() {
		return trace.SpanContext{}
	}
	evs, err := r.EventList(ctx, EventListParams{ActionID: id, Kind: EventSubmitted, Limit: 1})
	if err != nil || len(evs) == 0 || len(evs[0].Data) == 0 {
		return trace.SpanContext{}
	}
	var data struct {
		Traceparent string `json:"traceparent"`
	}
	if json.Unmarshal(evs[0].Data, &data) != nil {
		return trace.SpanContext{}
	}
	return tracing.Remote(data.Traceparent)
}

// TraceContext is a context carrying nothing but the span context of a's
// submission, as a remote parent: what an executor's span continues, so
// that the effect appears in the agent's trace. Background's when there is
// none.
func (d *Dispatch) TraceContext(ctx context.Context, a *Action) context.Context {
	sc := d.s.submissionTrace(ctx, a.ID)
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// actionAttrs are the attributes every span about a names: never its
// payload, only what the tools file and the intent key say of it.
func actionAttrs(a *Action) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("approvals.action.id", a.ID),
		attribute.String("gen_ai.tool.name", a.Tool),
		attribute.String("approvals.tool.class", string(a.Class)),
		attribute.String("approvals.intent_key", a.IntentKey),
		attribute.Int("approvals.attempt", a.Attempt),
	}
}

// endSpan records err on span (its code as error.type) and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		t := "_OTHER"
		if code := ErrorCode(err); code != "" {
			t = string(code)
		}
		span.SetAttributes(attribute.String("error.type", t))
		if t == "_OTHER" || t == string(CodeInternal) {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// SubmissionTraceContext is a context whose span is the submission of
// action id, as a remote parent (Background's when there is none): where
// the spans of what happens to an action later (the sweep's, a
// notification's) go, so that they appear in the agent's trace.
func SubmissionTraceContext(ctx context.Context, r Reader, id string) context.Context {
	sc := submissionTraceIn(ctx, r, id)
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// TraceSwept records what a sweep did at now as spans of each action's
// trace: approvals.expire for every expired action, approvals.ticket.open
// for every ticket opened. Nothing with tracing off.
func TraceSwept(ctx context.Context, r Reader, now time.Time, expired []*Action, opened []*Ticket) {
	if !tracing.Enabled() {
		return
	}
	for _, a := range expired {
		_, span := tracing.Start(SubmissionTraceContext(ctx, r, a.ID), "approvals.expire", trace.WithTimestamp(now),
			trace.WithAttributes(actionAttrs(a)...), trace.WithAttributes(attribute.String("approvals.state", string(a.State))))
		span.End(trace.WithTimestamp(now))
	}
	for _, t := range opened {
		_, span := tracing.Start(SubmissionTraceContext(ctx, r, t.ActionID), "approvals.ticket.open", trace.WithTimestamp(now),
			trace.WithAttributes(attribute.String("approvals.ticket.id", t.ID), attribute.String("approvals.ticket.kind", string(t.Kind))))
		if a, err := r.ActionGetByID(ctx, t.ActionID); err == nil {
			span.SetAttributes(actionAttrs(a)...)
		} else {
			span.SetAttributes(attribute.String("approvals.action.id", t.ActionID))
		}
		span.End(trace.WithTimestamp(now))
	}
}
