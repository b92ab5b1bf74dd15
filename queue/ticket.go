package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/tracing"
)

// ResolveRequest is an operator's finding on a ticket.
type ResolveRequest struct {
	TicketID string
	By       string // user:EMAIL
	Outcome  State  // done or failed
	Result   json.RawMessage
	Note     string
}

// Resolve records an operator's finding. For a stale ticket the
// action moves to the outcome; a conflict ticket changes no state.
func (ts Tickets) Resolve(ctx context.Context, r ResolveRequest) (*Action, *Ticket, error) {
	s := ts.s
	if !tracing.Enabled() {
		return s.resolveTicket(ctx, r)
	}
	ctx, span := tracing.Start(ctx, "approvals.ticket.resolve",
		trace.WithAttributes(attribute.String("approvals.ticket.id", r.TicketID),
			attribute.String("approvals.outcome", string(r.Outcome)), attribute.String("enduser.id", r.By)))
	a, t, err := s.resolveTicket(ctx, r)
	if a != nil {
		span.SetAttributes(actionAttrs(a)...)
		span.SetAttributes(attribute.String("approvals.state", string(a.State)))
		// The operator's finding, linked to the agent's submission.
		if sc := s.submissionTrace(ctx, a.ID); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	if t != nil {
		span.SetAttributes(attribute.String("approvals.ticket.kind", string(t.Kind)))
	}
	endSpan(span, err)
	return a, t, err
}

func (s *Service) resolveTicket(ctx context.Context, r ResolveRequest) (*Action, *Ticket, error) {
	if strings.TrimSpace(string(r.Result)) == "" {
		r.Result = nil // no result given: not an empty, invalid JSON document
	}
	note := strings.TrimSpace(r.Note)
	if err := checkResolution(r.Outcome, note, r.Result); err != nil {
		// A ticket that is no longer open answers 409 whatever the form
		// said: the operator needs to know someone else resolved it.
		if t, terr := s.store.TicketGetByID(ctx, r.TicketID); terr == nil && t.State != TicketOpen {
			a, _ := s.store.ActionGetByID(ctx, t.ActionID)
			return a, t, ticketResolved(a, t)
		}
		return nil, nil, err
	}
	res, err := s.store.TicketResolve(ctx, TicketResolveParams{TicketID: r.TicketID, Now: s.Now(), By: r.By,
		Outcome: r.Outcome, Result: r.Result, Note: note})
	a, t := res.Action, res.Ticket
	if errors.Is(err, ErrTicketNotOpen) {
		return a, t, ticketResolved(a, t)
	}
	if err == nil {
		s.ticketResolvedBy(r.By)
	}
	return a, t, err
}

func checkResolution(outcome State, note string, result json.RawMessage) error {
	if outcome != StateDone && outcome != StateFailed {
		return Errorf(CodeInvalidRequest, "outcome must be done or failed")
	}
	if note == "" {
		return Errorf(CodeInvalidRequest, "note: say what you checked in the external system")
	}
	if len(result) > 0 {
		if _, ok := decodeValue(result); !ok {
			return Errorf(CodeInvalidRequest, "result must be JSON")
		}
	}
	return nil
}

func ticketResolved(a *Action, t *Ticket) error {
	by := "someone"
	if t.ResolvedBy != nil {
		by = *t.ResolvedBy
	}
	return &Error{Code: CodeTicketResolved, Action: a, Detail: fmt.Sprintf("ticket %s was already resolved by %s at %s", t.ID, by, fmtTime(t.ResolvedAt))}
}

// ChannelDashboard is the channel of what a person does on the dashboard.
const ChannelDashboard = "dashboard"

// TicketResolution is what resolving a ticket writes, as
// PlanTicketResolution computes it from the locked action and ticket:
// the one rule of resolving, which every store applies as it is.
type TicketResolution struct {
	// Move is the action's new state when the finding on a stale ticket
	// moves it out of in_progress ("" when it stays: a conflict ticket, or
	// an action a late report finished meanwhile), with its Result (done)
	// or Error (failed).
	Move   State
	Result json.RawMessage
	Error  *string
	// Events are written in this order: the outcome event of a Move (the
	// same as an agent's report: it notifies action.done/failed), then
	// ticket_resolved.
	Events []Event
}

// PlanTicketResolution is the rule of resolving ticket t of action a with
// the finding p, applied by every store with a's row and then t's locked
// (the one lock order). ErrTicketNotOpen: someone resolved it first.
func PlanTicketResolution(a *Action, t *Ticket, p TicketResolveParams) (TicketResolution, error) {
	if p.Outcome != StateDone && p.Outcome != StateFailed {
		return TicketResolution{}, fmt.Errorf("resolve ticket %s: outcome %q is neither done nor failed", t.ID, p.Outcome)
	}
	if t.State != TicketOpen {
		return TicketResolution{}, ErrTicketNotOpen
	}
	channel := p.Channel
	if channel == "" {
		channel = ChannelDashboard
	}
	var plan TicketResolution
	if t.Kind == TicketStale && a.State == StateInProgress {
		plan.Move = p.Outcome
		if p.Outcome == StateDone {
			plan.Result = p.Result
		} else {
			e := OperatorError(p.Note)
			if channel == ChannelVerifier {
				e = "resolved by verifier: " + p.Note
			}
			plan.Error = &e
		}
		plan.Events = append(plan.Events, Event{ActionID: a.ID, Kind: OutcomeEventKind(p.Outcome), Actor: p.By,
			Channel: channel, At: p.Now, Data: TicketEventData(t.ID, t.Kind, "", "", nil)})
	}
	plan.Events = append(plan.Events, Event{ActionID: a.ID, Kind: EventTicketResolved, Actor: p.By,
		Channel: channel, At: p.Now, Data: TicketEventData(t.ID, t.Kind, p.Outcome, p.Note, p.Result)})
	return plan, nil
}

// StaleResolution is what a transition that settles an action writes to
// its open stale ticket, if any (ActionTransitionParams.ResolveStale), as
// LateResolution computes it: the one rule of a late report resolving the
// ticket, which every store writes as it is.
type StaleResolution struct {
	// By is the ticket's resolved_by and its ticket_resolved event's actor.
	By string
	// At is the ticket's resolved_at and the event's time.
	At time.Time
	// Channel is the event's channel.
	Channel string
	// Outcome and Note are the ticket's.
	Outcome State
	Note    string
	// Data is the ticket_resolved event's data without the ticket's id
	// ("ticket"), which only the store knows: it adds it.
	Data json.RawMessage
}

// LateResolution is the rule of a late report resolving the action's open
// stale ticket: report (the transition's outcome event) settles the action
// as outcome (done or failed), so its actor resolves the ticket at its
// time, on its channel, with that outcome and note, which says what
// settled it (LateReportNote for the agent's own report, VerifiedNote for
// a verifier's proof).
func LateResolution(report Event, outcome State, note string) *StaleResolution {
	return &StaleResolution{By: report.Actor, At: report.At, Channel: report.Channel, Outcome: outcome, Note: note,
		Data: TicketEventData("", TicketStale, outcome, note, nil)}
}

// Who resolved a ticket: the values of approvals_tickets_resolved_total{by}.
const (
	// ResolvedByVerifier: a verifier's proof (actor verifier:TOOL).
	ResolvedByVerifier = "verifier"
	// ResolvedByOperator: a person's finding (actor user:EMAIL).
	ResolvedByOperator = "operator"
	// ResolvedByAgent: the action's own late report, the agent's or its
	// webhook's answer, resolving the stale ticket it was waited for by.
	ResolvedByAgent = "agent"
)

// ticketResolvedBy counts one resolution that committed, made by actor.
func (s *Service) ticketResolvedBy(actor string) {
	if s.opts.OnTicketResolved == nil {
		return
	}
	by := ResolvedByAgent
	switch {
	case strings.HasPrefix(actor, "verifier:"):
		by = ResolvedByVerifier
	case strings.HasPrefix(actor, "user:"):
		by = ResolvedByOperator
	}
	s.opts.OnTicketResolved(by)
}

// noteStaleTicketResolved counts the stale ticket that transition p
// resolved, when it resolved one: p moved a (its answer) out of
// in_progress, and an action has at most one stale ticket (its
// resolution, or a report, ends the claim it was opened for), so a stale
// ticket a's answer shows resolved by p's resolver is the one p resolved.
func (s *Service) noteStaleTicketResolved(p ActionTransitionParams, a *Action) {
	r := p.ResolveStale
	if r == nil || a == nil || a.Ticket == nil {
		return
	}
	t := a.Ticket
	if t.Kind == TicketStale && t.State == TicketResolved && t.ResolvedBy != nil && *t.ResolvedBy == r.By {
		s.ticketResolvedBy(r.By)
	}
}
