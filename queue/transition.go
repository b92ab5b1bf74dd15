package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// refusal says why a drive call by agent may not touch a: it is another
// agent's action, or (when agentExecuted) one a server executor performs.
// nil when only a's state is at issue. The transitions themselves carry
// the same conditions, so a drive call costs one statement; this only
// explains a mismatch.
func refusal(a *Action, agent, what string, agentExecuted bool) error {
	if a.Agent() != agent {
		return &Error{Code: CodeForbidden, Detail: fmt.Sprintf("action %s was submitted by %s; only that agent may drive it", a.ID, a.RequestedBy)}
	}
	if agentExecuted && a.ServerExecuted() {
		return webhookOnly(a, what)
	}
	return nil
}

func invalidTransition(a *Action, what string) error {
	return &Error{Code: CodeInvalidTransition, Action: a,
		Detail: fmt.Sprintf("cannot %s action %s: it is %s", what, a.ID, a.State)}
}

func webhookOnly(a *Action, what string) error {
	executor := "a webhook executor"
	if a.Spec.Upstream != "" {
		executor = fmt.Sprintf("its call made by approvals on upstream %s", a.Spec.Upstream)
	}
	return &Error{Code: CodeInvalidTransition, Action: a,
		Detail: fmt.Sprintf("cannot %s action %s: tool %s has %s, so only the dispatcher and operators finish it", what, a.ID, a.Tool, executor)}
}

// DriveResult is the outcome of a drive call.
type DriveResult struct {
	Action   *Action
	Replayed bool // the call repeated one that already succeeded
}

// Execute hands an approved at-most-once action to its agent, once.
func (s *Service) Execute(ctx context.Context, id, agent, channel string) (*Action, error) {
	// The claim deadline needs the tool's claim_timeout, so Execute reads
	// the action first; the transition still carries every condition.
	a, err := s.store.ActionGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := refusal(a, agent, "execute", false); err != nil {
		return nil, err
	}
	if !a.Gated() {
		return nil, &Error{Code: CodeInvalidTransition, Action: a, Detail: fmt.Sprintf("execute is for actions that an approval gates (at-most-once, or exactly-once sent to a person by a policy rule); %s is %s, claimed or recorded at its submission", a.ID, a.Class)}
	}
	if a.ServerExecuted() {
		return nil, webhookOnly(a, "execute")
	}
	guard, err := s.driveGuard(ctx)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	by := "agent:" + agent
	deadline := now.Add(a.Spec.ClaimTimeout)
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: id, From: []State{StateApproved}, To: StateInProgress, Now: now, Unexpired: true,
		RequestedBy: by, AgentExecuted: true, TokenHash: guard,
		ClaimedAt: &now, ClaimedBy: &by, ClaimDeadline: &deadline,
		Event: Event{ActionID: id, Kind: EventClaimed, Actor: by, Channel: channel, At: now},
	})
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "execute", true); err != nil {
			return nil, err
		}
		switch got.State {
		case StateInProgress:
			return nil, &Error{Code: CodeInProgress, Action: got, Detail: fmt.Sprintf("action %s is already being executed (claimed at %s); this is not permission to send", got.ID, fmtTime(got.ClaimedAt))}
		case StateApproved: // past its expiry
			if exp, err := s.expireOne(ctx, got, StateApproved); err == nil {
				got = exp
			}
			return nil, &Error{Code: CodeInvalidTransition, Action: got, Detail: fmt.Sprintf("the approval of action %s expired at %s; submit the intent again", got.ID, fmtTime(got.ExpiresAt))}
		}
		return nil, invalidTransition(got, "execute")
	}
	return got, err
}

// expireOne expires a single action that is due, as the sweep would.
func (s *Service) expireOne(ctx context.Context, a *Action, from State) (*Action, error) {
	now := s.Now()
	ev := SystemEvent(EventExpired, now)
	ev.ActionID = a.ID
	p := ActionTransitionParams{ID: a.ID, From: []State{from}, To: StateExpired, Now: now, FinishedAt: &now, Event: ev}
	if from == StatePending {
		p.DecidedBy, p.DecidedAt = &ev.Actor, &now
	}
	if a.ExpiresAt == nil || a.ExpiresAt.After(now) {
		return a, fmt.Errorf("action %s is not due", a.ID)
	}
	return s.store.ActionTransition(ctx, p)
}

// Complete records the effect's result: in_progress → done. When the
// database does not answer, the report is kept and written once it does
// (OutcomeKeepFor), and the caller is still answered unavailable: its
// report, tried again, is answered as a replay.
func (s *Service) Complete(ctx context.Context, id, agent string, result json.RawMessage, channel string) (DriveResult, error) {
	res, err := s.complete(ctx, id, agent, result, channel)
	s.keepUnwritten(ctx, err, id, "complete", func(ctx context.Context) error {
		_, err := s.complete(ctx, id, agent, result, channel)
		return err
	})
	return res, err
}

func (s *Service) complete(ctx context.Context, id, agent string, result json.RawMessage, channel string) (DriveResult, error) {
	guard, err := s.driveGuard(ctx)
	if err != nil {
		return DriveResult{}, err
	}
	now := s.Now()
	by := "agent:" + agent
	p := ActionTransitionParams{
		ID: id, From: []State{StateInProgress}, To: StateDone, Now: now, Result: result, FinishedAt: &now,
		RequestedBy: by, TokenHash: guard, AgentExecuted: true,
		Event: Event{ActionID: id, Kind: EventCompleted, Actor: by, Channel: channel, At: now, Data: result,
			Unrouted: s.unrouted(Event{Kind: EventCompleted}, nil)},
	}
	p.ResolveStale = LateResolution(p.Event, p.To, LateReportNote)
	got, err := s.store.ActionTransition(ctx, p)
	if err == nil {
		s.noteStaleTicketResolved(p, got)
	}
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "complete", true); err != nil {
			return DriveResult{}, err
		}
		switch {
		case got.State == StateDone && JSONEqual(got.Result, result):
			return DriveResult{Action: got, Replayed: true}, nil
		case got.State == StateDone || got.State == StateFailed:
			return DriveResult{}, s.outcomeConflict(ctx, got, by, channel, "complete", map[string]any{"result": result})
		}
		return DriveResult{}, invalidTransition(got, "complete")
	}
	return DriveResult{Action: got}, err
}

// Fail records a definite non-effect: in_progress → failed, releasing the
// intent. Like Complete, it is kept when the database does not answer.
func (s *Service) Fail(ctx context.Context, id, agent, errText, channel string) (DriveResult, error) {
	res, err := s.fail(ctx, id, agent, errText, channel)
	s.keepUnwritten(ctx, err, id, "fail", func(ctx context.Context) error {
		_, err := s.fail(ctx, id, agent, errText, channel)
		return err
	})
	return res, err
}

func (s *Service) fail(ctx context.Context, id, agent, errText, channel string) (DriveResult, error) {
	guard, err := s.driveGuard(ctx)
	if err != nil {
		return DriveResult{}, err
	}
	now := s.Now()
	by := "agent:" + agent
	data, _ := json.Marshal(map[string]string{"error": errText})
	p := ActionTransitionParams{
		ID: id, From: []State{StateInProgress}, To: StateFailed, Now: now, Error: &errText, FinishedAt: &now,
		RequestedBy: by, TokenHash: guard, AgentExecuted: true,
		Event: Event{ActionID: id, Kind: EventFailed, Actor: by, Channel: channel, At: now, Data: data,
			Unrouted: s.unrouted(Event{Kind: EventFailed}, nil)},
	}
	p.ResolveStale = LateResolution(p.Event, p.To, LateReportNote)
	got, err := s.store.ActionTransition(ctx, p)
	if err == nil {
		s.noteStaleTicketResolved(p, got)
	}
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "fail", true); err != nil {
			return DriveResult{}, err
		}
		switch got.State {
		case StateFailed:
			return DriveResult{Action: got, Replayed: true}, nil
		case StateDone:
			return DriveResult{}, s.outcomeConflict(ctx, got, by, channel, "fail", map[string]any{"error": errText})
		}
		return DriveResult{}, invalidTransition(got, "fail")
	}
	return DriveResult{Action: got}, err
}

// outcomeConflict keeps a contradicting report in the timeline and opens a
// conflict ticket: it may mean an effect happened twice.
func (s *Service) outcomeConflict(ctx context.Context, a *Action, by, channel, report string, data map[string]any) error {
	now := s.Now()
	data["report"] = report
	data["stored_state"] = a.State
	raw, _ := json.Marshal(data)
	if _, err := s.store.TicketOpenConflict(ctx, TicketOpenConflictParams{ActionID: a.ID, Now: now,
		Event: Event{ActionID: a.ID, Kind: EventOutcomeConflict, Actor: by, Channel: channel, At: now, Data: raw}}); err != nil {
		return err
	}
	if fresh, err := s.store.ActionGetByID(ctx, a.ID); err == nil {
		a = fresh
	}
	return &Error{Code: CodeOutcomeConflict, Action: a,
		Detail: fmt.Sprintf("action %s is already %s; this %s report contradicts it and was recorded, and an operator ticket is open: the effect may have happened twice", a.ID, a.State, report)}
}

// Cancel withdraws a pending or approved action before execution.
func (s *Service) Cancel(ctx context.Context, id, agent, channel string) (DriveResult, error) {
	guard, err := s.driveGuard(ctx)
	if err != nil {
		return DriveResult{}, err
	}
	now := s.Now()
	by := "agent:" + agent
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: id, From: []State{StatePending, StateApproved}, To: StateCancelled, Now: now,
		RequestedBy: by, TokenHash: guard, DecidedBy: &by, DecidedAt: &now, FinishedAt: &now,
		Event: Event{ActionID: id, Kind: EventCancelled, Actor: by, Channel: channel, At: now},
	})
	if errors.Is(err, ErrStateMismatch) {
		if err := refusal(got, agent, "cancel", false); err != nil {
			return DriveResult{}, err
		}
		if got.State == StateCancelled && got.DecidedBy != nil && *got.DecidedBy == by {
			return DriveResult{Action: got, Replayed: true}, nil
		}
		return DriveResult{}, invalidTransition(got, "cancel")
	}
	return DriveResult{Action: got}, err
}
