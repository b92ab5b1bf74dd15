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
	// EventTicketResolved is not one a channel subscribes to: it reaches the channels that
	// told of the ticket (FollowsUp), so that PagerDuty resolves the incident it opened.
	EventTicketResolved = "ticket.resolved"

	// A plan's events (CONTRACT section 19): told as an action's are, to the channels of
	// its human steps' tools (notify; escalate_notify for plan.escalated) and to those that
	// list the type in events.
	EventPlanPending          = "plan.pending"
	EventPlanReminder         = "plan.reminder"
	EventPlanEscalated        = "plan.escalated"
	EventPlanApproved         = "plan.approved"
	EventPlanRejected         = "plan.rejected"
	EventPlanChangesRequested = "plan.changes_requested"
	EventPlanCancelled        = "plan.cancelled"
	// EventPlanExpired tells of a pending plan the sweep expired.
	EventPlanExpired = "plan.expired"
)

// EventTypes lists every event type, in the order the documentation gives them.
var EventTypes = []string{
	EventActionPending, EventActionReminder, EventActionEscalated, EventActionApproved,
	EventActionRejected, EventActionChangesRequested, EventActionExpired, EventActionCancelled,
	EventActionDone, EventActionFailed, EventTicketOpened,
	EventPlanPending, EventPlanReminder, EventPlanEscalated, EventPlanApproved, EventPlanRejected,
	EventPlanChangesRequested, EventPlanCancelled, EventPlanExpired,
}

// Channel is one named notification channel of the tools file. Exactly one of Slack, Email,
// Webhook, Teams, Telegram and PagerDuty is set.
type Channel struct {
	Name    string        `json:"name"`
	Slack   *SlackChannel `json:"slack,omitempty"`
	Email   *EmailChannel `json:"email,omitempty"`
	Webhook string        `json:"webhook,omitempty"` // URL that receives signed event POSTs
	// Teams, Telegram and PagerDuty are the channels of section 17; what makes them
	// credentials (a Workflows URL, a routing key) is never encoded.
	Teams     *TeamsChannel     `json:"teams,omitempty"`
	Telegram  *TelegramChannel  `json:"telegram,omitempty"`
	PagerDuty *PagerDutyChannel `json:"pagerduty,omitempty"`
	// Secret signs the webhook channel's events (the value, after ${VAR} expansion); never
	// the key of an executor, so a receiver of events cannot forge an execution.
	Secret string `json:"-"`
	// Events, when set, subscribes the channel to these event types for every tool; a
	// channel without Events hears only of the tools that name it in approval.notify or
	// approval.escalate_notify.
	Events []string `json:"events,omitempty"`
}

// Channel kinds: the key of a channel's settings in the tools file.
const (
	KindSlack     = "slack"
	KindEmail     = "email"
	KindWebhook   = "webhook"
	KindTeams     = "teams"
	KindTelegram  = "telegram"
	KindPagerDuty = "pagerduty"
)

// Kind is the channel's kind: KindSlack, KindEmail, KindWebhook, KindTeams, KindTelegram
// or KindPagerDuty.
func (c Channel) Kind() string {
	switch {
	case c.Slack != nil:
		return KindSlack
	case c.Email != nil:
		return KindEmail
	case c.Teams != nil:
		return KindTeams
	case c.Telegram != nil:
		return KindTelegram
	case c.PagerDuty != nil:
		return KindPagerDuty
	default:
		return KindWebhook
	}
}

// Address is where the channel sends, as its kind names the destination of a message it
// may update later (queue.ChannelMessage.Address): the Slack channel id, the Telegram chat
// id, and for every other kind the channel's name, since a URL or a routing key is a
// credential that is never stored.
func (c Channel) Address() string {
	switch {
	case c.Slack != nil:
		return c.Slack.Channel
	case c.Telegram != nil:
		return c.Telegram.ChatID
	}
	return c.Name
}

// FollowsUp reports whether a notification of type typ reaches, besides the channels that
// hear it, every channel that told of the action before (sent a message it recorded): a
// decision, so that no message keeps its buttons and no incident stays open whichever list
// named the channel, and a ticket's resolution, which resolves the incident its opening
// triggered.
func FollowsUp(typ string) bool {
	switch typ {
	case EventActionApproved, EventActionRejected, EventActionChangesRequested, EventActionExpired,
		EventActionCancelled, EventTicketResolved,
		EventPlanApproved, EventPlanRejected, EventPlanChangesRequested, EventPlanCancelled, EventPlanExpired:
		return true
	}
	return false
}

// SlackChannel posts to one Slack channel by its id (C0APPROVALS).
type SlackChannel struct {
	Channel string `json:"channel"`
}

// TeamsChannel posts Adaptive Cards to a Microsoft Teams Workflows webhook.
type TeamsChannel struct {
	// Webhook is the Workflows URL; its path and query are the credential.
	Webhook string `json:"-"`
}

// TelegramChannel sends to one Telegram chat by its id ("-100123") or a channel's
// @username, with the bot of APPROVALS_TELEGRAM_BOT_TOKEN.
type TelegramChannel struct {
	ChatID string `json:"chat_id"`
}

// PagerDutyChannel triggers and resolves incidents through the Events API v2.
type PagerDutyChannel struct {
	// RoutingKey is the integration's key (after ${VAR} expansion): a credential.
	RoutingKey string `json:"-"`
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
