// Package pagerduty is the PagerDuty notification channel, through the Events API v2: an
// escalation or a ticket.opened triggers an incident whose dedup_key is the action's id (the
// ticket's id), with a link to its page; the action's decision, or the ticket's resolution,
// resolves it with the same dedup_key. It is a queue.Channel, driven by
// maintenance.ChannelNotifier, which records each trigger so that the decision finds it.
package pagerduty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// DefaultURL is PagerDuty's Events API; APPROVALS_PAGERDUTY_URL overrides it (tests).
const DefaultURL = "https://events.pagerduty.com"

// Config sets up a Notifier.
type Config struct {
	URL       string // APPROVALS_PAGERDUTY_URL; DefaultURL when empty
	PublicURL string // APPROVALS_PUBLIC_URL, the base of the link to the action page
	// Client sends the requests; nil means one with a 10 s timeout.
	Client *http.Client
	// Now is the clock of a trigger's timestamp; nil means time.Now.
	Now func() time.Time
}

// Notifier triggers and resolves PagerDuty incidents.
type Notifier struct {
	enqueue, publicURL string
	client             *http.Client
	now                func() time.Time
}

// New checks cfg and returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	if cfg.PublicURL == "" {
		return nil, errors.New("pagerduty channel: APPROVALS_PUBLIC_URL is not set")
	}
	base := cfg.URL
	if base == "" {
		base = DefaultURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("APPROVALS_PAGERDUTY_URL %q is not an absolute http or https URL", base)
	}
	c := http.Client{Timeout: 10 * time.Second}
	if cfg.Client != nil {
		c = *cfg.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// Each request carries the traceparent of the span that sent it.
	c.Transport = tracing.Transport(c.Transport)
	n := &Notifier{enqueue: strings.TrimRight(base, "/") + "/v2/enqueue", publicURL: strings.TrimRight(cfg.PublicURL, "/"), client: &c, now: cfg.Now}
	if n.now == nil {
		n.now = time.Now
	}
	return n, nil
}

// Event is one Events API v2 event.
type Event struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"` // trigger or resolve
	DedupKey    string   `json:"dedup_key"`
	Payload     *Payload `json:"payload,omitempty"` // trigger only
	Links       []Link   `json:"links,omitempty"`
	Client      string   `json:"client,omitempty"`
	ClientURL   string   `json:"client_url,omitempty"`
}

// Payload describes a triggered incident.
type Payload struct {
	Summary       string            `json:"summary"` // at most 1024 characters
	Source        string            `json:"source"`
	Severity      string            `json:"severity"` // critical, error, warning or info
	Timestamp     string            `json:"timestamp,omitempty"`
	Component     string            `json:"component,omitempty"`
	Group         string            `json:"group,omitempty"`
	Class         string            `json:"class,omitempty"`
	CustomDetails map[string]string `json:"custom_details,omitempty"`
}

// Link is a link shown on the incident.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// Render builds the event of n without its routing key: a trigger for a notification that
// asks for attention (escalated, ticket.opened; pending and reminder too, on a channel that
// subscribes to them), a resolve for one that reports how things ended.
func (p *Notifier) Render(n queue.Notification) (Event, error) {
	a := n.Action
	if a == nil {
		return Event{}, fmt.Errorf("notification %s: no action", n.ID)
	}
	key, link := a.ID, p.publicURL+"/actions/"+a.ID
	if n.Ticket != nil {
		key, link = n.Ticket.ID, p.publicURL+"/tickets"
	}
	if queue.Reports(n.Type) {
		return Event{EventAction: "resolve", DedupKey: key}, nil
	}
	summary, severity, class := "Approval waiting: "+a.Tool+": "+preview.Headline(a), "warning", "approval"
	switch n.Type {
	case classify.EventActionEscalated:
		summary = "Escalated: approval waiting: " + a.Tool + ": " + preview.Headline(a)
	case classify.EventTicketOpened:
		summary, severity, class = fmt.Sprintf("Ticket opened (%s): %s: %s", n.Ticket.Kind, a.Tool, a.IntentKey), "error", "ticket"
	}
	details := map[string]string{"action": a.ID, "tool": a.Tool, "intent_key": a.IntentKey, "asked_by": a.RequestedBy, "state": string(a.State)}
	if a.ExpiresAt != nil && a.State == queue.StatePending {
		details["expires_at"] = a.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if n.Ticket != nil {
		details["ticket"], details["ticket_kind"] = n.Ticket.ID, string(n.Ticket.Kind)
	}
	return Event{EventAction: "trigger", DedupKey: key,
		Payload: &Payload{Summary: cut(summary, 1024), Source: "approvals", Severity: severity, Class: class,
			Component: a.Tool, Timestamp: n.OccurredAt.UTC().Format(time.RFC3339), CustomDetails: details},
		Links:  []Link{{Href: link, Text: "Open in approvals"}},
		Client: "approvals", ClientURL: link}, nil
}

// Send enqueues e, a trigger, and returns its dedup key to record: the decision resolves
// what was triggered. A resolve sent as a new message (the channel subscribes to decisions
// but triggered nothing for the action) has nothing to resolve, and is not sent.
func (p *Notifier) Send(ctx context.Context, n queue.Notification, e Event) (queue.Sent, error) {
	if e.EventAction != "trigger" {
		return queue.Sent{}, nil
	}
	if err := p.post(ctx, n, e); err != nil {
		return queue.Sent{}, err
	}
	return queue.Sent{Ref: e.DedupKey}, nil
}

// Update resolves what was triggered: for a decision the action's incident, for a ticket's
// resolution that ticket's. Resolving is idempotent, so a retry does no harm.
func (p *Notifier) Update(ctx context.Context, n queue.Notification, sent []queue.ChannelMessage, e Event) (queue.Sent, error) {
	if e.EventAction != "resolve" {
		// Render said trigger: the action was decided while its trigger was on its way, and
		// the trigger's record is all there is to resolve.
		e = Event{EventAction: "resolve", DedupKey: e.DedupKey}
	}
	for _, m := range sent {
		if m.Ref != e.DedupKey {
			continue
		}
		if err := p.post(ctx, n, e); err != nil {
			return queue.Sent{}, err
		}
		return queue.Sent{}, nil
	}
	return queue.Sent{}, nil
}

func (p *Notifier) post(ctx context.Context, n queue.Notification, e Event) error {
	if n.Channel.PagerDuty == nil || n.Channel.PagerDuty.RoutingKey == "" {
		return fmt.Errorf("pagerduty channel %q: no routing key", n.Channel.Name)
	}
	e.RoutingKey = n.Channel.PagerDuty.RoutingKey
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.enqueue, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "approvals")
	what := fmt.Sprintf("pagerduty channel %q: %s %s", n.Channel.Name, e.EventAction, e.DedupKey)
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		// PagerDuty throttles per routing key and says no delay; the outbox's backoff waits.
		err := fmt.Errorf("%s: answered %s", what, resp.Status)
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return &queue.RetryAfterError{After: time.Duration(s) * time.Second, Err: err}
		}
		return err
	}
	// The answer may repeat the event, and so the routing key: only its message is kept.
	var answer struct {
		Message string   `json:"message"`
		Errors  []string `json:"errors"`
	}
	_ = json.Unmarshal(snippet, &answer)
	return fmt.Errorf("%s: answered %s: %s", what, resp.Status, strings.TrimSpace(answer.Message+" "+strings.Join(answer.Errors, "; ")))
}

func cut(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit-1]) + "…"
}
