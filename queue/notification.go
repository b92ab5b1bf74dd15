package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

// Notification is one event told to one channel. It is stored (an outbox row) in the same
// transaction as the change that causes it and delivered at least once by any server
// process; ID stays the same across retries so that a receiver can recognise a duplicate
// (the webhook-id header, the email Message-ID).
type Notification struct {
	ID      string
	Type    string // one of classify.EventTypes
	Channel classify.Channel
	Action  *Action // the action as it is when the notification is sent; nil for a plan's
	Plan    *Plan   // a plan's notification (plan.*): the plan as it is when sent
	// PlanSteps are Plan's steps as actions (Plan.StepActions), to preview.
	PlanSteps  []*Action
	Ticket     *Ticket // ticket.opened only
	OccurredAt time.Time
	Attempt    int // 1 on the first try
}

// Notifier delivers notifications to one kind of channel: what the outbox's sender calls.
// Notify returns nil once the channel accepted the notification; any error is retried with
// backoff. A *RetryAfterError asks for the retry no earlier than its delay (Slack's 429).
// A channel kind implements Channel; maintenance.ChannelNotifier makes it a Notifier.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// Channel is one kind of notification channel (slack, email, webhook, teams, telegram,
// pagerduty), as the outbox drives it: each kind is one package that renders a
// notification into its own message type M, sends it, and brings what it sent up to date
// once the action is decided. The outbox keeps the rest (what was sent, retries, the race
// between a message and the decision), so a new channel is one package and its settings.
type Channel[M any] interface {
	// Render builds what n says from the action as it is now: the message Send posts or
	// Update writes over what was sent.
	Render(n Notification) (M, error)
	// Send delivers m as a new message. A message the kind can bring up to date later comes
	// back with its Ref (Slack's ts, Telegram's message id, PagerDuty's dedup key), which the
	// outbox records; a zero Sent is a message that stays as it is (an email).
	Send(ctx context.Context, n Notification, m M) (Sent, error)
	// Update tells of n (a decision, an outcome or a ticket's resolution) where the channel
	// told of the action before: sent are the messages recorded for the action in n's
	// channel, oldest first, perhaps none. A kind that edits rewrites them all (and sends m
	// anew when there are none); one that cannot change what it sent sends m as a new
	// message. Whatever it sends anew it returns, as Send does.
	Update(ctx context.Context, n Notification, sent []ChannelMessage, m M) (Sent, error)
}

// Sent is what a channel says of a message it sent: where (Address, as the kind names its
// destination) and the handle that updates it (Ref); a zero Ref keeps no record.
type Sent struct {
	Address, Ref string
}

// ChannelMessage is a message a channel sent for an action and brings up to date once the
// action is decided: Slack's posts (ts), Telegram's messages (message_id), PagerDuty's
// incidents (dedup key). Any server process may update it, so it is stored.
type ChannelMessage struct {
	ActionID string
	PlanID   string // a message about a plan (ActionID is then "")
	Kind     string // slack, telegram, pagerduty
	// Address is where it went, as classify.Channel.Address names it: the Slack channel id,
	// the Telegram chat id, or the channel's name for kinds whose address is a credential.
	Address string
	Ref     string
	SentAt  time.Time
}

// ChannelMessages records the messages sent for actions.
type ChannelMessages interface {
	// ChannelMessageAdd records m once (adding it again, a repeated notification, keeps
	// one); ErrNotFound for an unknown action.
	ChannelMessageAdd(ctx context.Context, m ChannelMessage) error
	// ChannelMessageList returns the action's messages, oldest first.
	ChannelMessageList(ctx context.Context, actionID string) ([]ChannelMessage, error)
}

// PlanMessages reads the messages sent for plans; ChannelMessageAdd
// records one when its PlanID is set.
type PlanMessages interface {
	// PlanMessageList returns the plan's messages, oldest first.
	PlanMessageList(ctx context.Context, planID string) ([]ChannelMessage, error)
}

// Reports reports whether a notification of type typ reports how something ended (a
// decision, an outcome, a ticket's resolution), which a channel tells by bringing up to
// date what it sent (Channel.Update), rather than asking for attention (pending, reminder,
// escalated, ticket.opened), which it tells with a new message (Channel.Send).
func Reports(typ string) bool {
	switch typ {
	case classify.EventActionPending, classify.EventActionReminder, classify.EventActionEscalated, classify.EventTicketOpened,
		classify.EventPlanPending, classify.EventPlanReminder, classify.EventPlanEscalated:
		return false
	}
	return true
}

// RetryAfterError is a delivery failure whose receiver said when to try again.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// NotificationState is where a notification is in its delivery.
type NotificationState string

const (
	NotificationPending   NotificationState = "pending"
	NotificationDelivered NotificationState = "delivered"
	NotificationFailed    NotificationState = "failed" // given up after GiveUpAfter
)

// NotificationRecord is a stored notification: one event for one channel.
type NotificationRecord struct {
	ID       string
	EventID  int64
	ActionID string
	PlanID   string // a plan's notification (ActionID is then "")
	Type     string // classify.EventTypes
	Channel  string // the channel's name in the tools file
	Kind     string // the channel's kind: slack, email, webhook, teams, telegram, pagerduty
	State    NotificationState
	// Attempts counts claims; a claim is an attempt even when its sender
	// died before it could say how it went.
	Attempts    int
	CreatedAt   time.Time
	DueAt       time.Time // when a sender may take it next
	DeliveredAt *time.Time
	LastError   string
	// EventAt and EventData are the causing event's (set by
	// NotificationClaim): when it happened and, for ticket.opened, which
	// ticket.
	EventAt   time.Time
	EventData json.RawMessage
}

// NotificationSettleParams end one attempt. The update applies only while
// the notification is pending with Attempts attempts, so a sender whose
// lease ran out (and whose row another sender took) changes nothing.
type NotificationSettleParams struct {
	ID        string
	Attempts  int
	State     NotificationState // delivered, pending (retry at DueAt) or failed
	Now       time.Time
	DueAt     time.Time // pending: the next try
	LastError string
}

// NotificationFanOutParams take a batch of events for the fan-out.
type NotificationFanOutParams struct {
	Now   time.Time
	Limit int
	// Route returns the notifications of one event (the channels that hear
	// of it); none for an event that tells nobody. sent are the messages
	// recorded for the event's action (ChannelMessages), so that a decision
	// reaches every channel that told of the action.
	Route func(ev Event, a *Action, sent []ChannelMessage) []NotificationRecord
	// RoutePlan does the same for an event of a plan (subject plan:ID),
	// with the messages recorded for the plan.
	RoutePlan func(ev Event, pl *Plan, sent []ChannelMessage) []NotificationRecord
}

// NotificationClaimParams take a batch of due notifications for a sender.
type NotificationClaimParams struct {
	Now   time.Time
	Lease time.Duration
	Limit int
}

// Outbox is the storage of notifications, part of Store.
type Outbox interface {
	// NotificationFanOut takes up to p.Limit events of NotifyingEventKinds
	// not yet fanned out (skipping events another process holds), inserts
	// the notifications p.Route returns for each (unique per event and
	// channel) and marks the events fanned out, in one transaction. It
	// returns the number of events taken.
	NotificationFanOut(ctx context.Context, p NotificationFanOutParams) (int, error)
	// NotificationClaim takes up to p.Limit pending notifications due at
	// p.Now (skipping rows another process holds), counts an attempt and
	// moves each one p.Lease ahead: a sender that dies leaves it due again
	// when the lease ends.
	NotificationClaim(ctx context.Context, p NotificationClaimParams) ([]NotificationRecord, error)
	// NotificationSettle ends an attempt; false when the row had moved on.
	NotificationSettle(ctx context.Context, p NotificationSettleParams) (bool, error)
	// NotificationCountPending counts notifications not yet delivered nor
	// given up (the queue depth on /metrics).
	NotificationCountPending(ctx context.Context) (int64, error)
	ChannelMessages
	PlanMessages
}

// The outbox. Every transition already writes an event row in its own
// transaction; the event kinds below are the ones that notify, so such a
// row is the outbox entry: it cannot be lost once the change committed, and
// it costs the transition nothing more than the row it wrote anyway. The
// fan-out turns each of them into one notification row per channel, in one
// transaction; the sender delivers those rows at least once, with retries.

// NotifyingEventKinds are the event kinds the fan-out reads. The stores'
// partial index events_fan_out lists the same kinds (the migrations), so
// that events of other kinds (replays, claims) never enter it.
var NotifyingEventKinds = []string{EventSubmitted, EventApproved, EventRejected, EventChangesRequested,
	EventExpired, EventCancelled, EventCompleted, EventFailed, EventTicketOpened, EventReminder, EventEscalated,
	EventTicketResolved, EventPlanSubmitted, EventPlanApproved, EventPlanRejected, EventPlanChanges,
	EventPlanCancelled, EventPlanReminder, EventPlanEscalated, EventPlanExpired}

// OutcomeEventKind is the event that records an action reaching outcome
// (done or failed), whoever reported it: the agent, the executor or an
// operator resolving a stale ticket.
func OutcomeEventKind(outcome State) string {
	if outcome == StateDone {
		return EventCompleted
	}
	return EventFailed
}

// NotificationType is the event type (classify.EventTypes) an event tells
// channels about, or "" for one that tells nobody (the submission of an
// action that waits for no person).
func NotificationType(ev Event, a *Action) string {
	switch ev.Kind {
	case EventSubmitted:
		if a.WaitsForPerson() {
			return classify.EventActionPending
		}
	case EventApproved:
		return classify.EventActionApproved
	case EventRejected:
		return classify.EventActionRejected
	case EventChangesRequested:
		return classify.EventActionChangesRequested
	case EventExpired:
		return classify.EventActionExpired
	case EventCancelled:
		return classify.EventActionCancelled
	case EventCompleted:
		return classify.EventActionDone
	case EventFailed:
		return classify.EventActionFailed
	case EventTicketOpened:
		return classify.EventTicketOpened
	case EventReminder:
		return classify.EventActionReminder
	case EventEscalated:
		return classify.EventActionEscalated
	case EventTicketResolved:
		return classify.EventTicketResolved
	}
	return ""
}

// unrouted reports whether ev, about to be written, notifies no channel of
// the tools file now in force, so that the fan-out need never read it. a
// may be nil for an outcome (action.done, action.failed), which only
// channels subscribed to the event type hear of, whatever the tool; for
// any other kind without its action, the fan-out judges. Judged at the
// write, routing is that of the file in force when the event happened; a
// reload a moment later does not change who hears of it.
func (s *Service) unrouted(ev Event, a *Action) bool {
	switch {
	case a != nil:
		typ := NotificationType(ev, a)
		return typ == "" || !s.Registry().Notifies(typ, a.Spec)
	case ev.Kind == EventCompleted:
		return !s.Registry().Notifies(classify.EventActionDone, classify.Tool{})
	case ev.Kind == EventFailed:
		return !s.Registry().Notifies(classify.EventActionFailed, classify.Tool{})
	}
	return false
}

// NotifyingKindsSQL is NotifyingEventKinds as an SQL list, for the stores.
func NotifyingKindsSQL() string {
	out := make([]string, len(NotifyingEventKinds))
	for i, k := range NotifyingEventKinds {
		out[i] = "'" + k + "'"
	}
	return strings.Join(out, ", ")
}
