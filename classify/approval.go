package classify

import (
	"slices"
	"strings"
	"time"
)

// Approval is a tool's approval rule: who may decide, how many must approve, whom to tell,
// and when to remind and escalate. It is part of the tool snapshot an action keeps, with the
// groups resolved to the emails they held at submission.
type Approval struct {
	// Approvers are group names; empty means every approver and admin may decide.
	Approvers []string `json:"approvers,omitempty"`
	// ApproverEmails are the members of Approvers when the action was submitted.
	ApproverEmails []string `json:"approver_emails,omitempty"`
	// ApproverIdPGroups are the identity provider's groups the approver groups name
	// ("idp:support-leads" members, without the prefix): anyone in one of them at their
	// last sign-in may decide.
	ApproverIdPGroups []string `json:"approver_idp_groups,omitempty"`
	// Required distinct approvals (default 1).
	Required       int           `json:"required"`
	Notify         []string      `json:"notify,omitempty"`
	RemindAfter    time.Duration `json:"remind_after,omitempty"`
	EscalateAfter  time.Duration `json:"escalate_after,omitempty"`
	EscalateTo     []string      `json:"escalate_to,omitempty"`
	EscalateEmails []string      `json:"escalate_emails,omitempty"` // members of EscalateTo at submission
	// EscalateIdPGroups are the identity provider's groups EscalateTo names.
	EscalateIdPGroups []string `json:"escalate_idp_groups,omitempty"`
	EscalateNotify    []string `json:"escalate_notify,omitempty"`
	// Bulk false means each action must be reviewed on its own page: no bulk approval.
	Bulk *bool `json:"bulk,omitempty"`
	// Policy is the tool's rules, in order: the first that matches a submission decides.
	// Grants are the limits of the grants approvers may create on the tool (nil: the
	// defaults). Neither reaches an action's snapshot: both are judged at submission or at
	// the grant, with the file then in force.
	Policy []Rule       `json:"-"`
	Grants *GrantLimits `json:"-"`
	// Rule and Decision, in an action's snapshot, name the policy rule that decided the
	// action at its submission and what it decided; a human rule's required and approvers
	// are then this rule's.
	Rule     string   `json:"rule,omitempty"`
	Decision Decision `json:"decision,omitempty"`
}

// Person is a staff member as the rules of deciding see them: the email,
// and the identity provider's groups as of their last sign-in (none for
// someone who signs in with a password only).
type Person struct {
	Email     string
	IdPGroups []string
}

// RequiredApprovals is the number of distinct approvals an action of the rule needs (1 for a
// tool without a rule).
func (a *Approval) RequiredApprovals() int {
	if a == nil || a.Required < 1 {
		return 1
	}
	return a.Required
}

// BulkAllowed reports whether actions of the rule may be approved in bulk (the default).
func (a *Approval) BulkAllowed() bool { return a == nil || a.Bulk == nil || *a.Bulk }

// MayDecide reports whether p may decide an action of the rule: p's email is among the
// approvers' emails, or one of p's identity provider groups among the approvers' "idp:"
// groups; escalated says the action has been escalated, which admits the escalation groups'
// people too. Without approvers every approver and admin may decide: roles are the caller's
// business.
func (a *Approval) MayDecide(p Person, escalated bool) bool {
	if a == nil || len(a.Approvers) == 0 {
		return true
	}
	email := strings.ToLower(p.Email)
	in := func(emails, groups []string) bool {
		return slices.Contains(emails, email) || slices.ContainsFunc(p.IdPGroups, func(g string) bool { return slices.Contains(groups, g) })
	}
	return in(a.ApproverEmails, a.ApproverIdPGroups) || escalated && in(a.EscalateEmails, a.EscalateIdPGroups)
}

// CountsPeople reports whether the rule's eligible people are a list the tools file names:
// false when an identity provider group is among them, whose members only the provider knows.
func (a *Approval) CountsPeople() bool {
	return a == nil || len(a.ApproverIdPGroups) == 0 && len(a.EscalateIdPGroups) == 0
}

func (a Approval) clone() Approval {
	a.Approvers = slices.Clone(a.Approvers)
	a.ApproverEmails = slices.Clone(a.ApproverEmails)
	a.ApproverIdPGroups = slices.Clone(a.ApproverIdPGroups)
	a.EscalateIdPGroups = slices.Clone(a.EscalateIdPGroups)
	a.Notify = slices.Clone(a.Notify)
	a.EscalateTo = slices.Clone(a.EscalateTo)
	a.EscalateEmails = slices.Clone(a.EscalateEmails)
	a.EscalateNotify = slices.Clone(a.EscalateNotify)
	if a.Bulk != nil {
		b := *a.Bulk
		a.Bulk = &b
	}
	return a
}

// UnderRule is the approval rule of an action that rule r decided: the tool's, with the
// rule and its decision named and, for a human rule, the rule's required and approvers in
// place of the tool's. It shares no memory with a.
func (a *Approval) UnderRule(r *Rule) *Approval {
	out := Approval{Required: 1}
	if a != nil {
		out = a.clone()
	}
	out.Policy, out.Grants = nil, nil
	out.Rule, out.Decision = r.Name, r.Decide
	if r.Decide != DecideHuman {
		out.Required = 1 // the rule decided: nobody else
	}
	if r.Required > 0 {
		out.Required = r.Required
	}
	if len(r.Approvers) > 0 {
		out.Approvers = slices.Clone(r.Approvers)
		out.ApproverEmails = slices.Clone(r.ApproverEmails)
		out.ApproverIdPGroups = slices.Clone(r.ApproverIdPGroups)
	}
	return &out
}
