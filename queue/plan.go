package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

// A plan is one human decision for a piece of work: an agent lists the
// exact steps (tool, payload, intent key), each judged by its tool's policy
// rules; a person approves the whole once, and each step is then submitted
// as an ordinary action naming the plan, let through only if it equals an
// unused step, and performed as its class says, once.

// PlanState is a plan's state. Pending, approved, rejected,
// changes_requested, cancelled and expired are stored: the sweep writes
// the expiry of a pending plan, or an approved one not done, once its
// window has ended (PlanExpireDue). Done is what an approved plan is when
// every step's action is finished, computed on every read (Plan.Settle,
// and the stores' lists by state); so is the expiry of a plan whose window
// ended since the last sweep.
type PlanState string

const (
	PlanPending          PlanState = "pending"
	PlanApproved         PlanState = "approved"
	PlanRejected         PlanState = "rejected"
	PlanChangesRequested PlanState = "changes_requested"
	PlanCancelled        PlanState = "cancelled"
	PlanExpired          PlanState = "expired"
	PlanDone             PlanState = "done"
)

// Step decisions: what the step's tool's rules make of it.
const (
	StepApprove = "approve" // an approve rule
	StepHuman   = "human"   // a person decides (a human rule, no rule on a gated tool, or a warning)
	StepReject  = "reject"  // a reject rule: the plan is rejected at once
	StepNone    = "none"    // nobody needs to (at-least-once, exactly-once with no matching rule)
)

// Limits of a plan.
const (
	MaxPlanSteps      = 50
	MaxPlanExpiry     = 7 * 24 * time.Hour
	DefaultPlanExpiry = 24 * time.Hour
	// PlanChannel is the channel of a plan's decisions of its steps'
	// actions; PlanActorPrefix + ID decides them.
	PlanChannel     = "plan"
	PlanActorPrefix = "plan:"
)

// Plan is a piece of work an agent asks one decision for.
type Plan struct {
	ID        string    `json:"id"`
	State     PlanState `json:"state"`
	Title     string    `json:"title"`
	Agent     string    `json:"agent"` // agent:NAME
	Ordered   bool      `json:"ordered"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// ApprovalsRequired is the largest required of its human steps.
	ApprovalsRequired int         `json:"approvals_required"`
	Approvals         []Approval  `json:"approvals"`
	DecidedBy         *string     `json:"decided_by"`
	DecidedAt         *time.Time  `json:"decided_at"`
	DecisionNote      *string     `json:"decision_note"`
	Steps             []*PlanStep `json:"steps"`
	// RemindedAt and EscalatedAt are the last reminder and the escalation
	// of a pending plan (Plans.RouteDue).
	RemindedAt  *time.Time `json:"-"`
	EscalatedAt *time.Time `json:"-"`
	// Version counts the stored changes of the plan's row: PlanUpdate is
	// conditional on it.
	Version int `json:"-"`
}

// PlanStep is one exact call of a plan.
type PlanStep struct {
	N         int             `json:"n"`
	Tool      string          `json:"tool"`
	Class     classify.Class  `json:"class"`
	IntentKey string          `json:"intent_key"`
	Payload   json.RawMessage `json:"payload"`
	Decision  string          `json:"decision"`
	Rule      string          `json:"rule,omitempty"`
	Warnings  []string        `json:"warnings"`
	// Approval is the rule a person decides the step under (its tool's,
	// or its human rule's): who may approve the plan.
	Approval *classify.Approval `json:"-"`
	// ActionID and ActionState are the action that used the step, once
	// submitted.
	ActionID    string `json:"action_id,omitempty"`
	ActionState State  `json:"state,omitempty"`
	// Ticket is the action's current ticket (its open one, else the
	// newest), if it has one: a stale claim shows here.
	Ticket *PlanStepTicket `json:"ticket,omitempty"`
}

// PlanStepTicket names a step's action's ticket.
type PlanStepTicket struct {
	ID    string      `json:"id"`
	Kind  TicketKind  `json:"kind"`
	State TicketState `json:"state"`
}

// Settle sets the state a stored plan has at now: an approved plan whose
// every step's action is finished is done; a pending or approved plan
// past its window is expired (its submitted steps go on), as the next
// sweep will store it. The stores' lists by state (PlanListParams) read
// the same rule in SQL.
func (p *Plan) Settle(now time.Time) {
	if p.State != PlanApproved && p.State != PlanPending {
		return
	}
	if p.State == PlanApproved && !slices.ContainsFunc(p.Steps, func(s *PlanStep) bool {
		return s.ActionID == "" || !s.ActionState.Final()
	}) {
		p.State = PlanDone
		return
	}
	if !p.ExpiresAt.After(now) {
		p.State = PlanExpired
	}
}

// MayDecide is the one rule of who may decide a plan: d must not be
// refused by the identity provider and must be eligible for every human
// step (each step's approval rule, as for its action). Roles are checked
// before, by the face.
func (p *Plan) MayDecide(d Decider) bool {
	if d.NoAccess {
		return false
	}
	for _, s := range p.Steps {
		if s.Decision == StepHuman && !s.Approval.MayDecide(d.Person(), p.Escalated()) {
			return false
		}
	}
	return true
}

// PlanStepRequest is one step as an agent proposes it.
type PlanStepRequest struct {
	Tool      string          `json:"tool"`
	Payload   json.RawMessage `json:"payload"`
	IntentKey string          `json:"intent_key,omitempty"`
}

// PlanRequest is a proposed plan.
type PlanRequest struct {
	Title        string
	Steps        []PlanStepRequest
	Ordered      bool
	ExpiresAfter time.Duration // 0: DefaultPlanExpiry
	Agent        string        // token name
	Channel      string        // api or mcp
	DryRun       bool
}

// PlanInsertParams store a new plan, its steps and its submitted event.
type PlanInsertParams struct {
	Plan  *Plan
	Event Event
}

// PlanUpdateParams change a plan's row: conditional on the plan's stored
// Version being Version, and (with Unused) on no step having been
// submitted; Event is recorded in the same transaction. A plan that fails
// the condition is returned as it is with ErrStateMismatch.
type PlanUpdateParams struct {
	Plan    *Plan
	Version int
	Unused  bool
	Event   Event
}

// PlanListParams filter plans: newest first, at most Limit. State is the
// state as Plan.Settle reads it at Now ("": all): done is an approved plan
// whose every step's action is in FinalStates; expired is a stored expiry,
// or a pending or approved (not done) plan whose expires_at is at or
// before Now that no sweep has expired yet. After pages on (created_at,
// id), exclusive.
type PlanListParams struct {
	State PlanState
	Now   time.Time
	After *Cursor
	Limit int
}

// PlanStepClaim asks ActionSubmit to use step N of plan PlanID for the new
// action in the submission's transaction: only while the plan is approved
// and unexpired at Now, the step unused and, for an ordered plan, every
// earlier step's action done or recorded. Anything else inserts nothing
// and answers PlanStepRefused. A held intent answers its holder as usual
// and uses no step.
type PlanStepClaim struct {
	PlanID string
	N      int
	Now    time.Time
}

// PlanReader is the plans' part of the Reader.
type PlanReader interface {
	// PlanGetByID returns the plan with its steps and their actions'
	// states, as stored (Plan.Settle is the Service's), or ErrNotFound.
	PlanGetByID(ctx context.Context, id string) (*Plan, error)
	// PlanList returns plans with their steps, newest first.
	PlanList(ctx context.Context, p PlanListParams) ([]*Plan, error)
}

// PlanStore is the plans' part of the Store.
type PlanStore interface {
	// PlanInsert stores p.Plan with its steps and p.Event (on no action,
	// subject plan:ID) in one transaction.
	PlanInsert(ctx context.Context, p PlanInsertParams) error
	// PlanUpdate writes p.Plan's state and decision columns, see
	// PlanUpdateParams.
	PlanUpdate(ctx context.Context, p PlanUpdateParams) (*Plan, error)
	// PlanExpireDue moves up to p.Limit pending plans, and approved plans
	// not done, whose expires_at is at or before p.Now to expired, each in
	// one conditional update with p.Event (PlanExpiryDue; on no action,
	// subject plan:ID; decided_by becomes its actor for a pending plan, as
	// for an action), and returns their ids. Safe to run concurrently: each
	// plan expires once.
	PlanExpireDue(ctx context.Context, p DueParams) ([]string, error)
	// PlanRouteMark records a reminder or an escalation of a pending plan,
	// see PlanRouteMarkParams; false when the plan had moved on.
	PlanRouteMark(ctx context.Context, p PlanRouteMarkParams) (bool, error)
}

// Plan event kinds (subject plan:ID).
const (
	EventPlanSubmitted = "plan_submitted"
	EventPlanApproved  = "plan_approved"
	EventPlanCounted   = "plan_approval_counted"
	EventPlanRejected  = "plan_rejected"
	EventPlanChanges   = "plan_changes_requested"
	EventPlanCancelled = "plan_cancelled"
	EventPlanExpired   = "plan_expired"
)

// PlanResult is a proposal's answer: the plan, and whether it was stored.
type PlanResult struct {
	Plan   *Plan
	DryRun bool
}

// ProposePlan checks every step as a submission would be checked and
// judged by its tool's rules, and stores the plan (nothing is claimed):
// rejected when a rule rejects a step, approved when no step needs a
// person, else pending.
func (ps Plans) Propose(ctx context.Context, r PlanRequest) (PlanResult, error) {
	s := ps.s
	switch {
	case len(r.Steps) == 0 || len(r.Steps) > MaxPlanSteps:
		return PlanResult{}, Errorf(CodeInvalidRequest, "steps: a plan has 1 to %d steps, not %d", MaxPlanSteps, len(r.Steps))
	case r.ExpiresAfter < 0 || r.ExpiresAfter > MaxPlanExpiry:
		return PlanResult{}, Errorf(CodeInvalidRequest, "expires_after: at most %s, not %s", MaxPlanExpiry, r.ExpiresAfter)
	case strings.TrimSpace(r.Title) == "":
		return PlanResult{}, Errorf(CodeInvalidRequest, "title is required")
	case len(r.Title) > 500:
		return PlanResult{}, Errorf(CodeInvalidRequest, "title: at most 500 bytes")
	}
	if r.ExpiresAfter == 0 {
		r.ExpiresAfter = DefaultPlanExpiry
	}
	now := s.Now()
	pl := &Plan{ID: NewID(now), Title: r.Title, Agent: "agent:" + r.Agent, Ordered: r.Ordered,
		CreatedAt: now, ExpiresAt: now.Add(r.ExpiresAfter), ApprovalsRequired: 1, Approvals: []Approval{}}
	keys := map[string]int{}
	var rejectedBy *PlanStep
	for i, sr := range r.Steps {
		n := i + 1
		tool, registered := s.Registry().Lookup(sr.Tool)
		sub, err := s.prepare(ctx, SubmitRequest{Tool: sr.Tool, Payload: sr.Payload, IntentKey: sr.IntentKey, Agent: r.Agent, Channel: r.Channel}, tool, registered)
		if err != nil {
			return PlanResult{}, stepError(n, err)
		}
		a := sub.a
		if first, ok := keys[a.IntentKey]; ok && a.IntentKey != "" {
			return PlanResult{}, Errorf(CodeInvalidRequest, "steps[%d]: intent key %q is that of step %d already; each step is its own intent", n, a.IntentKey, first)
		}
		keys[a.IntentKey] = n
		step := &PlanStep{N: n, Tool: a.Tool, Class: a.Class, IntentKey: a.IntentKey, Payload: a.Payload,
			Warnings: a.Warnings, Approval: a.Spec.Approval}
		if step.Warnings == nil {
			step.Warnings = []string{}
		}
		step.Decision, step.Rule = StepDecision(a.Class, sub.verdict, a.Warnings)
		if step.Decision == StepHuman {
			pl.ApprovalsRequired = max(pl.ApprovalsRequired, step.Approval.RequiredApprovals())
		}
		if step.Decision == StepReject && rejectedBy == nil {
			rejectedBy = step
		}
		pl.Steps = append(pl.Steps, step)
	}
	switch {
	case rejectedBy != nil:
		pl.State = PlanRejected
		by := PolicyActorPrefix + rejectedBy.Rule
		note := fmt.Sprintf("step %d (%s) is rejected by policy %s", rejectedBy.N, rejectedBy.Tool, rejectedBy.Rule)
		pl.DecidedBy, pl.DecidedAt, pl.DecisionNote = &by, &now, &note
	case slices.ContainsFunc(pl.Steps, func(st *PlanStep) bool { return st.Decision == StepHuman }):
		pl.State = PlanPending
	default:
		pl.State = PlanApproved
		by := PolicyActorPrefix + "plan"
		note := "no step needs a person"
		pl.DecidedBy, pl.DecidedAt, pl.DecisionNote = &by, &now, &note
	}
	if r.DryRun {
		return PlanResult{Plan: pl, DryRun: true}, nil
	}
	data, _ := json.Marshal(map[string]any{"title": pl.Title, "steps": len(pl.Steps), "state": pl.State})
	ev := s.planRouted(Event{Subject: PlanActorPrefix + pl.ID, Kind: EventPlanSubmitted, Actor: pl.Agent, Channel: r.Channel, At: now, Data: data}, pl)
	if err := s.store.PlanInsert(ctx, PlanInsertParams{Plan: pl, Event: ev}); err != nil {
		return PlanResult{}, fmt.Errorf("propose plan: %w", err)
	}
	s.planWake(ev)
	return PlanResult{Plan: pl}, nil
}

// StepDecision is the one rule of what a step's tool's rules make of it
// (the verdict v of its policy, its warnings): a reject rule rejects it;
// what no person saw, no rule approves (a warning or a failed rule makes
// it a person's, as a grant's check does); an approve rule approves it, a
// human rule sends it to a person; with no rule, an at-most-once step is
// a person's and any other needs nobody. rule names the rule that
// matched or failed. Proposals and approvals policy test both ask it.
func StepDecision(class classify.Class, v classify.Verdict, warnings []string) (decision, rule string) {
	if v.Rule != nil {
		rule = v.Rule.Name
	}
	if v.Failed != nil {
		rule = v.Failed.Name
	}
	switch {
	case v.Rule != nil && v.Rule.Decide == classify.DecideReject:
		return StepReject, rule
	case len(UnseenRisks(warnings)) > 0 || v.Failed != nil:
		return StepHuman, rule
	case v.Rule != nil && v.Rule.Decide == classify.DecideApprove:
		return StepApprove, rule
	case v.Rule != nil || class == classify.AtMostOnce:
		return StepHuman, rule
	}
	return StepNone, rule
}

// stepError names the step in a step's own refusal.
func stepError(n int, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Code: e.Code, Action: e.Action, Detail: fmt.Sprintf("steps[%d]: %s", n, e.Detail)}
	}
	return fmt.Errorf("steps[%d]: %w", n, err)
}

// PlanNotFound is ErrNotFound naming the plan.
func PlanNotFound(id string) error { return Errorf(CodeNotFound, "plan %s not found", id) }

// GetPlan returns the plan as it is now (Plan.Settle applied).
func (ps Plans) Get(ctx context.Context, id string) (*Plan, error) {
	s := ps.s
	pl, err := s.store.PlanGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	pl.Settle(s.Now())
	return pl, nil
}

// ListPlans returns plans in state (all when ""), newest first: the store
// selects them by state as read now (PlanListParams), so a page is whole.
func (ps Plans) List(ctx context.Context, state PlanState, limit int) ([]*Plan, error) {
	s := ps.s
	if _, err := ParsePlanState(string(state)); err != nil {
		return nil, err
	}
	now := s.Now()
	plans, err := s.store.PlanList(ctx, PlanListParams{State: state, Now: now, Limit: limit})
	if err != nil {
		return nil, err
	}
	for _, pl := range plans {
		pl.Settle(now)
	}
	if plans == nil {
		plans = []*Plan{} // a list, also when empty
	}
	return plans, nil
}

// CancelPlan cancels a plan for its agent while nothing has been submitted.
func (ps Plans) Cancel(ctx context.Context, id, agent, channel string) (*Plan, error) {
	s := ps.s
	for range 10 {
		pl, err := s.Plans().Get(ctx, id)
		if err != nil {
			return nil, err
		}
		by := "agent:" + agent
		if pl.Agent != by {
			return pl, Errorf(CodeForbidden, "plan %s was proposed by %s; only that agent cancels it", pl.ID, pl.Agent)
		}
		if pl.State == PlanCancelled {
			return pl, nil // a replay
		}
		if pl.State != PlanPending && pl.State != PlanApproved {
			return pl, planStateError(pl)
		}
		if i := slices.IndexFunc(pl.Steps, func(st *PlanStep) bool { return st.ActionID != "" }); i >= 0 {
			return pl, Errorf(CodeInvalidTransition, "plan %s cannot be cancelled: step %d was submitted already (action %s)", pl.ID, pl.Steps[i].N, pl.Steps[i].ActionID)
		}
		now := s.Now()
		next := *pl
		next.State, next.DecidedBy, next.DecidedAt = PlanCancelled, &by, &now
		ev := s.planRouted(Event{Subject: PlanActorPrefix + pl.ID, Kind: EventPlanCancelled, Actor: by, Channel: channel, At: now}, pl)
		_, err = s.store.PlanUpdate(ctx, PlanUpdateParams{Plan: &next, Version: pl.Version, Unused: true, Event: ev})
		if errors.Is(err, ErrStateMismatch) {
			continue // changed meanwhile: judge it again
		}
		if err != nil {
			return nil, err
		}
		s.planWake(ev)
		return s.Plans().Get(ctx, id)
	}
	return nil, fmt.Errorf("cancel plan %s: it changed too often; try again", id)
}

// planStateError is the refusal of a step of a plan that lets nothing
// through: 409 with its state.
func planStateError(pl *Plan) error {
	return Errorf(CodePlanNotApproved, "plan %s is %s, so it lets no step through", pl.ID, pl.State)
}

// PlanDecideRequest is a person's decision on a pending plan.
type PlanDecideRequest struct {
	ID      string
	To      PlanState // approved, rejected or changes_requested
	By      string    // user:EMAIL
	Note    string
	Channel string
}

// PlanDecideResult is the plan after a decision and what it did.
type PlanDecideResult struct {
	Plan    *Plan
	Outcome DecideOutcome
}

// DecidePlan records one person's decision on a pending plan: approvals
// count toward the plan's quorum (the same person again is a replay); one
// rejection or change request decides at once.
func (ps Plans) Decide(ctx context.Context, r PlanDecideRequest) (PlanDecideResult, error) {
	s := ps.s
	if (r.To == PlanRejected || r.To == PlanChangesRequested) && strings.TrimSpace(r.Note) == "" {
		return PlanDecideResult{}, Errorf(CodeInvalidRequest, "note is required to reject a plan or request changes")
	}
	if r.To != PlanApproved && r.To != PlanRejected && r.To != PlanChangesRequested {
		return PlanDecideResult{}, Errorf(CodeInvalidRequest, "a decision is approved, rejected or changes_requested, not %q", r.To)
	}
	d, err := s.Staff().Decider(ctx, r.By)
	if err != nil {
		return PlanDecideResult{}, err
	}
	channel := r.Channel
	if channel == "" {
		channel = "dashboard"
	}
	for range 10 {
		pl, err := s.Plans().Get(ctx, r.ID)
		if err != nil {
			return PlanDecideResult{}, err
		}
		now := s.Now()
		next, ev, outcome, err := DecidePlanRule(pl, d, r.To, r.Note, channel, now)
		if err != nil || outcome == DecideReplayed {
			return PlanDecideResult{Plan: pl, Outcome: outcome}, err
		}
		ev = s.planRouted(ev, pl)
		_, err = s.store.PlanUpdate(ctx, PlanUpdateParams{Plan: next, Version: pl.Version, Event: ev})
		if errors.Is(err, ErrStateMismatch) {
			continue // another decision committed first: judge this one again
		}
		if err != nil {
			return PlanDecideResult{}, err
		}
		s.planWake(ev)
		got, err := s.Plans().Get(ctx, r.ID)
		return PlanDecideResult{Plan: got, Outcome: outcome}, err
	}
	return PlanDecideResult{}, fmt.Errorf("decide plan %s: it changed too often; try again", r.ID)
}

// DecidePlanRule is the one rule of deciding a plan, applied to the plan as
// read; the store writes the result only if the plan has not changed since
// (PlanUpdateParams.Version). A plan no longer pending is CodeAlreadyDecided
// (the same person repeating their decision: a replay).
func DecidePlanRule(pl *Plan, d Decider, to PlanState, note, channel string, now time.Time) (*Plan, Event, DecideOutcome, error) {
	if pl.State != PlanPending {
		if pl.DecidedBy != nil && *pl.DecidedBy == d.By && pl.State == to || to == PlanApproved && pl.State == PlanApproved && slices.ContainsFunc(pl.Approvals, func(a Approval) bool { return a.By == d.By }) {
			return pl, Event{}, DecideReplayed, nil
		}
		who := "nobody"
		if pl.DecidedBy != nil {
			who = strings.TrimPrefix(*pl.DecidedBy, "user:")
		}
		return nil, Event{}, 0, Errorf(CodeAlreadyDecided, "plan %s is %s already (by %s at %s)", pl.ID, pl.State, who, fmtTime(pl.DecidedAt))
	}
	if !pl.MayDecide(d) {
		return nil, Event{}, 0, Errorf(CodeForbidden, "%s may not decide plan %s: they are not among the approvers of every step a person decides", strings.TrimPrefix(d.By, "user:"), pl.ID)
	}
	next := *pl
	ev := Event{Subject: PlanActorPrefix + pl.ID, Actor: d.By, Channel: channel, At: now}
	if note != "" {
		ev.Data, _ = json.Marshal(map[string]string{"note": note})
	}
	switch to {
	case PlanApproved:
		if slices.ContainsFunc(pl.Approvals, func(a Approval) bool { return a.By == d.By }) {
			return pl, Event{}, DecideReplayed, nil
		}
		next.Approvals = append(slices.Clone(pl.Approvals), Approval{By: d.By, At: now, Note: note, Channel: channel})
		if len(next.Approvals) < pl.ApprovalsRequired {
			ev.Kind = EventPlanCounted
			return &next, ev, DecideCounted, nil
		}
		ev.Kind = EventPlanApproved
	case PlanRejected:
		ev.Kind = EventPlanRejected
	default:
		ev.Kind = EventPlanChanges
	}
	next.State = to
	next.DecidedBy, next.DecidedAt = &d.By, &now
	if note != "" {
		next.DecisionNote = &note
	}
	return &next, ev, DecideTransitioned, nil
}

// stepMatch finds the step a submission equals: the same tool, intent key
// and payload (as JSON values), an unused one first (key-less at-least-once
// steps may be equal), else the used one.
func (pl *Plan) stepMatch(tool, key string, payload json.RawMessage) *PlanStep {
	var used *PlanStep
	for _, st := range pl.Steps {
		if st.Tool == tool && st.IntentKey == key && JSONEqual(st.Payload, payload) {
			if st.ActionID == "" {
				return st
			}
			if used == nil {
				used = st
			}
		}
	}
	return used
}

// notInPlan is the refusal of a submission that equals no unused step: it
// names the nearest step (the same intent key, else the same tool, else
// the first) and the fields that differ.
func notInPlan(pl *Plan, a *Action, used *PlanStep) error {
	if used != nil {
		return &Error{Code: CodeNotInPlan, Detail: fmt.Sprintf("step %d of plan %s was used already by action %s (%s); a step is performed once, nothing was done", used.N, pl.ID, used.ActionID, used.ActionState)}
	}
	near := pl.Steps[0]
	for _, st := range pl.Steps {
		if st.IntentKey == a.IntentKey {
			near = st
			break
		}
		if st.Tool == a.Tool && near.Tool != a.Tool {
			near = st
		}
	}
	var diffs []string
	if near.Tool != a.Tool {
		diffs = append(diffs, "tool ("+near.Tool+")")
	}
	if near.IntentKey != a.IntentKey {
		diffs = append(diffs, fmt.Sprintf("intent_key (%q)", near.IntentKey))
	}
	if fields := EditedPointers(near.Payload, a.Payload); len(fields) > 0 {
		diffs = append(diffs, "payload "+strings.Join(fields, ", "))
	}
	return &Error{Code: CodeNotInPlan, Detail: fmt.Sprintf("the submission matches no unused step of plan %s; nearest is step %d (%s), which differs in %s; nothing was done",
		pl.ID, near.N, near.Tool, strings.Join(diffs, "; "))}
}

// applyPlan lets a submission naming a plan through when it equals one of
// the plan's unused steps: the plan decides it (plan:ID), and it goes on as
// its class says. It answers a replay itself when the step was used by an
// action that still holds its intent, and refuses anything else.
func (s *Service) applyPlan(ctx context.Context, req SubmitRequest, sub *submission) (*PlanStepClaim, *Action, error) {
	pl, err := s.Plans().Get(ctx, req.Plan)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, Errorf(CodeNotInPlan, "plan %s not found; nothing was done", req.Plan)
	}
	if err != nil {
		return nil, nil, err
	}
	a := sub.a
	st := pl.stepMatch(a.Tool, a.IntentKey, a.Payload)
	if st == nil {
		return nil, nil, notInPlan(pl, a, nil)
	}
	if st.ActionID != "" {
		// A replay of a step's submission answers the stored action as
		// usual, whatever the plan's state.
		used, err := s.store.ActionGetByID(ctx, st.ActionID)
		if err != nil {
			return nil, nil, err
		}
		if used.HoldsIntent() {
			return nil, used, nil
		}
		return nil, nil, notInPlan(pl, a, st)
	}
	if pl.State != PlanApproved {
		return nil, nil, planStateError(pl)
	}
	if err := stepReady(pl, st); err != nil {
		return nil, nil, err
	}
	claim := &PlanStepClaim{PlanID: pl.ID, N: st.N, Now: a.CreatedAt}
	sub.grant = nil
	if a.State == StatePending && (len(UnseenRisks(a.Warnings)) > 0 || sub.verdict.Failed != nil) {
		// What no person saw, no plan approves: the step is used by an
		// action a person decides. One its class lets through without a
		// person (an exactly-once step no rule gates, an at-least-once
		// one) goes on as its class says, below.
		return claim, nil, nil
	}
	if a.State == StateRejected {
		return nil, nil, Errorf(CodeNotInPlan, "step %d of plan %s is rejected by policy %s under the tools file now in force; nothing was done", st.N, pl.ID, st.Rule)
	}
	s.planDecides(a, pl, sub)
	return claim, nil, nil
}

// stepReady refuses a step of an ordered plan while an earlier step's
// action is not done or recorded.
func stepReady(pl *Plan, st *PlanStep) error {
	if !pl.Ordered {
		return nil
	}
	for _, e := range pl.Steps {
		if e.N >= st.N {
			break
		}
		if e.ActionID == "" || e.ActionState != StateDone && e.ActionState != StateRecorded {
			what := "not submitted"
			if e.ActionID != "" {
				what = string(e.ActionState)
			}
			return Errorf(CodeStepNotReady, "plan %s is ordered: step %d waits for step %d (%s) to be done", pl.ID, st.N, e.N, what)
		}
	}
	return nil
}

// planDecides makes the plan the decider of a step's new action: approved
// (at-most-once), claimed (exactly-once) or recorded (at-least-once), with
// the plan's approvals and an approved event by plan:ID.
func (s *Service) planDecides(a *Action, pl *Plan, sub *submission) {
	now := a.CreatedAt
	actor := PlanActorPrefix + pl.ID
	note := fmt.Sprintf("approved as a step of plan %s: %s", pl.ID, pl.Title)
	a.DecidedBy, a.DecidedAt, a.DecisionNote = &actor, &now, &note
	a.Approvals = slices.Clone(pl.Approvals)
	if len(a.Approvals) == 0 {
		a.Approvals = []Approval{{By: actor, At: now, Note: note, Channel: PlanChannel}}
	}
	a.ApprovalsRequired = max(len(a.Approvals), 1)
	a.ClaimedAt, a.ClaimedBy, a.FinishedAt, a.ExpiresAt, a.ApprovedPayload = nil, nil, nil, nil, nil
	switch a.Class {
	case classify.ExactlyOnce:
		agent := a.RequestedBy
		a.State, a.ClaimedAt, a.ClaimedBy = StateInProgress, &now, &agent
		if a.Spec.Upstream != "" {
			by := DispatcherActor
			a.ClaimedBy = &by
		}
	case classify.AtLeastOnce:
		a.State, a.FinishedAt = StateRecorded, &now
	default:
		exp := now.Add(a.Spec.ExpiresAfter)
		a.State, a.ApprovedPayload, a.ExpiresAt = StateApproved, a.Payload, &exp
	}
	data, _ := json.Marshal(map[string]any{"plan": pl.ID, "approvals": pl.Approvals})
	ev := &Event{Kind: EventApproved, Actor: actor, Channel: PlanChannel, At: now, Data: data}
	ev.Unrouted = s.unrouted(*ev, a)
	sub.decision = ev
	// It never waited for anyone: its submission tells no channel (as a
	// grant's approval does).
	sub.ev.Unrouted = true
}

// planRefused explains why the store refused a step's claim: the plan
// changed since it was read (another submission used the step, the plan
// expired or was cancelled, an earlier step is not done).
func (s *Service) planRefused(ctx context.Context, req SubmitRequest, a *Action) (*Action, error) {
	pl, err := s.Plans().Get(ctx, req.Plan)
	if err != nil {
		return nil, err
	}
	st := pl.stepMatch(a.Tool, a.IntentKey, a.Payload)
	switch {
	case st == nil:
		return nil, notInPlan(pl, a, nil)
	case st.ActionID != "":
		used, err := s.store.ActionGetByID(ctx, st.ActionID)
		if err != nil {
			return nil, err
		}
		if used.HoldsIntent() {
			return used, nil
		}
		return nil, notInPlan(pl, a, st)
	case pl.State != PlanApproved:
		return nil, planStateError(pl)
	}
	if err := stepReady(pl, st); err != nil {
		return nil, err
	}
	return nil, Errorf(CodeStepNotReady, "step %d of plan %s could not be used now; read the plan and try again", st.N, pl.ID)
}

// Final reports whether no change leaves a plan in state st.
func (st PlanState) Final() bool {
	switch st {
	case PlanRejected, PlanChangesRequested, PlanCancelled, PlanExpired, PlanDone:
		return true
	}
	return false
}

// planPollInterval paces WaitPlan: a plan's decision made through any
// process is seen within it.
const planPollInterval = 500 * time.Millisecond

// WaitPlan returns the plan once its state differs from until (the state
// at the call when ""), at once for a final state, or at the end of d with
// its current state. It reads the plan every planPollInterval: plans are
// few and their waiters fewer than actions'.
func (ps Plans) Wait(ctx context.Context, id string, until PlanState, d time.Duration) (*Plan, error) {
	s := ps.s
	pl, err := s.Plans().Get(ctx, id)
	if err != nil || d <= 0 {
		return pl, err
	}
	if until == "" {
		until = pl.State
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(planPollInterval)
	defer tick.Stop()
	for pl.State == until && !pl.State.Final() {
		select {
		case <-ctx.Done():
			return pl, nil
		case <-deadline.C:
			return pl, nil
		case <-tick.C:
		}
		if pl, err = s.Plans().Get(ctx, id); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// ParsePlanState reads a plan state parameter ("" when absent), for every
// face.
func ParsePlanState(s string) (PlanState, error) {
	switch st := PlanState(s); st {
	case "", PlanPending, PlanApproved, PlanRejected, PlanChangesRequested, PlanCancelled, PlanExpired, PlanDone:
		return st, nil
	}
	return "", Errorf(CodeInvalidRequest, "state: %q is not a plan state (pending, approved, rejected, changes_requested, cancelled, expired, done)", s)
}
