package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/tracing"
)

// The MCP gateway's side of the domain: a tool with an upstream is executed
// by approvals itself, through an UpstreamCaller (the executor package).
// At-least-once and exactly-once calls run within the submission; approved
// at-most-once calls are claimed by an executor like webhook deliveries.

// UpstreamChannel names the upstream executor in events.
const UpstreamChannel = "upstream"

// UpstreamCaller calls an action's upstream MCP tool once with the action's
// arguments (approved_payload when approved, else payload) and says what
// came of it: done with the CallToolResult, failed (isError, a JSON-RPC
// error, or nothing sent), or unknown. It is bounded by the upstream's own
// timeout, not by ctx, which carries only the trace to continue, and
// never retries.
type UpstreamCaller interface {
	CallUpstream(ctx context.Context, a *Action) Execution
}

// DefaultMaxUpstreamCalls is how many upstream calls submissions make at
// once in a process unless APPROVALS_MAX_UPSTREAM_CALLS says otherwise.
const DefaultMaxUpstreamCalls = 64

// CodeTooManyUpstreamCalls refuses a submission that would call its
// upstream while the process already makes MaxUpstreamCalls such calls:
// 429 with UpstreamRetryAfter, and nothing was done.
const CodeTooManyUpstreamCalls Code = "too_many_upstream_calls"

// UpstreamRetryAfter is the Retry-After of a too_many_upstream_calls answer.
const UpstreamRetryAfter = time.Second

// acquireUpstreamCall takes a slot for an upstream call a submission makes,
// before anything is stored; release gives it back.
func (s *Service) acquireUpstreamCall(tool string) (release func(), err error) {
	select {
	case s.upstreamSlots <- struct{}{}:
		return sync.OnceFunc(func() { <-s.upstreamSlots }), nil
	default:
		return nil, Errorf(CodeTooManyUpstreamCalls, "this server is already making %d upstream calls (its limit, APPROVALS_MAX_UPSTREAM_CALLS); nothing was done for tool %s: retry in a second",
			cap(s.upstreamSlots), tool)
	}
}

// upstreamReady refuses a tool that approvals would have to call upstream
// but cannot now: its upstream is down or no longer lists it, or this
// process has no upstream caller. Nothing is stored before this check.
func (s *Service) upstreamReady(t classify.Tool) error {
	switch {
	case t.Upstream == "":
		return nil
	case t.Unavailable != "":
		return Errorf(CodeUpstreamUnavailable, "tool %s cannot be called now: %s; nothing was done, try again later", t.Name, t.Unavailable)
	case s.opts.Upstream == nil:
		return Errorf(CodeUpstreamUnavailable, "tool %s is executed by upstream %s, and this server has no connection to upstreams; nothing was done", t.Name, t.Upstream)
	}
	return nil
}

// approvableUpstream refuses to approve a pending upstream action that
// could not be executed: its upstream no longer lists the tool, or is down.
// A process whose tools file has no upstream of that name (a command-line
// tool, say) cannot tell, and leaves it to the executors, which never claim
// what they cannot call.
func (s *Service) approvableUpstream(a *Action) error {
	if a.Spec.Upstream == "" || a.State != StatePending {
		return nil
	}
	reg := s.Registry()
	known := false
	for _, u := range reg.Upstreams() {
		known = known || u.Name == a.Spec.Upstream
	}
	if !known {
		return nil
	}
	cur, _ := reg.Lookup(a.Tool)
	if cur.Upstream != a.Spec.Upstream || cur.UpstreamTool != a.Spec.UpstreamTool {
		return &Error{Code: CodeUpstreamUnavailable, Action: a, Detail: fmt.Sprintf(
			"tool %s is no longer upstream %s's tool %s in the tools file, so approving action %s could not execute it; reject it instead",
			a.Tool, a.Spec.Upstream, a.Spec.UpstreamTool, a.ID)}
	}
	if cur.Unavailable != "" {
		return &Error{Code: CodeUpstreamUnavailable, Action: a, Detail: fmt.Sprintf(
			"approving action %s now could not execute it: %s; reject it, or approve it once the upstream lists the tool again", a.ID, cur.Unavailable)}
	}
	return nil
}

// UpstreamTarget names the action's upstream and its tool in events (never
// the upstream's URL, which may carry a credential).
func UpstreamTarget(a *Action) map[string]any {
	return map[string]any{"upstream": a.Spec.Upstream, "upstream_tool": a.Spec.UpstreamTool}
}

// storeTimeout bounds the store writes around an upstream call, which must
// happen once the claim is committed even if the agent has gone away.
const storeTimeout = 10 * time.Second

// callUpstreamNow makes the upstream call of a just created at-least-once
// (recorded) or exactly-once (in_progress, claimed by the dispatcher) action
// and returns the action as the call left it: done or failed, or for an
// exactly-once call whose outcome is unknown, in_progress. The claim was
// committed by the submission, so the call happens at most once; the call
// and its record outlive the agent's request. A failure to record anything
// is logged and leaves the action as it is: an exactly-once claim then
// becomes a stale ticket, an at-least-once action stays recorded.
//
// startRecorded says the submission stored the call's start with the
// action (upstreamStart); otherwise it is recorded here, before the call.
func (s *Service) callUpstreamNow(reqCtx context.Context, a *Action, startRecorded bool) *Action {
	s.upstreamCalls.Add(1)
	defer s.upstreamCalls.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), storeTimeout)
	defer cancel()
	target := UpstreamTarget(a)
	d := NewDispatch(s)
	if !startRecorded {
		if err := d.RecordStart(ctx, a, UpstreamChannel, upstreamStartDetails(a)); err != nil {
			s.log.ErrorContext(reqCtx, "upstream: could not record the start; not calling", "action", a.ID, "err", err)
			return a
		}
	}
	// The call is a span of the submission's trace; ctx carries it to the
	// upstream (_meta traceparent), not the request's end.
	tctx, span := tracing.Start(trace.ContextWithSpan(context.Background(), trace.SpanFromContext(reqCtx)), "approvals.execute",
		trace.WithAttributes(actionAttrs(a)...), trace.WithAttributes(attribute.String("approvals.executor", UpstreamChannel)))
	out := s.opts.Upstream.CallUpstream(tctx, a)
	span.SetAttributes(attribute.String("approvals.outcome", out.Outcome))
	span.End()
	if out.Details == nil {
		out.Details = target
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(reqCtx), storeTimeout)
	defer rcancel()
	var err error
	if a.State == StateRecorded {
		var got *Action
		if got, err = s.recordAtLeastOnce(rctx, a, out); err == nil && got != nil {
			return got // the transition returns the action as it left it
		}
	} else {
		if out.Outcome == ExecutionUnknown {
			s.log.WarnContext(tctx, "upstream: outcome unknown; the action stays in_progress for an operator", "action", a.ID, "details", out.Details)
		}
		// An outcome that is not recorded becomes an operator's question:
		// try again briefly, as the executors do. One the database did not
		// take is kept and written once it answers (ErrOutcomeKept): trying
		// again would keep it twice, and the second write record the
		// answer once more.
		for try := range 3 {
			if try > 0 {
				time.Sleep(time.Duration(try) * time.Second)
			}
			if err = d.Record(rctx, a, UpstreamChannel, out); err == nil || errors.Is(err, ErrOutcomeKept) {
				break
			}
		}
	}
	if errors.Is(err, ErrOutcomeKept) {
		s.log.WarnContext(tctx, "upstream: the outcome is kept until the database answers", "action", a.ID, "outcome", out.Outcome, "err", err)
	} else if err != nil {
		s.log.ErrorContext(tctx, "upstream: could not record the outcome", "action", a.ID, "outcome", out.Outcome, "err", err)
	}
	got, gerr := s.store.ActionGetByID(rctx, a.ID)
	if gerr != nil {
		s.log.WarnContext(tctx, "upstream: read the action after the call", "action", a.ID, "err", gerr)
		return a
	}
	return got
}

// upstreamStartDetails is the data of an upstream call's delivery_started
// event: the target, the attempt and the intent key.
func upstreamStartDetails(a *Action) map[string]any {
	started := maps.Clone(UpstreamTarget(a))
	started["attempt"], started["intent_key"] = a.Attempt, a.IntentKey
	return started
}

// upstreamStart is the delivery_started event of the at-least-once
// upstream call of the new action a, stored with it (every at-least-once
// action is attempt 1, which the statement sets).
func (s *Service) upstreamStart(a *Action) *Event {
	b := *a
	b.Attempt = 1
	data, _ := json.Marshal(upstreamStartDetails(&b))
	ev := Event{Kind: EventDelivery, Actor: DispatcherActor, Channel: UpstreamChannel, At: a.CreatedAt, Data: data}
	ev.Unrouted = s.unrouted(ev, a)
	return &ev
}

// recordAtLeastOnce moves a recorded action to the upstream call's outcome
// (docs/tools-file.md, "Classification"): done with the CallToolResult as result,
// or failed with error set when the tool did not do it (an isError answer
// keeps its CallToolResult as result too). Neither holds the intent, as
// recorded did not: the stores leave at-least-once actions out of
// actions_held_intent whatever their state.
//
// An unknown outcome (a timeout, a lost connection) is failed too, with
// "outcome unknown: ..." as error, not left in_progress for an operator as
// an exactly-once call is: repeating an at-least-once call is harmless by
// definition, so the agent may simply call again.
func (s *Service) recordAtLeastOnce(ctx context.Context, a *Action, out Execution) (*Action, error) {
	now := s.Now()
	info := maps.Clone(out.Details)
	if info == nil {
		info = map[string]any{}
	}
	p := ActionTransitionParams{ID: a.ID, From: []State{StateRecorded}, Now: now, FinishedAt: &now,
		Event: Event{ActionID: a.ID, Kind: EventCompleted, Actor: DispatcherActor, Channel: UpstreamChannel, At: now}}
	switch out.Outcome {
	case ExecutionDone:
		p.To, p.Result = StateDone, out.Result
	case ExecutionFailed, ExecutionUnknown:
		msg := out.Error
		if out.Outcome == ExecutionUnknown {
			msg = "outcome unknown: " + msg
		}
		p.To, p.Error, p.Result = StateFailed, &msg, out.Result
		p.Event.Kind = EventFailed
	default:
		return nil, fmt.Errorf("record upstream call of %s: unknown outcome %q", a.ID, out.Outcome)
	}
	if len(out.Result) > 0 {
		info["result"] = out.Result
	}
	if out.Error != "" {
		info["error"] = out.Error
	}
	p.Event.Data, _ = json.Marshal(info)
	// Routed like every outcome: channels that listen for action.done or
	// action.failed hear of it.
	p.Event.Unrouted = s.unrouted(p.Event, a)
	got, err := s.store.ActionTransition(ctx, p)
	if errors.Is(err, ErrStateMismatch) {
		return nil, fmt.Errorf("record upstream call of %s: %w", a.ID, err)
	}
	return got, err
}
