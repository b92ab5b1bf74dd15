package classify

import (
	"maps"
	"slices"
)

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

// Channels returns every channel, sorted by name.
func (r *Registry) Channels() []Channel {
	if r == nil {
		return nil
	}
	out := make([]Channel, 0, len(r.channels))
	for _, name := range slices.Sorted(maps.Keys(r.channels)) {
		out = append(out, r.channels[name].clone())
	}
	return out
}

// HasChannels reports whether the file defines any channel: cheaper than
// Channels for a caller that asks on every change.
func (r *Registry) HasChannels() bool { return r != nil && len(r.channels) > 0 }

// Channel returns the named channel.
func (r *Registry) Channel(name string) (Channel, bool) {
	if r == nil {
		return Channel{}, false
	}
	c, ok := r.channels[name]
	return c.clone(), ok
}

// ChannelsFor returns the channels that hear of an event of the given type about an action of
// tool (the action's snapshot, so the rule it was submitted under decides), sorted by name
// and each once. A channel with Events hears exactly those types, of every tool; any other
// channel hears a tool's pending, reminder and decision events when the tool's notify names
// it, and its escalation when escalate_notify does.
func (r *Registry) ChannelsFor(event string, tool Tool) []Channel {
	if r == nil {
		return nil
	}
	named := toolNotifies(event, tool)
	var out []Channel
	for _, name := range slices.Sorted(maps.Keys(r.channels)) {
		if c := r.channels[name]; c.hears(event, named) {
			out = append(out, c.clone())
		}
	}
	return out
}

// Notifies reports whether any channel hears of event about tool: what
// ChannelsFor would return something for, without building the list (the
// Service asks it for every event it writes).
func (r *Registry) Notifies(event string, tool Tool) bool {
	if r == nil {
		return false
	}
	named := toolNotifies(event, tool)
	for _, c := range r.channels {
		if c.hears(event, named) {
			return true
		}
	}
	return false
}

// toolNotifies is the channels tool's approval rule names for event.
func toolNotifies(event string, tool Tool) []string {
	a := tool.Approval
	if a == nil {
		return nil
	}
	switch event {
	case EventActionPending, EventActionReminder, EventActionApproved, EventActionRejected,
		EventActionChangesRequested, EventActionExpired, EventActionCancelled,
		EventPlanPending, EventPlanReminder, EventPlanApproved, EventPlanRejected,
		EventPlanChangesRequested, EventPlanCancelled, EventPlanExpired:
		return a.Notify
	case EventActionEscalated, EventPlanEscalated:
		return a.EscalateNotify
	}
	return nil
}

// hears is the routing rule: a channel that lists event types hears of
// those, whatever the tool; one that lists none hears of what a tool's
// rule names it for.
func (c Channel) hears(event string, named []string) bool {
	if len(c.Events) > 0 {
		return slices.Contains(c.Events, event)
	}
	return slices.Contains(named, c.Name)
}

func (c Channel) clone() Channel {
	if c.Slack != nil {
		s := *c.Slack
		c.Slack = &s
	}
	if c.Email != nil {
		e := EmailChannel{To: slices.Clone(c.Email.To)}
		c.Email = &e
	}
	if c.Teams != nil {
		t := *c.Teams
		c.Teams = &t
	}
	if c.Telegram != nil {
		t := *c.Telegram
		c.Telegram = &t
	}
	if c.PagerDuty != nil {
		pd := *c.PagerDuty
		c.PagerDuty = &pd
	}
	c.Events = slices.Clone(c.Events)
	return c
}
