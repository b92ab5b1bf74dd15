package queue

import (
	"context"
	"fmt"
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
