package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

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
// action that needs no approval).
func NotificationType(ev Event, a *Action) string {
	switch ev.Kind {
	case EventSubmitted:
		if a.Class == classify.AtMostOnce {
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

// OutboxConfig configures the sender.
type OutboxConfig struct {
	// Notifiers deliver by channel kind (slack, email, webhook). A kind
	// without a notifier in this process is retried with backoff: another
	// process may have it, or a restart with the setting.
	Notifiers map[string]Notifier
	// Lease is how long a claimed notification stays with its sender
	// before another may take it; one delivery is given half of it.
	// Default 1 minute.
	Lease time.Duration
	// Poll paces the fan-out and the sender. Default 1 second.
	Poll time.Duration
	// Backoff is the first retry delay, doubled per attempt up to
	// BackoffCap. Defaults 5 seconds and 5 minutes.
	Backoff, BackoffCap time.Duration
	// GiveUpAfter ends the retries this long after the notification was
	// created. Default 24 hours.
	GiveUpAfter time.Duration
	// Batch is how many events or notifications one step takes. Default 100.
	Batch int
}

func (c *OutboxConfig) defaults() {
	if c.Lease <= 0 {
		c.Lease = time.Minute
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Backoff <= 0 {
		c.Backoff = 5 * time.Second
	}
	if c.BackoffCap <= 0 {
		c.BackoffCap = 5 * time.Minute
	}
	if c.GiveUpAfter <= 0 {
		c.GiveUpAfter = 24 * time.Hour
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
}

// RunOutbox fans out and sends until ctx ends. Any number of processes may
// run it on one database.
func (s *Service) RunOutbox(ctx context.Context, cfg OutboxConfig) {
	cfg.defaults()
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	for {
		if _, err := s.FanOut(ctx, cfg.Batch); err != nil && ctx.Err() == nil {
			s.log.Warn("notification fan-out failed", "err", err)
		}
		if _, err := s.SendDue(ctx, cfg); err != nil && ctx.Err() == nil {
			s.log.Warn("notification sender failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// FanOut turns events waiting in the outbox into notifications, one per
// channel that hears of the event (classify.Registry.ChannelsFor, judged
// on the action's tool snapshot, with the current file's channels).
func (s *Service) FanOut(ctx context.Context, limit int) (int, error) {
	reg := s.Registry()
	now := s.Now()
	total := 0
	for {
		n, err := s.store.NotificationFanOut(ctx, NotificationFanOutParams{Now: now, Limit: limit, Route: func(ev Event, a *Action) []NotificationRecord {
			typ := NotificationType(ev, a)
			if typ == "" {
				return nil
			}
			var out []NotificationRecord
			for _, c := range reg.ChannelsFor(typ, a.Spec) {
				out = append(out, NotificationRecord{ID: NewID(now), EventID: ev.ID, ActionID: a.ID, Type: typ,
					Channel: c.Name, Kind: c.Kind(), State: NotificationPending, CreatedAt: now, DueAt: now})
			}
			return out
		}})
		total += n
		if err != nil || n < limit {
			return total, err
		}
	}
}

// SendDue claims the notifications that are due and delivers each through
// its kind's Notifier, then records delivery, the next retry, or the end
// of the retries. It returns how many it claimed.
func (s *Service) SendDue(ctx context.Context, cfg OutboxConfig) (int, error) {
	cfg.defaults()
	now := s.Now()
	due, err := s.store.NotificationClaim(ctx, NotificationClaimParams{Now: now, Lease: cfg.Lease, Limit: cfg.Batch})
	if err != nil {
		return 0, err
	}
	for _, r := range due {
		if ctx.Err() != nil {
			// Shutting down: the send under way has finished; the lease
			// hands the rest of the batch to the next sender.
			return len(due), ctx.Err()
		}
		if s.Now().Sub(now) >= cfg.Lease/2 {
			// A send may take half the lease: one started later could
			// outlive the lease while another process, seeing it expired,
			// sends the same notification. The rest of the batch comes due
			// again when the lease ends.
			return len(due), nil
		}
		if err := s.send(context.WithoutCancel(ctx), cfg, r); err != nil {
			return len(due), err
		}
	}
	return len(due), nil
}

// send delivers one notification and settles it. Its context is not the
// sender's: a send under way when shutdown begins runs to its end (bounded
// by half the lease), so that its outcome is recorded rather than left to
// be repeated after the lease.
func (s *Service) send(ctx context.Context, cfg OutboxConfig, r NotificationRecord) error {
	err := s.deliver(ctx, cfg, r)
	now := s.Now()
	p := NotificationSettleParams{ID: r.ID, Attempts: r.Attempts, Now: now, State: NotificationDelivered}
	outcome := "delivered"
	if err != nil {
		p.LastError = err.Error()
		delay := min(cfg.Backoff<<min(r.Attempts-1, 20), cfg.BackoffCap)
		if ra, ok := errors.AsType[*RetryAfterError](err); ok && ra.After > 0 {
			delay = ra.After
		}
		end := r.CreatedAt.Add(cfg.GiveUpAfter)
		switch {
		case !now.Before(end):
			p.State, outcome = NotificationFailed, "failed"
		default:
			p.State, outcome = NotificationPending, "retry"
			p.DueAt = now.Add(delay)
			if p.DueAt.After(end) {
				p.DueAt = end // one last try when the 24 hours end
			}
		}
	}
	if _, err := s.store.NotificationSettle(ctx, p); err != nil {
		return fmt.Errorf("settle notification %s: %w", r.ID, err)
	}
	s.streak(r, outcome, p.LastError)
	if s.opts.OnNotification != nil {
		s.opts.OnNotification(r.Kind, outcome)
	}
	return nil
}

// deliver builds the notification as it is now and hands it to the
// channel kind's notifier.
func (s *Service) deliver(ctx context.Context, cfg OutboxConfig, r NotificationRecord) error {
	ch, ok := s.Registry().Channel(r.Channel)
	if !ok {
		return fmt.Errorf("channel %q is no longer in the tools file", r.Channel)
	}
	n, ok := cfg.Notifiers[ch.Kind()]
	if !ok {
		return fmt.Errorf("no %s notifier is configured in this process", ch.Kind())
	}
	a, err := s.store.ActionGetByID(ctx, r.ActionID)
	if err != nil {
		return fmt.Errorf("read action %s: %w", r.ActionID, err)
	}
	note := Notification{ID: r.ID, Type: r.Type, Channel: ch, Action: a, OccurredAt: r.EventAt, Attempt: r.Attempts}
	if r.Type == classify.EventTicketOpened {
		var d struct {
			Ticket string `json:"ticket"`
		}
		if json.Unmarshal(r.EventData, &d) == nil && d.Ticket != "" {
			if note.Ticket, err = s.store.TicketGetByID(ctx, d.Ticket); err != nil {
				return fmt.Errorf("read ticket %s: %w", d.Ticket, err)
			}
		}
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.Lease/2)
	defer cancel()
	return n.Notify(dctx, note)
}

func (s *Service) streak(r NotificationRecord, outcome, lastErr string) {
	s.failing.Lock()
	defer s.failing.Unlock()
	if s.failing.m == nil {
		s.failing.m = map[string]bool{}
	}
	m := s.failing.m
	was := m[r.Channel]
	switch outcome {
	case "delivered":
		if was {
			s.log.Info("notification channel recovered", "channel", r.Channel, "kind", r.Kind)
		}
		delete(m, r.Channel)
	case "retry":
		if !was {
			s.log.Warn("notification channel failing; retrying with backoff", "channel", r.Channel, "kind", r.Kind, "notification", r.ID, "err", lastErr)
		}
		m[r.Channel] = true
	case "failed":
		// Giving up is logged every time: it is the one loss an operator
		// must hear of.
		s.log.Error("notification given up after retries", "channel", r.Channel, "kind", r.Kind, "notification", r.ID, "action", r.ActionID, "type", r.Type, "err", lastErr)
		m[r.Channel] = true
	}
}

// Notifications returns an action's notifications for its page.
func (s *Service) Notifications(ctx context.Context, actionID string) ([]NotificationRecord, error) {
	return s.store.NotificationList(ctx, actionID)
}

// NotifyingKindsSQL is NotifyingEventKinds as an SQL list, for the stores.
func NotifyingKindsSQL() string {
	out := make([]string, len(NotifyingEventKinds))
	for i, k := range NotifyingEventKinds {
		out[i] = "'" + k + "'"
	}
	return strings.Join(out, ", ")
}
