package queue

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

// Policies and grants decide, at submission, what would otherwise wait for
// a person (docs/policies.md): a rule of the tool's policy approves,
// rejects, or sends the action to a person with its own required and
// approvers; a grant approves what no rule decided. Both are recorded like
// a person's decision, in the submission's transaction.

// Actors and channels of the decisions made at submission.
const (
	// PolicyActorPrefix starts decided_by and the event actor of a rule's
	// decision: policy:NAME.
	PolicyActorPrefix = "policy:"
	// GrantActorPrefix starts decided_by of an action a grant approved:
	// grant:ID.
	GrantActorPrefix = "grant:"
	// PolicyChannel and GrantChannel are the events' channels.
	PolicyChannel = "policy"
	GrantChannel  = "grant"
)

// Event kinds of policies and grants.
const (
	// EventPolicyHuman records a human rule that sent the action to a person
	// (approve and reject rules record approved and rejected events).
	EventPolicyHuman = "policy_human"
	// EventGrantCreated and EventGrantRevoked are written on the action whose
	// approval created the grant.
	EventGrantCreated = "grant_created"
	EventGrantRevoked = "grant_revoked"
)

// WarningPolicyError starts the warning of an action one of whose rules
// could not be evaluated: policy_error:RULE. Evaluation stopped at that rule
// and a person decides (classify.Verdict.Failed).
const WarningPolicyError = "policy_error"

// WarningToolNotRegistered marks an action of a tool the tools file does
// not name: at-most-once, with a key the agent chose.
const WarningToolNotRegistered = "tool_not_registered"

// UnseenRisks are the warnings among ws that only a person may accept:
// invisible characters, a policy rule that could not be evaluated, a tool
// not in the tools file. An action with one is never approved by a rule,
// a grant or a plan; a person decides it on the dashboard, where the
// warning is shown and explained.
func UnseenRisks(ws []string) []string {
	var out []string
	for _, w := range ws {
		if w == WarningInvisibleCharacters || w == WarningToolNotRegistered || strings.HasPrefix(w, WarningPolicyError+":") {
			out = append(out, w)
		}
	}
	return out
}

// Gated reports whether an approval stands between the action and its
// effect: every at-most-once action, and an exactly-once one that a policy
// rule decided or sent to a person. Everything it reads is fixed when the
// action is submitted.
func (a *Action) Gated() bool {
	switch a.Class {
	case classify.AtMostOnce:
		return true
	case classify.ExactlyOnce:
		return a.Spec.Approval != nil && a.Spec.Approval.Rule != ""
	}
	return false
}

// WaitsForPerson is the one rule of whether an action waits for a person:
// a gated action that neither a rule (approve, reject) nor a grant decided
// at its submission. A new action that waits starts pending; every other
// one is approved, rejected, claimed or recorded at once.
func (a *Action) WaitsForPerson() bool {
	if !a.Gated() || a.GrantID != "" {
		return false
	}
	r := a.Spec.Approval
	return r == nil || r.Rule == "" || r.Decision == classify.DecideHuman
}

// PolicyNote is the decision_note of an action a rule approved: the rule's
// name and expression, which the action page shows.
func PolicyNote(r *classify.Rule) string { return r.Name + ": " + r.When }

// GrantNote is the decision_note, and the note of the approval, of an action
// the grant id of grantedBy approved. The PostgreSQL store builds the same
// text in SQL (the fragment grantNote in sql/submit.sql).
func GrantNote(id, grantedBy string) string { return "grant " + id + " of " + grantedBy }

// routeAtSubmission sets what the policy's verdict and the class make of the
// new action a: approved or rejected by a rule, pending (for a person, maybe
// under a human rule's approvers), claimed, or recorded. It returns the
// event that records the rule's decision, if a rule decided.
//
// It fails closed: a rule that could not be evaluated sends the action to
// a person under that rule (v.HumanRule), and so does an approve rule that
// matched an action with an unseen risk (UnseenRisks), on exactly-once
// tools too, so no later rule, grant or immediate claim decides it.
func (s *Service) routeAtSubmission(a *Action, tool classify.Tool, v classify.Verdict, now time.Time) *Event {
	r, held := v.Rule, UnseenRisks(a.Warnings)
	if f := v.HumanRule(); f != nil {
		r = f
	} else if r != nil && r.Decide == classify.DecideApprove && len(held) > 0 {
		r = &classify.Rule{Name: r.Name, When: r.When, Decide: classify.DecideHuman}
	} else {
		held = nil
	}
	var ev *Event
	if r != nil {
		approval := tool.Approval.UnderRule(r)
		a.Spec.Approval = approval
		a.ApprovalsRequired = approval.RequiredApprovals()
	}
	if r != nil && v.Failed == nil {
		// The rule decided (or, with held, would have approved what a
		// person must see): its event says so. A failed rule's error is in
		// the submitted event.
		actor := PolicyActorPrefix + r.Name
		data := map[string]any{"rule": r.Name, "expression": r.When, "decision": r.Decide, "tools_hash": s.Registry().Hash}
		if len(held) > 0 {
			data["held_for"] = held
		}
		kind := EventPolicyHuman
		switch r.Decide {
		case classify.DecideApprove:
			kind = EventApproved
			note := PolicyNote(r)
			exp := now.Add(tool.ExpiresAfter)
			a.State, a.DecidedBy, a.DecidedAt, a.DecisionNote = StateApproved, &actor, &now, &note
			a.ApprovedPayload, a.ExpiresAt = a.Payload, &exp
			a.Approvals = []Approval{{By: actor, At: now, Note: note, Channel: PolicyChannel}}
		case classify.DecideReject:
			kind = EventRejected
			note := r.Note
			data["note"] = note
			a.State, a.DecidedBy, a.DecidedAt, a.DecisionNote, a.FinishedAt = StateRejected, &actor, &now, &note, &now
		}
		raw, _ := json.Marshal(data)
		ev = &Event{Kind: kind, Actor: actor, Channel: PolicyChannel, At: now, Data: raw}
	}
	if a.State == "" {
		switch {
		case a.WaitsForPerson():
			a.State = StatePending
			exp := now.Add(tool.ExpiresAfter)
			a.ExpiresAt = &exp
		case tool.Class == classify.ExactlyOnce:
			agent := a.RequestedBy
			a.State = StateInProgress
			a.ClaimedAt, a.ClaimedBy = &now, &agent
			if tool.Upstream != "" { // approvals itself makes the call
				by := DispatcherActor
				a.ClaimedBy = &by
			}
		default:
			a.State = StateRecorded
			a.FinishedAt = &now
		}
	}
	if ev != nil {
		ev.Unrouted = s.unrouted(*ev, a)
	}
	return ev
}

// evaluatePolicy runs the tool's rules over a submission. A tool without
// rules pays nothing; attempt is looked up only for a policy that reads it.
func (s *Service) evaluatePolicy(ctx context.Context, tool classify.Tool, payload map[string]any, req SubmitRequest, key string, now time.Time) (classify.Verdict, error) {
	if !tool.HasPolicy() {
		return classify.Verdict{}, nil
	}
	attempt := 1
	if tool.PolicyUsesAttempt() && key != "" {
		n, err := s.nextAttempt(ctx, key)
		if err != nil {
			return classify.Verdict{}, err
		}
		attempt = n
	}
	return tool.Evaluate(classify.PolicyInput{Payload: payload, Tool: req.Tool, Agent: req.Agent,
		IntentKey: key, Attempt: attempt, Now: now}), nil
}

// nextAttempt is the attempt number a new action of key would get, as the
// stores count it: one more than the highest attempt of the key among the
// classes that hold intents, which the newest such action has. It reads
// past any number of at-least-once actions of the key (they take no
// attempt, and an agent records as many as it likes). A release racing
// this read may make it one short; the stored attempt is the store's.
func (s *Service) nextAttempt(ctx context.Context, key string) (int, error) {
	const page = 100
	var after *Cursor
	for {
		list, err := s.store.ActionList(ctx, ActionListParams{IntentKey: key, Limit: page, After: after})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, a := range list {
			if a.Class != classify.AtLeastOnce {
				n = max(n, a.Attempt)
			}
		}
		if n > 0 || len(list) < page {
			return n + 1, nil
		}
		last := list[len(list)-1]
		after = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// policyWarnings are the warnings of the rules that could not be evaluated.
func policyWarnings(v classify.Verdict) []string {
	var out []string
	for _, e := range v.Errors {
		out = append(out, WarningPolicyError+":"+e.Rule)
	}
	return out
}

// DecidedByRule returns the name of the rule that decided the action at its
// submission (approve, reject or human), or "".
func (a *Action) DecidedByRule() string {
	if a.Spec.Approval == nil {
		return ""
	}
	return a.Spec.Approval.Rule
}

// GrantIDOf returns the id of the grant named by decided_by (grant:ID), or "".
func GrantIDOf(decidedBy *string) string {
	if decidedBy == nil {
		return ""
	}
	id, ok := strings.CutPrefix(*decidedBy, GrantActorPrefix)
	if !ok {
		return ""
	}
	return id
}
