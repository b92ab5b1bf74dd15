package classify

import "time"

// Event types of approval routing: what a notification channel can be told.
const (
	EventActionPending          = "action.pending"
	EventActionReminder         = "action.reminder"
	EventActionEscalated        = "action.escalated"
	EventActionApproved         = "action.approved"
	EventActionRejected         = "action.rejected"
	EventActionChangesRequested = "action.changes_requested"
	EventActionExpired          = "action.expired"
	EventActionCancelled        = "action.cancelled"
	EventActionDone             = "action.done"
	EventActionFailed           = "action.failed"
	EventTicketOpened           = "ticket.opened"
)

// EventTypes lists every event type, in the order the documentation gives them.
var EventTypes = []string{
	EventActionPending, EventActionReminder, EventActionEscalated, EventActionApproved,
	EventActionRejected, EventActionChangesRequested, EventActionExpired, EventActionCancelled,
	EventActionDone, EventActionFailed, EventTicketOpened,
}

// Channel is one named notification channel of the tools file. Exactly one of Slack, Email
// and Webhook is set.
type Channel struct {
	Name    string        `json:"name"`
	Slack   *SlackChannel `json:"slack,omitempty"`
	Email   *EmailChannel `json:"email,omitempty"`
	Webhook string        `json:"webhook,omitempty"` // URL that receives signed event POSTs
	// Secret signs the webhook channel's events (the value, after ${VAR} expansion); never
	// the key of an executor, so a receiver of events cannot forge an execution.
	Secret string `json:"-"`
	// Events, when set, subscribes the channel to these event types for every tool; a
	// channel without Events hears only of the tools that name it in approval.notify or
	// approval.escalate_notify.
	Events []string `json:"events,omitempty"`
}

// Kind is "slack", "email" or "webhook".
func (c Channel) Kind() string {
	switch {
	case c.Slack != nil:
		return "slack"
	case c.Email != nil:
		return "email"
	default:
		return "webhook"
	}
}

// SlackChannel posts to one Slack channel by its id (C0APPROVALS).
type SlackChannel struct {
	Channel string `json:"channel"`
}

// EmailChannel mails these addresses.
type EmailChannel struct {
	To []string `json:"to"`
}

// Approval is a tool's approval rule: who may decide, how many must approve, whom to tell,
// and when to remind and escalate. It is part of the tool snapshot an action keeps, with the
// groups resolved to the emails they held at submission.
type Approval struct {
	// Approvers are group names; empty means every approver and admin may decide.
	Approvers []string `json:"approvers,omitempty"`
	// ApproverEmails are the members of Approvers when the action was submitted.
	ApproverEmails []string `json:"approver_emails,omitempty"`
	// Required distinct approvals (default 1).
	Required       int           `json:"required"`
	Notify         []string      `json:"notify,omitempty"`
	RemindAfter    time.Duration `json:"remind_after,omitempty"`
	EscalateAfter  time.Duration `json:"escalate_after,omitempty"`
	EscalateTo     []string      `json:"escalate_to,omitempty"`
	EscalateEmails []string      `json:"escalate_emails,omitempty"` // members of EscalateTo at submission
	EscalateNotify []string      `json:"escalate_notify,omitempty"`
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
