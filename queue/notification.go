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
	ID         string
	Type       string // one of classify.EventTypes
	Channel    classify.Channel
	Action     *Action // the action as it is when the notification is sent
	Ticket     *Ticket // ticket.opened only
	OccurredAt time.Time
	Attempt    int // 1 on the first try
}

// Notifier delivers notifications to one kind of channel ("slack", "email", "webhook").
// Notify returns nil once the channel accepted the notification; any error is retried with
// backoff. A *RetryAfterError asks for the retry no earlier than its delay (Slack's 429).
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
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

// SlackMessage is one message posted to Slack for an action; every one of them is updated
// when the action is decided.
type SlackMessage struct {
	ActionID string
	Channel  string // Slack channel id
	TS       string // the ts chat.postMessage returned
	PostedAt time.Time
}

// SlackMessages records the Slack messages posted for actions.
type SlackMessages interface {
	SlackMessageAdd(ctx context.Context, m SlackMessage) error
	SlackMessageList(ctx context.Context, actionID string) ([]SlackMessage, error)
}

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
	Type     string // classify.EventTypes
	Channel  string // the channel's name in the tools file
	Kind     string // slack, email or webhook
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
	// of it); none for an event that tells nobody.
	Route func(ev Event, a *Action) []NotificationRecord
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
	SlackMessages
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
	EventExpired, EventCancelled, EventCompleted, EventFailed, EventTicketOpened, EventReminder, EventEscalated}

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
