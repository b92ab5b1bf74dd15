// Package executor performs approved actions on the outside world: the
// webhook dispatcher and the MCP upstream executor. Every executor takes
// the same three steps through queue.Dispatch: claim the approved action
// (committed before anything is sent), call once, record the outcome. The
// domain rules (states, expiry, contradicting outcomes) stay in queue; what
// a call looks like on the wire lives here.
package executor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// Call is one executor's way of performing an action.
type Call interface {
	// Channel names the executor in events ("webhook").
	Channel() string
	// Target describes where the action goes, for the claim and start
	// events (never a credential).
	Target(a *queue.Action) map[string]any
	// Do performs the claimed action once and says what came of it. It is
	// bounded by its own timeout, not by the caller's context: a call
	// under way finishes during shutdown. ctx carries only the trace the
	// call continues.
	Do(ctx context.Context, a *queue.Action) queue.Execution
}

const storeTimeout = 10 * time.Second

// failoverTimeout bounds the reading back of an ambiguous claim or start
// record: a failover of up to a minute.
const failoverTimeout = time.Minute

// detached is a context for work that must finish once begun (a claim, a
// call, its outcome), even while the server shuts down.
func detached(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// execute claims a unless worker has ended; once claimed, a is performed
// by c and its outcome recorded whatever happens to worker. onOutcome, when
// not nil, sees the outcome before it is visible in the store.
func execute(worker context.Context, svc *queue.Dispatch, log *slog.Logger, c Call, wants func(*queue.Action) bool, a *queue.Action, onOutcome func(string)) {
	// A claim that fails ambiguously (the primary died after the commit
	// was sent) is read back until the database answers, for as long as a
	// failover may take: with a store call's 10 s, a claim sent just
	// before the primary died ran out before the standby took over,
	// leaving a committed claim that nothing performs (a ticket).
	ctx, cancel := detached(failoverTimeout)
	defer cancel()
	// Checked as late as possible: a shutdown that began while this
	// goroutine waited to run claims nothing.
	if worker.Err() != nil {
		return
	}
	got, err := svc.Claim(ctx, a, c.Channel(), c.Target(a))
	switch {
	case errors.Is(err, queue.ErrStateMismatch):
		return // another process claimed it, or its approval expired
	case err != nil:
		log.Warn("executor: claim", "action", a.ID, "err", err)
		return
	}
	a = got
	if !wants(a) || a.ApprovedPayload == nil {
		// Cannot happen for an approved action of this executor; refuse to guess.
		log.Error("executor: claimed action is not this executor's or has no approved payload; leaving it for an operator", "action", a.ID, "executor", c.Channel())
		return
	}
	started := c.Target(a)
	started["attempt"], started["idempotency_key"] = a.Attempt, a.IntentKey
	// The start record may fail ambiguously (a failover): RecordStart reads
	// it back for as long as a failover may take, and the call is made
	// only once the record is known to exist.
	sctx, scancel := detached(failoverTimeout)
	err = svc.RecordStart(sctx, a, c.Channel(), started)
	scancel()
	if err != nil {
		// Nothing was sent, and nothing will be: the claim stays and
		// becomes a ticket, whose timeline shows no call started.
		log.Error("executor: could not record the start; not calling", "action", a.ID, "err", err)
		return
	}
	// The execution is a span of the agent's trace, whichever process
	// submitted the action.
	tctx, span := tracing.Start(svc.TraceContext(ctx, a), "approvals.execute",
		trace.WithAttributes(attribute.String("approvals.action.id", a.ID), attribute.String("gen_ai.tool.name", a.Tool),
			attribute.String("approvals.tool.class", string(a.Class)), attribute.String("approvals.intent_key", a.IntentKey),
			attribute.Int("approvals.attempt", a.Attempt), attribute.String("approvals.executor", c.Channel())))
	out := c.Do(tctx, a)
	span.SetAttributes(attribute.String("approvals.outcome", out.Outcome))
	if out.Outcome != queue.ExecutionDone {
		span.SetStatus(codes.Error, "")
	}
	span.End()
	if out.Outcome == queue.ExecutionUnknown {
		log.WarnContext(tctx, "executor: outcome unknown", "action", a.ID, "details", out.Details)
	}
	if onOutcome != nil {
		onOutcome(out.Outcome)
	}
	record(tctx, svc, log, c.Channel(), a, out)
}

// record stores the outcome. When the database does not answer, the
// domain keeps the outcome and writes it once it does (queue.OutcomeKeepFor),
// so a failover does not turn an answered delivery into a ticket. Its log
// lines name the execution's trace (tctx).
func record(tctx context.Context, svc *queue.Dispatch, log *slog.Logger, channel string, a *queue.Action, out queue.Execution) {
	ctx, cancel := detached(storeTimeout)
	defer cancel()
	ctx = trace.ContextWithSpan(ctx, trace.SpanFromContext(tctx))
	err := svc.Record(ctx, a, channel, out)
	switch {
	case errors.Is(err, queue.ErrOutcomeKept):
		log.WarnContext(ctx, "executor: outcome kept until the database answers", "action", a.ID, "outcome", out.Outcome, "err", err)
	case err != nil:
		log.ErrorContext(ctx, "executor: the outcome could not be recorded; the action becomes a ticket after its claim_timeout",
			"action", a.ID, "outcome", out.Outcome, "details", out.Details, "err", err)
	}
}
