package queue

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

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
	ID      string
	To      State  // StateApproved, StateRejected or StateChangesRequested
	By      string // user:EMAIL
	Note    string
	Channel string
	Now     time.Time
	// ApprovedPayload and ExpiresAt are set on the action when the
	// approval completes the quorum.
	ApprovedPayload json.RawMessage
	ExpiresAt       time.Time
	// Event is recorded with the transition (kind approved, rejected or
	// changes_requested); an approval that does not complete the quorum
	// records an approval_counted event instead.
	Event Event
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

// MayDecide reports whether the staff member by (user:EMAIL) may decide
// the action under its tool's approval rule; roles are checked before.
func (a *Action) MayDecide(by string) bool {
	return a.Spec.Approval.MayDecide(strings.TrimPrefix(by, "user:"), a.EscalatedAt != nil)
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
	if !a.MayDecide(p.By) {
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
