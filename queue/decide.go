package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/tracing"
)

// DecideRequest is a staff decision.
type DecideRequest struct {
	ID string
	// To is the decision: StateApproved, StateRejected or
	// StateChangesRequested.
	To      State
	By      string          // user:EMAIL
	Note    string          // required to reject and to request changes
	Payload json.RawMessage // approve only: an edited payload, or nil
	// Channel is where the decision was made: "dashboard" (the default),
	// "slack", …; it shows in the timeline.
	Channel string
	// decider is By as Service.Staff().Decider resolved it, when the caller (Bulk)
	// did so already; nil: Decide resolves it.
	decider *Decider
	// Grant, approve only: also create a grant of the actions like this
	// one ("Approve and allow similar"), in the same transaction. A grant
	// the tool does not allow refuses the whole decision.
	Grant *GrantRequest
}

func (r DecideRequest) channel() string {
	if r.Channel == "" {
		return "dashboard"
	}
	return r.Channel
}

// Decide records a person's decision on a pending action, exactly once:
// approve it (with an edited Payload, if any), reject it for good (a reason
// is required), or request changes, which sends it back to its agent: the
// state changes_requested is final for this attempt and releases the
// intent, so the agent revises the payload as the note asks and submits
// again with the same key (the note is required; the roles and rules are
// reject's).
func (s *Service) Decide(ctx context.Context, r DecideRequest) (DriveResult, error) {
	switch r.To {
	case StateApproved:
		a, err := s.store.ActionGetByID(ctx, r.ID)
		if err != nil {
			return DriveResult{}, err
		}
		return s.approve(ctx, a, r)
	case StateRejected:
		return s.decideWithNote(ctx, r, EventRejected, "a reason is required to reject")
	case StateChangesRequested:
		return s.decideWithNote(ctx, r, EventChangesRequested, "say what should change")
	}
	return DriveResult{}, Errorf(CodeInvalidRequest, "a decision is approved, rejected or changes_requested, not %q", r.To)
}

// approve is the approval of an action its caller has read (Bulk reads its
// selection in one query). Of that copy it uses only what is fixed at
// submission (payload, intent key, the tool's snapshot) and, to skip the
// upstream check, a state that is no longer pending; whether the action may
// still be decided is judged by the store under the action's lock.
func (s *Service) approve(ctx context.Context, a *Action, r DecideRequest) (DriveResult, error) {
	if err := s.approvableUpstream(a); err != nil {
		return DriveResult{}, err
	}
	approved := a.Payload
	data := map[string]any{}
	if r.Note != "" {
		data["note"] = r.Note
	}
	if len(r.Payload) > 0 && !JSONEqual(r.Payload, a.Payload) {
		if n := a.Spec.Approval.RequiredApprovals(); n > 1 {
			return DriveResult{}, Errorf(CodeInvalidPayload, "tool %s needs %d approvals of the same content, so the payload cannot be edited; request changes instead", a.Tool, n)
		}
		edited, err := DecodeObject(r.Payload)
		if err != nil {
			return DriveResult{}, Errorf(CodeInvalidPayload, "the edited payload must be a JSON object")
		}
		spec := a.Spec
		if err := spec.Validate(edited); err != nil {
			return DriveResult{}, payloadError(err)
		}
		if spec.Intent != "" {
			key, err := spec.DeriveKey(edited)
			if err != nil {
				return DriveResult{}, payloadError(err)
			}
			if key != a.IntentKey {
				return DriveResult{}, Errorf(CodeInvalidPayload, "the edited payload derives intent key %q, not %q: an edit may not change the intent", key, a.IntentKey)
			}
		}
		original, _ := DecodeObject(a.Payload)
		changed := changedFields(original, edited)
		sort.Strings(changed)
		data["changed_fields"] = changed
		data["approved_payload"] = json.RawMessage(r.Payload)
		approved = r.Payload
	}
	now := s.Now()
	raw, _ := json.Marshal(data)
	p := ActionDecideParams{
		ID: r.ID, To: StateApproved, By: r.By, Note: r.Note, Channel: r.channel(), Now: now,
		ApprovedPayload: approved, ExpiresAt: now.Add(a.Spec.ExpiresAfter),
		Event: Event{ActionID: r.ID, Kind: EventApproved, Actor: r.By, Channel: r.channel(), At: now, Data: raw},
	}
	if r.Grant != nil && a.State == StatePending {
		g, err := s.grantFor(a, r.By, r.Grant, len(data) > 0 && data["approved_payload"] != nil, now)
		if err != nil {
			return DriveResult{}, err
		}
		gd, _ := json.Marshal(map[string]any{"grant": g.ID, "expires_at": g.ExpiresAt, "max_uses": g.MaxUses,
			"agent": g.Agent, "fields": g.Fields})
		p.Grant = g
		p.GrantEvent = Event{ActionID: r.ID, Kind: EventGrantCreated, Actor: r.By, Channel: r.channel(), At: now, Data: gd}
	}
	return s.decide(ctx, p, r.decider)
}

func (s *Service) decideWithNote(ctx context.Context, r DecideRequest, kind, missing string) (DriveResult, error) {
	to := r.To
	note := strings.TrimSpace(r.Note)
	if note == "" {
		return DriveResult{}, Errorf(CodeInvalidRequest, "note: %s", missing)
	}
	r.Note = note
	now := s.Now()
	raw, _ := json.Marshal(map[string]string{"note": note})
	return s.decide(ctx, ActionDecideParams{
		ID: r.ID, To: to, By: r.By, Note: note, Channel: r.channel(), Now: now,
		Event: Event{ActionID: r.ID, Kind: kind, Actor: r.By, Channel: r.channel(), At: now, Data: raw},
	}, r.decider)
}

// decide runs one decision through the store's locked path and turns a
// refusal into the answer every face gives: a replay for the same user's same
// decision, else already_decided naming who decided and when. d is the
// decider already resolved, or nil.
func (s *Service) decide(ctx context.Context, p ActionDecideParams, d *Decider) (DriveResult, error) {
	if !tracing.Enabled() {
		return s.decideOnce(ctx, p, d)
	}
	// The decision is a span of the decider's request, linked to the
	// submission's span: the agent's trace and the person's meet there.
	sc := s.submissionTrace(ctx, p.ID)
	ctx, span := tracing.Start(ctx, "approvals.decide", tracing.LinkTo(sc),
		trace.WithAttributes(attribute.String("approvals.action.id", p.ID),
			attribute.String("approvals.decision", string(p.To)),
			attribute.String("enduser.id", p.By),
			attribute.String("approvals.channel", p.Channel)))
	res, err := s.decideOnce(ctx, p, d)
	if a := res.Action; a != nil {
		span.SetAttributes(actionAttrs(a)...)
		span.SetAttributes(attribute.String("approvals.state", string(a.State)), attribute.Bool("approvals.replayed", res.Replayed))
		if err == nil && !res.Replayed && a.State != StatePending {
			// The wait for a person ends here, in the agent's trace.
			tracing.WaitSpan(sc, a.CreatedAt, p.Now, attribute.String("approvals.action.id", a.ID),
				attribute.String("gen_ai.tool.name", a.Tool), attribute.String("approvals.decision", string(a.State)),
				attribute.String("enduser.id", p.By), attribute.String("approvals.channel", p.Channel))
		}
	}
	endSpan(span, err)
	return res, err
}

// decideOnce is decide without its span.
func (s *Service) decideOnce(ctx context.Context, p ActionDecideParams, d *Decider) (DriveResult, error) {
	if d == nil {
		got, err := s.Staff().Decider(ctx, p.By)
		if err != nil {
			return DriveResult{}, err
		}
		d = &got
	}
	p.IdPGroups, p.NoAccess = d.IdPGroups, d.NoAccess
	res, err := s.store.ActionDecide(ctx, p)
	got := res.Action
	if err == nil {
		return DriveResult{Action: got, Replayed: res.Outcome == DecideReplayed}, nil
	}
	if !errors.Is(err, ErrStateMismatch) {
		return DriveResult{Action: got}, err
	}
	if got.State == StatePending { // past expires_at, not yet swept
		// Expire it here. If another process got there first (a sweep, a
		// concurrent refusal), the failed transition returns the row as it
		// now is: answer with that, never with the pending copy read above.
		exp, err := s.expireOne(ctx, got, StatePending)
		if err == nil || (errors.Is(err, ErrStateMismatch) && exp != nil) {
			got = exp
		}
	}
	sameUser := got.DecidedBy != nil && *got.DecidedBy == p.By
	switch p.To {
	case StateRejected, StateChangesRequested:
		if got.State == p.To && sameUser {
			return DriveResult{Action: got, Replayed: true}, nil
		}
	case StateApproved:
		if (sameUser || got.Approved(p.By)) && got.ApprovedPayload != nil &&
			got.State != StateRejected && got.State != StateCancelled && got.State != StateChangesRequested {
			return DriveResult{Action: got, Replayed: true}, nil
		}
	}
	by := "system"
	if got.DecidedBy != nil {
		by = *got.DecidedBy
	}
	return DriveResult{}, &Error{Code: CodeAlreadyDecided, Action: got,
		Detail: fmt.Sprintf("action %s is %s: decided by %s at %s", got.ID, got.State, by, fmtTime(got.DecidedAt))}
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// Approval is one approval given to an action. Under a quorum an action
// collects several before it becomes approved; the approvals table keeps
// one per (action, user), which is what makes "the same user again" a
// replay rather than a second vote.
type Approval struct {
	By      string    `json:"by"` // user:EMAIL
	At      time.Time `json:"at"`
	Note    string    `json:"note"`
	Channel string    `json:"-"` // dashboard, slack, …
}

// ActionDecideParams is one staff decision on a pending action: approve
// (To approved), reject or request changes.
type ActionDecideParams struct {
	ID string
	To State  // StateApproved, StateRejected or StateChangesRequested
	By string // user:EMAIL
	// IdPGroups and NoAccess are what the staff directory knows of By
	// (Service.Staff().Decider): PlanDecision judges eligibility by them.
	IdPGroups []string
	NoAccess  bool
	Note      string
	Channel   string
	Now       time.Time
	// ApprovedPayload and ExpiresAt are set on the action when the
	// approval completes the quorum.
	ApprovedPayload json.RawMessage
	ExpiresAt       time.Time
	// Event is recorded with the transition (kind approved, rejected or
	// changes_requested); an approval that does not complete the quorum
	// records an approval_counted event instead.
	Event Event
	// Grant, when set, is created in the same transaction when the approval
	// moves the action to approved, with GrantEvent (grant_created); a
	// refusal or a replay creates nothing.
	Grant      *Grant
	GrantEvent Event
}

// DecideOutcome says what a decision did.
type DecideOutcome int

const (
	// DecideTransitioned: the action left pending.
	DecideTransitioned DecideOutcome = iota + 1
	// DecideCounted: an approval was counted; the quorum is not complete.
	DecideCounted
	// DecideReplayed: the user had approved already; nothing changed.
	DecideReplayed
)

// DecisionPlan is what a store writes for a decision once it holds the
// action's lock.
type DecisionPlan struct {
	Outcome DecideOutcome
	// Approvals is the action's approvals after the decision, as stored in
	// its approvals column.
	Approvals []Approval
	// Event is the event to append (zero for a replay).
	Event Event
}

// MayDecide is the one rule of who may decide the action: d must not be
// refused by the identity provider, and must be eligible under the tool's
// approval rule (by email, or by an identity provider group as of their
// last sign-in; the escalation's people too once escalated). Roles are
// checked before, by the face.
func (a *Action) MayDecide(d Decider) bool {
	return !d.NoAccess && a.Spec.Approval.MayDecide(d.Person(), a.EscalatedAt != nil)
}

// Approved reports whether by has given one of the action's approvals.
func (a *Action) Approved(by string) bool {
	return slices.ContainsFunc(a.Approvals, func(ap Approval) bool { return ap.By == by })
}

// PlanDecision is the one rule of deciding, applied by every store inside
// the transaction that has locked the action (so nothing it reads can
// change before the store writes the plan): the action must be pending and
// not past expires_at (else ErrStateMismatch), the decider must be eligible
// (else CodeForbidden, nothing changes), a repeated approval is a replay,
// and the approval that reaches the quorum moves the action to approved.
func PlanDecision(a *Action, p ActionDecideParams) (DecisionPlan, error) {
	if a.State != StatePending || a.ExpiresAt != nil && !a.ExpiresAt.After(p.Now) {
		return DecisionPlan{}, fmt.Errorf("decide %s: %w", a.ID, ErrStateMismatch)
	}
	d := Decider{By: p.By, IdPGroups: p.IdPGroups, NoAccess: p.NoAccess}
	if d.NoAccess {
		return DecisionPlan{}, &Error{Code: CodeForbidden, Action: a,
			Detail: fmt.Sprintf("%s may not decide: at their last sign-in the identity provider's groups gave them no role", strings.TrimPrefix(p.By, "user:"))}
	}
	if !a.MayDecide(d) {
		return DecisionPlan{}, &Error{Code: CodeForbidden, Action: a,
			Detail: fmt.Sprintf("%s is not among the approvers of tool %s for action %s", strings.TrimPrefix(p.By, "user:"), a.Tool, a.ID)}
	}
	if p.To != StateApproved {
		return DecisionPlan{Outcome: DecideTransitioned, Approvals: a.Approvals, Event: p.Event}, nil
	}
	if a.Approved(p.By) {
		return DecisionPlan{Outcome: DecideReplayed, Approvals: a.Approvals}, nil
	}
	ap := Approval{By: p.By, At: p.Now, Note: p.Note, Channel: p.Channel}
	all := append(slices.Clone(a.Approvals), ap)
	required := a.Spec.Approval.RequiredApprovals()
	if len(all) >= required {
		return DecisionPlan{Outcome: DecideTransitioned, Approvals: all, Event: p.Event}, nil
	}
	data, _ := json.Marshal(map[string]any{"note": p.Note, "count": len(all), "required": required})
	return DecisionPlan{Outcome: DecideCounted, Approvals: all, Event: Event{
		ActionID: a.ID, Kind: EventApprovalCounted, Actor: p.By, Channel: p.Channel, At: p.Now, Data: data,
	}}, nil
}

// ApprovalsJSON encodes approvals as the stores keep them in the action's
// approvals column.
func ApprovalsJSON(approvals []Approval) string {
	if len(approvals) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(approvals)
	return string(b)
}

// DecodeApprovals reads an approvals column; a nil or empty column is no
// approvals.
func DecodeApprovals(b []byte) ([]Approval, error) {
	if len(b) == 0 || string(b) == "[]" {
		return []Approval{}, nil
	}
	var out []Approval
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].At = out[i].At.UTC()
	}
	return out, nil
}
