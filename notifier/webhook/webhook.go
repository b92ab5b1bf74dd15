// Package webhook delivers approval events to a URL as signed JSON POSTs: the webhook
// notification channel (a queue.Channel, which maintenance.ChannelNotifier drives). Unlike the webhook executor, a notification is at-least-once: any
// failure is returned for the outbox to retry, and the stable webhook-id lets the receiver
// drop a duplicate.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
	"github.com/approvals/approvals/webhooksign"
)

// DefaultTimeout bounds one delivery when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Config sets up a Notifier. Each channel signs with its own secret (classify.Channel.Secret),
// never with APPROVALS_WEBHOOK_SECRET, which signs executions.
type Config struct {
	Timeout time.Duration // per request; DefaultTimeout when zero
	// Client sends the requests; nil means a client of its own. Redirects are never
	// followed whatever the client says: a receiver that moved must be reconfigured, or a
	// signed event could be handed to a host nobody configured.
	Client *http.Client
	// Now is the clock of the webhook-timestamp header; nil means time.Now.
	Now func() time.Time
}

// Notifier posts events to the channel's webhook URL.
type Notifier struct {
	timeout time.Duration
	client  *http.Client
	now     func() time.Time
}

// New returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	n := &Notifier{timeout: cfg.Timeout, now: cfg.Now}
	if n.timeout <= 0 {
		n.timeout = DefaultTimeout
	}
	if n.now == nil {
		n.now = time.Now
	}
	c := http.Client{}
	if cfg.Client != nil {
		c = *cfg.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// Each request carries the traceparent of the span that sent it.
	c.Transport = tracing.Transport(c.Transport)
	n.client = &c
	return n, nil
}

// Event is the body of every POST. Data.Action is encoded exactly as the REST API encodes
// an action (queue.Action's JSON), so one decoder serves both.
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData carries the action, and for ticket.opened the ticket too; a plan's event
// (plan.*) carries the plan instead, encoded as GET /api/v1/plans/{id} answers it.
type EventData struct {
	Ticket *queue.Ticket `json:"ticket,omitempty"`
	Action *queue.Action `json:"action,omitempty"`
	Plan   *queue.Plan   `json:"plan,omitempty"`
}

// Body returns the JSON document posted for n.
func Body(n queue.Notification) ([]byte, error) {
	if n.Plan != nil {
		return json.Marshal(Event{ID: n.ID, Type: n.Type, Timestamp: n.OccurredAt.UTC(), Data: EventData{Plan: n.Plan}})
	}
	if n.Action == nil {
		return nil, fmt.Errorf("notification %s: no action", n.ID)
	}
	return json.Marshal(Event{
		ID:        n.ID,
		Type:      n.Type,
		Timestamp: n.OccurredAt.UTC(),
		Data:      EventData{Ticket: n.Ticket, Action: n.Action},
	})
}

// Render is the body posted for n (the webhook channel's queue.Channel message).
func (w *Notifier) Render(n queue.Notification) ([]byte, error) { return Body(n) }

// Update posts the event of a decision as any other: an event is not changed once sent.
func (w *Notifier) Update(ctx context.Context, n queue.Notification, _ []queue.ChannelMessage, body []byte) (queue.Sent, error) {
	return w.Send(ctx, n, body)
}

// Send posts body, the event n, to n.Channel.Webhook. A 2xx answer is delivery; any other
// answer, a redirect, a timeout or a connection error is an error for the outbox to retry.
func (w *Notifier) Send(ctx context.Context, n queue.Notification, body []byte) (queue.Sent, error) {
	return queue.Sent{}, w.post(ctx, n, body)
}

func (w *Notifier) post(ctx context.Context, n queue.Notification, body []byte) error {
	target := n.Channel.Webhook
	if target == "" {
		return fmt.Errorf("webhook channel %q: no URL", n.Channel.Name)
	}
	shown := Redact(target)
	// The tools file checked the secret; one that fails here is a hand-made channel.
	signer, err := webhooksign.New(n.Channel.Secret)
	if n.Channel.Secret == "" || err != nil {
		return fmt.Errorf("webhook channel %q: no usable secret to sign its events with", n.Channel.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %s", shown, redactErr(err, target))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "approvals")
	// The signature's timestamp is the time of sending, not of the event: a receiver rejects
	// old timestamps as replays, and a retry hours later is not a replay.
	signer.SetHeaders(req.Header, n.ID, w.now(), body)
	resp, err := w.client.Do(req)
	if err != nil {
		// *url.Error repeats the whole URL, credentials and all; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook %s: %s", shown, redactErr(err, target))
	}
	defer resp.Body.Close()
	// Read a little so the connection can be reused, and to say what the receiver said.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fmt.Errorf("webhook %s: answered %s (redirects are not followed)", shown, resp.Status)
	}
	return fmt.Errorf("webhook %s: answered %s: %s", shown, resp.Status, strings.TrimSpace(string(snippet)))
}

// redactErr returns err's text with any copy of the raw URL replaced by its redacted form.
func redactErr(err error, raw string) string {
	return strings.ReplaceAll(err.Error(), raw, Redact(raw))
}

// Redact returns the URL fit for logs and errors: no user:password, and the values of query
// parameters whose names suggest a credential replaced by "redacted". A URL that does not
// parse is not shown at all, since where its secret is cannot be told.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for name := range q {
			if secretName(name) {
				q[name] = []string{"redacted"}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"token", "key", "secret", "password", "passwd", "pwd", "sig", "auth", "code"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
