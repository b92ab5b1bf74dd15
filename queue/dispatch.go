package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
)

// DispatcherActor is the claimed_by and the actor of the events of the
// server's own executors.
const DispatcherActor = "dispatcher"

// Execution outcomes, as an executor reports them.
const (
	// ExecutionDone: the receiver said it acted.
	ExecutionDone = "done"
	// ExecutionFailed: the receiver said it did not act.
	ExecutionFailed = "failed"
	// ExecutionUnknown: no answer that says either; the action stays
	// in_progress and becomes a ticket after its claim_timeout.
	ExecutionUnknown = "unknown"
)

// Execution is what one call of an executor came to.
type Execution struct {
	Outcome string          // ExecutionDone, ExecutionFailed or ExecutionUnknown
	Result  json.RawMessage // for done: the result to store, storable JSON
	Error   string          // for failed: why, in words
	// Details go into the outcome's event (status, an excerpt of the
	// answer, ...).
	Details map[string]any
}

// Dispatch is the domain's side of the server's executors (the webhook
// dispatcher and the MCP upstream executor): the approved actions they may
// claim, and the steps they take with one: claim it, record that the call
// started, call the outside world, record the outcome. The executor owns
// the call; the rules about states, expiry and contradicting outcomes stay
// here.
type Dispatch struct{ s *Service }

// NewDispatch returns the executors' side of svc.
func NewDispatch(svc *Service) *Dispatch { return &Dispatch{s: svc} }

// Approved returns approved actions that a server executor performs
// (webhook or MCP upstream), oldest first, after the given position: what
// the executors offer to claim.
func (d *Dispatch) Approved(ctx context.Context, after *Cursor, limit int) ([]*Action, error) {
	return d.s.store.ActionList(ctx, ActionListParams{State: StateApproved, ServerExecuted: true, Oldest: true, After: after, Limit: limit})
}

// Action reads one action as it is now.
func (d *Dispatch) Action(ctx context.Context, id string) (*Action, error) {
	return d.s.store.ActionGetByID(ctx, id)
}

// Subscribe delivers a Change for every state change made through any
// process sharing the database, until the subscription is cancelled.
func (d *Dispatch) Subscribe() Subscription { return d.s.store.Subscribe() }

// SubscribeApprovedAtSubmission delivers a Change for every action this
// process's submissions stored already approved (by a rule, a grant or a
// plan) for a server executor: no state change announces those.
func (d *Dispatch) SubscribeApprovedAtSubmission() Subscription {
	return d.s.approvedAtSubmission.Subscribe()
}

// Registry returns the tools in force.
func (d *Dispatch) Registry() *classify.Registry { return d.s.Registry() }

// Claim moves an approved action to in_progress for an executor
// of the given channel, with details in the claimed event. The claim is
// committed before it returns, so an executor that calls out only after
// it never calls twice. Losing the race to another process, or finding the
// approval expired (the action is then expired, as the sweep would),
// answers an error wrapping ErrStateMismatch with the current action.
func (d *Dispatch) Claim(ctx context.Context, a *Action, channel string, details map[string]any) (*Action, error) {
	s := d.s
	now := s.Now()
	by := DispatcherActor
	deadline := now.Add(a.Spec.ClaimTimeout)
	info := maps.Clone(details)
	if info == nil {
		info = map[string]any{}
	}
	info["claim_deadline"] = deadline
	data, _ := json.Marshal(info)
	got, err := s.store.ActionTransition(ctx, ActionTransitionParams{
		ID: a.ID, From: []State{StateApproved}, To: StateInProgress, Now: now, Unexpired: true,
		ClaimedAt: &now, ClaimedBy: &by, ClaimDeadline: &deadline,
		Event: Event{ActionID: a.ID, Kind: EventClaimed, Actor: by, Channel: channel, At: now, Data: data},
	})
	if transient(err) {
		// The claim may have committed before the connection broke (a
		// failover): read the action back until the database answers.
		// Claimed at this claim's own time by the dispatcher, it is ours
		// to perform; left claimed and never sent it would become a ticket.
		if back, ok := d.readBackClaim(ctx, a.ID, now); ok {
			return back, nil
		}
	}
	if errors.Is(err, ErrStateMismatch) && got != nil && got.State == StateApproved {
		// Its approval expired before the executor came to it.
		if exp, xerr := s.expireOne(ctx, got, StateApproved); xerr == nil {
			s.log.Info("executor: approval expired before execution", "action", a.ID)
			got = exp
		}
	}
	return got, err
}

// readBackClaim reads action id until the database answers or ctx ends,
// and returns it when it holds the claim made at claimedAt.
func (d *Dispatch) readBackClaim(ctx context.Context, id string, claimedAt time.Time) (*Action, bool) {
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 2*time.Second) {
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(wait):
		}
		a, err := d.s.store.ActionGetByID(ctx, id)
		if err != nil {
			continue
		}
		ours := a.State == StateInProgress && a.ClaimedAt != nil && a.ClaimedAt.Equal(claimedAt) &&
			a.ClaimedBy != nil && *a.ClaimedBy == DispatcherActor
		return a, ours
	}
}

// RecordStart writes ahead that the call of a claimed action
// starts, so the actions with a delivery event and no outcome are exactly
// the unknown ones. When it fails the executor must not call.
//
// A failed insert may still have committed (the connection broke after
// the commit was sent, a failover): RecordStart then reads the timeline
// back until the database answers, and writes the record again only when
// it is not there, so the executor calls exactly when the record exists.
// It gives up (and the executor does not call) only when ctx ends.
func (d *Dispatch) RecordStart(ctx context.Context, a *Action, channel string, details map[string]any) error {
	s := d.s
	data, _ := json.Marshal(details)
	ev := Event{ActionID: a.ID, Kind: EventDelivery, Actor: DispatcherActor, Channel: channel, At: s.Now(), Data: data}
	err := s.store.EventInsert(ctx, ev)
	for wait := 100 * time.Millisecond; err != nil; wait = min(wait*2, 2*time.Second) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("record the start of %s: %w", a.ID, err)
		case <-time.After(wait):
		}
		evs, lerr := s.store.EventList(ctx, EventListParams{ActionID: a.ID, Kind: EventDelivery, Limit: 100})
		if lerr != nil {
			continue // still away: read again
		}
		if slices.ContainsFunc(evs, func(e Event) bool { return e.At.Equal(ev.At) && e.Actor == ev.Actor }) {
			return nil // it had committed
		}
		err = s.store.EventInsert(ctx, ev)
	}
	return nil
}

// Record stores the outcome of a claimed action's call: done or
// failed with one conditional update, or for an unknown outcome an event
// only (the action stays in_progress and the sweep turns it into a ticket
// after claim_timeout). When someone settled the action first, the
// executor's answer is kept on record, and an answer that contradicts the
// stored outcome opens a conflict ticket.
//
// When the database does not answer, the outcome is kept and written once
// it does (OutcomeKeepFor); the error says so (ErrOutcomeKept).
func (d *Dispatch) Record(ctx context.Context, a *Action, channel string, out Execution) error {
	err := d.record(ctx, a, channel, out)
	if transient(err) {
		d.s.keepUnwritten(ctx, err, a.ID, channel+" "+out.Outcome, func(ctx context.Context) error {
			return d.record(ctx, a, channel, out)
		})
		return fmt.Errorf("%w: %w", ErrOutcomeKept, err)
	}
	return err
}

// ErrOutcomeKept says an outcome was not written yet but is kept, and
// written once the database answers again.
var ErrOutcomeKept = errors.New("outcome kept in memory until the database answers")

func (d *Dispatch) record(ctx context.Context, a *Action, channel string, out Execution) error {
	s := d.s
	now := s.Now()
	info := maps.Clone(out.Details)
	if info == nil {
		info = map[string]any{}
	}
	p := ActionTransitionParams{ID: a.ID, From: []State{StateInProgress}, Now: now, FinishedAt: &now}
	switch out.Outcome {
	case ExecutionDone:
		info["result"] = out.Result
		p.To, p.Result = StateDone, out.Result
		p.Event = Event{ActionID: a.ID, Kind: EventCompleted, Actor: DispatcherActor, Channel: channel, At: now}
	case ExecutionFailed:
		msg := out.Error
		p.To, p.Error = StateFailed, &msg
		p.Event = Event{ActionID: a.ID, Kind: EventFailed, Actor: DispatcherActor, Channel: channel, At: now}
	case ExecutionUnknown:
		info["outcome"] = "unknown: the action stays in_progress, is never re-sent, and becomes a ticket after claim_timeout"
		data, _ := json.Marshal(info)
		return s.store.EventInsert(ctx, Event{ActionID: a.ID, Kind: EventDeliveryResult, Actor: DispatcherActor,
			Channel: channel, At: now, Data: data})
	default:
		return fmt.Errorf("record execution of %s: unknown outcome %q", a.ID, out.Outcome)
	}
	p.Event.Data, _ = json.Marshal(info)
	p.Event.Unrouted = s.unrouted(p.Event, a)
	// The webhook's answer is the agent's report, made by the dispatcher.
	p.ResolveStale = LateResolution(p.Event, p.To, LateReportNote)
	got, err := s.store.ActionTransition(ctx, p)
	if err == nil {
		s.noteStaleTicketResolved(p, got)
	}
	if errors.Is(err, ErrStateMismatch) && got != nil {
		// Someone settled it first: an operator after a ticket, which the
		// executor timeout (shorter than claim_timeout) should prevent.
		// Keep the receiver's answer on record, and flag a contradiction:
		// another state, or done with another result.
		if got.State == p.To && (p.To != StateDone || JSONEqual(got.Result, p.Result)) {
			return s.store.EventInsert(ctx, Event{ActionID: a.ID, Kind: EventDeliveryResult, Actor: DispatcherActor,
				Channel: channel, At: now, Data: p.Event.Data})
		}
		info["report"], info["stored_state"] = out.Outcome, got.State
		data, _ := json.Marshal(info)
		_, err = s.store.TicketOpenConflict(ctx, TicketOpenConflictParams{ActionID: a.ID, Now: now, Event: Event{
			ActionID: a.ID, Kind: EventOutcomeConflict, Actor: DispatcherActor, Channel: channel, At: now, Data: data}})
		return err
	}
	return err
}

// MaxResultBody caps the answer an executor stores: a webhook's response,
// an upstream's CallToolResult.
const MaxResultBody = 64 << 10

// ResultOf is what an executor stores as an action's result from an answer
// body: JSON as it is, anything else (or a body over MaxResultBody, or JSON
// that PostgreSQL's jsonb cannot hold) as {"body": "<text>"}, cut at
// MaxResultBody.
func ResultOf(body []byte) json.RawMessage {
	if len(body) <= MaxResultBody && json.Valid(body) {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil && RefuseNUL(v, "") == nil {
			// Re-encoding replaces invalid UTF-8 and lone surrogates, which
			// jsonb refuses.
			if b, err := json.Marshal(v); err == nil {
				return b
			}
		}
	}
	b, _ := json.Marshal(map[string]string{"body": Excerpt(body, MaxResultBody)})
	return b
}

// Excerpt returns at most n bytes of b as valid UTF-8 text without NUL
// characters, which jsonb cannot hold.
func Excerpt(b []byte, n int) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
